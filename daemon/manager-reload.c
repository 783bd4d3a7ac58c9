/* SPDX-License-Identifier: MIT */
/* SIGHUP: the configuration files again.  A bad one is refused and the running one stays; a
 * good one applies what can change live (the rotation and scenarios from the next interval
 * boundary, [Probe] Threshold= from the next interval, [Upload] and [Inventory] at once) and
 * keeps the keys that need a restart at their running values.  The probes and the open
 * interval go on.  Every reload checks the machine's inventory. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "reload.h"
#include "sha256.h"
#include "timeutil.h"

static void refused(struct manager *m, const char *why) {
        log_error("Configuration reload refused, the running configuration stays: %s", why);
        manager_add_event(m, "config_reload_failed", -1, why);
}

static void forget_token(char *token) {
        if (token)
                explicit_bzero(token, strlen(token));
        free(token);
}

/* The new configuration rr->cfg, or why it is refused (<0, told and recorded).  The token file
 * is read again at every reload: a new token needs no restart; *ret_token is the one read, or
 * NULL without upload. */
static int check_new(struct manager *m, struct reload_result *rr, char **ret_token) {
        char err[CONF_ERROR_MAX], msg[2048];
        int r = reload_config(&m->cfg, m->opts.config_path, m->opts.explicit_config, m->opts.sets,
                              rr, err);
        if (r < 0) {
                refused(m, err); /* rr holds nothing */
                return r;
        }
        /* [Load] User= needs a restart: the running one must exist for the new rotation. */
        r = daemon_config_check_load_user(&rr->cfg, m->cfg.load_user, err);
        if (r >= 0 && *rr->cfg.upload_server) {
                r = manager_read_token(rr->cfg.upload_token_file, rr->cfg.upload_server, ret_token);
                if (r < 0) {
                        snprintf(msg, sizeof(msg), "[Upload] TokenFile=%s: cannot read the token",
                                 rr->cfg.upload_token_file);
                        log_error("Configuration reload refused, the running configuration "
                                  "stays");
                        manager_add_event(m, "config_reload_failed", -1, msg);
                }
        } else if (r < 0)
                refused(m, err);
        if (r < 0)
                reload_result_done(rr);
        return r;
}

static void log_reloaded(struct manager *m, const struct reload_result *rr) {
        char msg[2048], digest[2 * SHA256_DIGEST_SIZE + 1];
        _cleanup_free_ char *text = daemon_config_text(&m->cfg);
        if (text)
                sha256_hex(text, strlen(text), digest);
        else
                snprintf(digest, sizeof(digest), "unknown");
        /* What changed, when it applies, and what waits for a restart. */
        snprintf(msg, sizeof(msg), "configuration reloaded (digest %.16s): changed: %s%s%s%s%s%s",
                 digest, *rr->changed ? rr->changed : "nothing", *rr->applies ? " (" : "",
                 rr->applies, *rr->applies ? ")" : "", *rr->kept ? "; kept until a restart: " : "",
                 rr->kept);
        log_info("%s", msg);
        manager_add_event(m, "config_reloaded", -1, msg);
}

/* The new configuration in force; the one it replaces is kept (the loads and the interval
 * records may still point at its scenarios), the threshold and the upload changed. */
static void apply(struct manager *m, struct reload_result *rr, char *token) {
        bool upload_changed = strstr(rr->changed, "Upload.") != NULL;
        struct daemon_config *a = realloc(m->retired.cfgs, (m->retired.n + 1) * sizeof(*a));
        if (!a) {
                log_oom();
                forget_token(token);
                return;
        }
        m->retired.cfgs = a;
        if (token && (!m->up.token || strcmp(token, m->up.token) != 0)) {
                if (!upload_changed)
                        log_info("The upload token changed: the uploader restarts with it");
                upload_changed = true;
        }
        if (!upload_changed) {
                forget_token(token);
                token = NULL;
        }
        a[m->retired.n++] = m->cfg;
        m->cfg = rr->cfg;
        rr->cfg = (struct daemon_config){};

        if (*rr->kept)
                log_warning("These keys need a restart and keep their running values: %s",
                            rr->kept);
        atomic_store_explicit(&m->probes.ctl.threshold_ns, m->cfg.threshold_ns,
                              memory_order_relaxed);
        collector_set_threshold(m->iv.collector, m->cfg.threshold_ns);
        if (upload_changed)
                manager_restart_upload(m, token);
        log_reloaded(m, rr);
        if (strstr(rr->changed, "Inventory."))
                (void) manager_inventory_arm(m);
}

void manager_reload(struct manager *m) {
        struct reload_result rr;
        char *token = NULL;

        /* Before READY=1 a reload is still done, but systemd hears of neither. */
        if (m->sd.ready_sent)
                sd_notifyf(0,
                           "RELOADING=1\nMONOTONIC_USEC=%" PRIu64
                           "\nSTATUS=Reloading the configuration",
                           (uint64_t) now_ns(CLOCK_MONOTONIC) / NSEC_PER_USEC);
        log_info("SIGHUP: reloading the configuration (%s)",
                 m->opts.explicit_config || access(m->opts.config_path, F_OK) == 0
                         ? m->opts.config_path
                         : "built-in defaults");
        if (check_new(m, &rr, &token) >= 0) {
                apply(m, &rr, token);
                reload_result_done(&rr);
        }
        /* A reload is when an operator says the machine was changed: look now. */
        manager_inventory_check(m, "a reload");
        if (m->sd.ready_sent) {
                sd_notify(0, "READY=1");
                manager_notify_status(m);
        }
}
