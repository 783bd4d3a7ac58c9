/* SPDX-License-Identifier: MIT */
/* The HTTP API on libmicrohttpd: routes, authentication, the body limit, the rate limit, the
 * summary upload and the machine queries, and one request log line per request. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "access.h"
#include "answer-json.h"
#include "captures.h"
#include "auth.h"
#include "connlimit.h"
#include "dash.h"
#include "encode-series.h"
#include "encode-verdict.h"
#include "head.h"
#include "kcidb.h"
#include "machine-routes.h"
#include "http.h"
#include "maintenance.h"
#include "notifier.h"
#include "params.h"
#include "path.h"
#include "metrics.h"
#include "query.h"
#include "traces.h"
#include "ratelimit.h"
#include "routes.h"
#include "settings.h"
#include "verdict-log.h"
#include "verdict.h"
#include "waivers.h"
#include "json-path.h"
#include "summary.h"
#include "text-json.h"
#include "text-safe.h"
#include "timeutil.h"

#define API_SUMMARIES "/api/v1/summaries"
#define API_MACHINES "/api/v1/machines"
#define API_KERNELS "/api/v1/kernels"
#define API_WAIVERS "/api/v1/waivers"
#define API_AUDIT "/api/v1/audit"
#define API_MAINTENANCE "/api/v1/maintenance"
#define API_SERIES "/api/v1/series"
#define API_NOTIFICATIONS "/api/v1/notifications"
#define PATH_LOG_MAX 256

struct farm_http {
        struct MHD_Daemon *mhd;
        farm_db *db;
        farm_ratelimit *rl;
        farm_connlimit *limits;
        farm_access *access;
        size_t max_body_bytes;
        const struct farm_rule *rule;
        struct farm_counters counters; /* for /metrics */
};

/* What a request with a body does with it once it is read. */
enum body_action {
        BODY_UPLOAD,
        BODY_WAIVE,    /* arg: the release */
        BODY_WITHDRAW, /* arg: the waiver id */
        BODY_SETTINGS, /* arg: the machine id */
        BODY_WINDOW,   /* arg: the machine id */
        BODY_CANCEL,   /* arg: the window id */
};

/* One request, from its first call to the access handler to the completion notice. */
struct request {
        int64_t start_ns, start_mono_ns;
        bool started; /* the head was read and the request routed */
        char *target; /* as the client sent it, path and query */
        char *route;  /* the path for routing (server-path.h), NULL when the target is bad */
        char method[16];
        char path[PATH_LOG_MAX];            /* escaped for the log */
        char who[FARM_READER_NAME_MAX + 8]; /* a reader or staff member, for reads */
        char remote[FARM_ADDRESS_MAX];
        char machine[FARM_MACHINE_ID_LEN + 1]; /* once authenticated */
        char admin[FARM_ADMIN_NAME_MAX + 1];   /* a staff member, once authenticated */
        enum body_action action;
        char arg[SUMMARY_MAX_RELEASE + 1]; /* a release, a waiver or a window id */
        unsigned status;
        uint64_t bytes_in, bytes_out;
        char *body;
        size_t len, allocated;
        bool upload, duplicate; /* a summary upload, answered "duplicate" */
        struct farm_counters *counters;
};

/* The answer is decided: counted now, before the client can have it, so that a /metrics read
 * after a reply always includes that reply. */
static void answered(struct request *rq, unsigned status) {
        rq->status = status;
        farm_counters_request(rq->counters, rq->upload, rq->duplicate, status);
}

static void format_address(const struct sockaddr *sa, socklen_t len, char *buf, size_t size) {
        char host[NI_MAXHOST], port[NI_MAXSERV];
        if (!sa || getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
                               NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
                snprintf(buf, size, "-");
                return;
        }
        snprintf(buf, size, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

int farm_listen(const char *address, int *ret_fd, char ret_bound[static FARM_ADDRESS_MAX]) {
        char host[FARM_ADDRESS_MAX];
        const char *colon = strrchr(address, ':');
        if (!colon || colon == address || !colon[1] || strlen(address) >= sizeof(host))
                return -EINVAL;
        size_t hl = (size_t) (colon - address);
        memcpy(host, address, hl);
        host[hl] = '\0';
        if (host[0] == '[') {
                if (hl < 3 || host[hl - 1] != ']')
                        return -EINVAL;
                memmove(host, host + 1, hl - 2);
                host[hl - 2] = '\0';
        }
        char *end;
        errno = 0;
        unsigned long port = strtoul(colon + 1, &end, 10);
        if (*end || errno || port > 65535 || colon[1] < '0' || colon[1] > '9')
                return -EINVAL;

        struct addrinfo hints = { .ai_family = AF_UNSPEC,
                                  .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE },
                        *ai;
        if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
                return -EINVAL;
        _cleanup_close_ int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                                        0);
        int r = 0, one = 1;
        if (fd < 0)
                r = -errno;
        else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
                 bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0)
                r = -errno;
        freeaddrinfo(ai);
        if (r < 0)
                return r;

        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *) &ss, &sl) < 0)
                return -errno;
        format_address((struct sockaddr *) &ss, sl, ret_bound, FARM_ADDRESS_MAX);
        *ret_fd = fd;
        fd = -1;
        return 0;
}

/* The headers of every answer: never cached (answers change with every upload), never
 * sniffed as another type, never framed, and pages may run nothing but their own inline
 * style and script.  And one request per connection: libmicrohttpd 0.9.75 closes a
 * connection after an answer given before the body was read (every GET's), and this closes
 * it after the others, so that nothing left on a connection after a request is ever read as
 * another request, whatever libmicrohttpd made of the head (docs/security.md, "Framing"). */
static void add_headers(struct MHD_Response *resp, const char *content_type) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        MHD_add_response_header(resp, "Content-Security-Policy", farm_dash_csp());
}

/* Queues body (taken over) as the JSON response.  A body that could not be built (NULL: no
 * memory, or a string that is not UTF-8) is a failure of ours: 500 with its error, never an
 * empty answer.  Text stored before the rule (text-safe.h) leaves escaped, whatever route read
 * it. */
static enum MHD_Result respond(struct request *rq, struct MHD_Connection *c, unsigned status,
                               json_t *body, const char *header, const char *value) {
        if (body && text_json_escape(body) < 0) {
                json_decref(body);
                body = NULL;
        }
        if (!body) {
                log_error("%s %s: the answer (%u) could not be built", rq->method, rq->path,
                          status);
                status = 500;
                body = json_pack("{s:s}", "error", "internal server error");
        }
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!text)
                return MHD_NO;
        size_t len = strlen(text);
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, text,
                                                                    MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        add_headers(resp, "application/json");
        if (header)
                MHD_add_response_header(resp, header, value);
        answered(rq, status);
        enum MHD_Result ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        rq->bytes_out = len;
        return ret;
}

