/*
 * profile.h: where a CPU forward's time goes (rmlp_context_cpu_profile): wall-clock time by
 * phase, read from the clock only at phase boundaries and only while measuring is on (off, a mark
 * is one test of a flag). A mark gives the time since the previous mark to the phase that just
 * ended; a forward's first mark starts at cpu_profile_begin, and what lies between its last mark
 * and cpu_profile_end (the output's finite check, the cache's copies) is its "other" time.
 */
#ifndef RMLP_CPU_PROFILE_H
#define RMLP_CPU_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "radix_mlp/types.h"

typedef enum cpu_phase {
    CPU_PHASE_GEMM,        /* the linear layers (BLAS) */
    CPU_PHASE_ATTENTION,   /* built-in or the host's, with its K/V copies */
    CPU_PHASE_ELEMENTWISE, /* norms, RoPE, SwiGLU, residual adds */
    CPU_PHASE_GATHER,      /* embedding rows, the scatter to and gather from the batch rows */
    CPU_PHASES
} cpu_phase;

typedef struct cpu_profile {
    bool measure;         /* measure the forwards that follow */
    bool active;          /* inside a measured forward */
    double last;          /* ms, the clock at the previous mark */
    double started;       /* ms, the clock at the forward's begin */
    double ms[CPU_PHASES]; /* summed since the last read */
    double total_ms;
    uint64_t forwards;
} cpu_profile;

/* Milliseconds on the monotonic clock. */
double cpu_profile_now_ms(void);

/* The start and the end of a forward (counted and timed when measuring). */
void cpu_profile_begin(cpu_profile *p);
void cpu_profile_end(cpu_profile *p);

/* What was measured since the previous read into out (every field but struct_size), the count
 * restarted from zero, measuring set to `measure`. */
void cpu_profile_read(cpu_profile *p, bool measure, rmlp_cpu_profile *out);

/* The time since the previous mark goes to `phase`. */
static inline void cpu_profile_mark(cpu_profile *p, cpu_phase phase) {
    if (p->active) {
        double now = cpu_profile_now_ms();
        p->ms[phase] += now - p->last;
        p->last = now;
    }
}

#endif
