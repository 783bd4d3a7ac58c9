/* SPDX-License-Identifier: MIT */
/* The channels of notifications from the server's configuration: [Notify.NAME] sections
 * parsed key by key with file:line errors, checked as a whole, their secrets read at start,
 * and the routing of a notification by kind and gating group. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "server-notify-config.h"
#include "server-rule.h"
#include "text-safe.h"
#include "timeutil.h"

const char *const notify_kind_names[NK_COUNT] = {
        [NK_SILENCE] = "silence",
        [NK_VIOLATION] = "violation",
        [NK_UNCLEAN_END] = "unclean_end",
        [NK_LOAD_DOWN] = "load_down",
        [NK_PROBE_DOWN] = "probe_down",
        [NK_CLOCK] = "clock",
        [NK_OVERLAP] = "overlap",
        [NK_VERDICT] = "verdict",
        [NK_WAIVER] = "waiver",
        [NK_LATEST_STABLE] = "latest_stable",
        [NK_TEST] = "test",
};

#define KINDS_ALL ((UINT32_C(1) << NK_COUNT) - 1)
#define TIMEOUT_DEFAULT (10 * NSEC_PER_SEC)
#define RETRIES_DEFAULT 8
#define RETRY_DELAY_DEFAULT (30 * NSEC_PER_SEC)
#define RETRY_MAX_DEFAULT (3600 * NSEC_PER_SEC)
#define SENDMAIL_DEFAULT "/usr/sbin/sendmail"
#define SUBJECT_PREFIX_DEFAULT "[rtsoak]"
#define VALUE_MAX 2000

int notify_kind_from_name(const char *s) {
        for (int k = 0; k < NK_COUNT; k++)
                if (strcmp(s, notify_kind_names[k]) == 0)
                        return k;
        return -1;
}

_printf_(2, 3) static int bad(char *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, CONF_ERROR_MAX, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static const struct name_rule channel_name = { "a channel name", NAME_LOWER | NAME_DIGITS, "._-", 1,
                                               NOTIFY_CHANNEL_NAME_MAX - 1 };

/* Printable ASCII without spaces: URLs, paths, addresses. */
static bool plain_token(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s <= 0x20 || (unsigned char) *s >= 0x7f)
                        return false;
        return true;
}

/* An address as the mail's headers carry it: local@domain, nothing a header could be
 * made of around it. */
static bool address_ok(const char *s) {
        const char *at = strchr(s, '@');
        if (!at || at == s || !at[1] || strchr(at + 1, '@') || strlen(s) > 254 || !plain_token(s))
                return false;
        return !strpbrk(s, "<>()[],;:\"\\");
}

static void channel_defaults(struct notify_channel *ch, const char *name, const char *where) {
        *ch = (struct notify_channel){ .timeout_ns = TIMEOUT_DEFAULT,
                                       .retries = RETRIES_DEFAULT,
                                       .retry_delay_ns = RETRY_DELAY_DEFAULT,
                                       .retry_max_ns = RETRY_MAX_DEFAULT,
                                       .kinds = KINDS_ALL };
        snprintf(ch->name, sizeof(ch->name), "%s", name);
        snprintf(ch->where, sizeof(ch->where), "%s", where);
}

static void channel_free(struct notify_channel *ch) {
        free(ch->url);
        free(ch->secret_file);
        free(ch->ca_file);
        free(ch->to);
        free(ch->from);
        free(ch->sendmail);
        free(ch->smtp);
        free(ch->subject_prefix);
        if (ch->secret)
                explicit_bzero(ch->secret, ch->secret_len);
        free(ch->secret);
}

