/* SPDX-License-Identifier: MIT */
/* HTTP for the tests that talk to the real rtsoak-server: one request with libcurl. */
#pragma once

#include <jansson.h>

struct tu_reply {
        long status;
        char *body;   /* NUL-terminated, "" when empty */
        json_t *json; /* the body parsed, or NULL when it is not JSON */
};

/* method GET/POST/..., url absolute; bearer (a token) and body (JSON) may be NULL.  Fails the
 * test when the request cannot be made at all. */
void tu_http(const char *method, const char *url, const char *bearer, const char *body,
             struct tu_reply *ret);
void tu_reply_done(struct tu_reply *r);
/* GET url: its JSON after checking the status. */
json_t *tu_get_json(const char *url, long want_status);
