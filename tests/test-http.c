/* SPDX-License-Identifier: MIT */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"
#include "test-http.h"

static size_t on_body(char *data, size_t size, size_t n, void *userdata) {
        struct tu_reply *r = userdata;
        size_t old = strlen(r->body);
        char *b = realloc(r->body, old + size * n + 1);
        assert_non_null(b);
        memcpy(b + old, data, size * n);
        b[old + size * n] = '\0';
        r->body = b;
        return size * n;
}

void tu_http(const char *method, const char *url, const char *bearer, const char *body,
             struct tu_reply *ret) {
        struct curl_slist *headers = NULL;
        char auth[256];
        *ret = (struct tu_reply){ .body = strdup("") };
        assert_non_null(ret->body);
        CURL *c = curl_easy_init();
        assert_non_null(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
        if (bearer) {
                snprintf(auth, sizeof(auth), "Authorization: Bearer %s", bearer);
                headers = curl_slist_append(headers, auth);
        }
        if (body) {
                headers = curl_slist_append(headers, "Content-Type: application/json");
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        CURLcode rc = curl_easy_perform(c);
        if (rc != CURLE_OK)
                fail_msg("%s %s: %s", method, url, curl_easy_strerror(rc));
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        ret->json = json_loads(ret->body, 0, NULL);
}

void tu_reply_done(struct tu_reply *r) {
        free(r->body);
        json_decref(r->json);
        *r = (struct tu_reply){};
}

json_t *tu_get_json(const char *url, long want_status) {
        struct tu_reply r;
        tu_http("GET", url, NULL, NULL, &r);
        if (r.status != want_status || !r.json)
                fail_msg("GET %s: expected status %ld with JSON, got %ld: %s", url, want_status,
                         r.status, r.body);
        json_t *j = json_incref(r.json);
        tu_reply_done(&r);
        return j;
}