static enum MHD_Result respond_error(struct request *rq, struct MHD_Connection *c, unsigned status,
                                     const char *msg, const char *header, const char *value) {
        return respond(rq, c, status, farm_error_json(msg), header, value);
}

static enum MHD_Result respond_internal(struct request *rq, struct MHD_Connection *c, int error,
                                        const char *detail) {
        if (error == -EBUSY)
                return respond_error(rq, c, 503, "the farm database is busy, retry later",
                                     MHD_HTTP_HEADER_RETRY_AFTER, "5");
        log_error_errno(error, "%s %s: %s", rq->method, rq->path, detail);
        return respond_error(rq, c, 500, "internal server error", NULL, NULL);
}

static enum MHD_Result prepare_body(farm_http *h, struct MHD_Connection *c, struct request *rq);

static enum MHD_Result begin_upload(farm_http *h, struct MHD_Connection *c, struct request *rq) {
        uint8_t hash[SHA256_DIGEST_SIZE];
        int r;

        /* One answer for every failure, so that it does not tell whether a machine exists. */
        r = farm_token_from_header(
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                hash);
        if (r >= 0)
                r = farm_ratelimit_admit(h->rl, h->db, hash, rq->machine, now_ns(CLOCK_MONOTONIC));
        if (r == -EINVAL || r == -EACCES) {
                rq->machine[0] = '\0';
                return respond_error(rq, c, 401, "missing, invalid or revoked token",
                                     MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        }
        if (r < 0)
                return respond_internal(rq, c, r, "cannot check the token or the rate limit");
        if (r > 0) {
                char after[16];
                snprintf(after, sizeof(after), "%d", r);
                return respond_error(rq, c, 429, "too many requests from this machine",
                                     MHD_HTTP_HEADER_RETRY_AFTER, after);
        }

        rq->action = BODY_UPLOAD;
        return prepare_body(h, c, rq);
}

/* A body whose size is announced is refused before a byte of it is read. */
static enum MHD_Result prepare_body(farm_http *h, struct MHD_Connection *c, struct request *rq) {
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
                char *end;
                errno = 0;
                unsigned long long n = strtoull(cl, &end, 10);
                if (errno || *end || n > h->max_body_bytes) {
                        char msg[128];
                        snprintf(msg, sizeof(msg), "body of %s bytes is over the limit of %zu", cl,
                                 h->max_body_bytes);
                        return respond_error(rq, c, 413, msg, NULL, NULL);
                }
                rq->allocated = (size_t) n + 1;
                rq->body = malloc(rq->allocated);
                if (!rq->body)
                        return respond_internal(rq, c, -ENOMEM, "body buffer");
        }
        return MHD_YES;
}

static int append_body(farm_http *h, struct request *rq, const char *data, size_t n) {
        rq->bytes_in += n;
        if (n > h->max_body_bytes - rq->len)
                return -EFBIG;
        if (rq->len + n >= rq->allocated) {
                size_t a = MIN(MAX(rq->allocated * 2, rq->len + n + 1), h->max_body_bytes + 1);
                char *b = realloc(rq->body, a);
                if (!b)
                        return -ENOMEM;
                rq->body = b;
                rq->allocated = a;
        }
        memcpy(rq->body + rq->len, data, n);
        rq->len += n;
        return 0;
}

static enum MHD_Result finish_upload(farm_http *h, struct MHD_Connection *c, struct request *rq) {
        char err[MAX(SUMMARY_ERROR_MAX, FARM_ERROR_MAX)];
        struct farm_stored st;
        struct summary s;

        int r = summary_decode(rq->body ?: "", rq->len, &s, err);
        free(rq->body);
        rq->body = NULL;
        if (r == -ENOMEM)
                return respond_internal(rq, c, r, "decoding the summary");
        if (r < 0)
                return respond_error(rq, c, 400, err, NULL, NULL);

        if (strcmp(s.machine.id, rq->machine) != 0) {
                summary_done(&s);
                return respond_error(rq, c, 403, "machine.id: not the machine of this token", NULL,
                                     NULL);
        }

        r = farm_store_summary(h->db, &s, now_ns(CLOCK_REALTIME), &st, err);
        summary_done(&s);
        rq->duplicate = r >= 0 && st.duplicate;
        if (r == -EACCES)
                return respond_error(rq, c, 401, "missing, invalid or revoked token",
                                     MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        if (r == -EEXIST)
                return respond_error(rq, c, 409, err, NULL, NULL);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        return respond(rq, c, 200,
                       json_pack("{s:s, s:I, s:I, s:I, s:I}", "status",
                                 st.duplicate ? "duplicate" : "stored", "intervals",
                                 (json_int_t) st.intervals, "events", (json_int_t) st.events,
                                 "duplicate_intervals", (json_int_t) st.dup_intervals,
                                 "duplicate_events", (json_int_t) st.dup_events),
                       NULL, NULL);
}

static enum MHD_Result get_machines(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                    const char *id) {
        char err[FARM_ERROR_MAX];
        json_t *j = NULL;

        if (id && !farm_machine_id_valid(id))
                return respond_error(rq, c, 404, "no such machine", NULL, NULL);
        const struct farm_clock_view cv = { now_ns(CLOCK_REALTIME),
                                            (int64_t) h->rule->clock_tolerance_ns,
                                            (int64_t) h->rule->max_gap_ns };
        int r = farm_api_machine_json(h->db, id, &cv, &j, err);
        if (r == -ENOENT)
                return respond_error(rq, c, 404, "no such machine", NULL, NULL);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        return respond(rq, c, 200, j, NULL, NULL);
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
        struct farm_args *args = cls;
        (void) kind;
        if (args->n == FARM_ARGS_MAX) {
                args->too_many = true;
                return MHD_NO;
        }
        args->a[args->n].name = key;
        args->a[args->n++].value = value;
        return MHD_YES;
}

/* Sends what a query or dashboard route answered: JSON, or text with its content type. */
static enum MHD_Result send_answer(struct request *rq, struct MHD_Connection *c,
                                   struct farm_answer *a) {
        enum MHD_Result ret;
        if (a->status >= 500 && !a->text)
                ret = respond_internal(rq, c, a->error, a->err);
        else if (a->text) {
                if (a->status >= 500 && a->status != 503)
                        log_error_errno(a->error ?: -EIO, "%s %s: %s", rq->method, rq->path,
                                        a->err);
                size_t len = strlen(a->text);
                struct MHD_Response *resp = MHD_create_response_from_buffer(len, a->text,
                                                                            MHD_RESPMEM_MUST_FREE);
                if (resp) {
                        a->text = NULL;
                        add_headers(resp, a->content_type);
                        if (a->allow)
                                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, a->allow);
                        if (a->status == 503)
                                MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "5");
                        answered(rq, a->status);
                        ret = MHD_queue_response(c, a->status, resp);
                        MHD_destroy_response(resp);
                        rq->bytes_out = len;
                } else
                        ret = MHD_NO;
        } else {
                json_t *body = a->json ?: farm_error_json(a->message);
                a->json = NULL;
                ret = respond(rq, c, a->status, body, a->allow ? MHD_HTTP_HEADER_ALLOW : NULL,
                              a->allow);
        }
        farm_answer_done(a);
        return ret;
}

