/*
 * profile.c: the clock, the forward boundaries and the read-out of profile.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <time.h>

#include "profile.h"

double cpu_profile_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void cpu_profile_begin(cpu_profile *p) {
    if (!p->measure) return;
    p->active = true;
    p->started = p->last = cpu_profile_now_ms();
}

void cpu_profile_end(cpu_profile *p) {
    if (!p->active) return;
    p->active = false;
    p->total_ms += cpu_profile_now_ms() - p->started;
    p->forwards++;
}

void cpu_profile_read(cpu_profile *p, bool measure, rmlp_cpu_profile *out) {
    out->cpu = true;
    out->forwards = p->forwards;
    out->total_ms = p->total_ms;
    out->gemm_ms = p->ms[CPU_PHASE_GEMM];
    out->attention_ms = p->ms[CPU_PHASE_ATTENTION];
    out->elementwise_ms = p->ms[CPU_PHASE_ELEMENTWISE];
    out->gather_ms = p->ms[CPU_PHASE_GATHER];
    *p = (cpu_profile){.measure = measure};
}
