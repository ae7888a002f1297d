/*
 * linear_onednn.c: linear_onednn.h. oneDNN's C API (2.x: libdnnl.so.2) through dlopen: the
 * functions are looked up once per process into `api`, with the engine. The fp32 sgemm
 * (cpu/sgemm.h's oneDNN choice) is one call, OpenMP held to one thread. Each bf16 GEMM describes its
 * matmul (src (rows, in) bf16 plain, weights (in, out) bf16 as W's transpose, bias (1, out) fp32,
 * dst (rows, out) fp32), creates the primitive (oneDNN's primitive cache makes a repeated shape
 * cheap) and runs it on a stream of its own, so contexts on several threads never share one.
 * Without oneDNN's header at build time (RMLP_WITH_ONEDNN unset) every probe says so.
 */
#define _GNU_SOURCE /* RTLD_* */

#include "linear_onednn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "linear_bf16.h"
#include "model/weights_bf16.h"
#include "radix_mlp/types.h"
#include "threads.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* The CPU's own word: AVX512-BF16 (cpuid 7.1 eax bit 5) or AMX-BF16 (cpuid 7.0 edx bit 22). */
bool onednn_cpu_has_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1u)) return true;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1u)) return true;
#endif
    return false;
}

bool onednn_close(const float *got, const float *want, size_t n, float rel, float *worst, float *peak) {
    *worst = 0.0f, *peak = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        *peak = fabsf(want[i]) > *peak ? fabsf(want[i]) : *peak;
        *worst = d > *worst || d != d ? d : *worst;
    }
    return *worst <= rel * *peak;
}

#ifndef RMLP_WITH_ONEDNN

bool onednn_bf16_probe(bool check_cpu, char *what, size_t what_size, char *why, size_t why_size) {
    (void)what, (void)what_size;
    snprintf(why, why_size, "%sthis build of the library has no oneDNN (libdnnl-dev's header was missing when it "
             "was compiled)", check_cpu && !onednn_cpu_has_bf16() ? "this CPU has neither AVX512-BF16 nor AMX-BF16, and "
                                                               : "");
    return false;
}

int cpu_linear_onednn(const float *x, size_t rows, size_t in_dim, const uint16_t *w, const float *bias,
                      size_t out_dim, float *y, uint16_t *x16, workers *pool) {
    (void)x, (void)rows, (void)in_dim, (void)w, (void)bias, (void)out_dim, (void)y, (void)x16, (void)pool;
    return -1;
}

int onednn_bf16_self_check(const uint16_t *w, size_t in_dim, size_t out_dim, char *why, size_t why_size) {
    (void)w, (void)in_dim, (void)out_dim;
    snprintf(why, why_size, "this build of the library has no oneDNN");
    return 0;
}

int onednn_f32_matmul(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                      float *y, char *why, size_t why_size) {
    (void)x, (void)rows, (void)in_dim, (void)w, (void)bias, (void)out_dim, (void)y;
    snprintf(why, why_size, "this build of the library has no oneDNN");
    return -1;
}

int onednn_sgemm_probe(char *what, size_t what_size, char *why, size_t why_size) {
    (void)what, (void)what_size;
    snprintf(why, why_size, "this build of the library has no oneDNN (libdnnl-dev's header was missing when it was "
             "compiled)");
    return -1;
}

int onednn_sgemm_nt(const float *x, size_t rows, size_t in_dim, const float *w, size_t n, float beta, float *y,
                    size_t ldy) {
    (void)x, (void)rows, (void)in_dim, (void)w, (void)n, (void)beta, (void)y, (void)ldy;
    return -1;
}

#else

#include <dlfcn.h>
#include <pthread.h>

#include <oneapi/dnnl/dnnl.h>

#define LIBDNNL "libdnnl.so.2"

