/* SPDX-License-Identifier: MIT */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf-grow.h"
#include "tests.h"
#include "test-http.h"

size_t tu_http_on_body(char *data, size_t size, size_t n, void *reply) {
        struct tu_reply *r = reply;
        if (grow_bytes(&r->body, &r->cap, r->len + size * n + 1) < 0)
                return 0; /* curl ends the transfer with an error */
        memcpy(r->body + r->len, data, size * n);
        r->len += size * n;
        r->body[r->len] = '\0';
        return size * n;
}

static void header_value(const char *line, size_t len, const char *name, char *out, size_t size) {
        size_t nl = strlen(name);
        if (len > nl + 2 && strncasecmp(line, name, nl) == 0 && line[nl] == ':' &&
            line[nl + 1] == ' ')
                snprintf(out, size, "%.*s", (int) strcspn(line + nl + 2, "\r\n"), line + nl + 2);
}

static size_t on_header(char *data, size_t size, size_t n, void *reply) {
        struct tu_reply *r = reply;
        size_t len = size * n;
        header_value(data, len, "Allow", r->allow, sizeof(r->allow));
        header_value(data, len, "Content-Type", r->content_type, sizeof(r->content_type));
        header_value(data, len, "Retry-After", r->retry_after, sizeof(r->retry_after));
        return len;
}

void tu_http_request(const struct tu_request *rq, struct tu_reply *ret) {
        struct curl_slist *headers = NULL;
        char auth[512];
        *ret = (struct tu_reply){};
        CURL *c = curl_easy_init();
        assert_non_null(c);
        curl_easy_setopt(c, CURLOPT_URL, rq->url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
        if (strcmp(rq->method, "HEAD") == 0)
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        if (rq->cainfo)
                curl_easy_setopt(c, CURLOPT_CAINFO, rq->cainfo);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tu_http_on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, ret);
        if (rq->bearer || rq->authorization) {
                if (rq->authorization)
                        snprintf(auth, sizeof(auth), "Authorization: %s", rq->authorization);
                else
                        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", rq->bearer);
                headers = curl_slist_append(headers, auth);
        }
        if (rq->body) {
                headers = curl_slist_append(headers, "Content-Type: application/json");
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, rq->body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                                 (curl_off_t) (rq->body_len ? rq->body_len : strlen(rq->body)));
        }
        for (const char *const *h = rq->headers; h && *h; h++)
                headers = curl_slist_append(headers, *h);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        CURLcode rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        if (rc != CURLE_OK) {
                free(ret->body);
                *ret = (struct tu_reply){};
                fail_msg("%s %s: %s", rq->method, rq->url, curl_easy_strerror(rc));
        }
        if (!ret->body) {
                ret->body = strdup("");
                assert_non_null(ret->body);
        }
        ret->json = json_loadb(ret->body, ret->len, 0, NULL);
}

void tu_http(const char *method, const char *url, const char *bearer, const char *body,
             struct tu_reply *ret) {
        tu_http_request(
                &(struct tu_request){
                        .method = method, .url = url, .bearer = bearer, .body = body },
                ret);
}

struct tu_reply tu_http_at(const char *base, const char *method, const char *path,
                           const char *bearer, const char *body) {
        struct tu_reply r;
        char *url = NULL;
        if (asprintf(&url, "%s%s", base, path) < 0)
                fail_msg("out of memory");
        tu_http(method, url, bearer, body, &r);
        free(url);
        return r;
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