/* The query API (server-query.c): true when url is one of its routes, answered in *ret. */
static bool route_query(farm_http *h, struct MHD_Connection *c, struct request *rq, const char *url,
                        enum MHD_Result *ret) {
        struct farm_args args = {};
        struct farm_answer a;

        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &args);
        if (farm_query_route(h->db, &h->counters, url, &args, now_ns(CLOCK_REALTIME), &a) == 0)
                return false;
        *ret = send_answer(rq, c, &a);
        return true;
}

/* The dashboard (server-dash.c): HTML pages and SVG plots. */
static bool route_dash(farm_http *h, struct MHD_Connection *c, struct request *rq, const char *url,
                       enum MHD_Result *ret) {
        struct farm_args args = {};
        struct farm_answer a;

        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &args);
        if (farm_dash_route(h->db, h->rule, url, &args, now_ns(CLOCK_REALTIME), &a) == 0)
                return false;
        *ret = send_answer(rq, c, &a);
        return true;
}

/* The flight recorder's captures (server-trace.c). */
static bool route_trace(farm_http *h, struct MHD_Connection *c, struct request *rq, const char *url,
                        enum MHD_Result *ret) {
        struct farm_args args = {};
        struct farm_answer a;

        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &args);
        if (farm_trace_route(h->db, url, &args, now_ns(CLOCK_REALTIME), &a) == 0)
                return false;
        *ret = send_answer(rq, c, &a);
        return true;
}

static bool is_get(const char *method) {
        return strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
               strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
}

/* ---- query parameters (the route table checked them: server-routes.c) ---------------- */

