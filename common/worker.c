/* SPDX-License-Identifier: MIT */
/* A stoppable background thread: passes of work with sleeps between them that a stop ends at
 * once. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "macro.h"
#include "timeutil.h"
#include "worker.h"

struct worker {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;
        bool woken; /* worker_wake() since the last worker_wait() */
        void (*fn)(void *userdata, struct worker *w);
        void *userdata;
};

static void *worker_main(void *arg) {
        struct worker *w = arg;
        w->fn(w->userdata, w);
        return NULL;
}

void cond_init_monotonic(pthread_cond_t *cond) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(cond, &ca);
        pthread_condattr_destroy(&ca);
}

int worker_start(const char *name, void (*fn)(void *userdata, struct worker *w), void *userdata,
                 struct worker **ret) {
        struct worker *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->fn = fn;
        w->userdata = userdata;
        pthread_mutex_init(&w->lock, NULL);
        cond_init_monotonic(&w->cond);
        int r = -pthread_create(&w->thread, NULL, worker_main, w);
        if (r < 0) {
                pthread_cond_destroy(&w->cond);
                pthread_mutex_destroy(&w->lock);
                free(w);
                return r;
        }
        (void) pthread_setname_np(w->thread, name);
        *ret = w;
        return 0;
}

bool worker_wait(struct worker *w, uint64_t ns) {
        struct timespec ts = timespec_from_now(CLOCK_MONOTONIC, (int64_t) ns);
        pthread_mutex_lock(&w->lock);
        while (!w->stop && !w->woken && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
                ;
        w->woken = false;
        bool go_on = !w->stop;
        pthread_mutex_unlock(&w->lock);
        return go_on;
}

void worker_wake(struct worker *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->woken = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

void worker_stop(struct worker *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
}
