/*
 * model_api.c: the exported model entry points: load a checkpoint (or bind the host's device
 * tensors, described by an rmlp_model_config or by the checkpoint's config.json) on the backend of
 * the params' device (backends.h), free it, read its config and load report. The checkpoint's
 * config and audit are the same for every device (model/); the backend reads the weights.
 * Contexts are context_api.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends.h"
#include "common/alloc.h"
#include "common/export.h"
#include "common/guard.h"
#include "common/status.h"
#include "model/arch.h"
#include "model/audit.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model_internal.h"
#include "radix_mlp.h"
#include "validate.h"

RMLP_EXPORT rmlp_model_params rmlp_model_default_params(void) {
    rmlp_model_params params;
    memset(&params, 0, sizeof params);
    params.struct_size = (uint32_t)sizeof(rmlp_model_params);
    params.device = RMLP_DEVICE_CPU;
    params.device_index = 0;
    params.dtype = RMLP_DTYPE_F32;
    return params;
}

/* rmlp_model_params as 0.1.0 released it: the size callers compiled against that header pass. */
typedef struct model_params_0_1 {
    uint32_t struct_size;
    rmlp_device device;
    int32_t device_index;
    rmlp_dtype dtype;
} model_params_0_1;

/* ... and with skip_finite_check, before cpu_weight_dtype. */
typedef struct model_params_0_2 {
    model_params_0_1 base;
    bool skip_finite_check;
} model_params_0_2;

/* ... and with cpu_weight_dtype, before cpu_bf16_gemm. */
typedef struct model_params_0_3 {
    model_params_0_2 base;
    rmlp_dtype cpu_weight_dtype;
} model_params_0_3;

/* The caller's params of any version (validate.h) as this library's struct, defaults for NULL. */
static rmlp_status read_model_params(const char *fn, const rmlp_model_params *caller, rmlp_model_params *params) {
    static const size_t older[] = {sizeof(model_params_0_1), sizeof(model_params_0_2), sizeof(model_params_0_3)};
    *params = rmlp_model_default_params();
    return caller == NULL ? RMLP_OK
                          : rmlp_read_params(fn, "rmlp_model_params", caller, params, sizeof *params, older,
                                             sizeof older / sizeof older[0]);
}

/* The backend of the params' device, when it can hold such a model. */
static rmlp_status pick_backend(const char *fn, const rmlp_model_params *params, const rmlp_backend **out) {
    rmlp_status status = rmlp_backend_pick(fn, params->device, out);
    return status == RMLP_OK ? (*out)->check_model_params(fn, params) : status;
}

/* A zeroed model with a live guard on `backend`, or NULL. */
static rmlp_model *new_model(const rmlp_backend *backend, const rmlp_model_params *params) {
    rmlp_model *model = rmlp_calloc(1, sizeof *model);
    if (model != NULL) {
        rmlp_guard_init(&model->guard, RMLP_MAGIC_MODEL);
        atomic_init(&model->n_contexts, 0);
        model->backend = backend, model->device = params->device, model->dtype = params->dtype;
    }
    return model;
}

