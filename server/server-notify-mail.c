/* SPDX-License-Identifier: MIT */
/* The mail channel: a notification as a plain-text mail handed to the local MTA with
 * `sendmail -t -oi`, as Debian's services send theirs; the exit status of sendmail decides
 * whether it is sent, tried again or failed for good. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "config.h"
#include "macro.h"
#include "server-notify-channel.h"
#include "text-safe.h"
#include "timeutil.h"

extern char **environ;

#define LINE_MAX_BYTES 900 /* below the 998 of RFC 5322 */
#define OUTPUT_MAX 400     /* of what sendmail says, kept as the error */

static bool ascii_only(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s >= 0x80)
                        return false;
        return true;
}

/* A header's text on one line: control characters become spaces, so nothing can start a
 * header of its own; the rest that text_ok() refuses (stored before the rule) is escaped. */
static void put_header_text(FILE *f, const char *s) {
        _cleanup_free_ char *line = strdup(s), *safe = NULL;
        for (char *p = line; p && *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = ' ';
        safe = line ? text_escape_dup(line) : NULL;
        fputs(safe ?: "", f);
}

/* Subject: as it is when ASCII, else as RFC 2047 encoded words of whole characters. */
static void put_subject(FILE *f, const char *prefix, const char *title) {
        _cleanup_free_ char *line = NULL, *s = NULL;
        if (asprintf(&line, "%s%s%s", prefix ?: "", prefix && *prefix ? " " : "", title) < 0)
                return;
        for (char *p = line; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = ' ';
        s = text_escape_dup(line);
        if (!s)
                return;
        fputs("Subject: ", f);
        if (ascii_only(s)) {
                fprintf(f, "%.*s\n", LINE_MAX_BYTES, s);
                return;
        }
        size_t len = strlen(s);
        for (size_t i = 0; i < len;) {
                size_t n = MIN((size_t) 45, len - i);
                while (i + n < len && ((unsigned char) s[i + n] & 0xc0) == 0x80)
                        n--; /* never split a character */
                _cleanup_free_ char *b = base64_encode((const uint8_t *) s + i, n);
                fprintf(f, "%s=?UTF-8?B?%s?=", i ? "\n " : "", b ?: "");
                i += n;
        }
        fputc('\n', f);
}

/* The body: lines cut at LINE_MAX_BYTES, and what text_ok() refuses in text with lines
 * (control characters but tabs and newlines, bidirectional formatting characters, bytes that
 * are not UTF-8: what was stored before the rule) escaped. */
static void put_body(FILE *f, const char *text) {
        _cleanup_free_ char *safe = text_escape_lines_dup(text);
        size_t col = 0;
        for (const char *p = safe ?: ""; *p; p++) {
                if (*p == '\n') {
                        fputc('\n', f);
                        col = 0;
                        continue;
                }
                if (col == LINE_MAX_BYTES) {
                        fputc('\n', f);
                        col = 0;
                }
                fputc(*p, f);
                col++;
        }
        if (col)
                fputc('\n', f);
}

char *notify_mail_compose(const struct notify_channel *ch, const struct notify_message *m,
                          int64_t now_ns) {
        char *text = NULL, date[64];
        size_t len = 0;
        time_t t = (time_t) (now_ns / (int64_t) NSEC_PER_SEC);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        long long id = json_integer_value(json_object_get(m->row, "id"));
        if (ch->from)
                fprintf(f, "From: %s\n", ch->from);
        fprintf(f, "To: %s\n", ch->to);
        put_subject(f, ch->subject_prefix, m->text->title);
        fprintf(f, "Date: %s\n", date);
        /* The same for every attempt of a delivery: a mail sent twice is seen as one. */
        fprintf(f, "Message-ID: <rtsoak.%lld.%lld@", id, (long long) m->delivery);
        put_header_text(f, m->host);
        fputs(">\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n"
              "Content-Transfer-Encoding: 8bit\nAuto-Submitted: auto-generated\n",
              f);
        fputs("X-Rtsoak-Event: ", f);
        put_header_text(f, json_string_value(json_object_get(m->row, "kind")) ?: "");
        fprintf(f, "\nX-Rtsoak-Notification: %lld\nX-Rtsoak-Delivery: %lld\n\n", id,
                (long long) m->delivery);
        put_body(f, m->text->text);
        fprintf(f, "\n-- \nrtsoak-server on ");
        put_header_text(f, m->host);
        fprintf(f, ", notification %lld to channel %s\n", id, ch->name);
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

/* Starts sendmail -t -oi with pipes for its input and output (stdout and stderr together). */
static int spawn_sendmail(const char *path, pid_t *ret_pid, int *ret_in, int *ret_out) {
        int in[2], out[2];
        if (pipe2(in, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(out, O_CLOEXEC) < 0) {
                int r = -errno;
                close(in[0]), close(in[1]);
                return r;
        }
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, def;
        sigemptyset(&none);
        sigemptyset(&def);
        sigaddset(&def, SIGPIPE); /* the server ignores it; sendmail must not */
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, out[1], 2);
        posix_spawn_file_actions_addclosefrom_np(&fa, 3);
        posix_spawnattr_init(&attr);
        /* The server's threads block SIGTERM and SIGINT: the child gets them back. */
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &def);
        char *argv[] = { (char *) path, (char *) "-t", (char *) "-oi", NULL };
        int r = -posix_spawn(ret_pid, path, &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        close(in[0]);
        close(out[1]);
        if (r < 0) {
                close(in[1]);
                close(out[0]);
                return r;
        }
        *ret_in = in[1];
        *ret_out = out[0];
        return 0;
}

/* Writes the mail and reads what sendmail says until it closes its output or the deadline
 * passes: 0, or -ETIMEDOUT. */
static int talk(int in, int out, const char *mail, int64_t deadline, char *said, size_t size) {
        size_t sent = 0, len = strlen(mail), got = 0;
        fcntl(in, F_SETFL, O_NONBLOCK);
        for (;;) {
                struct pollfd p[2] = { { out, POLLIN, 0 }, { in, POLLOUT, 0 } };
                int64_t left = deadline - now_ns(CLOCK_MONOTONIC);
                if (left <= 0)
                        return -ETIMEDOUT;
                if (poll(p, in >= 0 ? 2 : 1, (int) MIN(left / (int64_t) NSEC_PER_MSEC + 1, 1000)) <
                    0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (in >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
                        ssize_t n = write(in, mail + sent, len - sent);
                        if (n > 0)
                                sent += (size_t) n;
                        if ((n < 0 && errno != EAGAIN) || sent == len) {
                                close(in); /* the end of the mail */
                                in = -1;
                        }
                }
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        char buf[512];
                        ssize_t n = read(out, buf, sizeof(buf));
                        if (n <= 0) {
                                if (in >= 0)
                                        close(in);
                                return n < 0 && errno != EAGAIN ? -errno : 0;
                        }
                        size_t keep = MIN((size_t) n, size - 1 - got);
                        memcpy(said + got, buf, keep);
                        got += keep;
                        said[got] = '\0';
                }
        }
}

/* Waits for the child until the deadline, then kills it: its wait status, or -ETIMEDOUT. */
static int reap(pid_t pid, int64_t deadline) {
        int status;
        for (;;) {
                pid_t w = waitpid(pid, &status, WNOHANG);
                if (w == pid)
                        return status;
                if (w < 0 && errno != EINTR)
                        return -errno;
                if (now_ns(CLOCK_MONOTONIC) >= deadline) {
                        kill(pid, SIGKILL);
                        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                                ;
                        return -ETIMEDOUT;
                }
                nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
        }
}

static void mail_send(const struct notify_channel *ch, const struct notify_message *m,
                      const atomic_bool *stop, struct notify_result *ret) {
        char said[OUTPUT_MAX] = "";
        pid_t pid = 0;
        int in = -1, out = -1;
        (void) stop; /* a mail handed over is not taken back: it ends within Timeout= */
        *ret = (struct notify_result){ .what = NOTIFY_RESULT_TRANSIENT };
        _cleanup_free_ char *mail = notify_mail_compose(ch, m, now_ns(CLOCK_REALTIME));
        if (!mail) {
                snprintf(ret->error, sizeof(ret->error), "out of memory");
                return;
        }
        int r = spawn_sendmail(ch->sendmail, &pid, &in, &out);
        if (r < 0) {
                snprintf(ret->error, sizeof(ret->error), "cannot run %s: %s", ch->sendmail,
                         strerror(-r));
                return;
        }
        int64_t deadline = now_ns(CLOCK_MONOTONIC) + (int64_t) ch->timeout_ns;
        r = talk(in, out, mail, deadline, said, sizeof(said));
        close(out);
        int status = reap(pid, r < 0 ? 0 : deadline);
        for (char *p = said; *p; p++)
                if ((unsigned char) *p < 0x20)
                        *p = ' ';
        if (r == -ETIMEDOUT || status == -ETIMEDOUT)
                snprintf(ret->error, sizeof(ret->error), "%s did not finish within %llds",
                         ch->sendmail, (long long) (ch->timeout_ns / NSEC_PER_SEC));
        else if (status < 0 || r < 0)
                snprintf(ret->error, sizeof(ret->error), "%s: %s", ch->sendmail,
                         strerror(-(status < 0 ? status : r)));
        else if (WIFSIGNALED(status))
                snprintf(ret->error, sizeof(ret->error), "%s was killed by signal %d%s%s",
                         ch->sendmail, WTERMSIG(status), *said ? ": " : "", said);
        else if (WEXITSTATUS(status) != 0) {
                int code = WEXITSTATUS(status);
                snprintf(ret->error, sizeof(ret->error), "%s exited with %d%s%s", ch->sendmail,
                         code, *said ? ": " : "", said);
                /* sysexits: usage, bad data, no such user or host will not get better. */
                if (code == 64 || code == 65 || code == 67 || code == 68)
                        ret->what = NOTIFY_RESULT_PERMANENT;
        } else
                ret->what = NOTIFY_RESULT_SENT;
}

const struct notify_transport_ops notify_mail_ops = {
        .name = "mail",
        .send = mail_send,
};
