/* SPDX-License-Identifier: MIT */
/* Times in JSON, the same way everywhere: integer nanoseconds under "NAME_ns" and, beside them,
 * the same moment in RFC 3339 UTC under "NAME" (integers above 2^53 lose precision in many JSON
 * tools; the text does not). */
#include <stdbool.h>
#include <string.h>

#include "json-time.h"
#include "timeutil.h"

json_t *json_time(int64_t ns) {
        char buf[TIMESTAMP_MAX_LEN];
        return json_string(format_timestamp_utc(buf, ns));
}

int json_set_time(json_t *o, const char *key_ns, int64_t ns) {
        size_t l = strlen(key_ns);
        char twin[128];
        if (l <= 3 || l - 3 >= sizeof(twin) || strcmp(key_ns + l - 3, "_ns") != 0)
                return -1;
        memcpy(twin, key_ns, l - 3);
        twin[l - 3] = '\0';
        bool none = ns == JSON_TIME_NONE;
        if (json_object_set_new(o, key_ns, none ? json_null() : json_integer(ns)) < 0 ||
            json_object_set_new(o, twin, none ? json_null() : json_time(ns)) < 0)
                return -1;
        return 0;
}
