/* SPDX-License-Identifier: MIT */
/* The manager's upload: the machine's token, the uploader thread that drains the outbox, and
 * the backlog the status shows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "timeutil.h"
#include "token-file.h"

/* The bearer token: the first line of the file, which only root should be able to read; a
 * file every user can read, or a server that gets it in clear, is warned about. */
int manager_read_token(const char *path, const char *server, char **ret) {
        char err[TOKEN_MESSAGE_MAX], warning[TOKEN_MESSAGE_MAX];
        int r = token_file_read(path, ret, err, warning);
        if (r < 0)
                return log_error_errno(r, "[Upload] TokenFile=%s%s", err,
                                       r == -ENOENT || r == -EACCES
                                               ? " (enroll the machine with \"rtsoak-server "
                                                 "enroll\" and store the token there)"
                                               : "");
        if (warning[0])
                log_warning("[Upload] TokenFile=%s", warning);
        if (token_in_clear(server))
                log_warning("[Upload] Server=%s: the token goes to another host over plain HTTP, "
                            "readable by anyone on the way (use https://)",
                            server);
        return 0;
}

static void on_uploader_alive(void *userdata) {
        struct manager *m = userdata;
        heartbeat_beat(&m->sd.hb_uploader);
}

/* The uploader thread drains the outbox at its own pace. */
int manager_start_uploader(struct manager *m) {
        struct uploader_params up = {
                .db_path = m->cfg.storage_path,
                .server = m->cfg.upload_server,
                .token = m->up.token,
                .ca_file = m->cfg.upload_ca_file,
                .batch = m->cfg.upload_batch,
                .connect_timeout_ns = m->cfg.upload_connect_timeout_ns,
                .timeout_ns = m->cfg.upload_timeout_ns,
                .backoff_min_ns = NSEC_PER_SEC,
                .backoff_max_ns = m->cfg.upload_retry_max_ns,
                .machine_id = m->run.si.machine_id,
                .hostname = m->run.si.hostname,
                .cpu_model = m->run.si.cpu_model,
                .cpus = (uint32_t) m->probes.cpus.n,
                .on_alive = on_uploader_alive,
                .alive_userdata = m,
                .alive_ns = m->loop.poll_cap_usec * NSEC_PER_USEC,
        };
        int r = uploader_start(&up, &m->up.uploader);
        if (r < 0)
                return log_error_errno(r, "Failed to start the uploader: %m");
        atomic_store(&m->sd.hb_uploader.active, true);
        log_info("Uploading to %s", m->cfg.upload_server);
        return 0;
}

void manager_stop_uploader(struct manager *m) {
        atomic_store(&m->sd.hb_uploader.active, false);
        uploader_stop(m->up.uploader);
        m->up.uploader = NULL;
}

/* Pending outbox rows: the upload backlog shown in the status. */
void manager_refresh_backlog(struct manager *m) {
        struct store_upload_status us = {};
        if (!m->up.token)
                return;
        heartbeat_enter(&m->sd.hb_storage);
        int r = store_get_upload_status(m->run.store, &us);
        heartbeat_leave(&m->sd.hb_storage);
        if (r >= 0)
                m->up.backlog = us.pending;
        store_upload_status_done(&us);
}

/* A reload changed [Upload] or the token: the uploader starts again with token (taken over;
 * NULL: upload off). */
void manager_restart_upload(struct manager *m, char *token) {
        if (m->up.uploader)
                manager_stop_uploader(m);
        if (m->up.token)
                explicit_bzero(m->up.token, strlen(m->up.token));
        free(m->up.token);
        m->up.token = token;
        store_set_outbox(m->run.store, m->up.token != NULL);
        atomic_store(&m->up.outbox_on, m->up.token != NULL);
        if (m->up.token && manager_start_uploader(m) < 0)
                log_error("Upload stays off until the next reload or restart");
        else if (!m->up.token)
                log_info("Upload off");
        manager_refresh_backlog(m);
}