static const char *param(struct MHD_Connection *c, const char *name) {
        return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- kernels, verdicts, waivers ---------------------------------------------------------- */

static enum MHD_Result get_kernels(farm_http *h, struct MHD_Connection *c, struct request *rq) {
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        int64_t now = now_ns(CLOCK_REALTIME);
        struct farm_question q;
        struct farm_page page;
        struct farm_kernel_page kp;

        if (farm_question_parse(NULL, param(c, "at"), param(c, "known_at"), now, &q, perr) < 0 ||
            farm_param_page(param(c, "limit"), param(c, "offset"), &page, perr) < 0)
                return respond_error(rq, c, 400, perr, NULL, NULL);
        int r = farm_kernels(h->db, h->rule, &q, &page, &kp, err);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        json_t *j = farm_kernel_page_to_json(&kp);
        int64_t total = kp.total;
        farm_kernel_page_done(&kp);
        if (total > 0 && page.offset + page.limit < (uint64_t) total) {
                /* The same question: the moment, and what was known (unless everything is). */
                char next[192], known[48] = "";
                if (q.known_ns != INT64_MAX)
                        snprintf(known, sizeof(known), "&known_at=%lld", (long long) q.known_ns);
                snprintf(next, sizeof(next), API_KERNELS "?at=%lld%s&limit=%llu&offset=%llu",
                         (long long) q.at_ns, known, (unsigned long long) page.limit,
                         (unsigned long long) (page.offset + page.limit));
                json_object_set_new(j, "next", json_string(next));
        } else
                json_object_set_new(j, "next", json_null());
        return respond(rq, c, 200, j, NULL, NULL);
}

/* A release's verdict asked ?at=&known_at=: as the verdict's JSON, or with kcidb_origin as a
 * KCIDB report (docs/kcidb.md); 404 when no machine ever ran it. */
static enum MHD_Result answer_release(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                      const char *release, const char *kcidb_origin) {
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        struct farm_question q;
        json_t *j = NULL;

        if (farm_question_parse(release, param(c, "at"), param(c, "known_at"),
                                now_ns(CLOCK_REALTIME), &q, perr) < 0)
                return respond_error(rq, c, 400, perr, NULL, NULL);
        int r = kcidb_origin ? farm_kcidb_report(h->db, h->rule, &q, kcidb_origin, &j, err)
                             : farm_verdict_json(h->db, h->rule, &q, &j, err);
        if (r == -ENOENT) {
                snprintf(err, sizeof(err), "no such kernel release: no machine ever ran %.200s",
                         release);
                return respond_error(rq, c, 404, err, NULL, NULL);
        }
        if (r < 0)
                return respond_internal(rq, c, r, err);
        return respond(rq, c, 200, j, NULL, NULL);
}

/* GET /api/v1/kernels/{release}/kcidb: the verdict as a KCIDB v5.3 report. */
static enum MHD_Result get_kcidb(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                 const char *release) {
        const char *origin = param(c, "origin") ?: FARM_KCIDB_ORIGIN_DEFAULT;
        if (!farm_kcidb_origin_ok(origin)) {
                char perr[FARM_PARAM_ERROR_MAX];
                snprintf(perr, sizeof(perr),
                         "origin=%.80s: 1 to %d of a-z, 0-9 and _, as KCIDB takes", origin,
                         FARM_KCIDB_ORIGIN_MAX);
                return respond_error(rq, c, 400, perr, NULL, NULL);
        }
        return answer_release(h, c, rq, release, origin);
}

/* GET /api/v1/series and /api/v1/series/{series}/latest-stable. */
static enum MHD_Result get_series(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                  const char *series) {
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        struct farm_question q;
        json_t *j = NULL;

        if (farm_question_parse(NULL, param(c, "at"), param(c, "known_at"), now_ns(CLOCK_REALTIME),
                                &q, perr) < 0)
                return respond_error(rq, c, 400, perr, NULL, NULL);
        int r = series ? farm_latest_stable_json(h->db, h->rule, series, &q, &j, err)
                       : farm_series_json(h->db, h->rule, &q, &j, err);
        if (r == -ENOENT) {
                snprintf(err, sizeof(err), "no such series: no release of %.200s has run", series);
                return respond_error(rq, c, 404, err, NULL, NULL);
        }
        if (r < 0)
                return respond_internal(rq, c, r, err);
        return respond(rq, c, 200, j, NULL, NULL);
}

static enum MHD_Result get_waivers(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                   const char *release, bool audit) {
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        struct farm_page page;
        json_t *j = NULL;

        if (farm_param_page(param(c, "limit"), param(c, "offset"), &page, perr) < 0)
                return respond_error(rq, c, 400, perr, NULL, NULL);
        int r = audit ? farm_audit_json(h->db, &page, &j, err)
                      : farm_waivers_json(h->db, release, &page, &j, err);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        int64_t total = json_integer_value(json_object_get(j, "total"));
        json_object_set_new(j, "next",
                            total > 0 && page.offset + page.limit < (uint64_t) total
                                    ? json_sprintf("%s?limit=%llu&offset=%llu", rq->route,
                                                   (unsigned long long) page.limit,
                                                   (unsigned long long) (page.offset + page.limit))
                                    : json_null());
        return respond(rq, c, 200, j, NULL, NULL);
}

/* Staff requests carry a staff token (rtsoak-server admin-token NAME). */
/* Whether the request carries a staff token: true, or false with the answer (401, 500)
 * queued in *ret. */
static bool staff_only(farm_http *h, struct MHD_Connection *c, struct request *rq,
                       enum MHD_Result *ret) {
        uint8_t hash[SHA256_DIGEST_SIZE];
        int r = farm_token_from_header(
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                hash);
        if (r >= 0)
                r = farm_admin_authenticate(h->db, hash, rq->admin);
        if (r == -EINVAL || r == -EACCES) {
                rq->admin[0] = '\0';
                *ret = respond_error(rq, c, 401, "missing, invalid or revoked staff token",
                                     MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
                return false;
        }
        if (r < 0) {
                *ret = respond_internal(rq, c, r, "cannot check the staff token");
                return false;
        }
        return true;
}

static enum MHD_Result begin_admin(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                   enum body_action action, const char *arg) {
        enum MHD_Result ret;
        if (!staff_only(h, c, rq, &ret))
                return ret;
        rq->action = action;
        snprintf(rq->arg, sizeof(rq->arg), "%s", arg);
        return prepare_body(h, c, rq);
}

/* What is wrong with a body that is not JSON: where (the field, as the decoders name them) and
 * the parser's words, escaped (they quote the text). */
static void not_json(const struct request *rq, const json_error_t *je, char *err, size_t errlen) {
        char path[JSON_PATH_MAX], what[sizeof(je->text) * 4];
        json_path_at(rq->body ?: "", rq->len, (size_t) MAX(je->position, 0), path);
        snprintf(err, errlen, "body%s%s: not JSON: %s (line %d, column %d)", *path ? "." : "", path,
                 text_escape(je->text, what, sizeof(what)), je->line, je->column);
}

/* The body of a staff request: a JSON object with string fields from the given list. */
static int admin_body(struct request *rq, const char *const *fields, const char **values,
                      json_t **ret, char *err, size_t errlen) {
        json_error_t je;
        json_t *j = json_loadb(rq->body ?: "", rq->len, JSON_REJECT_DUPLICATES, &je);
        if (!j) {
                not_json(rq, &je, err, errlen);
                return -EINVAL;
        }
        if (!json_is_object(j)) {
                json_decref(j);
                snprintf(err, errlen, "body: expected a JSON object");
                return -EINVAL;
        }
        const char *key;
        json_t *val;
        json_object_foreach (j, key, val) {
                size_t i = 0;
                for (; fields[i]; i++)
                        if (strcmp(fields[i], key) == 0)
                                break;
                if (!fields[i]) {
                        snprintf(err, errlen, "%.64s: unknown field", key);
                        json_decref(j);
                        return -EINVAL;
                }
                char why[TEXT_WHY_MAX];
                if (!json_is_string(val)) {
                        snprintf(err, errlen, "%s: expected a string", key);
                        json_decref(j);
                        return -EINVAL;
                }
                /* A reason is shown in pages, logs and terminals: one line of plain text. */
                if (!text_ok(json_string_value(val), false, why)) {
                        snprintf(err, errlen, "%s: %s", key, why);
                        json_decref(j);
                        return -EINVAL;
                }
                values[i] = json_string_value(val);
        }
        *ret = j;
        return 0;
}

static enum MHD_Result finish_admin(farm_http *h, struct MHD_Connection *c, struct request *rq) {
        static const char *const waive_fields[] = { "problem", "reason", NULL };
        static const char *const withdraw_fields[] = { "reason", NULL };
        const char *values[2] = {};
        char err[FARM_ERROR_MAX];
        json_t *body = NULL;
        int64_t id = 0;
        int r;

        r = admin_body(rq, rq->action == BODY_WAIVE ? waive_fields : withdraw_fields, values, &body,
                       err, sizeof(err));
        free(rq->body);
        rq->body = NULL;
        if (r < 0)
                return respond_error(rq, c, 400, err, NULL, NULL);
        int64_t now = now_ns(CLOCK_REALTIME);
        if (rq->action == BODY_WAIVE) {
                if (!values[0] || !values[1]) {
                        json_decref(body);
                        return respond_error(rq, c, 400,
                                             values[0] ? "reason: missing (a waiver needs one)"
                                                       : "problem: missing (the id of a problem "
                                                         "of the verdict)",
                                             NULL, NULL);
                }
                r = farm_waive(h->db, h->rule, rq->arg, values[0], values[1], rq->admin, now, &id,
                               err);
        } else {
                char *end;
                errno = 0;
                long long w = strtoll(rq->arg, &end, 10);
                if (errno || *end || w <= 0) {
                        json_decref(body);
                        return respond_error(rq, c, 404, "no such waiver", NULL, NULL);
                }
                id = w;
                r = farm_unwaive(h->db, id, rq->admin, values[0] ?: "", now, err);
        }
        json_decref(body);
        if (r == -ENOENT && rq->action == BODY_WITHDRAW)
                return respond_error(rq, c, 404, "no such waiver in force", NULL, NULL);
        if (r == -ENOENT || r == -EINVAL)
                return respond_error(rq, c, r == -EINVAL ? 400 : 404, err, NULL, NULL);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        return respond(rq, c, rq->action == BODY_WAIVE ? 201 : 200,
                       json_pack("{s:s, s:I, s:s}", "status",
                                 rq->action == BODY_WAIVE ? "waived" : "withdrawn", "id",
                                 (json_int_t) id, "by", rq->admin),
                       NULL, NULL);
}

/* ---- machine settings and maintenance windows ------------------------------------------- */

/* Adds "next" to a page j of the list at rq's path: the path with the same filter and the
 * next offset, or null on the last page. */
static void add_next(json_t *j, struct request *rq, const struct farm_page *page,
                     const char *filter, const char *value) {
        int64_t total = json_integer_value(json_object_get(j, "total"));
        json_object_set_new(
                j, "next",
                (int64_t) (page->offset + page->limit) < total
                        ? json_sprintf("%s?%s%s%slimit=%llu&offset=%llu", rq->path,
                                       value ? filter : "", value ? value : "", value ? "&" : "",
                                       (unsigned long long) page->limit,
                                       (unsigned long long) (page->offset + page->limit))
                        : json_null());
}

/* ---- notifications ---------------------------------------------------------------------- */

/* GET /api/v1/notifications: staff only (they name the channels and what failed there). */
static enum MHD_Result get_notifications(farm_http *h, struct MHD_Connection *c,
                                         struct request *rq) {
        static const char *const filters[] = { "state", "kind", "machine", "release", NULL };
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        struct farm_page page;
        enum MHD_Result ret;
        json_t *j = NULL;
        if (!staff_only(h, c, rq, &ret))
                return ret;
        if (farm_param_page(param(c, "limit"), param(c, "offset"), &page, perr) < 0)
                return respond_error(rq, c, 400, perr, NULL, NULL);
        int r = farm_notifications_json(h->db, param(c, "state"), param(c, "kind"),
                                        param(c, "machine"), param(c, "release"), &page, &j, err);
        if (r == -EINVAL)
                return respond_error(rq, c, 400, err, NULL, NULL);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        /* The next page keeps the filters (a release among them, three bytes a character). */
        int64_t total = json_integer_value(json_object_get(j, "total"));
        char query[3 * SUMMARY_MAX_RELEASE + 256] = "";
        for (const char *const *p = filters; *p; p++)
                if (param(c, *p)) {
                        _cleanup_free_ char *v = notify_url_escape("", param(c, *p));
                        snprintf(query + strlen(query), sizeof(query) - strlen(query), "%s=%s&", *p,
                                 v ?: "");
                }
        json_object_set_new(j, "next",
                            (int64_t) (page.offset + page.limit) < total
                                    ? json_sprintf("%s?%slimit=%llu&offset=%llu", rq->path, query,
                                                   (unsigned long long) page.limit,
                                                   (unsigned long long) (page.offset + page.limit))
                                    : json_null());
        return respond(rq, c, 200, j, NULL, NULL);
}

static enum MHD_Result get_settings(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                    const char *id) {
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        struct farm_page page;
        json_t *j = NULL;

        if (farm_param_page(param(c, "limit"), param(c, "offset"), &page, perr) < 0)
                return respond_error(rq, c, 400, perr, NULL, NULL);
        int r = farm_settings_json(h->db, id, &page, &j, err);
        if (r == -ENOENT)
                return respond_error(rq, c, 404, "no such machine", NULL, NULL);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        add_next(j, rq, &page, NULL, NULL);
        return respond(rq, c, 200, j, NULL, NULL);
}

/* GET /api/v1/maintenance[?machine=ID], or the windows of the machine in the path (id). */
static enum MHD_Result get_windows(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                   const char *id) {
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        const char *machine = id ?: param(c, "machine");
        struct farm_page page;
        json_t *j = NULL;

        if (farm_param_page(param(c, "limit"), param(c, "offset"), &page, perr) < 0)
                return respond_error(rq, c, 400, perr, NULL, NULL);
        if (machine && !farm_machine_id_valid(machine))
                return respond_error(rq, c, 400,
                                     "machine: not a machine id (32 lowercase hex digits)", NULL,
                                     NULL);
        int r = farm_maintenance_json(h->db, machine, &page, now_ns(CLOCK_REALTIME), &j, err);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        add_next(j, rq, &page, "machine=", id ? NULL : machine);
        return respond(rq, c, 200, j, NULL, NULL);
}

static enum MHD_Result staff_failed(struct request *rq, struct MHD_Connection *c, int r,
                                    const char *what, const char *err) {
        if (r == -EINVAL)
                return respond_error(rq, c, 400, err, NULL, NULL);
        if (r == -ENOENT)
                return respond_error(rq, c, 404, what, NULL, NULL);
        if (r == -EALREADY)
                return respond_error(rq, c, 409, err, NULL, NULL);
        return respond_internal(rq, c, r, err);
}

static enum MHD_Result post_settings(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                     json_t *body) {
        char err[FARM_ERROR_MAX];
        struct farm_page one = { .limit = 1, .offset = 0 };
        _cleanup_free_ struct farm_settings_change *change = malloc(sizeof(*change));
        const char *reason;
        int64_t version = 0;
        json_t *j = NULL;

        if (!change)
                return respond_internal(rq, c, -ENOMEM, "settings change");
        int r = farm_change_from_json(body, change, &reason, err);
        if (r >= 0)
                r = farm_machine_set(h->db, rq->arg, change, rq->admin, reason,
                                     now_ns(CLOCK_REALTIME), &version, err);
        if (r < 0)
                return staff_failed(rq, c, r, "no such machine", err);
        int q = farm_settings_json(h->db, rq->arg, &one, &j, err);
        if (q < 0)
                return respond_internal(rq, c, q, err);
        json_t *answer = json_pack("{s:s, s:I, s:O, s:s}", "status",
                                   r > 0 ? "changed" : "unchanged", "version", (json_int_t) version,
                                   "settings", json_object_get(j, "settings"), "by", rq->admin);
        json_decref(j);
        return respond(rq, c, r > 0 ? 201 : 200, answer, NULL, NULL);
}

static enum MHD_Result post_window(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                   json_t *body) {
        char err[FARM_ERROR_MAX];
        int64_t now = now_ns(CLOCK_REALTIME), from, to, id = 0;
        const char *reason = NULL;
        json_t *j = NULL;
        char *end;
        int r;

        if (rq->action == BODY_WINDOW) {
                r = farm_maintenance_from_json(body, &from, &to, &reason, err);
                if (r >= 0)
                        r = farm_maintenance_add(h->db, rq->arg, from, to, reason, rq->admin, now,
                                                 &id, err);
        } else {
                errno = 0;
                id = strtoll(rq->arg, &end, 10);
                if (errno || *end || id <= 0)
                        return respond_error(rq, c, 404, "no such maintenance window", NULL, NULL);
                r = farm_maintenance_cancel_from_json(body, &reason, err);
                if (r >= 0)
                        r = farm_maintenance_cancel(h->db, id, rq->admin, reason, now, err);
        }
        if (r < 0)
                return staff_failed(rq, c, r,
                                    rq->action == BODY_WINDOW ? "no such machine"
                                                              : "no such maintenance window",
                                    err);
        if ((r = farm_maintenance_get(h->db, id, now, &j, err)) < 0)
                return respond_internal(rq, c, r, err);
        return respond(rq, c, rq->action == BODY_WINDOW ? 201 : 200, j, NULL, NULL);
}

static enum MHD_Result finish_staff(farm_http *h, struct MHD_Connection *c, struct request *rq) {
        json_error_t je;
        json_t *body = json_loadb(rq->body ?: "", rq->len, JSON_REJECT_DUPLICATES, &je);
        char err[FARM_ERROR_MAX];
        if (!body)
                not_json(rq, &je, err, sizeof(err));
        free(rq->body);
        rq->body = NULL;
        if (!body)
                return respond_error(rq, c, 400, err, NULL, NULL);
        if (!json_is_object(body)) {
                json_decref(body);
                return respond_error(rq, c, 400, "body: expected a JSON object", NULL, NULL);
        }
        enum MHD_Result ret = rq->action == BODY_SETTINGS ? post_settings(h, c, rq, body)
                                                          : post_window(h, c, rq, body);
        json_decref(body);
        return ret;
}

/* /api/v1/machines/{id}/settings, /api/v1/machines/{id}/maintenance, /api/v1/maintenance and
 * /api/v1/maintenance/{id}/cancel. */
static enum MHD_Result route_staff(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                   const char *url, const char *method, bool *handled) {
        bool get = is_get(method);
        char id[FARM_MACHINE_ID_LEN + 1];
        *handled = true;
        if (strncmp(url, API_MACHINES "/", strlen(API_MACHINES) + 1) == 0) {
                const char *p = url + strlen(API_MACHINES) + 1, *slash = strchr(p, '/');
                if (!slash || (strcmp(slash, "/settings") != 0 && strcmp(slash, "/maintenance")))
                        return *handled = false, MHD_NO;
                if ((size_t) (slash - p) != FARM_MACHINE_ID_LEN)
                        return respond_error(rq, c, 404, "no such machine", NULL, NULL);
                snprintf(id, sizeof(id), "%.*s", FARM_MACHINE_ID_LEN, p);
                if (!farm_machine_id_valid(id))
                        return respond_error(rq, c, 404, "no such machine", NULL, NULL);
                bool settings = strcmp(slash, "/settings") == 0;
                /* GET, HEAD or POST: the route table let no other method through. */
                if (get)
                        return settings ? get_settings(h, c, rq, id) : get_windows(h, c, rq, id);
                return begin_admin(h, c, rq, settings ? BODY_SETTINGS : BODY_WINDOW, id);
        }
        if (strcmp(url, API_MAINTENANCE) == 0)
                return get_windows(h, c, rq, NULL);
        if (strncmp(url, API_MAINTENANCE "/", strlen(API_MAINTENANCE) + 1) == 0) {
                const char *p = url + strlen(API_MAINTENANCE) + 1, *slash = strchr(p, '/');
                if (!slash || strcmp(slash, "/cancel") != 0 || (size_t) (slash - p) >= 20)
                        return respond_error(rq, c, 404, "no such resource", NULL, NULL);
                snprintf(id, sizeof(id), "%.*s", (int) (slash - p), p);
                return begin_admin(h, c, rq, BODY_CANCEL, id);
        }
        *handled = false;
        return MHD_NO;
}

/* /api/v1/kernels[/RELEASE/(verdict|waivers)], /api/v1/waivers[/ID/withdraw], /api/v1/audit. */
static enum MHD_Result route_verdict(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                     const char *url, const char *method, bool *handled) {
        bool get = is_get(method);
        *handled = true;
        if (strcmp(url, API_KERNELS) == 0)
                return get_kernels(h, c, rq);
        if (strcmp(url, API_WAIVERS) == 0)
                return get_waivers(h, c, rq, NULL, false);
        if (strcmp(url, API_AUDIT) == 0)
                return get_waivers(h, c, rq, NULL, true);
        if (strcmp(url, API_NOTIFICATIONS) == 0)
                return get_notifications(h, c, rq);
        if (strcmp(url, API_SERIES) == 0)
                return get_series(h, c, rq, NULL);
        if (strncmp(url, API_SERIES "/", strlen(API_SERIES) + 1) == 0) {
                const char *name = url + strlen(API_SERIES) + 1, *slash = strchr(name, '/');
                char series[FARM_SERIES_NAME_MAX];
                /* Still percent-encoded in the routing path. */
                if (!slash || slash == name || strcmp(slash, "/latest-stable") != 0 ||
                    farm_segment_decode(name, (size_t) (slash - name), series, sizeof(series)) < 0)
                        return respond_error(rq, c, 404, "no such resource", NULL, NULL);
                return get_series(h, c, rq, series);
        }
        if (strncmp(url, API_WAIVERS "/", strlen(API_WAIVERS) + 1) == 0) {
                const char *id = url + strlen(API_WAIVERS) + 1, *slash = strchr(id, '/');
                if (!slash || strcmp(slash, "/withdraw") != 0 || (size_t) (slash - id) >= 32)
                        return respond_error(rq, c, 404, "no such resource", NULL, NULL);
                char buf[32];
                snprintf(buf, sizeof(buf), "%.*s", (int) (slash - id), id);
                return begin_admin(h, c, rq, BODY_WITHDRAW, buf);
        }
        if (strncmp(url, API_KERNELS "/", strlen(API_KERNELS) + 1) == 0) {
                const char *rel = url + strlen(API_KERNELS) + 1, *slash = strchr(rel, '/');
                char release[SUMMARY_MAX_RELEASE + 1];
                if (!slash || slash == rel) {
                        *handled = false;
                        return MHD_NO;
                }
                /* The segment is still percent-encoded: a release stored before the rule may
                 * hold a '/'. */
                if (farm_release_segment(rel, (size_t) (slash - rel), release) < 0)
                        return respond_error(rq, c, 404, "no such kernel release", NULL, NULL);
                if (strcmp(slash, "/verdict") == 0)
                        return answer_release(h, c, rq, release, NULL);
                if (strcmp(slash, "/kcidb") == 0)
                        return get_kcidb(h, c, rq, release);
                if (strcmp(slash, "/waivers") == 0) {
                        if (get)
                                return get_waivers(h, c, rq, release, false);
                        return begin_admin(h, c, rq, BODY_WAIVE, release);
                }
        }
        *handled = false;
        return MHD_NO;
}

static enum MHD_Result route(farm_http *h, struct MHD_Connection *c, struct request *rq,
                             const char *url, const char *method) {
        if (strcmp(url, API_SUMMARIES) == 0) {
                rq->upload = true;
                return begin_upload(h, c, rq);
        }
        enum MHD_Result ret;
        bool handled;
        ret = route_staff(h, c, rq, url, method, &handled);
        if (handled)
                return ret;
        if (route_query(h, c, rq, url, &ret) || route_dash(h, c, rq, url, &ret) ||
            route_trace(h, c, rq, url, &ret))
                return ret;
        if (strcmp(url, API_MACHINES) == 0 || strncmp(url, API_MACHINES "/", 17) == 0)
                return get_machines(h, c, rq, url[16] ? url + 17 : NULL);
        enum MHD_Result res = route_verdict(h, c, rq, url, method, &handled);
        if (handled)
                return res;
        return respond_error(rq, c, 404, "no such resource", NULL, NULL);
}

/* The path as the log shows it: bytes outside printable ASCII, spaces, quotes and '%' are
 * escaped, so a request cannot forge log lines. */
static void escape_path(const char *url, char *buf, size_t size) {
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *) url; *p && o + 4 < size; p++) {
                if (*p > 0x20 && *p < 0x7f && *p != '%' && *p != '"' && *p != '\\')
                        buf[o++] = (char) *p;
                else
                        o += (size_t) snprintf(buf + o, size - o, "%%%02X", *p);
        }
        buf[o] = '\0';
}

