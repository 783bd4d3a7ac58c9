/* SPDX-License-Identifier: MIT */
/* What the dashboard's pages share: text and number formats, the page around the content,
 * errors as pages, and what every page shows of a machine or a kernel release. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "macro.h"
#include "dash-internal.h"
#include "params.h"
#include "path.h"
#include "text-stream.h"
#include "traces.h"
#include "sha256.h"
#include "text-safe.h"
#include "timeutil.h"

#define RUNS_MAX 1000 /* of a machine, the newest */

/* Text for HTML: both in elements and in attribute values.  Control and bidirectional
 * formatting characters (stored before the schema refused them) show as escapes, so that
 * they cannot reorder what a page says. */
void dash_esc(FILE *f, const char *text) {
        _cleanup_free_ char *safe = text ? text_escape_dup(text) : NULL;
        markup_fputs(safe, f);
}

/* A path segment or query value, percent-encoded (and so safe in HTML as well). */
void dash_urlenc(FILE *f, const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; p && *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~')
                        fputc(*p, f);
                else
                        fprintf(f, "%%%02X", *p);
        }
}

void dash_urlenc_buf(char *buf, size_t size, const char *s) {
        FILE *f = fmemopen(buf, size, "w");
        if (!f) {
                buf[0] = '\0';
                return;
        }
        dash_urlenc(f, s);
        fputc('\0', f);
        fclose(f);
        buf[size - 1] = '\0';
}

/* "42 µs", "1.25 ms": latencies as people read them. */
char *dash_fmt_lat(char buf[static 32], int64_t ns) {
        if (ns < 0)
                snprintf(buf, 32, "–");
        else if (ns < 1000)
                snprintf(buf, 32, "%" PRId64 " ns", ns);
        else if (ns < 100000)
                snprintf(buf, 32, "%.1f µs", (double) ns / 1e3);
        else if (ns < 1000000)
                snprintf(buf, 32, "%.0f µs", (double) ns / 1e3);
        else if (ns < 1000000000)
                snprintf(buf, 32, "%.2f ms", (double) ns / 1e6);
        else
                snprintf(buf, 32, "%.2f s", (double) ns / 1e9);
        return buf;
}

/* "2 d 4 h", "3 h 12 min", "45 s": spans rounded to two units. */
char *dash_fmt_span(char buf[static 32], int64_t ns) {
        int64_t s = ns / (int64_t) NSEC_PER_SEC;
        if (ns < 0)
                snprintf(buf, 32, "–");
        else if (s < 60)
                snprintf(buf, 32, "%" PRId64 " s", s);
        else if (s < 3600)
                snprintf(buf, 32, "%" PRId64 " min", s / 60);
        else if (s < 86400 && s % 3600 / 60 == 0)
                snprintf(buf, 32, "%" PRId64 " h", s / 3600);
        else if (s < 86400)
                snprintf(buf, 32, "%" PRId64 " h %" PRId64 " min", s / 3600, s % 3600 / 60);
        else if (s % 86400 / 3600 == 0)
                snprintf(buf, 32, "%" PRId64 " d", s / 86400);
        else
                snprintf(buf, 32, "%" PRId64 " d %" PRId64 " h", s / 86400, s % 86400 / 3600);
        return buf;
}

/* "12.4 d": a coverage in days. */
char *dash_fmt_days(char buf[static 32], int64_t ns) {
        snprintf(buf, 32, "%.1f d", (double) MAX(ns, 0) / (double) DAY_NS);
        return buf;
}

/* A time as a <time> element: UTC without JavaScript, the viewer's time zone with it, and UTC
 * on hover either way. */
void dash_put_time(FILE *f, int64_t ns) {
        char iso[TIMESTAMP_MAX_LEN], shown[32];
        time_t s = (time_t) (ns / (int64_t) NSEC_PER_SEC - (ns % (int64_t) NSEC_PER_SEC < 0));
        struct tm tm;
        format_timestamp_utc(iso, ns);
        if (!gmtime_r(&s, &tm) || !strftime(shown, sizeof(shown), "%Y-%m-%d %H:%M:%S", &tm))
                snprintf(shown, sizeof(shown), "%s", iso);
        fprintf(f, "<time data-ns=\"%" PRId64 "\" datetime=\"%s\" title=\"%s UTC\">%s UTC</time>",
                ns, iso, shown, shown);
}