/* *second = *first's lines then *second's (either may be NULL); *first is taken (NULL after). */
static rmlp_status join_reports(const char *fn, char **first, char **second) {
    if (*first == NULL) return RMLP_OK;
    if (*second == NULL) {
        *second = *first;
        *first = NULL;
        return RMLP_OK;
    }
    size_t a = strlen(*first), b = strlen(*second);
    char *joined = rmlp_malloc(a + b + 1);
    if (joined == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the load report (%zu bytes) failed", a + b + 1);
    memcpy(joined, *first, a);
    memcpy(joined + a, *second, b + 1);
    free(*first);
    free(*second);
    *first = NULL;
    *second = joined;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_model_load(const char *path, const rmlp_model_params *params, rmlp_model **out) {
    static const char fn[] = "rmlp_model_load";
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    if (path == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "path is NULL");
    rmlp_model_params read;
    rmlp_status status = read_model_params(fn, params, &read);
    if (status != RMLP_OK) return status;
    params = &read;
    if (params->device != RMLP_DEVICE_CPU && params->device != RMLP_DEVICE_CUDA)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn,
                         "params->device=%d is neither RMLP_DEVICE_CPU nor RMLP_DEVICE_CUDA", params->device);
    const rmlp_backend *backend = NULL;
    status = pick_backend(fn, params, &backend);
    if (status != RMLP_OK) return status;
    rmlp_model *model = new_model(backend, params);
    if (model == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the model (%zu bytes) failed", sizeof *model);
    checkpoint *ckpt = NULL;
    char *config_report = NULL, *report = NULL;
    status = checkpoint_open(path, &ckpt);
    if (status == RMLP_OK) status = config_read_reported(fn, checkpoint_config_path(ckpt), &model->config, &model->ext,
                                                        &config_report);
    if (status == RMLP_OK) status = audit_checkpoint(ckpt, &model->config, !params->skip_finite_check, &report);
    if (status == RMLP_OK) status = join_reports(fn, &config_report, &report);
    if (status == RMLP_OK)
        status = backend->model_load(fn, ckpt, &model->config, &model->ext, params, &model->backend_model);
    checkpoint_close(ckpt);
    if (status != RMLP_OK) {
        free(config_report);
        free(report);
        model_ext_free(&model->ext);
        free(model);
        return status;
    }
    model->load_report = report;
    *out = model;
    return RMLP_OK;
}

/* The config.json at `path`, or in the folder `path`, into model->config and model->ext (every key
 * checked as rmlp_model_load checks it, its errors named by `fn`) and its findings into
 * model->load_report. */
static rmlp_status read_bound_config(const char *fn, const char *path, rmlp_model *model) {
    struct stat st;
    char *file = NULL;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t len = strlen(path) + sizeof "/config.json";
        if ((file = rmlp_malloc(len)) == NULL)
            return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating a path (%zu bytes) failed", len);
        snprintf(file, len, "%s/config.json", path);
    }
    rmlp_status status =
        config_read_reported(fn, file != NULL ? file : path, &model->config, &model->ext, &model->load_report);
    free(file);
    return status;
}

/* Both binds: *config as it is (plain RoPE, sliding_window on every layer), or (from_json) the
 * config of config.json at config_path, read before the device is looked for so that its errors
 * show on any machine. */
static rmlp_status bind_model(const char *fn, bool from_json, const rmlp_model_config *config, const char *config_path,
                              const rmlp_weight_binding *tensors, size_t n_tensors, const rmlp_model_params *params,
                              rmlp_model **out) {
    rmlp_clear_error();
    if (out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    if ((from_json ? (const void *)config_path : (const void *)config) == NULL || params == NULL)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "%s or params is NULL", from_json ? "config_path" : "config");
    rmlp_model_params read;
    rmlp_status status = read_model_params(fn, params, &read);
    if (status != RMLP_OK) return status;
    params = &read;
    if (params->device != RMLP_DEVICE_CUDA)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "params->device=%d: binding device pointers needs "
                         "RMLP_DEVICE_CUDA", params->device);
    const arch_info *arch = config != NULL ? arch_by_id(config->architecture) : NULL;
    if (arch != NULL && arch->windows == ARCH_WINDOWS_LAYER_TYPES && config->sliding_window != 0)
        return rmlp_fail(RMLP_ERR_MODEL, fn, "config->sliding_window=%u for %s, whose layers slide by layer type: "
                         "rmlp_model_config does not say which layers slide (bind with "
                         "rmlp_model_bind_cuda_config, which reads config.json's layer_types)",
                         config->sliding_window, arch->model_type);
    rmlp_model *model = new_model(NULL, params);
    if (model == NULL)
        return rmlp_fail(RMLP_ERR_OUT_OF_MEMORY, fn, "allocating the model (%zu bytes) failed", sizeof *model);
    if (from_json) {
        status = read_bound_config(fn, config_path, model);
    } else {
        model->config = *config;
        status = model_ext_init(fn, &model->config, &model->ext);
    }
    if (status == RMLP_OK) status = pick_backend(fn, params, &model->backend);
    if (status == RMLP_OK)
        status = model->backend->cuda->model_bind(fn, &model->config, &model->ext, tensors, n_tensors, params,
                                                  &model->backend_model);
    if (status != RMLP_OK) {
        free(model->load_report);
        model_ext_free(&model->ext);
        free(model);
        return status;
    }
    *out = model;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_model_bind_cuda(const rmlp_model_config *config, const rmlp_weight_binding *tensors,
                                             size_t n_tensors, const rmlp_model_params *params, rmlp_model **out) {
    return bind_model("rmlp_model_bind_cuda", false, config, NULL, tensors, n_tensors, params, out);
}

RMLP_EXPORT rmlp_status rmlp_model_bind_cuda_config(const char *config_path, const rmlp_weight_binding *tensors,
                                                    size_t n_tensors, const rmlp_model_params *params,
                                                    rmlp_model **out) {
    return bind_model("rmlp_model_bind_cuda_config", true, NULL, config_path, tensors, n_tensors, params, out);
}

RMLP_EXPORT void rmlp_model_free(rmlp_model *model) {
    static const char fn[] = "rmlp_model_free";
    if (model == NULL) return;
    uint32_t contexts = rmlp_guard_is_live(model, RMLP_MAGIC_MODEL) ? atomic_load(&model->n_contexts) : 0;
    if (contexts != 0) {
        rmlp_clear_error();
        rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "the model still has %u context(s): free them first; not freed",
                  contexts);
        return;
    }
    if (!rmlp_guard_retire(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model")) return;
    model->backend->model_free(model->backend_model, &model->config);
    model_ext_free(&model->ext);
    free(model->load_report);
    free(model);
}

RMLP_EXPORT rmlp_status rmlp_model_get_config(const rmlp_model *model, rmlp_model_config *out) {
    static const char fn[] = "rmlp_model_get_config";
    rmlp_clear_error();
    if (model == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model or out is NULL");
    rmlp_status status = rmlp_guard_check(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model");
    if (status != RMLP_OK) return status;
    *out = model->config;
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_model_layer_attention(const rmlp_model *model, uint32_t layer, rmlp_layer_attention *out) {
    static const char fn[] = "rmlp_model_layer_attention";
    rmlp_clear_error();
    if (model == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model or out is NULL");
    rmlp_status status = rmlp_guard_check(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model");
    if (status != RMLP_OK) return status;
    if (layer >= model->ext.n_layers)
        return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "layer=%u but the model has %u layers", layer, model->ext.n_layers);
    const layer_attention *la = &model->ext.layers[layer];
    *out = (rmlp_layer_attention){.scale = la->scale, .sliding_window = la->window, .softcap = la->softcap};
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_model_load_report(const rmlp_model *model, const char **out) {
    static const char fn[] = "rmlp_model_load_report";
    rmlp_clear_error();
    if (model == NULL || out == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model or out is NULL");
    rmlp_status status = rmlp_guard_check(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model");
    if (status != RMLP_OK) return status;
    *out = model->load_report != NULL ? model->load_report : "";
    return RMLP_OK;
}

RMLP_EXPORT rmlp_status rmlp_model_cpu_bf16_gemm(const rmlp_model *model, rmlp_cpu_bf16_gemm *kind,
                                                 uint64_t *fallbacks, const char **detail) {
    static const char fn[] = "rmlp_model_cpu_bf16_gemm";
    rmlp_clear_error();
    if (model == NULL || kind == NULL) return rmlp_fail(RMLP_ERR_INVALID_ARGUMENT, fn, "model or kind is NULL");
    rmlp_status status = rmlp_guard_check(fn, model, RMLP_MAGIC_MODEL, "model", "rmlp_model");
    if (status != RMLP_OK) return status;
    rmlp_cpu_bf16_gemm k = RMLP_CPU_BF16_GEMM_NONE;
    uint64_t n = 0;
    const char *d = "the model holds no bf16 CPU matrices";
    if (model->backend->cpu != NULL) model->backend->cpu->bf16_gemm(model->backend_model, &k, &n, &d);
    *kind = k;
    if (fallbacks != NULL) *fallbacks = n;
    if (detail != NULL) *detail = d;
    return RMLP_OK;
}