/* libmicrohttpd's URI log callback: the target as it came, before anything decoded it.  What
 * it returns is the request's context from then on (the completion notice frees it). */
static void *request_new(void *cls, const char *uri, struct MHD_Connection *c) {
        farm_http *h = cls;
        struct request *rq = calloc(1, sizeof(*rq));
        if (!rq)
                return NULL;
        rq->counters = &h->counters;
        rq->start_ns = now_ns(CLOCK_REALTIME);
        rq->start_mono_ns = now_ns(CLOCK_MONOTONIC);
        rq->target = strdup(uri);
        char *path = strndup(uri, strcspn(uri, "?"));
        escape_path(path ?: "", rq->path, sizeof(rq->path));
        /* Of the path alone, so that a refusal of the target is answered in the format of its
         * route; a path that farm_target_check() refuses is kept as it came, for that only (the
         * request is refused before it is routed). */
        int r = path ? farm_route_path(path, &rq->route) : -ENOMEM;
        if (r == -EINVAL)
                rq->route = TAKE_PTR(path);
        free(path);
        return rq;
}

struct field_list {
        struct farm_field *f;
        size_t n, size;
};

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
        struct field_list *l = cls;
        (void) kind;
        if (l->n < l->size)
                l->f[l->n++] = (struct farm_field){ .name = key, .value = value ?: "" };
        return MHD_YES;
}

