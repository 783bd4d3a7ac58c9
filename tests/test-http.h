/* SPDX-License-Identifier: MIT */
/* HTTP for the tests that talk to the real rtsoak-server: one request with libcurl. */
#pragma once

#include <jansson.h>
#include <stddef.h>

struct tu_reply {
        long status;
        char *body;   /* NUL-terminated, "" when empty */
        size_t len;   /* of body, which may hold NULs */
        size_t cap;   /* bytes allocated for body (grown by doubling: a 16 MiB answer arrives
                       * in thousands of pieces) */
        json_t *json; /* the body parsed, or NULL when it is not JSON */
        char allow[64], content_type[128], retry_after[32]; /* those headers, "" if absent */
};

struct tu_request {
        const char *method;         /* GET, POST, HEAD ... */
        const char *url;            /* absolute */
        const char *bearer;         /* a token for "Authorization: Bearer", or NULL */
        const char *authorization;  /* the whole Authorization value instead, or NULL */
        const char *body;           /* sent as application/json, or NULL */
        size_t body_len;            /* 0: strlen(body) */
        const char *cainfo;         /* CA file for https, or NULL */
        const char *const *headers; /* more header lines, NULL-terminated, or NULL */
};

/* Fails the test when the request cannot be made at all. */
void tu_http_request(const struct tu_request *rq, struct tu_reply *ret);
/* method GET/POST/..., url absolute; bearer (a token) and body (JSON) may be NULL. */
void tu_http(const char *method, const char *url, const char *bearer, const char *body,
             struct tu_reply *ret);
/* The same with the URL as base (the server's, "http://127.0.0.1:8470") and path. */
struct tu_reply tu_http_at(const char *base, const char *method, const char *path,
                           const char *bearer, const char *body);
void tu_reply_done(struct tu_reply *r);
/* GET url: its JSON after checking the status. */
json_t *tu_get_json(const char *url, long want_status);
/* libcurl's CURLOPT_WRITEFUNCTION appending to the struct tu_reply in CURLOPT_WRITEDATA (for
 * tests that drive curl themselves); the reply's body must start as NULL or malloc'd. */
size_t tu_http_on_body(char *data, size_t size, size_t n, void *reply);