static int set_string(char **field, const char *value) {
        char *s = *value ? strdup(value) : NULL;
        if (*value && !s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

static int set_span(uint64_t *field, const char *value, uint64_t def, uint64_t min, uint64_t max,
                    char *err) {
        const char *why = NULL;
        uint64_t ns = def;
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        if (*value && parse_timespan(value, &ns, &why) < 0)
                return bad(err, "%s", why ?: "not a time span");
        if (ns < min || ns > max)
                return bad(err, "out of range (%s to %s)", format_timespan(a, min),
                           format_timespan(b, max));
        *field = ns;
        return 0;
}

/* Kinds=: names separated by spaces or commas, or "all". */
static int set_kinds(uint32_t *field, const char *value, char *err) {
        _cleanup_free_ char *copy = strdup(value);
        uint32_t kinds = 0;
        if (!copy)
                return -ENOMEM;
        if (!*value) {
                *field = KINDS_ALL;
                return 0;
        }
        char *rest = copy;
        for (char *w; (w = strsep(&rest, ", \t"));) {
                if (!*w)
                        continue;
                int k = strcmp(w, "all") == 0 ? -2 : notify_kind_from_name(w);
                if (k == -1 || k == NK_TEST)
                        return bad(err,
                                   "'%.64s' is not a kind (all, silence, violation, unclean_end, "
                                   "load_down, probe_down, clock, overlap, verdict, waiver, "
                                   "latest_stable)",
                                   w);
                kinds |= k == -2 ? KINDS_ALL : UINT32_C(1) << k;
        }
        if (!kinds)
                return bad(err, "no kind given (use all, or leave the key out)");
        /* A channel always takes the test notifications sent to it by name. */
        *field = kinds | UINT32_C(1) << NK_TEST;
        return 0;
}

/* Groups=: gating group names separated by spaces or commas; "" or "*": every group. */
static int set_groups(struct notify_channel *ch, const char *value, char *err) {
        _cleanup_free_ char *copy = strdup(value);
        size_t n = 0;
        if (!copy)
                return -ENOMEM;
        /* Checked in full before the channel changes: a wrong value leaves the last one. */
        char *rest = copy;
        for (char *w; strcmp(value, "*") != 0 && (w = strsep(&rest, ", \t"));) {
                if (!*w)
                        continue;
                char why[NAME_WHY_MAX];
                if (!name_ok(&farm_name_group, w, why))
                        return bad(err, "'%.80s' is not a group name (%s)", w, why);
                if (n++ == NOTIFY_GROUPS_MAX)
                        return bad(err, "more than %d groups", NOTIFY_GROUPS_MAX);
        }
        ch->ngroups = 0;
        rest = strcpy(copy, value);
        for (char *w; n > 0 && (w = strsep(&rest, ", \t"));)
                if (*w)
                        snprintf(ch->groups[ch->ngroups++], NOTIFY_GROUP_MAX, "%s", w);
        return 0;
}

/* Mail=: addresses separated by commas or spaces, kept as "a, b". */
static int set_recipients(struct notify_channel *ch, const char *value, char *err) {
        _cleanup_free_ char *copy = strdup(value), *list = calloc(1, strlen(value) * 2 + 1);
        size_t n = 0;
        if (!copy || !list)
                return -ENOMEM;
        char *rest = copy;
        for (char *w; (w = strsep(&rest, ", \t"));) {
                if (!*w)
                        continue;
                if (!address_ok(w))
                        return bad(err, "'%.80s' is not a mail address (local@domain)", w);
                if (++n > NOTIFY_RECIPIENTS_MAX)
                        return bad(err, "more than %d recipients", NOTIFY_RECIPIENTS_MAX);
                strcat(list, n > 1 ? ", " : "");
                strcat(list, w);
        }
        if (n == 0 && *value)
                return bad(err, "no address given");
        return set_string(&ch->to, list);
}

static int set_url(struct notify_channel *ch, const char *value, char *err) {
        if (*value && strncmp(value, "http://", 7) != 0 && strncmp(value, "https://", 8) != 0)
                return bad(err, "expected an http:// or https:// URL");
        if (*value && (!plain_token(value) || strlen(value) < 9))
                return bad(err, "not a URL (no spaces or control characters)");
        return set_string(&ch->url, value);
}

static int set_path(char **field, const char *value, char *err) {
        if (*value && (value[0] != '/' || !plain_token(value)))
                return bad(err, "expected an absolute path");
        return set_string(field, value);
}

/* One line of free text (text_ok()), and short: it goes into mail headers. */
static int set_text(char **field, const char *value, char *err) {
        char why[TEXT_WHY_MAX];
        if (!text_ok(value, false, why))
                return bad(err, "%s", why);
        if (strlen(value) > 64)
                return bad(err, "longer than 64 bytes");
        return set_string(field, value);
}

static int channel_key(struct notify_channel *ch, const char *where, const char *key,
                       const char *value, char *err) {
        unsigned long long n;
        char *end;
        if (strcmp(key, "Webhook") == 0)
                return set_url(ch, value, err);
        if (strcmp(key, "Mail") == 0)
                return set_recipients(ch, value, err);
        if (strcmp(key, "SecretFile") == 0) {
                snprintf(ch->secret_where, sizeof(ch->secret_where), "%s", where);
                return set_path(&ch->secret_file, value, err);
        }
        if (strcmp(key, "CAFile") == 0)
                return set_path(&ch->ca_file, value, err);
        if (strcmp(key, "Sendmail") == 0)
                return set_path(&ch->sendmail, value, err);
        if (strcmp(key, "SMTP") == 0) {
                if (*value && strncmp(value, "smtp://", 7) != 0 &&
                    strncmp(value, "smtps://", 8) != 0)
                        return bad(err, "expected an smtp:// or smtps:// URL");
                if (*value && (!plain_token(value) || strlen(value) < 8))
                        return bad(err, "not a URL (no spaces or control characters)");
                return set_string(&ch->smtp, value);
        }
        if (strcmp(key, "From") == 0) {
                if (*value && !address_ok(value))
                        return bad(err, "'%.80s' is not a mail address (local@domain)", value);
                return set_string(&ch->from, value);
        }
        if (strcmp(key, "SubjectPrefix") == 0)
                return set_text(&ch->subject_prefix, value, err);
        if (strcmp(key, "Timeout") == 0)
                return set_span(&ch->timeout_ns, value, TIMEOUT_DEFAULT, NSEC_PER_SEC / 10,
                                600 * NSEC_PER_SEC, err);
        if (strcmp(key, "RetryDelay") == 0)
                return set_span(&ch->retry_delay_ns, value, RETRY_DELAY_DEFAULT, NSEC_PER_SEC / 10,
                                86400 * NSEC_PER_SEC, err);
        if (strcmp(key, "RetryMax") == 0)
                return set_span(&ch->retry_max_ns, value, RETRY_MAX_DEFAULT, NSEC_PER_SEC / 10,
                                7 * 86400 * NSEC_PER_SEC, err);
        if (strcmp(key, "Retries") == 0) {
                errno = 0;
                n = *value ? strtoull(value, &end, 10) : RETRIES_DEFAULT;
                if (*value && (errno || *end || value[0] == '-' || n > 100))
                        return bad(err, "expected a number from 0 to 100");
                ch->retries = (unsigned) n;
                return 0;
        }
        if (strcmp(key, "Kinds") == 0)
                return set_kinds(&ch->kinds, value, err);
        if (strcmp(key, "Groups") == 0)
                return set_groups(ch, value, err);
        return bad(err,
                   "unknown key (a channel takes Webhook=, SecretFile=, CAFile=, Mail=, From=, "
                   "Sendmail=, SMTP=, SubjectPrefix=, Timeout=, Retries=, RetryDelay=, "
                   "RetryMax=, Kinds= and Groups=)");
}

int notify_channel_assign(struct notify_config *c, const char *where, const char *name,
                          const char *key, const char *value, char err[static CONF_ERROR_MAX]) {
        struct notify_channel *ch = (struct notify_channel *) notify_channel_find(c, name);
        if (strlen(value) > VALUE_MAX)
                return bad(err, "longer than %d bytes", VALUE_MAX);
        if (!ch) {
                char why[NAME_WHY_MAX];
                if (!name_ok(&channel_name, name, why))
                        return bad(err, "\"%.64s\": %s", name, why);
                if (c->nchannels == NOTIFY_CHANNELS_MAX)
                        return bad(err, "more than %d [Notify.NAME] channels", NOTIFY_CHANNELS_MAX);
                ch = &c->channels[c->nchannels++];
                channel_defaults(ch, name, where);
        }
        int r = channel_key(ch, where, key, value, err);
        return r == -ENOMEM ? bad(err, "out of memory") : r;
}

static void print_kinds(const struct notify_channel *ch, FILE *f) {
        uint32_t shown = ch->kinds & ~(UINT32_C(1) << NK_TEST);
        fputs("Kinds=", f);
        if (shown == (KINDS_ALL & ~(UINT32_C(1) << NK_TEST)))
                fputs("all", f);
        else
                for (int k = 0, first = 1; k < NK_COUNT; k++)
                        if (shown & UINT32_C(1) << k) {
                                fprintf(f, "%s%s", first ? "" : " ", notify_kind_names[k]);
                                first = 0;
                        }
        fputs("\nGroups=", f);
        for (size_t i = 0; i < ch->ngroups; i++)
                fprintf(f, "%s%s", i ? " " : "", ch->groups[i]);
        fputs(ch->ngroups ? "\n" : "*\n", f);
}

void notify_channels_print(const struct notify_config *c, FILE *f) {
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN], t[TIMESPAN_MAX_LEN];
        for (size_t i = 0; i < c->nchannels; i++) {
                const struct notify_channel *ch = &c->channels[i];
                fprintf(f, "\n[Notify.%s]\n", ch->name);
                if (ch->transport == NOTIFY_WEBHOOK || ch->url)
                        fprintf(f, "Webhook=%s\nSecretFile=%s\nCAFile=%s\n", ch->url ?: "",
                                ch->secret_file ?: "", ch->ca_file ?: "");
                else if (ch->smtp)
                        fprintf(f, "Mail=%s\nFrom=%s\nSMTP=%s\nCAFile=%s\nSubjectPrefix=%s\n",
                                ch->to ?: "", ch->from ?: "", ch->smtp, ch->ca_file ?: "",
                                ch->subject_prefix ?: SUBJECT_PREFIX_DEFAULT);
                else
                        fprintf(f, "Mail=%s\nFrom=%s\nSendmail=%s\nSubjectPrefix=%s\n",
                                ch->to ?: "", ch->from ?: "", ch->sendmail ?: SENDMAIL_DEFAULT,
                                ch->subject_prefix ?: SUBJECT_PREFIX_DEFAULT);
                fprintf(f, "Timeout=%s\nRetries=%u\nRetryDelay=%s\nRetryMax=%s\n",
                        format_timespan(t, ch->timeout_ns), ch->retries,
                        format_timespan(a, ch->retry_delay_ns),
                        format_timespan(b, ch->retry_max_ns));
                print_kinds(ch, f);
        }
}

/* A channel's transport, from which of Webhook= and Mail= it has, and no key of the other. */
static int check_channel(const struct notify_channel *ch, char *err) {
        const char *w = ch->where;
        if (!!ch->url == !!ch->to)
                return bad(err, "%s: [Notify.%s]: needs %s", w, ch->name,
                           ch->url ? "either Webhook= or Mail=, not both"
                                   : "Webhook=URL or Mail=ADDRESS");
        const char *other = ch->url ? (ch->from             ? "From="
                                       : ch->sendmail       ? "Sendmail="
                                       : ch->smtp           ? "SMTP="
                                       : ch->subject_prefix ? "SubjectPrefix="
                                                            : NULL)
                                    : (ch->secret_file            ? "SecretFile="
                                       : ch->ca_file && !ch->smtp ? "CAFile="
                                                                  : NULL);
        if (other)
                return bad(err, "%s: [Notify.%s]: %s is not a key of a %s channel", w, ch->name,
                           other, ch->url ? "webhook" : "mail");
        if (ch->smtp && ch->sendmail)
                return bad(err, "%s: [Notify.%s]: either Sendmail= or SMTP=, not both", w,
                           ch->name);
        if (ch->retry_max_ns < ch->retry_delay_ns)
                return bad(err, "%s: [Notify.%s]: RetryMax= is shorter than RetryDelay=", w,
                           ch->name);
        return 0;
}

int notify_config_check(struct notify_config *c, const char *dashboard_where,
                        char err[static CONF_ERROR_MAX]) {
        for (size_t i = 0; i < c->nchannels; i++) {
                struct notify_channel *ch = &c->channels[i];
                int r = check_channel(ch, err);
                if (r < 0)
                        return r;
                ch->transport = ch->url ? NOTIFY_WEBHOOK : NOTIFY_MAIL;
                if (ch->transport == NOTIFY_MAIL &&
                    ((!ch->sendmail && !ch->smtp &&
                      set_string(&ch->sendmail, SENDMAIL_DEFAULT) < 0) ||
                     (!ch->subject_prefix &&
                      set_string(&ch->subject_prefix, SUBJECT_PREFIX_DEFAULT) < 0)))
                        return bad(err, "out of memory");
        }
        const char *u = c->dashboard_url ?: "";
        if (*u &&
            ((strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) || !plain_token(u)))
                return bad(err,
                           "%s: [Notifications] DashboardURL=%.200s: expected an http:// or "
                           "https:// URL",
                           dashboard_where ?: "?", u);
        return 0;
}

/* The first line of path, without its newline: the secret. */
static int read_secret(struct notify_channel *ch, char *err) {
        _cleanup_close_ int fd = open(ch->secret_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        char buf[NOTIFY_SECRET_MAX + 2];
        struct stat st;
        if (fd < 0 && errno == EACCES)
                /* Typically the packaged unit's dynamic user and a file only root reads. */
                return bad(err,
                           "%s: [Notify.%s] SecretFile=%s: %s (under rtsoak-server.service, pass "
                           "it with LoadCredential=NAME:%s and name "
                           "/run/credentials/rtsoak-server.service/NAME here)",
                           ch->secret_where, ch->name, ch->secret_file, strerror(errno),
                           ch->secret_file);
        if (fd < 0 || fstat(fd, &st) < 0)
                return bad(err, "%s: [Notify.%s] SecretFile=%s: %s", ch->secret_where, ch->name,
                           ch->secret_file, strerror(errno));
        if (!S_ISREG(st.st_mode))
                return bad(err, "%s: [Notify.%s] SecretFile=%s: not a regular file",
                           ch->secret_where, ch->name, ch->secret_file);
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return bad(err, "%s: [Notify.%s] SecretFile=%s: %s", ch->secret_where, ch->name,
                           ch->secret_file, strerror(errno));
        buf[n] = '\0';
        size_t len = strcspn(buf, "\r\n");
        if (len < NOTIFY_SECRET_MIN || len > NOTIFY_SECRET_MAX) {
                explicit_bzero(buf, sizeof(buf));
                return bad(err,
                           "%s: [Notify.%s] SecretFile=%s: the first line holds %zu bytes; a "
                           "secret has %d to %d (e.g. 64 hex digits of `openssl rand -hex 32`)",
                           ch->secret_where, ch->name, ch->secret_file, len, NOTIFY_SECRET_MIN,
                           NOTIFY_SECRET_MAX);
        }
        ch->secret_shared = st.st_mode & 0077;
        ch->secret = malloc(len);
        if (!ch->secret)
                return bad(err, "out of memory");
        memcpy(ch->secret, buf, len);
        ch->secret_len = len;
        explicit_bzero(buf, sizeof(buf));
        return 0;
}

int notify_config_load_secrets(struct notify_config *c, char err[static CONF_ERROR_MAX]) {
        for (size_t i = 0; i < c->nchannels; i++)
                if (c->channels[i].secret_file && !c->channels[i].secret) {
                        int r = read_secret(&c->channels[i], err);
                        if (r < 0)
                                return r;
                }
        return 0;
}

void notify_config_free(struct notify_config *c) {
        for (size_t i = 0; i < c->nchannels; i++)
                channel_free(&c->channels[i]);
        c->nchannels = 0;
}

const struct notify_channel *notify_channel_find(const struct notify_config *c, const char *name) {
        for (size_t i = 0; i < c->nchannels; i++)
                if (strcmp(c->channels[i].name, name) == 0)
                        return &c->channels[i];
        return NULL;
}

bool notify_channel_wants(const struct notify_channel *ch, enum notify_kind kind,
                          const char *groups) {
        if (kind == NK_TEST || !(ch->kinds & UINT32_C(1) << kind))
                return false;
        if (ch->ngroups == 0)
                return true;
        for (size_t i = 0; i < ch->ngroups; i++) {
                size_t n = strlen(ch->groups[i]);
                for (const char *p = groups ?: ""; *p;) {
                        size_t len = strcspn(p, ",");
                        if (len == n && strncmp(p, ch->groups[i], n) == 0)
                                return true;
                        p += len + (p[len] == ',');
                }
        }
        return false;
}
