/* SPDX-License-Identifier: MIT */
/* The farm dashboard: the overview, the machine and kernel pages and their plots, as HTML and
 * SVG rendered here from the data of the query API and of the verdict. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "log.h"
#include "macro.h"
#include "server-dash.h"
#include "server-path.h"
#include "server-params.h"
#include "server-query-compare.h"
#include "server-query-hist.h"
#include "server-query-machines.h"
#include "server-query-steps.h"
#include "server-stable.h"
#include "server-svg.h"
#include "server-trace.h"
#include "sha256.h"
#include "text-safe.h"
#include "timeutil.h"

#define HOUR_NS (3600 * (int64_t) NSEC_PER_SEC)
#define DAY_NS FARM_DAY_NS
#define LT_STEP_NS (300 * (int64_t) NSEC_PER_SEC) /* the long-term plot's 5-minute step */
#define LT_FINE_WINDOW_NS (12 * HOUR_NS)          /* shorter windows: one point per interval */
#define LT_POINTS_MAX 20000
#define ZOOM_NS (3 * HOUR_NS) /* an evidence link shows this much either side */
#define COV_BINS 300
#define LIST_MAX 200          /* rows of a list on a page; the rest is counted */
#define RUNS_MAX 1000         /* of a machine, the newest */
#define COMPARE_ROWS_MAX 1000 /* of a comparison, the first */
#define WAITING_MAX 6
#define HTML "text/html; charset=utf-8"
#define SVG "image/svg+xml; charset=utf-8"

/* One request of the dashboard. */
struct dash {
        farm_db *db;
        const struct farm_rule *rule;
        int64_t now;
        const struct farm_args *args;
        struct farm_answer *a;
        FILE *f; /* the page being written */
        char *buf;
        size_t len;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static int64_t ji(const json_t *o, const char *key, int64_t def) {
        const json_t *v = json_object_get(o, key);
        return json_is_integer(v) ? (int64_t) json_integer_value(v) : def;
}

static const char *js(const json_t *o, const char *key) {
        return json_string_value(json_object_get(o, key));
}

/* The value of a query parameter, or NULL. */
static const char *arg(const struct farm_args *args, const char *name) {
        for (unsigned i = 0; i < args->n; i++)
                if (strcmp(args->a[i].name, name) == 0)
                        return args->a[i].value ?: "";
        return NULL;
}

/* Text for HTML: both in elements and in attribute values.  Control and bidirectional
 * formatting characters (stored before the schema refused them) show as escapes, so that
 * they cannot reorder what a page says. */
static void esc(FILE *f, const char *text) {
        _cleanup_free_ char *safe = text ? text_escape_dup(text) : NULL;
        for (const char *s = safe; s && *s; s++)
                switch (*s) {
                case '&':
                        fputs("&amp;", f);
                        break;
                case '<':
                        fputs("&lt;", f);
                        break;
                case '>':
                        fputs("&gt;", f);
                        break;
                case '"':
                        fputs("&quot;", f);
                        break;
                case '\'':
                        fputs("&#39;", f);
                        break;
                default:
                        fputc(*s, f);
                }
}

/* A path segment or query value, percent-encoded (and so safe in HTML as well). */
static void urlenc(FILE *f, const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; p && *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~')
                        fputc(*p, f);
                else
                        fprintf(f, "%%%02X", *p);
        }
}

static void urlenc_buf(char *buf, size_t size, const char *s) {
        FILE *f = fmemopen(buf, size, "w");
        if (!f) {
                buf[0] = '\0';
                return;
        }
        urlenc(f, s);
        fputc('\0', f);
        fclose(f);
        buf[size - 1] = '\0';
}