/* A refusal of the request before its route answers: an HTML page for the dashboard's routes,
 * else JSON. */
static enum MHD_Result refuse_request(struct request *rq, struct MHD_Connection *c,
                                      const struct farm_route *route, unsigned status,
                                      const char *msg) {
        if (!route || route->format != FARM_ROUTE_HTML)
                return respond_error(rq, c, status, msg, NULL, NULL);
        struct farm_answer a;
        farm_dash_refusal(&a, status, msg, now_ns(CLOCK_REALTIME));
        return send_answer(rq, c, &a);
}

/* 405 for a method the route does not take, with the methods it takes in Allow (the route
 * table's).  The dashboard's pages say it in a page of their own. */
static enum MHD_Result method_not_allowed(struct request *rq, struct MHD_Connection *c,
                                          const struct farm_route *route, const char *method) {
        char allow[64], msg[FARM_ERROR_MAX];
        farm_route_allow(route, allow, sizeof(allow));
        if (route->format != FARM_ROUTE_HTML)
                return respond_error(rq, c, 405, "method not allowed", MHD_HTTP_HEADER_ALLOW,
                                     allow);
        struct farm_answer a;
        snprintf(msg, sizeof(msg), "%.16s: the dashboard is read only (%s)", method, allow);
        farm_dash_refusal(&a, 405, msg, now_ns(CLOCK_REALTIME));
        a.allow = allow;
        return send_answer(rq, c, &a);
}

