/* SPDX-License-Identifier: MIT */
/* A background thread that works in passes and sleeps between them until it is stopped: one
 * implementation for the server's cache warmer, verdict watcher and notifications. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A condition variable whose timed waits run on CLOCK_MONOTONIC: a wall-clock step neither
 * cuts them short nor stretches them. */
void cond_init_monotonic(pthread_cond_t *cond);

struct worker;

/* Runs fn(userdata, w) in a thread named name; fn returns when worker_wait() says so. */
int worker_start(const char *name, void (*fn)(void *userdata, struct worker *w), void *userdata,
                 struct worker **ret);
/* Sleeps ns (on CLOCK_MONOTONIC), until woken or until stopped: false when stopping. */
bool worker_wait(struct worker *w, uint64_t ns);
/* Ends the thread's current or next worker_wait() early (work has arrived). */
void worker_wake(struct worker *w);
/* Stops the thread and waits for it (NULL: nothing). */
void worker_stop(struct worker *w);
