/*
 * test_gpu_errors.c: the CUDA model entry points where they can run without a GPU, and the
 * additions to the CPU path that came with them. RMLP_DEVICE_CUDA at load and bind gives
 * RMLP_ERR_NO_DEVICE with a message (a CUDA build on a machine without a device) or
 * RMLP_ERR_UNSUPPORTED (a build without CUDA), never a crash and never a model; where a device
 * is present, the load succeeds instead (said on a line of its own). On the CPU,
 * rmlp_context_set_stream and rmlp_context_set_plan are accepted no-ops, rmlp_context_pool
 * equals rmlp_pool, and a host attention callback gets cu_seqlens_device and max_seqlen.
 * rmlp_model_bind_cuda_config reads config.json before it looks for the device, so its errors
 * are checked here on any machine, named by that call (and by rmlp_model_load through the load).
 * Usage: test_gpu_errors FIXTURES_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <unistd.h>

#include "test_util.h"

static void expect(rmlp_status got, rmlp_status want, const char *substring, const char *what) {
    const char *msg = rmlp_last_error();
    CHECK(got == want && strstr(msg, substring) != NULL, "%s: status %d (want %d), message \"%s\" (want \"%s\")", what,
          got, want, msg, substring);
}

/* What this build on this machine answers for RMLP_DEVICE_CUDA: OK with a device, else the
 * status and a piece of its message. */
static rmlp_status cuda_expectation(const char **substring) {
    if ((rmlp_build_flags() & RMLP_BUILD_CUDA) == 0) {
        *substring = "built without CUDA";
        return RMLP_ERR_UNSUPPORTED;
    }
    int32_t count = 0;
    if (rmlp_cuda_device_count(&count) == RMLP_OK && count > 0) {
        *substring = "";
        return RMLP_OK;
    }
    *substring = "RMLP_DEVICE_CUDA but";
    return RMLP_ERR_NO_DEVICE;
}

static void test_cuda_load(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen3_tiny", dir);
    const char *substring = NULL;
    rmlp_status want = cuda_expectation(&substring);
    static const rmlp_dtype dtypes[] = {RMLP_DTYPE_F32, RMLP_DTYPE_F16, RMLP_DTYPE_BF16};
    for (size_t i = 0; i < 3; i++) {
        rmlp_model_params params = rmlp_model_default_params();
        params.device = RMLP_DEVICE_CUDA;
        params.dtype = dtypes[i];
        rmlp_model *model = (rmlp_model *)1;
        rmlp_status got = rmlp_model_load(path, &params, &model);
        if (want == RMLP_OK) {
            CHECK(got == RMLP_OK && model != NULL, "load on the CUDA device present: %s", rmlp_last_error());
            if (i == 0) printf("a CUDA device is present: the CUDA load succeeded (test_gpu_model covers it)\n");
            rmlp_model_free(got == RMLP_OK ? model : NULL);
            continue;
        }
        expect(got, want, substring, "load with RMLP_DEVICE_CUDA");
        CHECK(model == NULL, "out is NULL after the refused load");
        if (i == 0) printf("RMLP_DEVICE_CUDA here: status %d (%s): %s\n", got, rmlp_status_string(got), rmlp_last_error());
    }

    /* Binding: refused the same way before any tensor is looked at (or, with a device, for the
     * tensors that are missing). */
    rmlp_model *cpu = NULL;
    rmlp_model_config cfg;
    if (!CHECK(rmlp_model_load(path, NULL, &cpu) == RMLP_OK && rmlp_model_get_config(cpu, &cfg) == RMLP_OK,
               "CPU load: %s", rmlp_last_error()))
        return;
    rmlp_model_free(cpu);
    rmlp_model_params params = rmlp_model_default_params();
    params.device = RMLP_DEVICE_CUDA;
    rmlp_model *model = (rmlp_model *)1;
    rmlp_status got = rmlp_model_bind_cuda(&cfg, NULL, 0, &params, &model);
    if (want == RMLP_OK)
        expect(got, RMLP_ERR_MODEL, "missing tensor", "bind of no tensors on a device");
    else
        expect(got, want, substring, "bind with RMLP_DEVICE_CUDA");
    CHECK(model == NULL, "out is NULL after the refused bind");
    params.device = RMLP_DEVICE_CPU;
    expect(rmlp_model_bind_cuda(&cfg, NULL, 0, &params, &model), RMLP_ERR_INVALID_ARGUMENT, "needs RMLP_DEVICE_CUDA",
           "bind with RMLP_DEVICE_CPU");
    expect(rmlp_model_bind_cuda(&cfg, NULL, 0, NULL, &model), RMLP_ERR_INVALID_ARGUMENT, "params is NULL",
           "bind without params");
    params.device = 7;
    expect(rmlp_model_load(path, &params, &model), RMLP_ERR_INVALID_ARGUMENT, "params->device=7", "device 7");
}

