/*
 * workers.h: a small pool of threads for the CPU kernels that do not run on OpenBLAS's threads
 * (OpenBLAS 0.3.21 has no per-call thread count, and its threaded calls from several threads at
 * once queue on one lock). A pool of n threads is the calling thread plus n - 1 workers that sleep
 * between jobs; a job is n_tasks calls fn(arg, task, worker), each task run exactly once, on the
 * calling thread or a worker, worker < n naming the thread (for its scratch). A pool is used by
 * one thread at a time (its owner's: a generation session's), and workers_destroy joins every
 * thread it started. A child process after fork() has none of the workers: it must not use a
 * pool made before the fork (a session begun in the parent).
 */
#ifndef RMLP_CPU_WORKERS_H
#define RMLP_CPU_WORKERS_H

#include <stddef.h>

typedef struct workers workers;
typedef void (*workers_task_fn)(void *arg, size_t task, size_t worker);

/* The most threads a pool has (far above a socket's cores; a request above it gets this many). */
#define WORKERS_MAX 256

/* A pool of n_threads threads (1 .. WORKERS_MAX; 1 starts none), or NULL when memory or a thread
 * could not be had: *error is then ENOMEM or pthread_create's error, and nothing is left behind. */
workers *workers_create(size_t n_threads, int *error);

/* Threads of the pool; 1 for NULL (the calling thread alone). */
size_t workers_count(const workers *w);

/* Runs the job and returns when every task has run. w NULL: all tasks on the calling thread, in
 * order, as worker 0. */
void workers_run(workers *w, size_t n_tasks, workers_task_fn fn, void *arg);

/* Stops and joins the workers and frees the pool; NULL is a no-op. */
void workers_destroy(workers *w);

#endif
