/*
 * test_gpu_options.c: the run-time choices of CUDA contexts, checked without a device:
 *   - gpu_options_read (gpu/options.h): each RADIX_MLP_GPU_* variable's defaults (unset or empty),
 *     its values, and any other value refused naming the variable and its values; the context
 *     parameter gpu_attention winning over RADIX_MLP_GPU_ATTENTION unless it is auto, and an
 *     out-of-range one refused by name; the table tools check settings against;
 *   - rmlp_context_params::gpu_attention on a CPU context (a tiny model): auto taken, and the
 *     environment not read; flashinfer, reference and out-of-range values refused naming the
 *     field; the struct of 16 bytes (before gpu_attention) taken with the default, other sizes not;
 *   - rmlp_context_gpu_stats: a CPU context's zeros, the output struct's versioning (a newer
 *     header's larger struct zero-filled past this library's, a smaller size or NULL refused).
 * The CUDA side of the same choices (kernels, fallbacks, counters) is test_gpu_attention's.
 */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdlib.h>

#include "gpu/options.h"
#include "bench/tiny_model.h"
#include "st_writer.h"
#include "test_util.h"

#define FN "test_gpu_options"

static void unset_all(void) {
    for (int i = 0; i < GPU_OPT_COUNT; i++) unsetenv(GPU_OPTION_VARS[i].name);
}

static void test_defaults(void) {
    unset_all();
    gpu_options o;
    CHECK(gpu_options_read(FN, GPU_ATTENTION_AUTO, &o) == RMLP_OK, "defaults: %s", rmlp_last_error());
    CHECK(o.attention == GPU_ATTENTION_AUTO && !o.attention_from_env && o.full_kv_paged && o.flashinfer_sm90 &&
              o.rope_table && o.decode_flashinfer,
          "defaults: attention %d (from env %d), switches %d %d %d %d", o.attention, o.attention_from_env,
          o.full_kv_paged, o.flashinfer_sm90, o.rope_table, o.decode_flashinfer);
    for (int i = 0; i < GPU_OPT_COUNT; i++) setenv(GPU_OPTION_VARS[i].name, "", 1);
    CHECK(gpu_options_read(FN, GPU_ATTENTION_AUTO, &o) == RMLP_OK && o.attention == GPU_ATTENTION_AUTO &&
              o.full_kv_paged && o.flashinfer_sm90 && o.rope_table && o.decode_flashinfer,
          "empty variables: the defaults");
    unset_all();
}

/* Each variable set to each of its values, the others unset: only its field changes. */
static void test_values(void) {
    static const struct {
        const char *name, *value;
        gpu_attention_kernel attention;
        int switches; /* full_kv_paged, flashinfer_sm90, rope_table, decode_flashinfer: bits 3..0 */
    } cases[] = {
        {"RADIX_MLP_GPU_ATTENTION", "auto", GPU_ATTENTION_AUTO, 15},
        {"RADIX_MLP_GPU_ATTENTION", "flashinfer", GPU_ATTENTION_FLASHINFER, 15},
        {"RADIX_MLP_GPU_ATTENTION", "reference", GPU_ATTENTION_REFERENCE, 15},
        {"RADIX_MLP_GPU_FULL_KV", "paged", GPU_ATTENTION_AUTO, 15},
        {"RADIX_MLP_GPU_FULL_KV", "scatter", GPU_ATTENTION_AUTO, 7},
        {"RADIX_MLP_GPU_FLASHINFER_SM90", "on", GPU_ATTENTION_AUTO, 15},
        {"RADIX_MLP_GPU_FLASHINFER_SM90", "off", GPU_ATTENTION_AUTO, 11},
        {"RADIX_MLP_GPU_ROPE", "table", GPU_ATTENTION_AUTO, 15},
        {"RADIX_MLP_GPU_ROPE", "sincos", GPU_ATTENTION_AUTO, 13},
        {"RADIX_MLP_GPU_DECODE", "flashinfer", GPU_ATTENTION_AUTO, 15},
        {"RADIX_MLP_GPU_DECODE", "own", GPU_ATTENTION_AUTO, 14},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        unset_all();
        setenv(cases[k].name, cases[k].value, 1);
        gpu_options o;
        rmlp_status status = gpu_options_read(FN, GPU_ATTENTION_AUTO, &o);
        int got = o.full_kv_paged << 3 | o.flashinfer_sm90 << 2 | o.rope_table << 1 | o.decode_flashinfer;
        CHECK(status == RMLP_OK && o.attention == cases[k].attention && got == cases[k].switches,
              "%s=%s: status %d, attention %d, switches %d (want %d, %d)", cases[k].name, cases[k].value, status,
              o.attention, got, cases[k].attention, cases[k].switches);
        bool from_env = strcmp(cases[k].name, "RADIX_MLP_GPU_ATTENTION") == 0 && strcmp(cases[k].value, "auto") != 0;
        CHECK(o.attention_from_env == from_env, "%s=%s: attention_from_env %d", cases[k].name, cases[k].value,
              o.attention_from_env);
        const gpu_option_var *var = gpu_option_find(cases[k].name);
        CHECK(var != NULL && gpu_option_value(var, cases[k].value) >= 0, "%s=%s: not in the table", cases[k].name,
              cases[k].value);
    }
    unset_all();
    CHECK(gpu_option_find("RADIX_MLP_GPU_ATTENTIONS") == NULL && gpu_option_find("RADIX_MLP_THRESHOLD") == NULL,
          "the table holds the GPU variables only");
    CHECK(gpu_option_value(gpu_option_find("RADIX_MLP_GPU_ROPE"), "Table") < 0, "values are case-sensitive");
    CHECK(strcmp(gpu_attention_kernel_name(GPU_ATTENTION_REFERENCE), "reference") == 0 &&
              strcmp(gpu_attention_kernel_name((gpu_attention_kernel)9), "unknown") == 0,
          "gpu_attention_kernel_name");
}

