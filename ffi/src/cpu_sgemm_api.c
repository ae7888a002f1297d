/*
 * cpu_sgemm_api.c: rmlp_cpu_sgemm, which library the CPU path's fp32 GEMMs run, through the CPU
 * backend's table (cpu/sgemm.c makes the choice, once per process).
 */
#include "backends.h"
#include "common/export.h"
#include "common/status.h"
#include "radix_mlp.h"

RMLP_EXPORT rmlp_status rmlp_cpu_sgemm(rmlp_cpu_sgemm_kind *kind, const char **detail) {
    static const char fn[] = "rmlp_cpu_sgemm";
    rmlp_clear_error();
    if (kind == NULL || detail == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s is NULL", kind == NULL ? "kind" : "detail");
    return rmlp_backend_for(RMLP_DEVICE_CPU)->cpu->sgemm(fn, kind, detail);
}
