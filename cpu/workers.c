/*
 * workers.c: the thread pool of workers.h. A job is published under the lock with a new
 * generation number; sleeping workers wake on it, and every thread (the caller included) claims
 * tasks from one atomic counter until none is left, then the caller waits for the workers to
 * leave the job before it returns (so the job's arguments may live on its stack).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "workers.h"

struct workers {
    pthread_mutex_t lock;
    pthread_cond_t wake, done; /* a new job or stop; the last worker left the job */
    pthread_t *threads;        /* the n_started workers (room for n_threads) */
    size_t n_threads, n_started;
    unsigned long generation;  /* of the current job; under lock */
    bool stop;                 /* under lock */
    size_t busy;               /* workers still in the current job; under lock */
    workers_task_fn fn;        /* the job, set under lock before generation moves */
    void *arg;
    size_t n_tasks;
    atomic_size_t next;        /* the next unclaimed task */
};

typedef struct worker_start {
    workers *pool;
    size_t id;
} worker_start;

static void run_tasks(workers *w, size_t worker) {
    for (size_t t; (t = atomic_fetch_add(&w->next, 1)) < w->n_tasks;) w->fn(w->arg, t, worker);
}

static void *worker_main(void *p) {
    workers *w = ((worker_start *)p)->pool;
    size_t id = ((worker_start *)p)->id;
    free(p);
    /* the generation before the first job (not read from the pool: a job may start before this
     * thread does, and would be missed) */
    unsigned long seen = 0;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && w->generation == seen) pthread_cond_wait(&w->wake, &w->lock);
        if (w->stop) break;
        seen = w->generation;
        pthread_mutex_unlock(&w->lock);
        run_tasks(w, id);
        pthread_mutex_lock(&w->lock);
        if (--w->busy == 0) pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

size_t workers_count(const workers *w) { return w == NULL ? 1 : w->n_threads; }

void workers_destroy(workers *w) {
    if (w == NULL) return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (size_t i = 0; i < w->n_started; i++) pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w->threads);
    free(w);
}

workers *workers_create(size_t n_threads, int *error) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > WORKERS_MAX) n_threads = WORKERS_MAX;
    workers *w = rmlp_calloc(1, sizeof *w);
    pthread_t *threads = rmlp_malloc(n_threads * sizeof(pthread_t));
    if (w == NULL || threads == NULL) {
        free(w), free(threads);
        *error = ENOMEM;
        return NULL;
    }
    int e = pthread_mutex_init(&w->lock, NULL);
    if (e == 0 && (e = pthread_cond_init(&w->wake, NULL)) != 0) pthread_mutex_destroy(&w->lock);
    if (e == 0 && (e = pthread_cond_init(&w->done, NULL)) != 0) {
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
    }
    if (e != 0) {
        free(w), free(threads);
        *error = e;
        return NULL;
    }
    w->threads = threads, w->n_threads = n_threads;
    atomic_init(&w->next, 0);
    for (size_t i = 1; i < n_threads; i++) {
        worker_start *start = rmlp_malloc(sizeof *start);
        e = start == NULL ? ENOMEM : 0;
        if (start != NULL) {
            *start = (worker_start){w, i};
            e = pthread_create(&threads[w->n_started], NULL, worker_main, start);
            if (e != 0) free(start);
        }
        if (e != 0) {
            workers_destroy(w);
            *error = e;
            return NULL;
        }
        w->n_started++;
    }
    return w;
}

void workers_run(workers *w, size_t n_tasks, workers_task_fn fn, void *arg) {
    if (w == NULL || w->n_threads == 1 || n_tasks <= 1) {
        for (size_t t = 0; t < n_tasks; t++) fn(arg, t, 0);
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->fn = fn, w->arg = arg, w->n_tasks = n_tasks;
    atomic_store(&w->next, 0);
    w->busy = w->n_started;
    w->generation++;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    run_tasks(w, 0);
    pthread_mutex_lock(&w->lock);
    while (w->busy > 0) pthread_cond_wait(&w->done, &w->lock);
    pthread_mutex_unlock(&w->lock);
}