void dash_put_stamp(const struct dash *x, int64_t stamp_ns, int64_t received_ns) {
        char b[32];
        if (received_ns == INT64_MIN ||
            stamp_ns - received_ns <= (int64_t) x->rule->clock_tolerance_ns) {
                dash_put_time(x->f, stamp_ns);
                return;
        }
        fputs("<span class=\"clock-ahead\">", x->f);
        dash_put_time(x->f, stamp_ns);
        fprintf(x->f, " <span class=\"bad\">⚠ stamped %s after it arrived</span> (received ",
                dash_fmt_span(b, stamp_ns - received_ns));
        dash_put_time(x->f, received_ns);
        fputs(")</span>", x->f);
}

const char *dash_name(const char *id, const char *hostname, char buf[static 16]) {
        if (hostname && *hostname)
                return hostname;
        snprintf(buf, 16, "%.8s…", id ?: "?");
        return buf;
}

/* The machine's name as shown: its hostname, or the start of its id. */
const char *dash_machine_name(const struct farm_machine *m, char buf[static 16]) {
        return dash_name(m->id, m->hostname, buf);
}

static const char css[] =
        "*{box-sizing:border-box}"
        "html{font-family:system-ui,sans-serif;font-size:15px;color:#111;background:#fff}"
        "@media (min-width:1800px){html{font-size:20px}}"
        "@media (min-width:2800px){html{font-size:26px}}"
        "body{margin:0 auto;padding:0 1.2rem 2rem;max-width:110rem}"
        "header{display:flex;flex-wrap:wrap;gap:1rem;align-items:baseline;"
        "border-bottom:2px solid #111;padding:.6rem 0;margin-bottom:1rem}"
        "header a{font-weight:bold;color:#111;text-decoration:none;font-size:1.2rem}"
        "header .now{margin-left:auto;color:#444;font-size:.9rem}"
        "h1{font-size:1.6rem;margin:.6rem 0}h2{font-size:1.25rem;margin:1.6rem 0 .5rem}"
        "a{color:#0055a0}a[href^=\"/kernels/\"]{white-space:nowrap}"
        ".scroll{overflow-x:auto}"
        "table{border-collapse:collapse;width:100%;margin:.3rem 0}"
        "th,td{text-align:left;padding:.3rem .6rem;border-bottom:1px solid #ccc;"
        "vertical-align:top}"
        "th{background:#eee;font-weight:600}"
        "td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
        "tr.silent td{background:#fbe3d6}"
        "tr.hl td{background:#fff0c8;outline:2px dashed #000}"
        ".alert{background:#a33a00;color:#fff;border:3px solid #000;padding:.7rem 1rem;"
        "margin:1rem 0;font-size:1.15rem}"
        ".alert a{color:#fff;font-weight:bold}"
        ".alert strong{font-size:1.3rem}"
        ".badge{display:inline-block;padding:.1rem .5rem;border:2px solid #000;"
        "font-weight:bold;border-radius:.3rem;white-space:nowrap}"
        ".failed{background:#D55E00;color:#fff}"
        ".qualified{background:#009E73;color:#fff}"
        ".pending{background:#F0E442;color:#000;border-style:dashed}"
        ".state-silent{background:#a33a00;color:#fff}"
        ".state-ok{background:#fff;color:#000;border-color:#009E73}"
        ".state-none{background:#eee;color:#000;border-style:dotted}"
        ".state-clock{background:#fff;color:#a33a00;border-color:#a33a00;border-style:dashed}"
        ".plot svg{width:100%;height:auto;display:block;border:1px solid #ccc}"
        ".plot{margin:.5rem 0}"
        ".note{color:#444;font-size:.9rem}"
        ".bad{color:#a33a00;font-weight:bold}"
        ".culprit{font-size:.9rem}"
        "nav.windows a,nav.windows strong{margin-right:.8rem}"
        "ul.reasons li{margin:.2rem 0}ul.waiting{margin:0;padding-left:1.2rem}"
        "code{font-size:.85rem;word-break:break-all}"
        "form{margin:.5rem 0}"
        "@media print{.alert{background:#fff;color:#000}header .now{display:none}}";