/* The route of the request's path, NULL for a path no route has. */
static const struct farm_route *route_of(const struct request *rq) {
        return rq->route ? farm_route_find(rq->route) : NULL;
}

/* The route table's checks (server-routes.c): a path no route has is unknown, and the query
 * parameters of a method the route takes are checked once, here, for every route. */
static enum MHD_Result check_route(farm_http *h, struct MHD_Connection *c, struct request *rq,
                                   const char *method) {
        char err[FARM_ERROR_MAX];
        const struct farm_route *rt = farm_route_find(rq->route);
        if (!rt)
                return respond_error(rq, c, 404, "no such resource", NULL, NULL);
        if (!farm_route_takes(rt, method))
                return method_not_allowed(rq, c, rt, method);
        struct farm_args args = {};
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &args);
        if (farm_route_check_args(rt, &args, now_ns(CLOCK_REALTIME), err) < 0)
                return refuse_request(rq, c, rt, 400, err);
        return route(h, c, rq, rq->route, method);
}

/* The framing of the head (server-head.h): 0, the status of a refusal with err, or -ENOMEM. */
static int check_head(struct MHD_Connection *c, const char *version,
                      char err[static FARM_HEAD_ERROR_MAX]) {
        int n = MHD_get_connection_values(c, MHD_HEADER_KIND, NULL, NULL);
        struct field_list l = { .size = (size_t) MAX(n, 0) };
        _cleanup_free_ struct farm_field *f = calloc(MAX(l.size, (size_t) 1), sizeof(*f));
        if (!f)
                return -ENOMEM;
        l.f = f;
        MHD_get_connection_values(c, MHD_HEADER_KIND, collect_field, &l);
        return (int) farm_head_check(version, l.f, l.n, err);
}

/* The head arrived: the checks every request passes before its route, then the route.  A
 * head refused for its framing or its target is answered here, in the format of its route;
 * what follows it on the connection is neither trusted as its body nor read as another
 * request (the connection is closed after every answer). */
static enum MHD_Result begin(farm_http *h, struct MHD_Connection *c, struct request *rq,
                             const char *method, const char *version) {
        char err[MAX(MAX(FARM_PATH_ERROR_MAX, FARM_HEAD_ERROR_MAX), FARM_ERROR_MAX)];
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        format_address(ci ? ci->client_addr : NULL, sizeof(struct sockaddr_in6), rq->remote,
                       sizeof(rq->remote));
        escape_path(method, rq->method, sizeof(rq->method));
        int status = check_head(c, version, err);
        if (status < 0)
                return respond_internal(rq, c, status, "request head");
        if (status > 0)
                return refuse_request(rq, c, route_of(rq), (unsigned) status, err);
        if (!rq->target)
                return respond_internal(rq, c, -ENOMEM, "request target");
        int r = farm_target_check(rq->target, err);
        if (r == -ENOMEM)
                return respond_internal(rq, c, r, err);
        if (r < 0)
                return refuse_request(rq, c, route_of(rq), 400, err);
        if (!rq->route)
                return respond_internal(rq, c, -ENOMEM, "request path");

        struct farm_denial d;
        enum farm_route_class cls = farm_route_class_of(rq->route, method);
        r = farm_access_check(
                h->access, h->db, cls,
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION), &d,
                rq->who, err);
        if (r < 0)
                return respond_internal(rq, c, r, err);
        if (r > 0)
                return respond_error(rq, c, d.status, d.message,
                                     d.www_authenticate ? MHD_HTTP_HEADER_WWW_AUTHENTICATE : NULL,
                                     d.www_authenticate);
        return check_route(h, c, rq, method);
}

static struct farm_conn *conn_of(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls) {
        farm_http *h = cls;
        struct request *rq = *con_cls;

        if (!rq)
                return MHD_NO; /* no memory for it in request_new() */
        if (!rq->started) {
                rq->started = true;
                farm_connlimit_head(h->limits, conn_of(c));
                return begin(h, c, rq, method, version);
        }
        if (rq->status != 0) {
                /* Answered already: whatever else arrives is dropped. */
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                int r = append_body(h, rq, upload_data, *upload_data_size);
                *upload_data_size = 0;
                if (r == -EFBIG) {
                        /* A chunked body without a size that grew over the limit: a response
                         * can no longer be queued in the middle of it, so the connection is
                         * closed and the log says why. */
                        answered(rq, 413);
                        return MHD_NO;
                }
                return r < 0 ? MHD_NO : MHD_YES;
        }
        if (rq->action == BODY_UPLOAD)
                return finish_upload(h, c, rq);
        return rq->action == BODY_WAIVE || rq->action == BODY_WITHDRAW ? finish_admin(h, c, rq)
                                                                       : finish_staff(h, c, rq);
}