/* Values outside a variable's list, and out-of-range parameters, refused by name. */
static void test_refused(void) {
    static const struct {
        const char *name, *value, *want;
    } cases[] = {
        {"RADIX_MLP_GPU_ATTENTION", "FlashInfer", "RADIX_MLP_GPU_ATTENTION='FlashInfer' is none of 'auto', "
                                                  "'flashinfer', 'reference'"},
        {"RADIX_MLP_GPU_ATTENTION", "1", "RADIX_MLP_GPU_ATTENTION='1' is none of"},
        {"RADIX_MLP_GPU_FULL_KV", "yes", "RADIX_MLP_GPU_FULL_KV='yes' is neither 'paged' nor 'scatter'"},
        {"RADIX_MLP_GPU_FLASHINFER_SM90", "1", "RADIX_MLP_GPU_FLASHINFER_SM90='1' is neither 'on' nor 'off'"},
        {"RADIX_MLP_GPU_ROPE", " table", "RADIX_MLP_GPU_ROPE=' table' is neither 'table' nor 'sincos'"},
        {"RADIX_MLP_GPU_DECODE", "ownn", "RADIX_MLP_GPU_DECODE='ownn' is neither 'flashinfer' nor 'own'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        unset_all();
        setenv(cases[k].name, cases[k].value, 1);
        gpu_options o;
        rmlp_status status = gpu_options_read(FN, GPU_ATTENTION_AUTO, &o);
        const char *msg = rmlp_last_error();
        CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(msg, cases[k].want) != NULL,
              "%s='%s': status %d, message \"%s\"", cases[k].name, cases[k].value, status, msg);
    }
    /* The parameter wins over the variable unless it is auto: the variable is then not read. */
    unset_all();
    setenv("RADIX_MLP_GPU_ATTENTION", "flashinfer", 1);
    gpu_options o;
    CHECK(gpu_options_read(FN, GPU_ATTENTION_REFERENCE, &o) == RMLP_OK && o.attention == GPU_ATTENTION_REFERENCE &&
              !o.attention_from_env,
          "the parameter reference over the variable flashinfer: attention %d", o.attention);
    setenv("RADIX_MLP_GPU_ATTENTION", "bogus", 1);
    CHECK(gpu_options_read(FN, GPU_ATTENTION_FLASHINFER, &o) == RMLP_OK && o.attention == GPU_ATTENTION_FLASHINFER,
          "a parameter other than auto: the variable not read (%s)", rmlp_last_error());
    rmlp_status status = gpu_options_read(FN, (gpu_attention_kernel)3, &o);
    CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(rmlp_last_error(), "params->gpu_attention=3 is not") != NULL,
          "gpu_attention=3: status %d, \"%s\"", status, rmlp_last_error());
    unset_all();
}

