/* SPDX-License-Identifier: MIT */
/* The uploader: a thread of rtsoakd that drains the outbox of the local database to the farm
 * server, in order, batched, over one reused libcurl connection, retrying with backoff. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uploader_params {
        const char *db_path;
        const char *server;  /* base URL: "https://farm.example:8470" */
        const char *token;   /* bearer token */
        const char *ca_file; /* NULL or "": the system's CAs */
        size_t batch;        /* outbox rows per upload at most */
        uint64_t connect_timeout_ns, timeout_ns;
        uint64_t backoff_min_ns, backoff_max_ns;
        /* who we are */
        const char *machine_id, *hostname, *cpu_model;
        uint32_t cpus;
        /* Optional: called from the thread at every turn of its loop, while idle or backing
         * off too, at least every alive_ns (0: every second), and during transfers; a
         * watchdog sees the thread is not stuck. */
        void (*on_alive)(void *userdata);
        void *alive_userdata;
        uint64_t alive_ns;
};

struct uploader;

/* Whether url is one the uploader can send to: http:// or https://, a host, a port in range,
 * no control character and no query or fragment (the API's path is appended); why names what
 * is wrong (len bytes). */
bool uploader_url_ok(const char *url, char *why, size_t len);

/* Copies what it needs from p and starts the thread. */
int uploader_start(const struct uploader_params *p, struct uploader **ret);
/* Something new is in the outbox: look now rather than at the next poll. */
void uploader_poke(struct uploader *u);
/* Waits up to timeout_ns for the outbox to be empty (at a clean stop, so that the last
 * interval leaves now rather than at the next start); false if rows are still pending. */
bool uploader_flush(struct uploader *u, uint64_t timeout_ns);
/* Stops the thread (an upload in progress is abandoned, its rows stay pending) and frees. */
void uploader_stop(struct uploader *u);

struct uploader_stats {
        uint64_t uploads, failures, rows_sent, rows_rejected;
        int64_t last_progress_mono; /* the thread's last sign of life */
};
void uploader_get_stats(struct uploader *u, struct uploader_stats *ret);

/* The wait before retry number attempt (0-based): exponential from min up to max, with full
 * jitter (a uniform draw below it), but never less than retry_after_ns (the server's
 * Retry-After).  rnd is a uniform 64-bit random number. */
uint64_t uploader_backoff(uint64_t min_ns, uint64_t max_ns, unsigned attempt,
                          uint64_t retry_after_ns, uint64_t rnd);