/* Times in the viewer's time zone (UTC stays in the tooltip). */
static const char script[] =
        "(function(){function p(n){return(n<10?'0':'')+n}"
        "var z='';try{z=Intl.DateTimeFormat().resolvedOptions().timeZone||''}catch(e){}"
        "var l=document.querySelectorAll('time[data-ns]');"
        "for(var i=0;i<l.length;i++){var ms=Math.floor(Number(l[i].getAttribute('data-ns'))/1e6);"
        "if(!isFinite(ms))continue;var d=new Date(ms);"
        "l[i].textContent=d.getFullYear()+'-'+p(d.getMonth()+1)+'-'+p(d.getDate())+' '+"
        "p(d.getHours())+':'+p(d.getMinutes())+':'+p(d.getSeconds())+(z?' '+z:'');"
        "l[i].setAttribute('data-local','1')}})();";

static char csp[512];

static void csp_hash(const char *text, char *buf, size_t size) {
        uint8_t hash[SHA256_DIGEST_SIZE];
        struct sha256_ctx c;
        sha256_init(&c);
        sha256_update(&c, text, strlen(text));
        sha256_final(&c, hash);
        _cleanup_free_ char *b64 = base64_encode(hash, sizeof(hash));
        snprintf(buf, size, "'sha256-%s'", b64 ?: "");
}

static void csp_init(void) {
        char style[80], js[80];
        csp_hash(css, style, sizeof(style));
        csp_hash(script, js, sizeof(js));
        snprintf(csp, sizeof(csp),
                 "default-src 'none'; style-src %s; script-src %s; img-src 'self' data:; "
                 "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
                 style, js);
}

const char *farm_dash_csp(void) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, csp_init);
        return csp;
}

void dash_page_begin(struct dash *x, const char *title, unsigned refresh_s) {
        FILE *f = x->f;
        fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">",
              f);
        if (refresh_s)
                fprintf(f, "<meta http-equiv=\"refresh\" content=\"%u\">", refresh_s);
        fputs("<title>", f);
        dash_esc(f, title);
        fprintf(f, " – rtsoak farm</title><style>%s</style></head>\n<body>\n", css);
        fputs("<header><a href=\"/\">rtsoak farm</a><span class=\"note\">latency soak tests"
              "</span><span class=\"now\">as of ",
              f);
        dash_put_time(f, x->now);
        fputs("</span></header>\n", f);
}

void dash_page_end(struct dash *x) {
        fprintf(x->f, "<script>%s</script>\n</body></html>\n", script);
}

int dash_open_page(struct dash *x) {
        x->buf = NULL;
        x->len = 0;
        x->f = text_stream_open(&x->buf, &x->len);
        return x->f ? 0 : -ENOMEM;
}