/* The oneDNN functions used, looked up by name in LIBDNNL. */
static struct {
    __typeof__(dnnl_version) *version;
    __typeof__(dnnl_get_effective_cpu_isa) *effective_cpu_isa;
    __typeof__(dnnl_engine_create) *engine_create;
    __typeof__(dnnl_stream_create) *stream_create;
    __typeof__(dnnl_stream_wait) *stream_wait;
    __typeof__(dnnl_stream_destroy) *stream_destroy;
    __typeof__(dnnl_memory_desc_init_by_tag) *memory_desc_init_by_tag;
    __typeof__(dnnl_matmul_desc_init) *matmul_desc_init;
    __typeof__(dnnl_primitive_desc_create) *primitive_desc_create;
    __typeof__(dnnl_primitive_desc_destroy) *primitive_desc_destroy;
    __typeof__(dnnl_primitive_create) *primitive_create;
    __typeof__(dnnl_primitive_destroy) *primitive_destroy;
    __typeof__(dnnl_memory_create) *memory_create;
    __typeof__(dnnl_memory_destroy) *memory_destroy;
    __typeof__(dnnl_primitive_execute) *primitive_execute;
    __typeof__(dnnl_sgemm) *sgemm;
    void (*omp_set_num_threads)(int); /* the OpenMP runtime's, where oneDNN was built on one */
    int (*omp_get_max_threads)(void);
} api;
static dnnl_engine_t engine;
static char load_error[256]; /* empty once oneDNN loaded */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *lib = dlopen(LIBDNNL, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(load_error, sizeof load_error, "oneDNN could not be loaded (%s; Debian's package libdnnl2 "
                 "installs it)", e != NULL ? e : LIBDNNL);
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&api.version, "dnnl_version"},
        {(void **)&api.effective_cpu_isa, "dnnl_get_effective_cpu_isa"},
        {(void **)&api.engine_create, "dnnl_engine_create"},
        {(void **)&api.stream_create, "dnnl_stream_create"},
        {(void **)&api.stream_wait, "dnnl_stream_wait"},
        {(void **)&api.stream_destroy, "dnnl_stream_destroy"},
        {(void **)&api.memory_desc_init_by_tag, "dnnl_memory_desc_init_by_tag"},
        {(void **)&api.matmul_desc_init, "dnnl_matmul_desc_init"},
        {(void **)&api.primitive_desc_create, "dnnl_primitive_desc_create"},
        {(void **)&api.primitive_desc_destroy, "dnnl_primitive_desc_destroy"},
        {(void **)&api.primitive_create, "dnnl_primitive_create"},
        {(void **)&api.primitive_destroy, "dnnl_primitive_destroy"},
        {(void **)&api.memory_create, "dnnl_memory_create"},
        {(void **)&api.memory_destroy, "dnnl_memory_destroy"},
        {(void **)&api.primitive_execute, "dnnl_primitive_execute"},
        {(void **)&api.sgemm, "dnnl_sgemm"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        if ((*syms[i].slot = dlsym(lib, syms[i].name)) == NULL) {
            snprintf(load_error, sizeof load_error, "%s has no function %s: not the oneDNN 2.x C API this "
                     "library was built against", LIBDNNL, syms[i].name);
            dlclose(lib);
            return;
        }
    }
    *(void **)&api.omp_set_num_threads = dlsym(lib, "omp_set_num_threads");
    *(void **)&api.omp_get_max_threads = dlsym(lib, "omp_get_max_threads");
    (void)dlerror(); /* a runtime without it leaves an error message; nothing to report */
    dnnl_status_t s = api.engine_create(&engine, dnnl_cpu, 0);
    if (s != dnnl_success) {
        snprintf(load_error, sizeof load_error, "oneDNN's CPU engine could not be created (dnnl status %d)", (int)s);
        dlclose(lib);
        return;
    }
    /* lib stays open for the process: the engine and the primitives' JIT code live in it */
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "another";
    }
}

/* A matmul primitive for (rows, in) x (in, out) (+ bias), x and W of type `ab` (bf16; f32 in the
 * tests), or dnnl's refusal. */