/* Context creation with gpu_attention on a CPU model, and its counters. */
static void test_cpu_context(const char *dir) {
    rmlp_model *model = NULL;
    if (!CHECK(rmlp_model_load(dir, NULL, &model) == RMLP_OK, "load: %s", rmlp_last_error())) return;
    static const struct {
        const char *name;
        uint32_t struct_size;
        rmlp_gpu_attention value;
        rmlp_status want;
        const char *want_msg;
    } cases[] = {
        {"auto", sizeof(rmlp_context_params), RMLP_GPU_ATTENTION_AUTO, RMLP_OK, ""},
        {"flashinfer", sizeof(rmlp_context_params), RMLP_GPU_ATTENTION_FLASHINFER, RMLP_ERR_INVALID_ARGUMENT,
         "params->gpu_attention=RMLP_GPU_ATTENTION_FLASHINFER applies to CUDA contexts only"},
        {"reference", sizeof(rmlp_context_params), RMLP_GPU_ATTENTION_REFERENCE, RMLP_ERR_INVALID_ARGUMENT,
         "params->gpu_attention=RMLP_GPU_ATTENTION_REFERENCE applies to CUDA contexts only"},
        {"3", sizeof(rmlp_context_params), 3, RMLP_ERR_INVALID_ARGUMENT, "params->gpu_attention=3 is not"},
        {"-1", sizeof(rmlp_context_params), -1, RMLP_ERR_INVALID_ARGUMENT, "params->gpu_attention=-1 is not"},
        /* the struct before gpu_attention: the field unread (reference behind it), the default */
        {"16-byte struct", offsetof(rmlp_context_params, gpu_attention), RMLP_GPU_ATTENTION_REFERENCE, RMLP_OK, ""},
        {"a size between releases", offsetof(rmlp_context_params, gpu_attention) + 4, RMLP_GPU_ATTENTION_AUTO,
         RMLP_ERR_INVALID_ARGUMENT, "is not the size of a rmlp_context_params"},
    };
    setenv("RADIX_MLP_GPU_ATTENTION", "bogus", 1); /* a CPU context reads no RADIX_MLP_GPU_* variable */
    setenv("RADIX_MLP_GPU_FULL_KV", "bogus", 1);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rmlp_context_params p = rmlp_context_default_params();
        p.struct_size = cases[k].struct_size;
        p.gpu_attention = cases[k].value;
        rmlp_context *ctx = NULL;
        rmlp_status status = rmlp_context_create_with_params(model, 16, &p, &ctx);
        const char *msg = rmlp_last_error();
        CHECK(status == cases[k].want && strstr(msg, cases[k].want_msg) != NULL && (status == RMLP_OK) == (ctx != NULL),
              "gpu_attention %s: status %d, want %d; message \"%s\"", cases[k].name, status, cases[k].want, msg);
        rmlp_context_free(ctx);
    }
    unset_all();
    CHECK(rmlp_context_default_params().gpu_attention == RMLP_GPU_ATTENTION_AUTO, "the default is auto");

    rmlp_context *ctx = NULL;
    if (CHECK(rmlp_context_create(model, 16, &ctx) == RMLP_OK, "context: %s", rmlp_last_error())) {
        struct {
            rmlp_gpu_stats s;
            unsigned char newer[16];
        } b;
        memset(&b, 0xAB, sizeof b);
        b.s.struct_size = sizeof b;
        rmlp_status status = rmlp_context_gpu_stats(ctx, &b.s);
        size_t nonzero = 0;
        for (size_t i = sizeof(uint32_t); i < sizeof b; i++) nonzero += ((unsigned char *)&b)[i] != 0;
        CHECK(status == RMLP_OK && b.s.struct_size == sizeof(rmlp_gpu_stats) && !b.s.cuda && nonzero == 0,
              "CPU context, a newer header's struct: status %d, struct_size %u, %zu nonzero bytes", status,
              b.s.struct_size, nonzero);
        b.s.struct_size = sizeof(rmlp_gpu_stats) - 8;
        status = rmlp_context_gpu_stats(ctx, &b.s);
        CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(rmlp_last_error(), "out->struct_size=") != NULL,
              "a smaller struct_size: status %d, \"%s\"", status, rmlp_last_error());
        status = rmlp_context_gpu_stats(ctx, NULL);
        CHECK(status == RMLP_ERR_INVALID_ARGUMENT && strstr(rmlp_last_error(), "out is NULL") != NULL,
              "out NULL: status %d", status);
    }
    rmlp_context_free(ctx);
    rmlp_model_free(model);
}

int main(void) {
    test_defaults();
    test_values();
    test_refused();
    char *root = stw_mkdtemp();
    rmlp_model_config tiny = {.architecture = RMLP_ARCH_QWEN3, .vocab_size = 32, .hidden_size = 16,
                              .intermediate_size = 24, .num_hidden_layers = 1, .num_attention_heads = 2,
                              .num_key_value_heads = 1, .head_dim = 8, .max_position_embeddings = 64,
                              .rms_norm_eps = 1e-6, .rope_theta = 1e6, .qk_norm = true};
    if (CHECK(tiny_model_write(root, &tiny, 3) == 0, "writing the tiny model under %s", root)) {
        tu_scrub_dir = root;
        test_cpu_context(root);
    }
    stw_rmtree(root);
    free(root);
    return tu_summary();
}
