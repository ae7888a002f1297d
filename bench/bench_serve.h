/*
 * bench_serve.h: `radixmlp bench --serve`: serving traces (serve_trace.h) in simulated time
 * (serve_sim.h) on a built-in random model on the CPU, FIFO against prefix batching at the same
 * budget, then K replicas routed round robin against by routing key. `radixmlp bench --serve
 * --help` lists the options; docs/batching.md explains the figures.
 */
#ifndef RMLP_TOOLS_BENCH_SERVE_H
#define RMLP_TOOLS_BENCH_SERVE_H

/* Whether argv (argc) asks for the serving bench (holds --serve). */
int bench_serve_wanted(int argc, char **argv);

/* Runs it with the bench's arguments (all of them: --serve and its own options). Returns the
 * process's exit code: 0, 1 after a failure, 2 for bad arguments. */
int bench_serve(int argc, char **argv);

#endif