static dnnl_status_t make_matmul(dnnl_data_type_t ab, size_t rows, size_t in_dim, size_t out_dim, bool with_bias,
                                 dnnl_primitive_t *out, dnnl_memory_desc_t md[4]) {
    const dnnl_dims_t src = {(dnnl_dim_t)rows, (dnnl_dim_t)in_dim}, wei = {(dnnl_dim_t)in_dim, (dnnl_dim_t)out_dim},
                      bia = {1, (dnnl_dim_t)out_dim}, dst = {(dnnl_dim_t)rows, (dnnl_dim_t)out_dim};
    dnnl_status_t s = api.memory_desc_init_by_tag(&md[0], 2, src, ab, dnnl_ab);
    if (s == dnnl_success) s = api.memory_desc_init_by_tag(&md[1], 2, wei, ab, dnnl_ba); /* W (out, in) */
    if (s == dnnl_success) s = api.memory_desc_init_by_tag(&md[2], 2, bia, dnnl_f32, dnnl_ab);
    if (s == dnnl_success) s = api.memory_desc_init_by_tag(&md[3], 2, dst, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t desc;
    if (s == dnnl_success) s = api.matmul_desc_init(&desc, &md[0], &md[1], with_bias ? &md[2] : NULL, &md[3]);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = api.primitive_desc_create(&pd, &desc, NULL, engine, NULL);
    if (s == dnnl_success) s = api.primitive_create(out, pd);
    if (pd != NULL) api.primitive_desc_destroy(pd);
    return s;
}

bool onednn_bf16_probe(bool check_cpu, char *what, size_t what_size, char *why, size_t why_size) {
    if (check_cpu && !onednn_cpu_has_bf16()) {
        snprintf(why, why_size, "this CPU has neither AVX512-BF16 nor AMX-BF16 (cpuid)");
        return false;
    }
    pthread_once(&load_once, load);
    if (load_error[0] != '\0') {
        snprintf(why, why_size, "%s", load_error);
        return false;
    }
    const dnnl_version_t *v = api.version();
    dnnl_cpu_isa_t isa = api.effective_cpu_isa();
    if (check_cpu && (isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16) {
        snprintf(why, why_size, "oneDNN %d.%d.%d's ISA on this machine is %s (0x%x): it runs no bf16 instructions "
                 "here (the OS may not enable their state)", v->major, v->minor, v->patch, isa_name(isa),
                 (unsigned)isa);
        return false;
    }
    dnnl_primitive_t prim = NULL;
    dnnl_memory_desc_t md[4];
    dnnl_status_t s = make_matmul(dnnl_bf16, 2, 32, 16, true, &prim, md);
    if (s != dnnl_success) {
        snprintf(why, why_size, "oneDNN %d.%d.%d (ISA %s) has no bf16 x bf16 -> f32 matmul here (dnnl status %d%s)",
                 v->major, v->minor, v->patch, isa_name(isa), (int)s, s == dnnl_unimplemented ? ": unimplemented" : "");
        return false;
    }
    api.primitive_destroy(prim);
    snprintf(what, what_size, "oneDNN %d.%d.%d, ISA %s", v->major, v->minor, v->patch, isa_name(isa));
    return true;
}

#define ROUND_ROWS_PER_TASK 32

typedef struct round_job {
    const float *x;
    size_t rows, in_dim;
    uint16_t *x16;
} round_job;

static void round_task(void *arg, size_t task, size_t worker) {
    (void)worker;
    const round_job *j = arg;
    size_t r0 = task * ROUND_ROWS_PER_TASK, r1 = r0 + ROUND_ROWS_PER_TASK < j->rows ? r0 + ROUND_ROWS_PER_TASK : j->rows;
    for (size_t i = r0 * j->in_dim; i < r1 * j->in_dim; i++) j->x16[i] = weights_f32_to_bf16(j->x[i]);
}

/* y (rows, out) = x (rows, in) W^T + bias, x and W of type ab, on a stream of its own. */
static int run_matmul(dnnl_data_type_t ab, const void *x, size_t rows, size_t in_dim, const void *w, const float *bias,
                      size_t out_dim, float *y) {
    dnnl_primitive_t prim = NULL;
    dnnl_memory_desc_t md[4];
    dnnl_status_t s = make_matmul(ab, rows, in_dim, out_dim, bias != NULL, &prim, md);
    if (s != dnnl_success) return (int)s;
    void *handles[4] = {(void *)x, (void *)w, (void *)bias, y};
    const int args[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    dnnl_exec_arg_t exec[4];
    dnnl_memory_t mem[4] = {NULL, NULL, NULL, NULL};
    int n = 0;
    for (int i = 0; i < 4 && s == dnnl_success; i++) {
        if (handles[i] == NULL) continue; /* no bias */
        s = api.memory_create(&mem[i], &md[i], engine, handles[i]);
        exec[n++] = (dnnl_exec_arg_t){args[i], mem[i]};
    }
    dnnl_stream_t stream = NULL;
    if (s == dnnl_success) s = api.stream_create(&stream, engine, dnnl_stream_default_flags);
    if (s == dnnl_success) {
        if (api.omp_set_num_threads != NULL) api.omp_set_num_threads((int)cpu_threads());
        s = api.primitive_execute(prim, stream, n, exec);
        if (s == dnnl_success) s = api.stream_wait(stream);
    }
    if (stream != NULL) api.stream_destroy(stream);
    for (int i = 0; i < 4; i++)
        if (mem[i] != NULL) api.memory_destroy(mem[i]);
    api.primitive_destroy(prim);
    return (int)s;
}

int cpu_linear_onednn(const float *x, size_t rows, size_t in_dim, const uint16_t *w, const float *bias,
                      size_t out_dim, float *y, uint16_t *x16, workers *pool) {
    if (rows == 0 || out_dim == 0) return 0;
    round_job job = {x, rows, in_dim, x16};
    workers_run(pool, (rows + ROUND_ROWS_PER_TASK - 1) / ROUND_ROWS_PER_TASK, round_task, &job);
    return run_matmul(dnnl_bf16, x16, rows, in_dim, w, bias, out_dim, y);
}

int onednn_f32_matmul(const float *x, size_t rows, size_t in_dim, const float *w, const float *bias, size_t out_dim,
                      float *y, char *why, size_t why_size) {
    pthread_once(&load_once, load);
    if (load_error[0] != '\0') {
        snprintf(why, why_size, "%s", load_error);
        return -1;
    }
    int s = rows == 0 || out_dim == 0 ? 0 : run_matmul(dnnl_f32, x, rows, in_dim, w, bias, out_dim, y);
    if (s != 0) snprintf(why, why_size, "oneDNN's f32 matmul failed (dnnl status %d)", s);
    return s;
}

int onednn_sgemm_probe(char *what, size_t what_size, char *why, size_t why_size) {
    pthread_once(&load_once, load);
    if (load_error[0] != '\0') {
        snprintf(why, why_size, "%s", load_error);
        return -1;
    }
    const dnnl_version_t *v = api.version();
    dnnl_cpu_isa_t isa = api.effective_cpu_isa();
    snprintf(what, what_size, "oneDNN %d.%d.%d, ISA %s", v->major, v->minor, v->patch, isa_name(isa));
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? 2
           : (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2             ? 1
                                                                       : 0;
}

int onednn_sgemm_nt(const float *x, size_t rows, size_t in_dim, const float *w, size_t n, float beta, float *y,
                    size_t ldy) {
    /* OpenMP's count is per thread: one for this call, then back to what the caller had */
    int had = api.omp_get_max_threads != NULL && api.omp_set_num_threads != NULL ? api.omp_get_max_threads() : 1;
    if (had != 1) api.omp_set_num_threads(1);
    dnnl_status_t s = api.sgemm('N', 'T', (dnnl_dim_t)rows, (dnnl_dim_t)n, (dnnl_dim_t)in_dim, 1.0f, x,
                                (dnnl_dim_t)in_dim, w, (dnnl_dim_t)in_dim, beta, y, (dnnl_dim_t)ldy);
    if (had != 1) api.omp_set_num_threads(had);
    return (int)s;
}

int onednn_bf16_self_check(const uint16_t *w, size_t in_dim, size_t out_dim, char *why, size_t why_size) {
    enum { ROWS = 8 };
    float *x = rmlp_malloc(ROWS * in_dim * sizeof *x), *got = rmlp_malloc(ROWS * out_dim * sizeof *got);
    float *want = rmlp_malloc(ROWS * out_dim * sizeof *want);
    float *wide = rmlp_malloc(cpu_linear_bf16_scratch_floats(in_dim, out_dim) * sizeof *wide);
    uint16_t *x16 = rmlp_malloc(ROWS * in_dim * sizeof *x16);
    int ok = 0;
    if (x == NULL || got == NULL || want == NULL || wide == NULL || x16 == NULL) {
        snprintf(why, why_size, "allocating the check of oneDNN's matmul (%zu x %zu) failed", in_dim, out_dim);
        ok = -1;
        goto done;
    }
    for (size_t i = 0; i < ROWS * in_dim; i++) { /* bf16 values, so both ways multiply the same x */
        uint16_t b = weights_f32_to_bf16((float)((int)(i * 2654435761u % 2001u) - 1000) / 997.0f);
        uint32_t bits = (uint32_t)b << 16;
        memcpy(&x[i], &bits, sizeof bits);
    }
    int s = cpu_linear_onednn(x, ROWS, in_dim, w, NULL, out_dim, got, x16, NULL);
    if (s != 0) {
        snprintf(why, why_size, "oneDNN's matmul of (%d, %zu) x (%zu, %zu) failed (dnnl status %d)", ROWS, in_dim,
                 in_dim, out_dim, s);
        goto done;
    }
    cpu_linear_bf16(x, ROWS, in_dim, w, NULL, out_dim, want, wide, NULL);
    float worst, peak;
    ok = onednn_close(got, want, ROWS * out_dim, 1e-4f, &worst, &peak);
    if (ok == 0)
        snprintf(why, why_size, "oneDNN's matmul disagreed with the widening path by %g of values up to %g "
                 "(allowed: 1e-4 of it)", (double)worst, (double)peak);
done:
    free(x), free(got), free(want), free(wide), free(x16);
    return ok;
}

#endif