typedef struct seen {
    const uint32_t *cu_seqlens, *cu_seqlens_device;
    uint32_t max_seqlen;
} seen;

static rmlp_status recording_attention(void *user_data, const rmlp_attention_args *args) {
    seen *s = ((void **)user_data)[1];
    s->cu_seqlens = args->cu_seqlens;
    s->cu_seqlens_device = args->cu_seqlens_device;
    s->max_seqlen = args->max_seqlen;
    return rmlp_attention(((void **)user_data)[0], args);
}

static void test_cpu_additions(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/qwen3_tiny", dir);
    static const uint32_t ids[7] = {5, 6, 7, 5, 6, 8, 9}, pos[7] = {0, 1, 2, 0, 1, 2, 3}, cu[3] = {0, 3, 7};
    rmlp_model *model = NULL;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_model_config cfg;
    rmlp_plan plan;
    rmlp_plan_params params = tu_params(1.0, 0);
    if (!CHECK(rmlp_model_load(path, NULL, &model) == RMLP_OK && rmlp_model_get_config(model, &cfg) == RMLP_OK &&
                   rmlp_context_create(model, 7, &ctx) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK &&
                   rmlp_plan_build(planner, ids, pos, 7, cu, 2, &params, &plan) == RMLP_OK,
               "setup: %s", rmlp_last_error()))
        goto done;
    CHECK(rmlp_context_set_stream(ctx, (void *)&cfg) == RMLP_OK, "set_stream on the CPU is a no-op: %s",
          rmlp_last_error());
    CHECK(rmlp_context_set_plan(ctx, &plan) == RMLP_OK, "set_plan on the CPU: %s", rmlp_last_error());
    expect(rmlp_context_set_plan(ctx, NULL), RMLP_ERR_INVALID_ARGUMENT, "plan is NULL", "set_plan NULL plan");
    expect(rmlp_context_set_plan(NULL, &plan), RMLP_ERR_INVALID_ARGUMENT, "context is NULL", "set_plan NULL context");
    expect(rmlp_context_set_stream(NULL, NULL), RMLP_ERR_INVALID_ARGUMENT, "context is NULL",
           "set_stream NULL context");

    size_t h = cfg.hidden_size;
    float *out = tu_xmalloc(7 * h * sizeof(float)), *a = tu_xmalloc(2 * h * sizeof(float));
    float *b = tu_xmalloc(2 * h * sizeof(float));
    seen s = {0};
    void *user[2] = {ctx, &s};
    CHECK(rmlp_forward(ctx, &plan, recording_attention, user, out) == RMLP_OK, "forward: %s", rmlp_last_error());
    CHECK(s.cu_seqlens == plan.cu_seqlens && s.cu_seqlens_device == plan.cu_seqlens && s.max_seqlen == 4,
          "callback args: cu_seqlens %p, cu_seqlens_device %p (want both %p), max_seqlen %u (want 4)",
          (const void *)s.cu_seqlens, (const void *)s.cu_seqlens_device, (const void *)plan.cu_seqlens, s.max_seqlen);
    static const rmlp_pooling poolings[] = {RMLP_POOLING_LAST, RMLP_POOLING_MEAN, RMLP_POOLING_FIRST};
    for (size_t p = 0; p < 3; p++)
        for (int normalize = 0; normalize < 2; normalize++) {
            CHECK(rmlp_context_pool(ctx, out, 7, cu, 2, poolings[p], normalize, a) == RMLP_OK &&
                      rmlp_pool(out, 7, (uint32_t)h, cu, 2, poolings[p], normalize, b) == RMLP_OK,
                  "pool %d: %s", poolings[p], rmlp_last_error());
            CHECK(memcmp(a, b, 2 * h * sizeof(float)) == 0, "rmlp_context_pool %d/%d differs from rmlp_pool",
                  poolings[p], normalize);
        }
    expect(rmlp_context_pool(ctx, out, 7, cu, 2, 9, false, a), RMLP_ERR_INVALID_ARGUMENT, "pooling=9", "pooling 9");
    expect(rmlp_context_pool(ctx, NULL, 7, cu, 2, RMLP_POOLING_LAST, false, a), RMLP_ERR_INVALID_ARGUMENT,
           "hidden or out is NULL", "pool NULL hidden");
    static const uint32_t empty_cu[3] = {0, 0, 7};
    expect(rmlp_context_pool(ctx, out, 7, empty_cu, 2, RMLP_POOLING_LAST, false, a), RMLP_ERR_INVALID_SEQLENS,
           "sequence 0 is empty", "pool with an empty sequence");
    free(out), free(a), free(b);
done:
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

/* rmlp_model_bind_cuda_config: config.json (the file or its folder) is read first, as
 * rmlp_model_load reads it, so its errors show on any machine under this call's name; then the
 * device is looked for. The struct bind refuses Gemma 2's window and names the one that takes it. */
static void test_cuda_bind_config(const char *dir) {
    const char *substring = NULL;
    rmlp_status want = cuda_expectation(&substring);
    rmlp_model_params params = rmlp_model_default_params();
    params.device = RMLP_DEVICE_CUDA;
    rmlp_model *model = (rmlp_model *)1;
    expect(rmlp_model_bind_cuda_config(NULL, NULL, 0, &params, &model), RMLP_ERR_INVALID_ARGUMENT,
           "rmlp_model_bind_cuda_config: config_path or params is NULL", "bind_config without a path");
    CHECK(model == NULL, "out is NULL after a refused bind_config");
    char path[1024];
    snprintf(path, sizeof path, "%s/no_such_model", dir);
    expect(rmlp_model_bind_cuda_config(path, NULL, 0, &params, &model), RMLP_ERR_IO,
           "rmlp_model_bind_cuda_config: ", "bind_config of a missing config.json");
    CHECK(strstr(rmlp_last_error(), "no_such_model") != NULL, "the message names the path: %s", rmlp_last_error());

    /* a key refused by name: llama3_rope's config with a RoPE that depends on the length */
    char tmp[] = "/tmp/rmlp_bind_config_XXXXXX", file[1100], fixture[1100];
    snprintf(fixture, sizeof fixture, "%s/llama3_rope/config.json", dir);
    size_t len = 0;
    unsigned char *bytes = tu_read_file(fixture, &len);
    char *text = bytes != NULL ? tu_xmalloc(len + 1) : NULL; /* NUL-terminated for strstr */
    if (text != NULL) memcpy(text, bytes, len), text[len] = '\0';
    free(bytes);
    char *type = text != NULL ? strstr(text, "\"llama3\"") : NULL;
    if (CHECK(type != NULL && mkdtemp(tmp) != NULL, "%s: no \"llama3\" rope type, or no temporary folder", fixture)) {
        snprintf(file, sizeof file, "%s/config.json", tmp);
        FILE *f = fopen(file, "wb");
        CHECK(f != NULL, "%s: cannot write", file);
        if (f != NULL) {
            fprintf(f, "%.*s\"dynamic\"%s", (int)(type - text), text, type + strlen("\"llama3\""));
            fclose(f);
        }
        expect(rmlp_model_bind_cuda_config(tmp, NULL, 0, &params, &model), RMLP_ERR_MODEL,
               "rope_scaling.type 'dynamic' is not supported", "bind_config of a dynamic rope_scaling");
        static const char bind[] = "rmlp_model_bind_cuda_config: ", load[] = "rmlp_model_load: ";
        char bound[1024];
        snprintf(bound, sizeof bound, "%s", rmlp_last_error());
        CHECK(strncmp(bound, bind, sizeof bind - 1) == 0, "named by the call: %s", bound);
        /* the same folder, with the fixture's tensors, through rmlp_model_load: the same message
         * under that call's name */
        char tensors[1100], copy[1100];
        snprintf(tensors, sizeof tensors, "%s/llama3_rope/model.safetensors", dir);
        snprintf(copy, sizeof copy, "%s/model.safetensors", tmp);
        unsigned char *weights = tu_read_file(tensors, &len);
        FILE *w = weights != NULL ? fopen(copy, "wb") : NULL;
        if (CHECK(w != NULL && fwrite(weights, 1, len, w) == len, "%s: cannot copy to %s", tensors, copy)) {
            fclose(w), w = NULL;
            rmlp_model *cpu = (rmlp_model *)1;
            expect(rmlp_model_load(tmp, NULL, &cpu), RMLP_ERR_MODEL, "rope_scaling.type 'dynamic' is not supported",
                   "load of a dynamic rope_scaling");
            const char *loaded = rmlp_last_error();
            CHECK(strncmp(loaded, load, sizeof load - 1) == 0 && strncmp(bound, bind, sizeof bind - 1) == 0 &&
                      strcmp(loaded + sizeof load - 1, bound + sizeof bind - 1) == 0,
                  "the load's message \"%s\" is the bind's \"%s\" under its own name", loaded, bound);
            CHECK(cpu == NULL, "out is NULL after the refused load");
        }
        if (w != NULL) fclose(w);
        free(weights);
        remove(copy);
        remove(file);
        rmdir(tmp);
    }
    free(text);

    /* configs the struct cannot carry, by folder and by file: past the config, the device */
    static const char *const names[] = {"gemma2_window", "gemma3_text", "llama3_rope", "qwen2_yarn"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (int as_file = 0; as_file < 2; as_file++) {
            snprintf(path, sizeof path, "%s/%s%s", dir, names[i], as_file ? "/config.json" : "");
            rmlp_status got = rmlp_model_bind_cuda_config(path, NULL, 0, &params, &model);
            if (want == RMLP_OK)
                expect(got, RMLP_ERR_MODEL, "missing tensor", path);
            else
                expect(got, want, substring, path);
            CHECK(model == NULL, "%s: out is NULL after the refused bind", path);
        }
    params.device = RMLP_DEVICE_CPU;
    expect(rmlp_model_bind_cuda_config(path, NULL, 0, &params, &model), RMLP_ERR_INVALID_ARGUMENT,
           "needs RMLP_DEVICE_CUDA", "bind_config with RMLP_DEVICE_CPU");

    rmlp_model *cpu = NULL;
    rmlp_model_config cfg;
    snprintf(path, sizeof path, "%s/gemma2_window", dir);
    if (!CHECK(rmlp_model_load(path, NULL, &cpu) == RMLP_OK && rmlp_model_get_config(cpu, &cfg) == RMLP_OK,
               "CPU load of %s: %s", path, rmlp_last_error()))
        return;
    rmlp_model_free(cpu);
    CHECK(cfg.sliding_window != 0, "%s has a window", path);
    params.device = RMLP_DEVICE_CUDA;
    expect(rmlp_model_bind_cuda(&cfg, NULL, 0, &params, &model), RMLP_ERR_MODEL, "rmlp_model_bind_cuda_config",
           "struct bind of Gemma 2 with a window");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_gpu_errors FIXTURES_DIR\n");
        return 2;
    }
    test_cuda_load(argv[1]);
    test_cuda_bind_config(argv[1]);
    test_cpu_additions(argv[1]);
    return tu_summary();
}