/* "42 µs", "1.25 ms": latencies as people read them. */
static char *fmt_lat(char buf[static 32], int64_t ns) {
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
static char *fmt_span(char buf[static 32], int64_t ns) {
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
static char *fmt_days(char buf[static 32], int64_t ns) {
        snprintf(buf, 32, "%.1f d", (double) MAX(ns, 0) / (double) DAY_NS);
        return buf;
}

/* A time as a <time> element: UTC without JavaScript, the viewer's time zone with it, and UTC
 * on hover either way. */
static void put_time(FILE *f, int64_t ns) {
        char iso[TIMESTAMP_MAX_LEN], shown[32];
        time_t s = (time_t) (ns / (int64_t) NSEC_PER_SEC - (ns % (int64_t) NSEC_PER_SEC < 0));
        struct tm tm;
        format_timestamp_utc(iso, ns);
        if (!gmtime_r(&s, &tm) || !strftime(shown, sizeof(shown), "%Y-%m-%d %H:%M:%S", &tm))
                snprintf(shown, sizeof(shown), "%s", iso);
        fprintf(f, "<time data-ns=\"%" PRId64 "\" datetime=\"%s\" title=\"%s UTC\">%s UTC</time>",
                ns, iso, shown, shown);
}

/* The machine's name as shown: its hostname, or the start of its id. */
static const char *machine_name(const json_t *m, char buf[static 16]) {
        const char *h = js(m, "hostname");
        if (h && *h)
                return h;
        snprintf(buf, 16, "%.8s…", js(m, "id") ?: "?");
        return buf;
}

/* ---- pages and errors ------------------------------------------------------------------- */

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

static void page_begin(struct dash *x, const char *title, unsigned refresh_s) {
        FILE *f = x->f;
        fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">",
              f);
        if (refresh_s)
                fprintf(f, "<meta http-equiv=\"refresh\" content=\"%u\">", refresh_s);
        fputs("<title>", f);
        esc(f, title);
        fprintf(f, " – rtsoak farm</title><style>%s</style></head>\n<body>\n", css);
        fputs("<header><a href=\"/\">rtsoak farm</a><span class=\"note\">latency soak tests"
              "</span><span class=\"now\">as of ",
              f);
        put_time(f, x->now);
        fputs("</span></header>\n", f);
}

static void page_end(struct dash *x) {
        fprintf(x->f, "<script>%s</script>\n</body></html>\n", script);
}

static int open_page(struct dash *x) {
        x->buf = NULL;
        x->len = 0;
        x->f = open_memstream(&x->buf, &x->len);
        return x->f ? 0 : -ENOMEM;
}

/* A complete HTML page for an error: 400 names the parameter, 404 the unknown thing. */
static void fail_page(struct dash *x, unsigned status, const char *fmt, ...) _printf_(3, 4);
static void fail_page(struct dash *x, unsigned status, const char *fmt, ...) {
        char msg[FARM_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
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
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return;
        struct dash e = *x;
        e.f = f;
        char title[64];
        snprintf(title, sizeof(title), "%u %s", status, what);
        page_begin(&e, title, 0);
        fprintf(f, "<h1>%s</h1>\n<p class=\"error\" id=\"error\">", title);
        esc(f, msg);
        fputs("</p>\n<p><a href=\"/\">Back to the farm overview</a></p>\n", f);
        page_end(&e);
        if (fclose(f) == 0)
                a->text = text;
        else
                free(text);
}

/* A failure of ours: logged by the caller from a->err, answered with a 500 (503 when busy). */
static int fail_internal(struct dash *x, int error, const char *what) {
        if (what && !x->a->err[0])
                snprintf(x->a->err, sizeof(x->a->err), "%s", what);
        int e = error < 0 ? error : -EIO;
        fail_page(x, e == -EBUSY ? 503 : 500,
                  e == -EBUSY ? "The farm database is busy; retry in a few seconds."
                              : "Internal server error (see the server's log).");
        x->a->error = e;
        return e;
}

/* 0, or 400 naming the first parameter that the page does not take or that is repeated. */
static int check_params(struct dash *x, const char *const *allowed) {
        char list[160] = "";
        size_t o = 0;
        for (const char *const *p = allowed; *p && o < sizeof(list); p++)
                o += (size_t) snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", *p);
        if (x->args->too_many) {
                fail_page(x, 400, "too many query parameters (at most %d)", FARM_ARGS_MAX);
                return -EINVAL;
        }
        for (unsigned i = 0; i < x->args->n; i++) {
                const char *name = x->args->a[i].name;
                bool known = false;
                for (const char *const *p = allowed; *p; p++)
                        known = known || strcmp(*p, name) == 0;
                if (!known) {
                        fail_page(x, 400, "%.64s: unknown parameter (this page takes: %s)", name,
                                  o ? list : "none");
                        return -EINVAL;
                }
                for (unsigned j = 0; j < i; j++)
                        if (strcmp(x->args->a[j].name, name) == 0) {
                                fail_page(x, 400, "%.64s: given more than once", name);
                                return -EINVAL;
                        }
        }
        return 0;
}

static int finish_page(struct dash *x, const char *content_type) {
        if (fclose(x->f) != 0) {
                x->f = NULL;
                free(x->buf);
                return fail_internal(x, -ENOMEM, "dashboard: cannot write the page");
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
static void abandon_page(struct dash *x) {
        if (!x->f)
                return;
        fclose(x->f);
        x->f = NULL;
        free(x->buf);
        x->buf = NULL;
}

static int finish_svg(struct dash *x, struct svg_buf *b) {
        farm_answer_done(x->a);
        x->a->status = 200;
        x->a->text = b->data;
        x->a->content_type = SVG;
        b->data = NULL;
        return 0;
}

/* ---- what the pages share about a machine ----------------------------------------------- */

struct machine {
        char id[FARM_MACHINE_ID_LEN + 1];
        json_t *info; /* GET /api/v1/machines/{id} */
        json_t *runs; /* as GET .../runs lists them: newest first */
        bool has_data, silent;
        int64_t last_data_ns; /* end of its latest interval */
        int64_t bound_ns;
        int64_t interval_ns; /* of its latest run */
};

static void machine_done(struct machine *m) {
        json_decref(m->info);
        json_decref(m->runs);
        *m = (struct machine){};
}

/* 1 with m filled, 0 answered (404), < 0 internal. */
static int machine_load(struct dash *x, const char *id, struct machine *m) {
        char err[FARM_ERROR_MAX];
        *m = (struct machine){};
        if (!farm_machine_id_valid(id)) {
                fail_page(x, 404, "no such machine: %.64s (machine ids are 32 hex digits)", id);
                return 0;
        }
        snprintf(m->id, sizeof(m->id), "%s", id);
        int r = farm_machines_json(x->db, id, &m->info, err);
        if (r == -ENOENT) {
                fail_page(x, 404, "no such machine: %s is not enrolled", id);
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return fail_internal(x, r, NULL);
        }
        r = farm_machine_runs_json(x->db, id, &(struct farm_page){ RUNS_MAX, 0 }, &m->runs, NULL,
                                   err);
        if (r == -ENOENT) { /* removed meanwhile */
                machine_done(m);
                fail_page(x, 404, "no such machine");
                return 0;
        }
        if (r < 0) {
                machine_done(m);
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return fail_internal(x, r, NULL);
        }
        json_t *run;
        size_t i;
        json_array_foreach (m->runs, i, run) {
                int64_t last = ji(run, "last_data_ns", INT64_MIN);
                if (last != INT64_MIN && (!m->has_data || last > m->last_data_ns)) {
                        m->last_data_ns = last;
                        m->has_data = true;
                }
                if (i == 0)
                        m->interval_ns = ji(run, "interval_ns", 0);
        }
        /* The next interval is due when it ends: a machine with hour-long intervals reports
         * once an hour and is only late an allowed gap after that. */
        m->silent = m->has_data &&
                    x->now - m->last_data_ns > m->interval_ns + (int64_t) x->rule->max_gap_ns &&
                    !json_is_true(json_object_get(m->info, "revoked"));
        m->bound_ns = ji(m->info, "threshold_ns", (int64_t) FARM_DEFAULT_THRESHOLD_NS);
        return 1;
}

/* The machine's state as a badge: silence is said in words, not colour alone. */
static void put_state(struct dash *x, const struct machine *m) {
        char s[32];
        if (json_is_true(json_object_get(m->info, "revoked")))
                fputs("<span class=\"badge state-none\">revoked</span>", x->f);
        else if (!m->has_data)
                fputs("<span class=\"badge state-none\">no data yet</span>", x->f);
        else if (m->silent) {
                fputs("<span class=\"badge state-silent\">⚠ SILENT</span> since ", x->f);
                put_time(x->f, m->last_data_ns);
                fprintf(x->f, " (%s)", fmt_span(s, x->now - m->last_data_ns));
        } else
                fputs("<span class=\"badge state-ok\">✓ reporting</span>", x->f);
}

static void machine_link(FILE *f, const json_t *info, const char *query) {
        char nb[16];
        fprintf(f, "<a href=\"/machines/%s%s\">", js(info, "id") ?: "", query ?: "");
        esc(f, machine_name(info, nb));
        fputs("</a>", f);
}

static void kernel_link(FILE *f, const char *release) {
        if (!release) {
                fputs("–", f);
                return;
        }
        fputs("<a href=\"/kernels/", f);
        urlenc(f, release);
        fputs("\">", f);
        esc(f, release);
        fputs("</a>", f);
}

static void verdict_badge(FILE *f, const char *status) {
        const char *s = status ?: "unknown";
        const char *label = strcmp(s, "failed") == 0      ? "✗ FAILED"
                            : strcmp(s, "qualified") == 0 ? "✓ QUALIFIED"
                            : strcmp(s, "pending") == 0   ? "… PENDING"
                                                          : s;
        fprintf(f, "<span class=\"badge %s\">%s</span>", s, label);
}

/* ---- the machine's window --------------------------------------------------------------- */

struct window {
        int64_t from, to;
        int64_t hl_from, hl_to; /* hl_to <= hl_from: nothing highlighted */
        char name[64];          /* "1d", "30d", "kernel:..." or "" for from/to */
        char kernel[256];
};

static const char *const machine_params[] = { "window", "from", "to", "hl_from", "hl_to", NULL };

/* ?window=1d|30d|kernel:RELEASE, or ?from=&to= (one of them: a day from or up to it), and
 * ?hl_from=&hl_to= (a span to highlight).  By default the last day up to now, or up to the
 * end of the latest data (and a little after) for a machine that is silent. */
static int parse_window(struct dash *x, const struct machine *m, struct window *w) {
        char perr[FARM_PARAM_ERROR_MAX];
        const char *win = arg(x->args, "window"), *f = arg(x->args, "from"),
                   *t = arg(x->args, "to"), *hf = arg(x->args, "hl_from"),
                   *ht = arg(x->args, "hl_to");
        *w = (struct window){};
        if (win && (f || t)) {
                fail_page(x, 400, "window=%.64s: give either window= or from=/to=, not both", win);
                return -EINVAL;
        }
        int64_t end = m->silent ? MIN(x->now, m->last_data_ns + HOUR_NS) : x->now;
        if (!win && !f && !t)
                win = "1d";
        if (win && (strcmp(win, "1d") == 0 || strcmp(win, "30d") == 0)) {
                w->to = end;
                w->from = end - (win[0] == '1' ? 1 : 30) * DAY_NS;
                snprintf(w->name, sizeof(w->name), "%s", win);
        } else if (win && strncmp(win, "kernel:", 7) == 0 && win[7]) {
                const char *rel = win + 7;
                json_t *run;
                size_t i;
                bool any = false;
                json_array_foreach (m->runs, i, run) {
                        const char *k = js(run, "kernel_release");
                        int64_t a = ji(run, "first_data_ns", INT64_MIN),
                                b = ji(run, "last_data_ns", INT64_MIN);
                        if (!k || strcmp(k, rel) != 0 || a == INT64_MIN || b == INT64_MIN)
                                continue;
                        w->from = any ? MIN(w->from, a) : a;
                        w->to = any ? MAX(w->to, b) : b;
                        any = true;
                }
                if (!any) {
                        fail_page(x, 400,
                                  "window=%.300s: this machine has no data of kernel %.256s "
                                  "(expected 1d, 30d or kernel:RELEASE of one of its runs)",
                                  win, rel);
                        return -EINVAL;
                }
                snprintf(w->name, sizeof(w->name), "kernel");
                snprintf(w->kernel, sizeof(w->kernel), "%s", rel);
        } else if (win) {
                fail_page(x, 400, "window=%.64s: expected 1d, 30d or kernel:RELEASE", win);
                return -EINVAL;
        } else {
                if (farm_param_time("from", f, x->now, &w->from, perr) < 0 ||
                    farm_param_time("to", t, x->now, &w->to, perr) < 0) {
                        fail_page(x, 400, "%s", perr);
                        return -EINVAL;
                }
                if (!t)
                        w->to = w->from + DAY_NS;
                else if (!f)
                        w->from = w->to - DAY_NS;
                if (w->from >= w->to) {
                        fail_page(x, 400, "from=%.64s: not before to=%.64s", f ?: "(default)",
                                  t ?: "(default)");
                        return -EINVAL;
                }
        }
        if (farm_param_time("hl_from", hf, x->now, &w->hl_from, perr) < 0 ||
            farm_param_time("hl_to", ht, x->now, &w->hl_to, perr) < 0) {
                fail_page(x, 400, "%s", perr);
                return -EINVAL;
        }
        if (!hf != !ht || (hf && w->hl_from >= w->hl_to)) {
                fail_page(x, 400, "hl_from=, hl_to=: give both, hl_from before hl_to");
                return -EINVAL;
        }
        return 0;
}

/* A point in time as a parameter: Unix nanoseconds, or "@SECONDS.NANOSECONDS" before 1970-01-12
 * (a plain number of fewer than 16 digits is refused as probably meant as seconds). */
static const char *time_arg(char buf[static 40], int64_t ns) {
        if (ns >= INT64_C(1000000000000000))
                snprintf(buf, 40, "%" PRId64, ns);
        else
                snprintf(buf, 40, "@%" PRId64 ".%09" PRId64, ns / (int64_t) NSEC_PER_SEC,
                         ns % (int64_t) NSEC_PER_SEC);
        return buf;
}

/* The query string that selects the same window ("?window=30d", "?from=..&to=.."), with
 * "&amp;" when for HTML. */
static void window_query(char *buf, size_t size, const struct window *w, bool html, bool hl) {
        const char *amp = html ? "&amp;" : "&";
        char t1[40], t2[40];
        size_t o;
        if (w->name[0] && strcmp(w->name, "kernel") != 0)
                o = (size_t) snprintf(buf, size, "?window=%s", w->name);
        else if (w->name[0]) {
                char k[600];
                urlenc_buf(k, sizeof(k), w->kernel);
                o = (size_t) snprintf(buf, size, "?window=kernel:%s", k);
        } else
                o = (size_t) snprintf(buf, size, "?from=%s%sto=%s", time_arg(t1, w->from), amp,
                                      time_arg(t2, w->to));
        if (hl && w->hl_to > w->hl_from && o < size)
                snprintf(buf + o, size - o, "%shl_from=%s%shl_to=%s", amp, time_arg(t1, w->hl_from),
                         amp, time_arg(t2, w->hl_to));
}

/* The longest interval of the machine's runs with data in the window (0: none). */
static int64_t window_interval(const struct machine *m, const struct window *w) {
        json_t *run;
        size_t i;
        int64_t iv = 0;
        json_array_foreach (m->runs, i, run) {
                int64_t first = ji(run, "first_data_ns", INT64_MIN),
                        last = ji(run, "last_data_ns", INT64_MIN);
                if (first != INT64_MIN && last != INT64_MIN && first < w->to && last > w->from)
                        iv = MAX(iv, ji(run, "interval_ns", 0));
        }
        return iv;
}

/* The long-term plot's step: 5 minutes (or the longest interval of the window when longer,
 * so that no step falls between two intervals); one point per interval in a short window;
 * longer steps when the window would hold too many. */
static int64_t lt_step(const struct machine *m, const struct window *w) {
        int64_t iv = MAX(window_interval(m, w), m->interval_ns);
        if (iv <= 0)
                iv = 60 * (int64_t) NSEC_PER_SEC;
        int64_t step = w->to - w->from <= LT_FINE_WINDOW_NS ? iv : MAX(LT_STEP_NS, iv);
        int64_t n = (w->to - w->from) / step;
        if (n > LT_POINTS_MAX)
                step *= (n + LT_POINTS_MAX - 1) / LT_POINTS_MAX;
        return step;
}

/* ---- the plots of a machine ------------------------------------------------------------- */

/* The histogram plot's CPUs as they are merged: each reduced to the plot's columns at once
 * (6 KiB a CPU, whatever its histogram), the axis known from all CPUs merged. */
struct plot_cpus {
        uint64_t bound_us, x_limit_us;
        struct svg_hist_cpu *cpus;
        struct svg_hist_columns *cols;
        size_t n, alloc;
};

static uint32_t last_exact_bucket(const struct farm_acc *c) {
        for (uint32_t i = c->h.counts ? MIN(c->h.limit_us, c->h.nbuckets) : 0; i > 0; i--)
                if (c->h.counts[i - 1])
                        return i;
        return 0;
}

static int plot_cpu(void *userdata, int64_t cpu, const struct farm_acc *acc,
                    const struct farm_acc *all) {
        struct plot_cpus *p = userdata;
        if (!p->x_limit_us)
                p->x_limit_us = svg_hist_axis_end(p->bound_us, last_exact_bucket(all));
        if (cpu < 0 || !acc->samples)
                return 0;
        if (p->n == p->alloc) {
                size_t na = p->alloc ? p->alloc * 2 : 16;
                struct svg_hist_cpu *c = realloc(p->cpus, na * sizeof(*c));
                if (c)
                        p->cpus = c;
                struct svg_hist_columns *k = realloc(p->cols, na * sizeof(*k));
                if (k)
                        p->cols = k;
                if (!c || !k)
                        return -ENOMEM;
                p->alloc = na;
        }
        uint32_t limit = MIN(acc->h.limit_us, acc->h.nbuckets);
        uint64_t overflow = 0;
        for (uint32_t i = limit; i < acc->h.nbuckets; i++)
                overflow += acc->h.counts[i];
        svg_hist_reduce(p->x_limit_us, p->bound_us, acc->h.counts, limit, overflow, &p->cols[p->n]);
        p->cpus[p->n] = (struct svg_hist_cpu){ .cpu = (unsigned) cpu,
                                               .nbuckets = limit,
                                               .overflow = overflow,
                                               .max_ns = acc->max_ns };
        p->n++;
        return 0;
}

static int machine_hist(struct dash *x, const struct machine *m, const struct window *w,
                        struct svg_buf *out) {
        char title[400], nb[16];
        /* A bound beyond the exact ranges (a threshold of minutes) is not drawn. */
        struct plot_cpus p = { .bound_us = MIN((uint64_t) m->bound_ns / 1000,
                                               (uint64_t) HIST_LIMIT_US_MAX * 1000) };
        int r = farm_machine_hists(x->db, m->id, w->from, w->to, x->now, plot_cpu, &p, x->a->err);
        /* The columns move with realloc: pointed at once all are there. */
        for (size_t i = 0; r >= 0 && i < p.n; i++)
                p.cpus[i].cols = &p.cols[i];
        snprintf(title, sizeof(title), "%s: latency histogram per CPU", machine_name(m->info, nb));
        if (r >= 0) {
                struct svg_hist_plot plot = { .title = title,
                                              .cpus = p.cpus,
                                              .ncpus = p.n,
                                              .bound_us = p.bound_us,
                                              .x_limit_us = p.x_limit_us };
                r = svg_hist_render(out, &plot);
                if (r < 0)
                        snprintf(x->a->err, sizeof(x->a->err), "histogram plot: %s", out->error);
        }
        free(p.cpus);
        free(p.cols);
        if (r < 0)
                return fail_internal(x, r, "dashboard: histogram plot");
        return 1;
}

/* The steps of a machine's window, as the long-term plot and the lists need them: computed
 * by the same code as the intervals query, without the JSON of thousands of steps. */
struct steps {
        struct farm_steps fs;
        int64_t step_ns;
};

/* Where the data of a step ends: its end, or later when an interval in it is longer. */
static int64_t step_end(const struct steps *s, const struct farm_step *st) {
        return MAX(st->start_ns + s->step_ns, st->data_end_ns);
}

static int machine_steps(struct dash *x, const struct machine *m, const struct window *w,
                         struct steps *s) {
        char err[FARM_ERROR_MAX];
        s->step_ns = lt_step(m, w);
        int r = farm_machine_steps(x->db, m->id, w->from, w->to, (uint64_t) s->step_ns, &s->fs,
                                   err);
        if (r == -E2BIG || r == -ENOSPC || r == -EINVAL) {
                fail_page(x, 400, "the window holds too much to show: %s; narrow it (from=, to=)",
                          err);
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return fail_internal(x, r, NULL);
        }
        return 1;
}

/* The first of the names in mask ("" for none). */
static const char *step_name(const struct farm_names *names, uint64_t mask) {
        if (!mask)
                return "";
        unsigned i = (unsigned) __builtin_ctzll(mask);
        return i < names->n ? names->s[i] : "";
}

static int machine_lt(struct dash *x, const struct machine *m, const struct window *w,
                      const struct steps *s, struct svg_buf *out) {
        size_t n = s->fs.n;
        struct svg_lt_point *pts = calloc(MAX(n, 1), sizeof(*pts));
        struct svg_lt_mark *marks = calloc(MAX(n, 1), sizeof(*marks));
        struct svg_lt_band *bands = calloc(MAX(n, 1), sizeof(*bands));
        char *text = malloc(MAX(n, 1) * 256);
        size_t nm = 0, nb = 0;
        const char *prev_kernel = NULL;
        char title[400], hl[300], namebuf[16];
        int r = pts && marks && bands && text ? 0 : -ENOMEM;

        for (size_t i = 0; r >= 0 && i < n; i++) {
                const struct farm_step *st = &s->fs.v[i];
                int64_t t = st->start_ns;
                const char *scen = step_name(&s->fs.scenarios, st->scenarios);
                const char *kern = step_name(&s->fs.kernels, st->kernels);
                char *href = text + i * 256, *detail = href + 128;
                snprintf(href, 128,
                         "/machines/%s?from=%" PRId64 "&to=%" PRId64 "&hl_from=%" PRId64
                         "&hl_to=%" PRId64,
                         m->id, t - ZOOM_NS, t + s->step_ns + ZOOM_NS, t, t + s->step_ns);
                snprintf(detail, 128, "CPU %" PRId64 ", scenario %.40s, kernel %.60s", st->max_cpu,
                         *scen ? scen : "none", kern);
                pts[i] = (struct svg_lt_point){
                        .t_ns = t, .max_ns = (int64_t) st->max_ns, .href = href, .detail = detail
                };
                if (prev_kernel && strcmp(prev_kernel, kern) != 0)
                        marks[nm++] = (struct svg_lt_mark){ .t_ns = t, .label = kern };
                prev_kernel = kern;
                if (nb > 0 && strcmp(bands[nb - 1].scenario, scen) == 0 &&
                    bands[nb - 1].end_ns >= t - s->step_ns / 2)
                        bands[nb - 1].end_ns = MAX(bands[nb - 1].end_ns, step_end(s, st));
                else
                        bands[nb++] = (struct svg_lt_band){
                                .start_ns = nb ? MAX(t, bands[nb - 1].end_ns) : t,
                                .end_ns = step_end(s, st),
                                .scenario = scen
                        };
        }
        if (r >= 0) {
                char sp[TIMESPAN_MAX_LEN];
                snprintf(title, sizeof(title), "%s: worst case per %s step",
                         machine_name(m->info, namebuf),
                         format_timespan(sp, (uint64_t) s->step_ns));
                snprintf(hl, sizeof(hl), "the evidence linked to");
                struct svg_lt_plot p = { .title = title,
                                         .points = pts,
                                         .npoints = n,
                                         .step_ns = s->step_ns,
                                         .bound_ns = m->bound_ns,
                                         .scale = SVG_SCALE_LOG,
                                         .start_ns = w->from,
                                         .end_ns = w->to,
                                         .marks = marks,
                                         .nmarks = nm,
                                         .bands = bands,
                                         .nbands = nb,
                                         .hl_start_ns = w->hl_from,
                                         .hl_end_ns = w->hl_to,
                                         .hl_label = hl };
                r = svg_lt_render(out, &p);
                if (r < 0)
                        snprintf(x->a->err, sizeof(x->a->err), "long-term plot: %s", out->error);
        }
        free(pts);
        free(marks);
        free(bands);
        free(text);
        if (r < 0)
                return fail_internal(x, r, "dashboard: long-term plot");
        return 1;
}

/* ---- GET /machines/{id} ----------------------------------------------------------------- */

static void window_nav(struct dash *x, const struct machine *m, const struct window *w) {
        static const char *const wins[] = { "1d", "30d" };
        FILE *f = x->f;
        fputs("<nav class=\"windows\">Window: ", f);
        for (size_t i = 0; i < ELEMENTSOF(wins); i++) {
                if (strcmp(w->name, wins[i]) == 0)
                        fprintf(f, "<strong>%s</strong>", wins[i]);
                else
                        fprintf(f, "<a href=\"/machines/%s?window=%s\">%s</a>", m->id, wins[i],
                                wins[i]);
        }
        const char *k = js(m->info, "kernel");
        if (k) {
                if (strcmp(w->name, "kernel") == 0 && strcmp(w->kernel, k) == 0)
                        fputs("<strong>current kernel</strong>", f);
                else {
                        fprintf(f, "<a href=\"/machines/%s?window=kernel:", m->id);
                        urlenc(f, k);
                        fputs("\">current kernel</a>", f);
                }
        }
        fputs(" · showing ", f);
        put_time(f, w->from);
        fputs(" to ", f);
        put_time(f, w->to);
        char sp[32];
        fprintf(f, " (%s)</nav>\n", fmt_span(sp, w->to - w->from));
}

static void zoom_href(FILE *f, const char *id, int64_t start, int64_t end) {
        fprintf(f,
                "/machines/%s?from=%" PRId64 "&amp;to=%" PRId64 "&amp;hl_from=%" PRId64
                "&amp;hl_to=%" PRId64,
                id, start - ZOOM_NS, end + ZOOM_NS, start, end);
}

/* What the trace flight recorder names as the cause of a violation, with its raw events. */
static void culprit_html(FILE *f, const char *summary, int64_t trace_id, bool raw) {
        fputs("<span class=\"culprit\">culprit: ", f);
        esc(f, summary);
        if (raw)
                fprintf(f,
                        " (<a class=\"trace\" href=\"" FARM_DASH_TRACES "%" PRId64
                        ".txt\" download=\"trace-%" PRId64 ".txt\">raw trace</a>)",
                        trace_id, trace_id);
        fputs("</span>", f);
}

/* The steps whose worst case is over the machine's bound. */
static void list_violations(struct dash *x, const struct machine *m, const struct window *w,
                            const struct steps *s) {
        FILE *f = x->f;
        char b1[32];
        const struct farm_step *st;
        size_t i;

        size_t nviol = 0;
        for (i = 0; i < s->fs.n; i++)
                nviol += (int64_t) s->fs.v[i].max_ns > m->bound_ns;
        fprintf(f, "<h2 id=\"violations\">Violations (%zu step%s over the bound of %s)</h2>\n",
                nviol, nviol == 1 ? "" : "s", fmt_lat(b1, m->bound_ns));
        if (nviol) {
                fputs("<div class=\"scroll\"><table class=\"violations\"><tr><th>time of the "
                      "maximum</th><th class=\"num\">worst</th><th class=\"num\">CPU</th>"
                      "<th>scenario</th><th>kernel</th><th>culprit</th><th></th></tr>\n",
                      f);
                size_t shown = 0;
                for (i = 0; i < s->fs.n; i++) {
                        st = &s->fs.v[i];
                        if ((int64_t) st->max_ns <= m->bound_ns || shown++ >= LIST_MAX)
                                continue;
                        int64_t t = st->start_ns, mt = st->max_time_ns;
                        bool hl = w->hl_to > w->hl_from && mt >= w->hl_from && t < w->hl_to;
                        fprintf(f, "<tr%s><td>", hl ? " class=\"hl\"" : "");
                        put_time(f, mt);
                        fprintf(f,
                                "</td><td class=\"num bad\">%s</td><td class=\"num\">%" PRId64
                                "</td><td>",
                                fmt_lat(b1, (int64_t) st->max_ns), st->max_cpu);
                        esc(f, step_name(&s->fs.scenarios, st->scenarios));
                        fputs("</td><td>", f);
                        kernel_link(f, step_name(&s->fs.kernels, st->kernels));
                        fputs("</td><td>", f);
                        struct farm_trace_brief tb;
                        if (farm_trace_find_machine(x->db, m->id, (int) st->max_cpu, t,
                                                    t + s->step_ns, mt, &tb) == 0)
                                culprit_html(f, tb.summary, tb.id, tb.raw);
                        else
                                fputs("–", f);
                        fputs("</td><td><a href=\"", f);
                        zoom_href(f, m->id, t, t + s->step_ns);
                        fputs("\">zoom</a></td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
                if (nviol > LIST_MAX)
                        fprintf(f, "<p class=\"note\">and %zu more; narrow the window.</p>\n",
                                nviol - LIST_MAX);
        } else
                fputs("<p>None in this window.</p>\n", f);
}

/* The holes between the steps longer than the allowed gap, and the ongoing one. */
static void list_silences(struct dash *x, const struct machine *m, const struct window *w,
                          const struct steps *s) {
        FILE *f = x->f;
        char b1[32];
        size_t i;

        fputs("<h2 id=\"silences\">Silences</h2>\n", f);
        size_t nsil = m->silent;
        int64_t prev_end = INT64_MIN;
        for (i = 0; i < s->fs.n; i++) {
                int64_t t = s->fs.v[i].start_ns;
                nsil += prev_end != INT64_MIN && t - prev_end > (int64_t) x->rule->max_gap_ns;
                prev_end = MAX(prev_end, step_end(s, &s->fs.v[i]));
        }
        if (nsil)
                fputs("<div class=\"scroll\"><table class=\"silences\"><tr><th>from</th>"
                      "<th>to</th><th class=\"num\">length</th><th></th></tr>\n",
                      f);
        size_t shown = 0;
        prev_end = INT64_MIN;
        for (i = 0; i < s->fs.n; i++) {
                int64_t t = s->fs.v[i].start_ns;
                if (prev_end != INT64_MIN && t - prev_end > (int64_t) x->rule->max_gap_ns &&
                    shown++ < LIST_MAX) {
                        bool hl = w->hl_to > w->hl_from && prev_end < w->hl_to && t > w->hl_from;
                        fprintf(f, "<tr%s><td>", hl ? " class=\"hl\"" : "");
                        put_time(f, prev_end);
                        fputs("</td><td>", f);
                        put_time(f, t);
                        fprintf(f, "</td><td class=\"num\">%s</td><td><a href=\"",
                                fmt_span(b1, t - prev_end));
                        zoom_href(f, m->id, prev_end, t);
                        fputs("\">zoom</a></td></tr>\n", f);
                }
                prev_end = MAX(prev_end, step_end(s, &s->fs.v[i]));
        }
        if (m->silent) {
                fputs("<tr class=\"silent\"><td>", f);
                put_time(f, m->last_data_ns);
                fprintf(f,
                        "</td><td><strong>still silent</strong></td><td class=\"num\">%s</td>"
                        "<td></td></tr>\n",
                        fmt_span(b1, x->now - m->last_data_ns));
        }
        if (nsil)
                fputs("</table></div>\n", f);
        if (shown > LIST_MAX)
                fprintf(f, "<p class=\"note\">and %zu more; narrow the window.</p>\n",
                        shown - LIST_MAX);
        if (!nsil)
                fprintf(f,
                        "<p>None in this window: no hole longer than the allowed gap of %s.</p>\n",
                        fmt_span(b1, (int64_t) x->rule->max_gap_ns));
}

/* The events of the window: unclean ends, generator failures, the machine's own violation
 * events. */
static void list_events(struct dash *x, json_t *events, uint64_t nevents) {
        FILE *f = x->f;
        char b2[32];
        size_t i;

        json_t *ev, *list = events;
        size_t total = (size_t) nevents;
        fprintf(f, "<h2 id=\"events\">Events (%zu)</h2>\n", total);
        if (json_array_size(list)) {
                fputs("<div class=\"scroll\"><table class=\"events\"><tr><th>time</th>"
                      "<th>type</th><th class=\"num\">CPU</th><th class=\"num\">value</th>"
                      "<th>message</th><th class=\"num\">run</th></tr>\n",
                      f);
                json_array_foreach (list, i, ev) {
                        const char *type = js(ev, "type") ?: "";
                        fputs("<tr><td>", f);
                        put_time(f, ji(ev, "time_ns", 0));
                        fprintf(f, "</td><td class=\"%s\">",
                                strcmp(type, "scenario") == 0 ? "" : "bad");
                        esc(f, type);
                        fputs("</td><td class=\"num\">", f);
                        if (json_is_integer(json_object_get(ev, "cpu")))
                                fprintf(f, "%" PRId64, ji(ev, "cpu", 0));
                        fputs("</td><td class=\"num\">", f);
                        if (json_is_integer(json_object_get(ev, "value")))
                                fputs(strcmp(type, "violation") == 0
                                              ? fmt_lat(b2, ji(ev, "value", 0))
                                              : (snprintf(b2, sizeof(b2), "%" PRId64,
                                                          ji(ev, "value", 0)),
                                                 b2),
                                      f);
                        fputs("</td><td>", f);
                        esc(f, js(ev, "message"));
                        fprintf(f, "</td><td class=\"num\">%" PRId64 "</td></tr>\n",
                                ji(ev, "run", 0));
                }
                fputs("</table></div>\n", f);
                if (total > json_array_size(list))
                        fprintf(f, "<p class=\"note\">The latest %zu are shown.</p>\n",
                                json_array_size(list));
        } else
                fputs("<p>None in this window.</p>\n", f);
}

static void machine_lists(struct dash *x, const struct machine *m, const struct window *w,
                          const struct steps *s, json_t *events, uint64_t nevents) {
        list_violations(x, m, w, s);
        list_silences(x, m, w, s);
        list_events(x, events, nevents);
}

static void machine_runs(struct dash *x, const struct machine *m) {
        FILE *f = x->f;
        char b[32];
        json_t *run, *runs = m->runs;
        size_t i;
        fprintf(f, "<h2 id=\"runs\">Runs (%zu)</h2>\n", json_array_size(runs));
        if (!json_array_size(runs)) {
                fputs("<p>No run reported yet.</p>\n", f);
                return;
        }
        fputs("<div class=\"scroll\"><table class=\"runs\"><tr><th class=\"num\">run</th>"
              "<th>kernel</th><th>boot</th><th>started</th><th>last data</th>"
              "<th class=\"num\">intervals</th><th class=\"num\">worst</th><th>end</th></tr>\n",
              f);
        json_array_foreach (runs, i, run) {
                json_t *end = json_object_get(run, "end");
                const char *boot = js(run, "boot_id") ?: "";
                fprintf(f, "<tr><td class=\"num\">%" PRId64 "</td><td>", ji(run, "id", 0));
                kernel_link(f, js(run, "kernel_release"));
                fputs("<br><span class=\"note\">", f);
                esc(f, js(run, "preempt_model"));
                fputs("</span></td><td><code title=\"", f);
                esc(f, boot);
                fprintf(f, "\">%.8s</code></td><td>", boot);
                put_time(f, ji(run, "start_ns", 0));
                fputs("</td><td>", f);
                if (json_is_integer(json_object_get(run, "last_data_ns")))
                        put_time(f, ji(run, "last_data_ns", 0));
                else
                        fputs("–", f);
                fprintf(f, "</td><td class=\"num\">%" PRId64 "</td><td class=\"num\">%s</td><td>",
                        ji(run, "intervals", 0), fmt_lat(b, ji(run, "worst_latency_ns", -1)));
                if (json_is_object(end)) {
                        fputs("<span class=\"bad\">✗ unclean end</span> found ", f);
                        put_time(f, ji(end, "time_ns", 0));
                        fputs(": ", f);
                        esc(f, js(end, "message"));
                } else if (i > 0)
                        fputs("ended cleanly", f);
                else if (m->silent)
                        fputs("<span class=\"bad\">silent</span> (no end reported)", f);
                else
                        fputs("running", f);
                fputs("</td></tr>\n", f);
        }
        fputs("</table></div>\n", f);
}

/* The latest events of the window, and how many it holds: 1, or 0 answered (400), < 0
 * internal. */
static int machine_events(struct dash *x, const struct machine *m, const struct window *w,
                          json_t **ret, uint64_t *ret_total) {
        char err[FARM_ERROR_MAX], t[40];
        /* The times the events query takes (those of its from= and to=). */
        const char *bad = w->from < FARM_TIME_MIN_NS  ? "from"
                          : w->to >= FARM_TIME_MAX_NS ? "to"
                                                      : NULL;
        if (bad) {
                fail_page(x, 400, "%s=%.64s: out of range (from 1970-01-01 to 2200-01-01)", bad,
                          time_arg(t, bad[0] == 'f' ? w->from : w->to));
                return 0;
        }
        int r = farm_machine_events_json(x->db, m->id, w->from, w->to, NULL,
                                         &(struct farm_page){ LIST_MAX, 0 }, ret, ret_total, err);
        if (r == -ENOENT) { /* removed meanwhile */
                fail_page(x, 404, "no such machine");
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return fail_internal(x, r, NULL);
        }
        return 1;
}

static int page_machine(struct dash *x, const char *id) {
        struct machine m;
        struct window w;
        struct steps s = {};
        struct svg_buf hist = {}, lt = {};
        json_t *events = NULL;
        uint64_t nevents = 0;
        char q[1200], nb[16], b1[32], b2[32];
        int r;

        if (check_params(x, machine_params) < 0)
                return 0;
        if ((r = machine_load(x, id, &m)) <= 0)
                return r;
        if (parse_window(x, &m, &w) < 0) {
                machine_done(&m);
                return 0;
        }
        if ((r = machine_steps(x, &m, &w, &s)) <= 0 ||
            (r = machine_events(x, &m, &w, &events, &nevents)) <= 0 ||
            (r = machine_hist(x, &m, &w, &hist)) <= 0 || (r = machine_lt(x, &m, &w, &s, &lt)) <= 0)
                goto done;
        if ((r = open_page(x)) < 0) {
                r = fail_internal(x, r, "dashboard: no memory for the page");
                goto done;
        }
        FILE *f = x->f;
        const char *name = machine_name(m.info, nb);
        page_begin(x, name, 300);
        if (m.silent) {
                fputs("<div class=\"alert\" id=\"silent\"><strong>⚠ SILENT</strong> — ", f);
                esc(f, name);
                fputs(" has sent no data since ", f);
                put_time(f, m.last_data_ns);
                fprintf(f, " (%s; allowed gap %s).</div>\n", fmt_span(b1, x->now - m.last_data_ns),
                        fmt_span(b2, (int64_t) x->rule->max_gap_ns));
        }
        fputs("<h1>", f);
        esc(f, name);
        fputs("</h1>\n<table class=\"facts\"><tr><th>state</th><td>", f);
        put_state(x, &m);
        fputs("</td><th>kernel</th><td>", f);
        kernel_link(f, js(m.info, "kernel"));
        fprintf(f,
                "</td><th>bound</th><td class=\"num\">%s</td></tr>\n<tr><th>machine id</th>"
                "<td><code>%s</code></td><th>CPUs</th><td>%" PRId64 " · ",
                fmt_lat(b1, m.bound_ns), m.id, ji(m.info, "cpus", 0));
        esc(f, js(m.info, "cpu_model"));
        fprintf(f, "</td><th>gating</th><td>%s</td></tr></table>\n",
                json_is_true(json_object_get(m.info, "gating")) ? "yes" : "no");
        window_nav(x, &m, &w);
        if (w.hl_to > w.hl_from) {
                fputs("<p class=\"note\" id=\"highlight\">Highlighted (dashed box): ", f);
                put_time(f, w.hl_from);
                fputs(" to ", f);
                put_time(f, w.hl_to);
                fputs(".</p>\n", f);
        }
        window_query(q, sizeof(q), &w, true, false);
        fputs("<h2 id=\"histogram\">Latency histogram</h2>\n<div class=\"plot\">", f);
        fputs(hist.data, f);
        fprintf(f,
                "</div><p class=\"note\">One curve per CPU; samples on a logarithmic axis. "
                "<a href=\"/plots/machines/%s/histogram.svg%s\">SVG</a></p>\n",
                m.id, q);
        window_query(q, sizeof(q), &w, true, true);
        fputs("<h2 id=\"longterm\">Worst case over time</h2>\n<div class=\"plot\">", f);
        fputs(lt.data, f);
        fprintf(f,
                "</div><p class=\"note\">Each point is the worst latency of a step on any "
                "CPU; the dashed line is the bound, vertical lines are kernel changes, the "
                "strip under the plot the scenarios. Click a point to zoom. "
                "<a href=\"/plots/machines/%s/longterm.svg%s\">SVG</a></p>\n",
                m.id, q);
        machine_lists(x, &m, &w, &s, events, nevents);
        machine_runs(x, &m);
        page_end(x);
        r = finish_page(x, HTML);
done:
        if (r <= 0)
                abandon_page(x);
        svg_buf_done(&hist);
        svg_buf_done(&lt);
        farm_steps_done(&s.fs);
        json_decref(events);
        machine_done(&m);
        return r < 0 ? r : 0;
}

/* /plots/machines/{id}/histogram.svg and longterm.svg */
static int plot_machine(struct dash *x, const char *id, bool histogram) {
        struct machine m;
        struct window w;
        struct steps s = {};
        struct svg_buf out = {};
        int r;
        if (check_params(x, machine_params) < 0)
                return 0;
        if ((r = machine_load(x, id, &m)) <= 0)
                return r;
        if (parse_window(x, &m, &w) < 0) {
                machine_done(&m);
                return 0;
        }
        if (histogram)
                r = machine_hist(x, &m, &w, &out);
        else if ((r = machine_steps(x, &m, &w, &s)) > 0)
                r = machine_lt(x, &m, &w, &s, &out);
        if (r > 0)
                finish_svg(x, &out);
        svg_buf_done(&out);
        farm_steps_done(&s.fs);
        machine_done(&m);
        return r < 0 ? r : 0;
}

/* ---- GET / ------------------------------------------------------------------------------ */

struct verdicts {
        struct {
                char *release;
                json_t *v;
        } * e;
        size_t n;
};

static void verdicts_done(struct verdicts *vs) {
        for (size_t i = 0; i < vs->n; i++) {
                free(vs->e[i].release);
                json_decref(vs->e[i].v);
        }
        free(vs->e);
}

/* The verdict of release now, computed once per page. */
static json_t *verdict_of(struct dash *x, struct verdicts *vs, const char *release, int *ret) {
        char err[FARM_ERROR_MAX];
        for (size_t i = 0; i < vs->n; i++)
                if (strcmp(vs->e[i].release, release) == 0)
                        return vs->e[i].v;
        json_t *v = NULL;
        int r = farm_verdict(x->db, x->rule, release, x->now, &v, err);
        if (r < 0 && r != -ENOENT) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                *ret = r;
                return NULL;
        }
        void *e = realloc(vs->e, (vs->n + 1) * sizeof(*vs->e));
        if (!e) {
                json_decref(v);
                *ret = -ENOMEM;
                return NULL;
        }
        vs->e = e;
        vs->e[vs->n].release = strdup(release);
        vs->e[vs->n++].v = v;
        return v;
}

/* The entry of machine id in a verdict's "machines", or NULL. */
static json_t *verdict_machine(json_t *v, const char *id) {
        json_t *m;
        size_t i;
        json_array_foreach (json_object_get(v, "machines"), i, m)
                if (strcmp(js(m, "id") ?: "", id) == 0)
                        return m;
        return NULL;
}

static size_t count_problems(json_t *v, const char *id, const char *kind) {
        json_t *p;
        size_t i, n = 0;
        json_array_foreach (json_object_get(v, "problems"), i, p)
                n += strcmp(js(p, "machine") ?: "", id) == 0 &&
                     (!kind || strcmp(js(p, "kind") ?: "", kind) == 0);
        return n;
}

/* "Latest stable" per series: the answer the farm exists for, first. */
static void latest_stable_headline(struct dash *x, FILE *f) {
        char err[FARM_ERROR_MAX];
        json_t *series = NULL, *e;
        size_t i;
        struct farm_question q = { NULL, x->now, x->now, x->now };
        if (farm_series_json(x->db, x->rule, &q, &series, err) < 0) {
                fputs("<p class=\"alert\">The latest stable releases cannot be told: ", f);
                esc(f, err);
                fputs("</p>\n", f);
                return;
        }
        json_t *list = json_object_get(series, "series");
        fputs("<div id=\"latest-stable\" class=\"headline\">", f);
        if (json_array_size(list) == 0)
                fputs("<p>No kernel release has run yet.</p>", f);
        json_array_foreach (list, i, e) {
                const char *stable = js(e, "latest_stable");
                fputs("<p class=\"series\"><strong>", f);
                esc(f, js(e, "series") ?: "");
                fputs("</strong>: latest stable ", f);
                if (stable) {
                        kernel_link(f, stable);
                        if (js(e, "since")) {
                                fputs(" (since ", f);
                                esc(f, js(e, "since"));
                                fputs(")", f);
                        }
                } else
                        fputs("<em>none yet</em>", f);
                if (js(e, "newest") && (!stable || strcmp(js(e, "newest"), stable) != 0)) {
                        fputs("; newest ", f);
                        kernel_link(f, js(e, "newest"));
                        fputs(" is ", f);
                        esc(f, js(e, "newest_verdict") ?: "?");
                }
                fputs("</p>", f);
        }
        fputs("</div>\n", f);
        json_decref(series);
}

struct overview_row {
        struct machine m;
        struct farm_steps steps; /* the last day of data, per hour */
};

static int64_t parse_utc(struct dash *x, const char *s);

/* Loads the machines' rows: 0, or < 0 internal (answered).  *n counts those loaded (those
 * removed meanwhile are left out). */
static int overview_rows(struct dash *x, json_t *machines, struct overview_row *rows, size_t *n) {
        char err[FARM_ERROR_MAX];
        json_t *mi;
        size_t i;
        int r;
        json_array_foreach (machines, i, mi) {
                struct overview_row *row = &rows[*n];
                if ((r = machine_load(x, js(mi, "id") ?: "", &row->m)) < 0)
                        return r;
                if (r == 0) { /* removed meanwhile */
                        farm_answer_done(x->a);
                        continue;
                }
                (*n)++;
                if (row->m.has_data &&
                    (r = farm_machine_recent_steps(x->db, row->m.id, x->now, HOUR_NS, &row->steps,
                                                   err)) < 0 &&
                    r != -ENOENT && r != -ENOSPC && r != -E2BIG) {
                        snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                        return fail_internal(x, r, NULL);
                }
                /* One machine's refused steps (more names than a step lists) leave its row
                 * without them, not the farm without its overview. */
        }
        return 0;
}

/* The alert that lists the silent machines, when there are any. */
static void overview_silent(struct dash *x, const struct overview_row *rows, size_t n) {
        FILE *f = x->f;
        char b1[32];
        size_t nsilent = 0;
        for (size_t k = 0; k < n; k++)
                nsilent += rows[k].m.silent;
        if (nsilent) {
                fprintf(f,
                        "<div class=\"alert\" id=\"silent\"><strong>⚠ %zu SILENT "
                        "MACHINE%s</strong> (no data for longer than the allowed gap of %s):<ul>",
                        nsilent, nsilent == 1 ? "" : "S",
                        fmt_span(b1, (int64_t) x->rule->max_gap_ns));
                for (size_t k = 0; k < n; k++) {
                        if (!rows[k].m.silent)
                                continue;
                        fputs("<li>", f);
                        machine_link(f, rows[k].m.info, NULL);
                        fputs(" — silent since ", f);
                        put_time(f, rows[k].m.last_data_ns);
                        fprintf(f, " (%s)</li>", fmt_span(b1, x->now - rows[k].m.last_data_ns));
                }
                fputs("</ul></div>\n", f);
        }
}

/* A machine's row of the table: 0, or < 0 internal (answered). */
static int overview_machine(struct dash *x, struct verdicts *vs, const struct overview_row *row) {
        FILE *f = x->f;
        char b1[32], b2[32];
        const struct machine *m = &row->m;
        const char *kernel = js(m->info, "kernel");
        const struct farm_steps *fs = &row->steps;
        int64_t worst24 = -1, kworst = -1;
        const char *scen = NULL;
        size_t j;
        for (j = 0; j < fs->n; j++) {
                const struct farm_step *st = &fs->v[j];
                if (st->start_ns + HOUR_NS > x->now - DAY_NS)
                        worst24 = MAX(worst24, (int64_t) st->max_ns);
                scen = step_name(&fs->scenarios, st->scenarios);
        }
        json_t *run;
        json_array_foreach (m->runs, j, run)
                if (kernel && strcmp(js(run, "kernel_release") ?: "", kernel) == 0)
                        kworst = MAX(kworst, ji(run, "worst_latency_ns", -1));
        int r = 0;
        json_t *v = kernel ? verdict_of(x, vs, kernel, &r) : NULL;
        if (kernel && !v && r < 0) {
                abandon_page(x);
                return fail_internal(x, r, NULL);
        }
        json_t *vm = v ? verdict_machine(v, m->id) : NULL;
        fprintf(f, "<tr%s><td>", m->silent ? " class=\"silent\"" : "");
        machine_link(f, m->info, NULL);
        fputs("</td><td>", f);
        put_state(x, m);
        fputs("</td><td>", f);
        kernel_link(f, kernel);
        fputs("</td><td>", f);
        if (scen && *scen && !m->silent)
                esc(f, scen);
        else if (scen && *scen) {
                fputs("<span class=\"note\">last: ", f);
                esc(f, scen);
                fputs("</span>", f);
        } else
                fputs("–", f);
        fprintf(f, "</td><td class=\"num%s\">%s</td><td class=\"num%s\">%s</td>",
                worst24 > m->bound_ns ? " bad" : "", fmt_lat(b1, worst24),
                kworst > m->bound_ns ? " bad" : "", fmt_lat(b2, kworst));
        fprintf(f, "<td class=\"num\">%s</td>", fmt_lat(b1, m->bound_ns));
        if (v) {
                size_t viol = count_problems(v, m->id, "violation"),
                       all_p = count_problems(v, m->id, NULL);
                fprintf(f, "<td class=\"num%s\">%zu", viol ? " bad" : "", viol);
                if (all_p > viol)
                        fprintf(f, " <span class=\"bad\">+%zu other problem%s</span>", all_p - viol,
                                all_p - viol == 1 ? "" : "s");
                fputs("</td><td>", f);
                if (vm) {
                        int64_t cov = ji(vm, "covered_ns", 0);
                        fprintf(f, "%s of %s", fmt_days(b1, cov),
                                fmt_days(b2, (int64_t) x->rule->period_ns));
                        /* Clean: all of it, or the time covered since the last
                         * problem (a streak that starts again at each problem). */
                        if (!all_p)
                                fputs(", all clean", f);
                        else {
                                fprintf(f, "; <span class=\"bad\">%s clean since ",
                                        fmt_days(b1, ji(vm, "clean_ns", 0)));
                                put_time(f, ji(vm, "last_problem_ns", 0));
                                fputs("</span>", f);
                        }
                } else
                        fputs("<span class=\"note\">not gating</span>", f);
                fputs("</td></tr>\n", f);
        } else
                fputs("<td class=\"num\">–</td><td>–</td></tr>\n", f);
        return 0;
}

/* The kernels under test and what each is still waiting for. */
static void overview_kernels(struct dash *x, json_t *kernels) {
        FILE *f = x->f;
        char b1[32];
        size_t i;
        json_t *kl = json_object_get(kernels, "kernels"), *k;
        fprintf(f, "<h2 id=\"kernels\">Kernels under test (%" PRId64 ")</h2>\n",
                ji(kernels, "total", 0));
        if (json_array_size(kl)) {
                fputs("<div class=\"scroll\"><table class=\"kernels\"><tr><th>release</th>"
                      "<th>verdict</th><th class=\"num\">machines</th><th>latest run</th>"
                      "<th class=\"num\">covered</th><th class=\"num\">problems</th>"
                      "<th>still waiting for</th></tr>\n",
                      f);
                json_array_foreach (kl, i, k) {
                        json_t *miss = json_object_get(k, "missing"), *mm;
                        size_t j;
                        fputs("<tr><td>", f);
                        kernel_link(f, js(k, "release"));
                        fputs("</td><td>", f);
                        verdict_badge(f, js(k, "verdict"));
                        fprintf(f, "</td><td class=\"num\">%" PRId64 "</td><td>",
                                ji(k, "machines", 0));
                        int64_t last = parse_utc(x, js(k, "last_run"));
                        if (last != INT64_MIN)
                                put_time(f, last);
                        else
                                esc(f, js(k, "last_run"));
                        fprintf(f,
                                "</td><td class=\"num\">%s</td><td class=\"num%s\">%" PRId64
                                "</td><td>",
                                fmt_days(b1, ji(k, "covered_ns", 0)),
                                ji(k, "problems", 0) ? " bad" : "", ji(k, "problems", 0));
                        if (!json_array_size(miss))
                                fputs("nothing", f);
                        else
                                fputs("<ul class=\"waiting\">", f);
                        json_array_foreach (miss, j, mm) {
                                if (j == WAITING_MAX) {
                                        fprintf(f, "<li>and %zu more</li>",
                                                json_array_size(miss) - WAITING_MAX);
                                        break;
                                }
                                fputs("<li>", f);
                                esc(f, js(mm, "message"));
                                fputs("</li>", f);
                        }
                        if (json_array_size(miss))
                                fputs("</ul>", f);
                        fputs("</td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
        } else
                fputs("<p>No kernel has run yet.</p>\n", f);
}

static int page_overview(struct dash *x) {
        static const char *const none[] = { NULL };
        char err[FARM_ERROR_MAX];
        json_t *all = NULL, *kernels = NULL;
        struct overview_row *rows = NULL;
        struct verdicts vs = {};
        size_t n = 0;
        int r;

        if (check_params(x, none) < 0)
                return 0;
        if ((r = farm_machines_json(x->db, NULL, &all, err)) < 0 ||
            (r = farm_kernels_json(x->db, x->rule,
                                   &(struct farm_question){ NULL, x->now, x->now, x->now },
                                   &(struct farm_page){ 100, 0 }, &kernels, err)) < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                r = fail_internal(x, r, NULL);
                goto done;
        }
        json_t *machines = json_object_get(all, "machines");
        rows = calloc(MAX(json_array_size(machines), 1), sizeof(*rows));
        if (!rows) {
                r = fail_internal(x, -ENOMEM, "dashboard: no memory");
                goto done;
        }
        if ((r = overview_rows(x, machines, rows, &n)) < 0)
                goto done;
        if ((r = open_page(x)) < 0) {
                r = fail_internal(x, r, "dashboard: no memory for the page");
                goto done;
        }
        FILE *f = x->f;
        page_begin(x, "Farm overview", 60);
        overview_silent(x, rows, n);
        fputs("<h1>Farm overview</h1>\n", f);
        latest_stable_headline(x, f);
        fprintf(f, "<h2 id=\"machines\">Machines (%zu)</h2>\n", n);
        if (!n)
                fputs("<p>No machine is enrolled yet (<code>rtsoak-server enroll</code>).</p>\n",
                      f);
        else
                fputs("<div class=\"scroll\"><table class=\"machines\"><tr><th>machine</th>"
                      "<th>state</th><th>kernel</th><th>scenario</th>"
                      "<th class=\"num\">worst, last 24 h</th>"
                      "<th class=\"num\">worst on this kernel</th><th class=\"num\">bound</th>"
                      "<th class=\"num\">violations</th><th>coverage of this kernel, "
                      "clean</th></tr>\n",
                      f);
        for (size_t k = 0; k < n; k++)
                if ((r = overview_machine(x, &vs, &rows[k])) < 0)
                        goto done;
        if (n)
                fputs("</table></div>\n", f);
        overview_kernels(x, kernels);
        page_end(x);
        r = finish_page(x, HTML);
done:
        for (size_t z = 0; rows && z < n; z++) {
                machine_done(&rows[z].m);
                farm_steps_done(&rows[z].steps);
        }
        free(rows);
        verdicts_done(&vs);
        json_decref(all);
        json_decref(kernels);
        return r < 0 ? r : 0;
}

/* ---- GET /kernels/{release} ------------------------------------------------------------- */

static int64_t parse_utc(struct dash *x, const char *s) {
        char perr[FARM_PARAM_ERROR_MAX];
        int64_t t = 0;
        if (!s || farm_param_time("time", s, x->now, &t, perr) < 0)
                return INT64_MIN;
        return t;
}

/* The evidence of a problem: the machine page zoomed on its interval (or its silence). */
static void evidence_href(FILE *f, const json_t *p, int64_t now) {
        const char *id = js(p, "machine") ?: "";
        json_t *iv = json_object_get(p, "interval");
        int64_t start = ji(p, "time_ns", 0), end;
        if (strcmp(js(p, "kind") ?: "", "gap") == 0)
                end = MIN(ji(p, "end_ns", start + 1), now);
        else if (json_is_object(iv)) {
                start = ji(iv, "start_ns", start);
                end = start + MAX(ji(iv, "length_ns", 1), 1);
                if (strcmp(js(p, "kind") ?: "", "load_down") == 0)
                        end = MAX(end, ji(p, "end_ns", end));
        } else
                end = start + 1;
        zoom_href(f, id, start, MAX(end, start + 1));
}

/* Time spans of one status, sorted and merged, for a coverage bar. */
struct spans {
        struct svg_cov_segment *v;
        size_t n, alloc;
};

static int spans_add(struct spans *sp, int64_t a, int64_t e, enum svg_cov_status status) {
        if (e <= a)
                return 0;
        if (sp->n && sp->v[sp->n - 1].status == status && a <= sp->v[sp->n - 1].end_ns) {
                sp->v[sp->n - 1].end_ns = MAX(sp->v[sp->n - 1].end_ns, e);
                return 0;
        }
        if (sp->n == sp->alloc) {
                size_t na = sp->alloc ? 2 * sp->alloc : 64;
                struct svg_cov_segment *nv = realloc(sp->v, na * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                sp->v = nv;
                sp->alloc = na;
        }
        sp->v[sp->n++] = (struct svg_cov_segment){ a, e, status, NULL };
        return 0;
}

/* Where the machine ran the release in [from, to): the steps of the window that hold its
 * intervals, each from its start to the end of its last interval (an interval longer than a
 * step is covered over its whole length). */
static int covered_spans(struct dash *x, const char *id, const char *release, int64_t from,
                         int64_t to, int64_t step, struct spans *ret) {
        char err[FARM_ERROR_MAX];
        struct farm_steps fs;
        int r = farm_machine_steps(x->db, id, from, to, (uint64_t) step, &fs, err);
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return r;
        }
        int ki = -1;
        for (unsigned k = 0; k < fs.kernels.n; k++)
                if (strcmp(fs.kernels.s[k], release) == 0)
                        ki = (int) k;
        for (size_t i = 0; ki >= 0 && r >= 0 && i < fs.n; i++)
                if (fs.v[i].kernels & (UINT64_C(1) << ki))
                        r = spans_add(ret, fs.v[i].start_ns, MIN(fs.v[i].data_end_ns, to),
                                      SVG_COV_COVERED);
        farm_steps_done(&fs);
        return r;
}

static int cmp_segment(const void *a, const void *b) {
        const struct svg_cov_segment *x = a, *y = b;
        return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* One machine's bar: problems over covered time over missing time, each at its exact times
 * (up to now; what is later is missing). */
static int machine_bar(struct dash *x, const char *release, json_t *v, json_t *m, int64_t start,
                       int64_t end, int64_t step, struct spans *bar) {
        int64_t known = MAX(MIN(end, x->now), start); /* what is later has not happened */
        const char *id = js(m, "id") ?: "";
        struct spans cov = {}, prob = {};
        json_t *p;
        size_t j;
        int r = 0;

        if (json_is_true(json_object_get(m, "ran")))
                r = covered_spans(x, id, release, start, known, step, &cov);
        json_array_foreach (json_object_get(v, "problems"), j, p) {
                if (r < 0)
                        break;
                if (strcmp(js(p, "machine") ?: "", id) != 0)
                        continue;
                int64_t a = ji(p, "time_ns", 0), e = MAX(ji(p, "end_ns", a), a + 1);
                r = spans_add(&prob, MAX(a, start), MIN(e, known), SVG_COV_PROBLEM);
        }
        if (r >= 0 && prob.n > 1) { /* merge problems that overlap */
                qsort(prob.v, prob.n, sizeof(*prob.v), cmp_segment);
                size_t k = 0;
                for (size_t i = 1; i < prob.n; i++)
                        if (prob.v[i].start_ns <= prob.v[k].end_ns)
                                prob.v[k].end_ns = MAX(prob.v[k].end_ns, prob.v[i].end_ns);
                        else
                                prob.v[++k] = prob.v[i];
                prob.n = k + 1;
        }
        /* Walk the bar: at each point, a problem wins over coverage, coverage over nothing. */
        size_t ci = 0, pi = 0;
        for (int64_t t = start; r >= 0 && t < end;) {
                while (ci < cov.n && cov.v[ci].end_ns <= t)
                        ci++;
                while (pi < prob.n && prob.v[pi].end_ns <= t)
                        pi++;
                int64_t next = end;
                enum svg_cov_status st = SVG_COV_MISSING;
                if (pi < prob.n && prob.v[pi].start_ns <= t) {
                        st = SVG_COV_PROBLEM;
                        next = prob.v[pi].end_ns;
                } else {
                        if (pi < prob.n)
                                next = prob.v[pi].start_ns;
                        if (ci < cov.n && cov.v[ci].start_ns <= t) {
                                st = SVG_COV_COVERED;
                                next = MIN(next, cov.v[ci].end_ns);
                        } else if (ci < cov.n)
                                next = MIN(next, cov.v[ci].start_ns);
                }
                next = MIN(next, end);
                r = spans_add(bar, t, next, st);
                t = next;
        }
        free(cov.v);
        free(prob.v);
        return r;
}

static int coverage_plot(struct dash *x, const char *release, json_t *v, struct svg_buf *out) {
        json_t *ms = json_object_get(v, "machines"), *m;
        size_t n = json_array_size(ms), i;
        int64_t period = (int64_t) x->rule->period_ns, start = INT64_MAX;
        int64_t step = MAX(period / COV_BINS / (int64_t) NSEC_PER_SEC, 1) * (int64_t) NSEC_PER_SEC;
        struct svg_cov_machine *cm = calloc(MAX(n, 1), sizeof(*cm));
        struct spans *bars = calloc(MAX(n, 1), sizeof(*bars));
        char(*hrefs)[64] = calloc(MAX(n, 1), 64), (*names)[64] = calloc(MAX(n, 1), 64);
        int r = cm && bars && hrefs && names ? 0 : -ENOMEM;
        json_array_foreach (ms, i, m) {
                int64_t t = parse_utc(x, js(m, "first"));
                if (t != INT64_MIN)
                        start = MIN(start, t);
        }
        if (start == INT64_MAX)
                start = MAX(x->now - period, 0);
        json_array_foreach (ms, i, m) {
                if (r < 0)
                        break;
                char nb[16];
                snprintf(hrefs[i], 64, "/machines/%.32s", js(m, "id") ?: "");
                snprintf(names[i], 64, "%s", machine_name(m, nb));
                r = machine_bar(x, release, v, m, start, start + period, step, &bars[i]);
                if (r < 0) {
                        r = fail_internal(x, r, NULL);
                        break;
                }
                /* The figure beside the bar is the verdict's, as in the table. */
                cm[i] = (struct svg_cov_machine){ .name = names[i],
                                                  .href = hrefs[i],
                                                  .segs = bars[i].v,
                                                  .nsegs = bars[i].n,
                                                  .covered_ns = ji(m, "covered_ns", 0),
                                                  .covered_given = true };
        }
        if (r >= 0) {
                char title[400], d[32];
                snprintf(title, sizeof(title), "%.200s: coverage of the %s period per machine",
                         release, fmt_days(d, period));
                struct svg_cov_plot pl = { .title = title,
                                           .start_ns = start,
                                           .target_ns = period,
                                           .machines = cm,
                                           .nmachines = n };
                r = svg_cov_render(out, &pl);
                if (r < 0) {
                        snprintf(x->a->err, sizeof(x->a->err), "coverage plot: %s", out->error);
                        r = fail_internal(x, r, NULL);
                }
        }
        for (size_t k = 0; bars && k < n; k++)
                free(bars[k].v);
        free(bars);
        free(cm);
        free(hrefs);
        free(names);
        return r < 0 ? r : 1;
}

/* 1 and *ret, 0 answered (404), < 0 internal. */
static int kernel_verdict(struct dash *x, const char *release, json_t **ret) {
        char err[FARM_ERROR_MAX];
        int r = farm_verdict(x->db, x->rule, release, x->now, ret, err);
        if (r == -ENOENT) {
                fail_page(x, 404, "no such kernel release: no machine ever ran %.256s", release);
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return fail_internal(x, r, NULL);
        }
        return 1;
}

/* A figure of one side of a comparison ("–" when it did not run there). */
static char *cmp_lat(char buf[static 32], const struct farm_cmp_side *side, bool worst) {
        return fmt_lat(buf, !side->used ? -1 : (int64_t) (worst ? side->worst_ns : side->p99_9_ns));
}

static void kernel_compare(struct dash *x, const char *release, json_t *v,
                           const struct farm_comparison *cmp, const char *with, json_t *list) {
        FILE *f = x->f;
        char b1[32], b2[32], b3[32], b4[32], nb[16];
        json_t *k;
        size_t i;
        fputs("<h2 id=\"compare\">Comparison with an earlier kernel</h2>\n"
              "<form method=\"get\" action=\"\"><label>Compare with <select name=\"compare\">",
              f);
        json_array_foreach (list, i, k) {
                const char *s = json_string_value(k);
                if (!s || strcmp(s, release) == 0)
                        continue;
                fputs("<option value=\"", f);
                esc(f, s);
                fprintf(f, "\"%s>", cmp && strcmp(with, s) == 0 ? " selected" : "");
                esc(f, s);
                fputs("</option>", f);
        }
        fputs("</select></label> <button type=\"submit\">Compare</button></form>\n", f);
        if (!cmp)
                return;
        fprintf(f, "<p id=\"regressions\">%" PRIu64 " regression%s against ", cmp->regressions,
                cmp->regressions == 1 ? "" : "s");
        kernel_link(f, with);
        fputs(" (", f);
        esc(f, cmp->rule);
        fputs(").</p>\n<div class=\"scroll\"><table class=\"compare\"><tr><th>machine</th>"
              "<th>scenario</th><th class=\"num\">worst, this</th><th class=\"num\">worst, "
              "other</th><th class=\"num\">p99.9, this</th><th class=\"num\">p99.9, other</th>"
              "<th>result</th></tr>\n",
              f);
        for (i = 0; i < cmp->n && i < COMPARE_ROWS_MAX; i++) {
                const struct farm_cmp_entry *e = &cmp->v[i];
                const struct farm_cmp_side *a = &e->side[0], *b = &e->side[1];
                json_t *vm = verdict_machine(v, e->machine);
                fputs("<tr><td>", f);
                if (vm)
                        esc(f, machine_name(vm, nb));
                else
                        fprintf(f, "<code>%.8s…</code>", e->machine);
                fputs("</td><td>", f);
                esc(f, e->scenario[0] ? e->scenario : "none");
                fprintf(f,
                        "</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
                        "<td class=\"num\">%s</td><td class=\"num\">%s</td><td>",
                        cmp_lat(b1, a, true), cmp_lat(b2, b, true), cmp_lat(b3, a, false),
                        cmp_lat(b4, b, false));
                if (a->used && b->used)
                        fputs(e->regression ? "<span class=\"bad\">✗ REGRESSION</span>" : "ok", f);
                else
                        fprintf(f, "only in %s", a->used ? "this" : "the other");
                fputs("</td></tr>\n", f);
        }
        fputs("</table></div>\n", f);
}

/* The heading, the rule and why the verdict is what it is. */
static void kernel_head(struct dash *x, const char *release, json_t *v) {
        FILE *f = x->f;
        char b1[32], b2[32], b3[32];
        const char *status = farm_verdict_status(v);
        json_t *reason;
        size_t i;
        fputs("<h1>Kernel ", f);
        esc(f, release);
        fputs(" ", f);
        verdict_badge(f, status);
        fputs("</h1>\n<p class=\"note\">The verdict as of ", f);
        put_time(f, ji(v, "at_ns", x->now));
        fprintf(f,
                "; rule: every gating machine (%" PRId64 ") covers %s under every required "
                "scenario, no violation, no unclean end, no silence over %s, no generator "
                "down over %s.</p>\n",
                ji(v, "gating_machines", 0), fmt_days(b1, (int64_t) x->rule->period_ns),
                fmt_span(b2, (int64_t) x->rule->max_gap_ns),
                fmt_span(b3, (int64_t) x->rule->load_down_max_ns));

        fputs("<h2 id=\"reasons\">Why</h2>\n<ul class=\"reasons\">", f);
        json_array_foreach (json_object_get(v, "reasons"), i, reason) {
                fputs("<li>", f);
                esc(f, json_string_value(reason));
                fputs("</li>", f);
        }
        if (!json_array_size(json_object_get(v, "reasons")))
                fputs("<li>every requirement is met</li>", f);
        fputs("</ul>\n", f);
}

/* The problems, those waived, and what the verdict still waits for. */
static void kernel_problems(struct dash *x, json_t *v) {
        FILE *f = x->f;
        char nb[16];
        json_t *p;
        size_t i;
        json_t *probs = json_object_get(v, "problems");
        fprintf(f, "<h2 id=\"problems\">Problems (%" PRId64 ")</h2>\n", ji(v, "problems_total", 0));
        if (json_array_size(probs)) {
                fputs("<div class=\"scroll\"><table class=\"problems\"><tr><th>kind</th>"
                      "<th>machine</th><th>time</th><th>what</th><th>evidence</th></tr>\n",
                      f);
                json_array_foreach (probs, i, p) {
                        fputs("<tr><td class=\"bad\">", f);
                        esc(f, js(p, "kind"));
                        fputs("</td><td>", f);
                        esc(f, machine_name(p, nb));
                        fputs("</td><td>", f);
                        put_time(f, ji(p, "time_ns", 0));
                        fputs("</td><td class=\"reason\">", f);
                        esc(f, js(p, "message"));
                        if (js(p, "culprit")) {
                                fputs("<br>", f);
                                culprit_html(f, js(p, "culprit"), ji(p, "trace", 0),
                                             ji(p, "trace", 0) > 0);
                        }
                        fputs("<br><span class=\"note\">id <code>", f);
                        esc(f, js(p, "id"));
                        fputs("</code></span></td><td><a class=\"evidence\" href=\"", f);
                        evidence_href(f, p, x->now);
                        fputs("\">evidence</a></td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
                if (ji(v, "problems_total", 0) > (int64_t) json_array_size(probs))
                        fprintf(f, "<p class=\"note\">The first %zu are listed.</p>\n",
                                json_array_size(probs));
        } else
                fputs("<p>None.</p>\n", f);

        json_t *waived = json_object_get(v, "waived");
        fprintf(f, "<h2 id=\"waived\">Waived problems (%zu)</h2>\n", json_array_size(waived));
        if (json_array_size(waived)) {
                fputs("<div class=\"scroll\"><table class=\"waived\"><tr><th>problem</th>"
                      "<th>waived by</th><th>when</th><th>why</th><th>evidence</th></tr>\n",
                      f);
                json_array_foreach (waived, i, p) {
                        json_t *w = json_object_get(p, "waiver");
                        fputs("<tr><td>", f);
                        esc(f, js(p, "message"));
                        fputs("</td><td>", f);
                        esc(f, js(w, "by"));
                        fputs("</td><td>", f);
                        put_time(f, ji(w, "created_ns", 0));
                        fputs("</td><td>", f);
                        esc(f, js(w, "reason"));
                        fputs("</td><td><a href=\"", f);
                        evidence_href(f, p, x->now);
                        fputs("\">evidence</a></td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
        } else
                fputs("<p>None.</p>\n", f);

        json_t *miss = json_object_get(v, "missing");
        fprintf(f, "<h2 id=\"missing\">Still waiting for (%zu)</h2>\n", json_array_size(miss));
        if (json_array_size(miss)) {
                fputs("<ul class=\"missing\">", f);
                json_array_foreach (miss, i, p) {
                        fputs("<li>", f);
                        esc(f, js(p, "message"));
                        fputs("</li>", f);
                }
                fputs("</ul>\n", f);
        } else
                fputs("<p>Nothing.</p>\n", f);
}

/* The coverage plot and table of the gating machines, and the others that ran the release. */
static void kernel_coverage(struct dash *x, const char *release, json_t *v,
                            const struct svg_buf *cov) {
        FILE *f = x->f;
        char b1[32], b2[32], nb[16];
        size_t i;
        fputs("<h2 id=\"coverage\">Coverage</h2>\n<div class=\"plot\">", f);
        fputs(cov->data, f);
        fputs("</div><p class=\"note\"><a href=\"/plots/kernels/", f);
        urlenc(f, release);
        fputs("/coverage.svg\">SVG</a></p>\n", f);
        json_t *ms = json_object_get(v, "machines"), *m;
        if (json_array_size(ms)) {
                fputs("<div class=\"scroll\"><table class=\"coverage\"><tr><th>gating machine"
                      "</th><th>status</th><th class=\"num\">covered</th><th class=\"num\">"
                      "still missing</th><th>scenarios</th></tr>\n",
                      f);
                json_array_foreach (ms, i, m) {
                        json_t *sc;
                        size_t j;
                        fputs("<tr><td>", f);
                        fprintf(f, "<a href=\"/machines/%.32s?window=kernel:", js(m, "id") ?: "");
                        urlenc(f, release);
                        fputs("\">", f);
                        esc(f, machine_name(m, nb));
                        fputs("</a></td><td>", f);
                        verdict_badge(f, js(m, "status"));
                        fprintf(f, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>",
                                fmt_days(b1, ji(m, "covered_ns", 0)),
                                fmt_days(b2, ji(m, "missing_ns", 0)));
                        json_array_foreach (json_object_get(m, "scenarios"), j, sc) {
                                int64_t got = ji(sc, "covered_ns", 0),
                                        need = ji(sc, "required_ns", -1);
                                fprintf(f, "%s<span class=\"%s\">", j ? ", " : "",
                                        need >= 0 && got < need ? "bad" : "");
                                esc(f, js(sc, "name"));
                                fprintf(f, " %s", fmt_span(b1, got));
                                if (need >= 0)
                                        fprintf(f, " of %s", fmt_span(b2, need));
                                fputs("</span>", f);
                        }
                        fputs("</td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
        } else
                fputs("<p class=\"bad\">No gating machine is enrolled: the release cannot "
                      "qualify.</p>\n",
                      f);
        json_t *others = json_object_get(v, "other_machines");
        if (json_array_size(others)) {
                fputs("<p>Also ran it (not gating): ", f);
                json_array_foreach (others, i, m) {
                        fputs(i ? ", " : "", f);
                        machine_link(f, m, NULL);
                }
                fputs("</p>\n", f);
        }
}

static int page_kernel(struct dash *x, const char *release) {
        static const char *const allowed[] = { "compare", NULL };
        char err[FARM_ERROR_MAX];
        json_t *v = NULL, *list = NULL;
        struct farm_comparison cmp = {};
        struct svg_buf cov = {};
        const char *with = arg(x->args, "compare");
        int r;

        if (check_params(x, allowed) < 0)
                return 0;
        if ((r = kernel_verdict(x, release, &v)) <= 0)
                return r;
        if (with && !*with)
                with = NULL; /* the form sent without a choice */
        if (with) {
                r = farm_kernel_compare(x->db, release, with,
                                        FARM_COMPARE_TOLERANCE_PERCENT_DEFAULT,
                                        FARM_COMPARE_MIN_DIFFERENCE_NS_DEFAULT, x->now, &cmp, err);
                if (r == -ENOENT) {
                        fail_page(x, 400, "compare=%.256s: no such kernel release", with);
                        r = 0;
                        goto done;
                }
                if (r < 0) {
                        snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                        r = fail_internal(x, r, NULL);
                        goto done;
                }
        }
        if ((r = farm_kernel_list(x->db, &list, err)) < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                r = fail_internal(x, r, NULL);
                goto done;
        }
        if ((r = coverage_plot(x, release, v, &cov)) <= 0)
                goto done;
        if ((r = open_page(x)) < 0) {
                r = fail_internal(x, r, "dashboard: no memory for the page");
                goto done;
        }
        page_begin(x, release, 300);
        kernel_head(x, release, v);
        kernel_problems(x, v);
        kernel_coverage(x, release, v, &cov);
        kernel_compare(x, release, v, with ? &cmp : NULL, with, list);
        page_end(x);
        r = finish_page(x, HTML);
done:
        if (r <= 0)
                abandon_page(x);
        svg_buf_done(&cov);
        json_decref(v);
        farm_comparison_done(&cmp);
        json_decref(list);
        return r < 0 ? r : 0;
}

static int plot_coverage(struct dash *x, const char *release) {
        static const char *const none[] = { NULL };
        struct svg_buf out = {};
        json_t *v = NULL;
        int r;
        if (check_params(x, none) < 0)
                return 0;
        if ((r = kernel_verdict(x, release, &v)) <= 0)
                return r;
        if ((r = coverage_plot(x, release, v, &out)) > 0)
                finish_svg(x, &out);
        svg_buf_done(&out);
        json_decref(v);
        return r < 0 ? r : 0;
}

/* ---- routes ----------------------------------------------------------------------------- */

/* The part of url after prefix when url starts with it, else NULL. */
static const char *after(const char *url, const char *prefix) {
        size_t n = strlen(prefix);
        return strncmp(url, prefix, n) == 0 ? url + n : NULL;
}

/* The part of s before suffix (into buf) when s ends with it. */
static bool strip_suffix(const char *s, const char *suffix, char *buf, size_t size) {
        size_t n = strlen(s), m = strlen(suffix);
        if (n <= m || strcmp(s + n - m, suffix) != 0 || n - m >= size)
                return false;
        snprintf(buf, size, "%.*s", (int) (n - m), s);
        return true;
}

int farm_dash_route(farm_db *db, const struct farm_rule *rule, const char *url, const char *method,
                    const struct farm_args *args, int64_t now_ns, struct farm_answer *ret) {
        enum { OVERVIEW, MACHINE, KERNEL, PLOT_HIST, PLOT_LT, PLOT_COV } which;
        char key[512];
        const char *rest;

        if (strcmp(url, "/") == 0)
                which = OVERVIEW;
        else if ((rest = after(url, "/plots/machines/"))) {
                if (strip_suffix(rest, "/histogram.svg", key, sizeof(key)))
                        which = PLOT_HIST;
                else if (strip_suffix(rest, "/longterm.svg", key, sizeof(key)))
                        which = PLOT_LT;
                else
                        return 0;
        } else if ((rest = after(url, "/plots/kernels/"))) {
                if (!strip_suffix(rest, "/coverage.svg", key, sizeof(key)))
                        return 0;
                which = PLOT_COV;
        } else if ((rest = after(url, "/machines/")) && *rest && !rest[strcspn(rest, "/")]) {
                which = MACHINE;
                snprintf(key, sizeof(key), "%.64s", rest);
        } else if ((rest = after(url, "/kernels/")) && *rest) {
                which = KERNEL;
                snprintf(key, sizeof(key), "%s", rest);
                if (strlen(rest) >= 256) {
                        which = KERNEL;
                        key[255] = '\0';
                }
        } else
                return 0;

        *ret = (struct farm_answer){};
        struct dash x = { .db = db, .rule = rule, .now = now_ns, .args = args, .a = ret };
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
                fail_page(&x, 405, "%.16s: the dashboard is read only (GET, HEAD)", method);
                ret->allow = "GET, HEAD";
                return 1;
        }
        /* The key is a segment of the routing path, still percent-encoded (a release may hold
         * a '/'): decoded here. */
        if (which != OVERVIEW && farm_segment_decode(key, strlen(key), key, sizeof(key)) < 0) {
                fail_page(&x, 404, "no such page: a bad escape in the path");
                return 1;
        }
        switch (which) {
        case OVERVIEW:
                page_overview(&x);
                break;
        case MACHINE:
                page_machine(&x, key);
                break;
        case KERNEL:
                page_kernel(&x, key);
                break;
        case PLOT_HIST:
                plot_machine(&x, key, true);
                break;
        case PLOT_LT:
                plot_machine(&x, key, false);
                break;
        case PLOT_COV:
                plot_coverage(&x, key);
                break;
        }
        if (ret->status == 0) {
                snprintf(ret->err, sizeof(ret->err), "%s: no answer", url);
                fail_internal(&x, -EIO, NULL);
        }
        return 1;
}