static const char *termination(enum MHD_RequestTerminationCode toe) {
        switch (toe) {
        case MHD_REQUEST_TERMINATED_COMPLETED_OK:
                return NULL;
        case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
                return "timeout";
        case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
                return "shutdown";
        case MHD_REQUEST_TERMINATED_READ_ERROR:
                return "read-error";
        case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
                return "client-abort";
        default:
                return "error";
        }
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
        farm_http *h = cls;
        struct request *rq = *con_cls;
        char when[TIMESTAMP_MAX_LEN];
        struct farm_conn *conn = conn_of(c);
        farm_connlimit_done(h->limits, conn);
        if (!rq)
                return;
        /* A head that never arrived whole is not a request; the connection limits say so. */
        if (rq->started) {
                const char *end = farm_connlimit_cut(h->limits, conn) ?: termination(toe);
                log_info("request time=%s remote=%s method=%s path=%s status=%u in=%llu "
                         "out=%llu duration_us=%lld machine=%s%s%s%s%s",
                         format_timestamp_utc(when, rq->start_ns), rq->remote, rq->method, rq->path,
                         rq->status, (unsigned long long) rq->bytes_in,
                         (unsigned long long) rq->bytes_out,
                         (long long) ((now_ns(CLOCK_MONOTONIC) - rq->start_mono_ns) / 1000),
                         rq->machine[0] ? rq->machine : "-", rq->who[0] ? " user=" : "", rq->who,
                         end ? " end=" : "", end ?: "");
        }
        free(rq->body);
        free(rq->target);
        free(rq->route);
        free(rq);
        *con_cls = NULL;
}

/* libmicrohttpd's notices of connections opened and closed, for the connection limits. */
static void connection_notice(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
        farm_http *h = cls;
        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *fd =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
                const union MHD_ConnectionInfo *addr =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                *socket_context = fd && addr ? farm_connlimit_opened(h->limits, fd->connect_fd,
                                                                     addr->client_addr,
                                                                     sizeof(struct sockaddr_in6))
                                             : NULL;
        } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                farm_connlimit_closed(h->limits, *socket_context);
                *socket_context = NULL;
        }
}

static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t len) {
        farm_http *h = cls;
        return farm_connlimit_admit(h->limits, addr, len) ? MHD_YES : MHD_NO;
}

/* libmicrohttpd's messages: one per connection a client breaks off, so a client that opens and
 * drops connections would flood the log.  At most MHD_LOG_BURST lines per ten seconds; the
 * next line says how many were left out. */
#define MHD_LOG_BURST 5
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static int64_t window_ns;
        static unsigned shown, dropped;
        char msg[1024];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        msg[strcspn(msg, "\n")] = '\0';
        int64_t now = now_ns(CLOCK_MONOTONIC);
        pthread_mutex_lock(&lock);
        if (now - window_ns >= 10 * (int64_t) NSEC_PER_SEC) {
                if (dropped)
                        log_warning("libmicrohttpd: %u more message(s) left out", dropped);
                window_ns = now;
                shown = dropped = 0;
        }
        bool show = shown < MHD_LOG_BURST;
        shown += show;
        dropped += !show;
        pthread_mutex_unlock(&lock);
        if (show)
                log_warning("libmicrohttpd: %s", msg);
}

void farm_http_stop(farm_http *h) {
        if (!h)
                return;
        if (h->mhd)
                MHD_stop_daemon(h->mhd);
        farm_ratelimit_free(h->rl);
        farm_connlimit_free(h->limits);
        farm_access_free(h->access);
        free(h);
}

int farm_http_start(const struct farm_http_config *c, farm_db *db, farm_http **ret) {
        bool tls = c->tls_cert_pem && c->tls_key_pem;
        if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                return log_error_errno(EOPNOTSUPP,
                                       "This libmicrohttpd was built without TLS support");

        farm_http *h = calloc(1, sizeof(*h));
        if (!h)
                return log_oom();
        h->db = db;
        h->max_body_bytes = c->max_body_bytes;
        h->rule = c->rule;
        h->counters.rule = c->rule;
        int r = farm_ratelimit_new(c->rate_per_s, c->burst, &h->rl);
        if (r < 0) {
                farm_http_stop(h);
                return log_error_errno(r, "Invalid rate limit: %m");
        }
        farm_ratelimit_share(h->rl, db);
        char err[FARM_ACCESS_ERROR_MAX];
        r = farm_access_new(&c->access, &h->access, err);
        if (r < 0) {
                farm_http_stop(h);
                return log_error_errno(r, "Invalid [Access] settings: %s", err);
        }
        r = farm_connlimit_new(&c->limits, &h->limits);
        if (r < 0) {
                farm_http_stop(h);
                return log_error_errno(r, "Cannot start the connection deadlines: %m");
        }
        farm_access_describe(h->access, err, sizeof(err));
        log_info("Read access: %s", err);

        struct MHD_OptionItem opts[] = {
                { MHD_OPTION_LISTEN_SOCKET, c->listen_fd, NULL },
                { MHD_OPTION_THREAD_POOL_SIZE, c->threads, NULL },
                /* The limits of server-connlimit.c refuse first and log it; this one is a
                 * backstop for the connections accepted at once by several threads. */
                { MHD_OPTION_CONNECTION_LIMIT, c->limits.max_total + c->threads, NULL },
                { MHD_OPTION_CONNECTION_TIMEOUT, c->connection_timeout_s, NULL },
                { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t) completed, h },
                { MHD_OPTION_NOTIFY_CONNECTION, (intptr_t) connection_notice, h },
                { MHD_OPTION_URI_LOG_CALLBACK, (intptr_t) request_new, h },
                { tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *) c->tls_cert_pem },
                { tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *) c->tls_key_pem },
                { MHD_OPTION_END, 0, NULL },
        };
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
        if (tls)
                flags |= MHD_USE_TLS;
        /* The logger goes first, so that it sees the messages about the other options. */
        h->mhd = MHD_start_daemon(flags, 0, accept_policy, h, handle, h, MHD_OPTION_EXTERNAL_LOGGER,
                                  mhd_log, h, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
        if (!h->mhd) {
                farm_http_stop(h);
                return log_error_errno(EIO, "Failed to start the HTTP server%s",
                                       tls ? " (are --cert and --key a matching PEM certificate "
                                             "and private key?)"
                                           : "");
        }
        *ret = h;
        return 0;
}