void dash_fail_page(struct dash *x, unsigned status, const char *fmt, ...) {
        char raw[FARM_ERROR_MAX], msg[FARM_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
        /* It quotes what the client sent: the page is UTF-8 whatever that was. */
        text_copy_utf8(raw, msg, sizeof(msg));
        struct farm_answer *a = x->a;
        farm_answer_done(a);
        a->status = status;
        a->content_type = HTML;
        const char *what = status == 400   ? "Bad request"
                           : status == 404 ? "Not found"
                           : status == 405 ? "Method not allowed"
                           : status == 503 ? "Busy"
                                           : "Server error";
        char *text = NULL;
        size_t len = 0;
        FILE *f = text_stream_open(&text, &len);
        if (!f)
                return;
        struct dash e = *x;
        e.f = f;
        char title[64];
        snprintf(title, sizeof(title), "%u %s", status, what);
        dash_page_begin(&e, title, 0);
        fprintf(f, "<h1>%s</h1>\n<p class=\"error\" id=\"error\">", title);
        dash_esc(f, msg);
        fputs("</p>\n<p><a href=\"/\">Back to the farm overview</a></p>\n", f);
        dash_page_end(&e);
        if (fclose(f) == 0)
                a->text = text;
        else
                free(text);
}

/* A failure of ours: logged by the caller from a->err, answered with a 500 (503 when busy). */
int dash_fail_internal(struct dash *x, int error, const char *what) {
        if (what && !x->a->err[0])
                snprintf(x->a->err, sizeof(x->a->err), "%s", what);
        int e = error < 0 ? error : -EIO;
        dash_fail_page(x, e == -EBUSY ? 503 : 500,
                       e == -EBUSY ? "The farm database is busy; retry in a few seconds."
                                   : "Internal server error (see the server's log).");
        x->a->error = e;
        return e;
}

int dash_machine_read(struct dash *x, int r, const char *err) {
        if (r == -ENOENT) { /* removed meanwhile */
                dash_fail_page(x, 404, "no such machine");
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return dash_fail_internal(x, r, NULL);
        }
        return 1;
}

int dash_finish_page(struct dash *x, const char *content_type) {
        if (fclose(x->f) != 0) {
                x->f = NULL;
                free(x->buf);
                return dash_fail_internal(x, -ENOMEM, "dashboard: cannot write the page");
        }
        x->f = NULL;
        farm_answer_done(x->a);
        x->a->status = 200;
        x->a->text = x->buf;
        x->a->content_type = content_type;
        x->buf = NULL;
        return 0;
}

/* Drops a page that is not finished (nothing when there is none). */
void dash_abandon_page(struct dash *x) {
        if (!x->f)
                return;
        fclose(x->f);
        x->f = NULL;
        free(x->buf);
        x->buf = NULL;
}

int dash_finish_svg(struct dash *x, struct svg_buf *b) {
        farm_answer_done(x->a);
        x->a->status = 200;
        x->a->text = b->data;
        x->a->content_type = SVG;
        b->data = NULL;
        return 0;
}

void dash_machine_done(struct dash_machine *m) {
        farm_machine_done(&m->info);
        farm_run_page_done(&m->runs);
        *m = (struct dash_machine){};
}

struct farm_clock_view dash_clock_view(const struct dash *x) {
        return (struct farm_clock_view){ x->now, (int64_t) x->rule->clock_tolerance_ns,
                                         (int64_t) x->rule->max_gap_ns };
}

/* The rest of m once m->info is there: its runs, its last data and silence.  1, 0 answered
 * (404: removed meanwhile), < 0 internal; m is emptied unless 1. */
static int machine_complete(struct dash *x, const struct farm_clock_view *cv,
                            struct dash_machine *m) {
        char err[FARM_ERROR_MAX];
        int r = farm_machine_runs(x->db, m->id, &(struct farm_page){ RUNS_MAX, 0 }, cv, &m->runs,
                                  err);
        if (r == -ENOENT) { /* removed meanwhile */
                dash_machine_done(m);
                dash_fail_page(x, 404, "no such machine");
                return 0;
        }
        if (r < 0) {
                dash_machine_done(m);
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return dash_fail_internal(x, r, NULL);
        }
        /* Its last data and silence as the server takes them (struct farm_clock_view): data
         * stamped beyond the tolerance after it arrived counts as arrived, never later. */
        const struct farm_machine *info = &m->info;
        m->last_data_ns = info->last_data_ns;
        m->has_data = m->last_data_ns != FARM_NONE;
        m->silent = info->silent;
        m->clock_ahead_ns = info->clock_ahead_ns != FARM_NONE ? info->clock_ahead_ns : 0;
        m->interval_ns = m->runs.n && m->runs.v[0].interval_ns != FARM_NONE
                                 ? m->runs.v[0].interval_ns
                                 : 0;
        m->bound_ns = info->threshold_ns != FARM_NONE ? info->threshold_ns
                                                      : (int64_t) FARM_DEFAULT_THRESHOLD_NS;
        return 1;
}

/* 1 with m filled, 0 answered (404), < 0 internal. */
int dash_machine_load(struct dash *x, const char *id, struct dash_machine *m) {
        char err[FARM_ERROR_MAX];
        *m = (struct dash_machine){};
        if (!farm_machine_id_valid(id)) {
                dash_fail_page(x, 404, "no such machine: %.64s (machine ids are 32 hex digits)",
                               id);
                return 0;
        }
        snprintf(m->id, sizeof(m->id), "%s", id);
        struct farm_clock_view cv = dash_clock_view(x);
        int r = farm_machine_get(x->db, id, &cv, &m->info, err);
        if (r == -ENOENT) {
                dash_fail_page(x, 404, "no such machine: %s is not enrolled", id);
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return dash_fail_internal(x, r, NULL);
        }
        return machine_complete(x, &cv, m);
}

int dash_machine_load_listed(struct dash *x, struct farm_machine *listed, struct dash_machine *m) {
        *m = (struct dash_machine){ .info = *listed };
        *listed = (struct farm_machine){};
        snprintf(m->id, sizeof(m->id), "%s", m->info.id ?: "");
        struct farm_clock_view cv = dash_clock_view(x);
        return machine_complete(x, &cv, m);
}

/* The machine's state as a badge: silence is said in words, not colour alone. */
void dash_put_state(struct dash *x, const struct dash_machine *m) {
        char s[32];
        if (m->info.revoked)
                fputs("<span class=\"badge state-none\">revoked</span>", x->f);
        else if (!m->has_data)
                fputs("<span class=\"badge state-none\">no data yet</span>", x->f);
        else if (m->silent) {
                fputs("<span class=\"badge state-silent\">⚠ SILENT</span> since ", x->f);
                dash_put_time(x->f, m->last_data_ns);
                fprintf(x->f, " (%s)", dash_fmt_span(s, x->now - m->last_data_ns));
        } else
                fputs("<span class=\"badge state-ok\">✓ reporting</span>", x->f);
        if (m->clock_ahead_ns > 0)
                fprintf(x->f,
                        " <span class=\"badge state-clock\" title=\"its data is stamped up to %s "
                        "after it arrived: shown as stamped, counted as received\">⚠ clock ahead "
                        "%s</span>",
                        dash_fmt_span(s, m->clock_ahead_ns), s);
}

void dash_link_machine(FILE *f, const char *id, const char *hostname, const char *query) {
        char nb[16];
        fprintf(f, "<a href=\"/machines/%s%s\">", id ?: "", query ?: "");
        dash_esc(f, dash_name(id, hostname, nb));
        fputs("</a>", f);
}

void dash_machine_link(FILE *f, const struct farm_machine *info, const char *query) {
        dash_link_machine(f, info->id, info->hostname, query);
}

const char *dash_machine_kernel(const struct dash_machine *m) {
        return m->info.has_latest ? m->info.latest.kernel_release : NULL;
}

void dash_kernel_link(FILE *f, const char *release) {
        if (!release) {
                fputs("–", f);
                return;
        }
        fputs("<a href=\"/kernels/", f);
        dash_urlenc(f, release);
        fputs("\">", f);
        dash_esc(f, release);
        fputs("</a>", f);
}

void dash_verdict_badge(FILE *f, const char *status) {
        const char *s = status ?: "unknown";
        const char *label = strcmp(s, "failed") == 0      ? "✗ FAILED"
                            : strcmp(s, "qualified") == 0 ? "✓ QUALIFIED"
                            : strcmp(s, "pending") == 0   ? "… PENDING"
                                                          : s;
        fprintf(f, "<span class=\"badge %s\">%s</span>", s, label);
}

void dash_zoom_href(FILE *f, const char *id, int64_t start, int64_t end) {
        fprintf(f,
                "/machines/%s?from=%" PRId64 "&amp;to=%" PRId64 "&amp;hl_from=%" PRId64
                "&amp;hl_to=%" PRId64,
                id, start - ZOOM_NS, end + ZOOM_NS, start, end);
}

/* What the trace flight recorder names as the cause of a violation, with its raw events. */
void dash_culprit_html(FILE *f, const char *summary, int64_t trace_id, bool raw) {
        fputs("<span class=\"culprit\">culprit: ", f);
        dash_esc(f, summary);
        if (raw)
                fprintf(f,
                        " (<a class=\"trace\" href=\"" FARM_DASH_TRACES "%" PRId64
                        ".txt\" download=\"trace-%" PRId64 ".txt\">raw trace</a>)",
                        trace_id, trace_id);
        fputs("</span>", f);
}

/* The first of the names in mask ("" for none). */
const char *dash_step_name(const struct farm_names *names, uint64_t mask) {
        if (!mask)
                return "";
        unsigned i = (unsigned) __builtin_ctzll(mask);
        return i < names->n ? names->s[i] : "";
}

const struct farm_verdict_machine *dash_verdict_machine(const struct farm_verdict *v,
                                                        const char *id) {
        for (size_t i = 0; i < v->nmachines; i++)
                if (strcmp(v->machines[i].id, id) == 0)
                        return &v->machines[i];
        return NULL;
}

int64_t dash_time_shown(int64_t ns) {
        return ns >= FARM_TIME_MIN_NS && ns < FARM_TIME_MAX_NS ? ns : INT64_MIN;
}

int64_t dash_parse_utc(struct dash *x, const char *s) {
        char perr[FARM_PARAM_ERROR_MAX];
        int64_t t = 0;
        if (!s || farm_param_time("time", s, x->now, &t, perr) < 0)
                return INT64_MIN;
        return t;
}
