/*
 * test_alloc_failure.c: every allocation the library makes while building plans, loading a model
 * and creating a context is made to fail in turn (k = 0, 1, 2, ... until the calls succeed with no
 * failure injected), through the hook of the radix_mlp_alloc_hooks build (common/alloc.h). Each
 * failure must come back as RMLP_ERR_OUT_OF_MEMORY with a message about memory (never a crash or
 * another status), the objects involved must still work afterwards, and nothing may leak
 * (LeakSanitizer checks that when this runs in the ASan build, as scripts/test.sh does).
 *
 * Two modes: sticky (allocation k and every one after it fail, as when memory has really run
 * out) and one-shot (only allocation k fails, so the clean-up and what follows run with
 * allocations succeeding again). jansson's allocations go through the same hook
 * (json_set_alloc_funcs), in sticky mode only: jansson 2.14 ignores a failed growth of its token
 * buffer and, when the next allocation succeeds, carries on without the byte it could not store
 * (a key "model.layers.0.x" comes back as "model.layers.0x"), so one-shot failures inside jansson
 * would test jansson, not us. One-shot mode leaves jansson on plain malloc.
 *
 * Scenarios: a planner (create, reserve, a padded build with sharing, a larger build that grows
 * it); model loads of three tiny checkpoints written here (F32 in one file, also loaded into bf16
 * weight matrices; BF16 in one file with tied embeddings and QKV biases; the F32 one in two shards
 * with an index); a context create followed by a forward; a generation session's begin and one
 * step (fp32 and bf16 weights), on 3 CPU threads (so its decode attention's thread pool is made
 * too).
 */
#define _POSIX_C_SOURCE 200809L

#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#ifndef RMLP_ALLOC_HOOKS
#error "links radix_mlp_alloc_hooks, whose RMLP_ALLOC_HOOKS declares the failure hook"
#endif
#include "model/safetensors.h"
#include "bench/tiny_model.h"
#include "st_writer.h"
#include "test_util.h"

#define MAX_ATTEMPTS 100000 /* far above any scenario's allocation count: a loop that gets here is stuck */

static int one_shot;           /* the current mode */
static char failed_message[512]; /* rmlp_last_error() of the call that failed under the hook */

/* jansson's allocator: the hook in sticky mode, plain malloc in one-shot mode (see above). */
static void *json_alloc(size_t bytes) { return one_shot ? malloc(bytes) : rmlp_malloc(bytes); }

/* ---- arming and disarming the hook ------------------------------------------------------------ */

static int armed;
static long armed_count, armed_failures; /* what the hook saw while armed */

static void arm(long k) {
    rmlp_alloc_fail_after(k, one_shot);
    armed = 1;
}

/* Stops injecting (the checks after a failure allocate normally) and keeps the counts. */
static void disarm(void) {
    if (!armed) return;
    armed_count = rmlp_alloc_count();
    armed_failures = rmlp_alloc_failures();
    rmlp_alloc_fail_after(-1, 0);
    armed = 0;
}

/* Called right after a library call under the hook: on failure, disarms and keeps the message
 * before anything else can overwrite it. Returns status. */
static rmlp_status observe(rmlp_status status) {
    if (status != RMLP_OK) {
        disarm();
        snprintf(failed_message, sizeof failed_message, "%s", rmlp_last_error());
    }
    return status;
}

/* docs/errors.md's bad-input table (tu_record_bad_input): one row per allocation site, from the one-shot
 * sweeps (a sticky failure gives the same messages). A site is the message from "allocating" on,
 * with numbers and quoted names left out, so each weight or workspace buffer is not a row of its own. */
static void record_once(const char *scenario, const char *message) {
    static char seen[128][160];
    static int n_seen;
    char site[160];
    size_t n = 0;
    const char *from = strstr(message, "allocating");
    for (const char *c = from ? from : message; *c && n + 1 < sizeof site; c++) {
        if (*c >= '0' && *c <= '9') continue;
        if (*c == '\'') {
            const char *close = strchr(c + 1, '\'');
            if (close != NULL) c = close;
            continue;
        }
        site[n++] = *c;
    }
    site[n] = '\0';
    for (int i = 0; i < n_seen; i++)
        if (strcmp(seen[i], site) == 0) return;
    if (n_seen < 128) snprintf(seen[n_seen++], sizeof seen[0], "%s", site);
    char input[160];
    snprintf(input, sizeof input, "out of memory in the %s scenario (one allocation made to fail)", scenario);
    tu_record_bad_input(input, RMLP_ERR_OUT_OF_MEMORY, message);
}

/* A scenario runs its calls with the hook armed at k and returns the first failing status (or
 * RMLP_OK); it checks its own objects after a failure (disarmed by observe) and frees them. */
typedef rmlp_status (*scenario_fn)(void *ctx);

/* Runs the scenario for k = 0, 1, ... and checks each outcome; returns the number of allocations
 * the scenario makes when nothing fails (-1 when it went wrong). */
static long sweep(const char *name, scenario_fn run, void *ctx) {
    for (long k = 0; k < MAX_ATTEMPTS; k++) {
        failed_message[0] = '\0';
        arm(k);
        rmlp_status status = run(ctx);
        disarm();
        if (armed_failures == 0) {
            CHECK(status == RMLP_OK, "%s (%s): no allocation failed (%ld made) but status %d: %s", name,
                  one_shot ? "one-shot" : "sticky", armed_count, status, failed_message);
            CHECK_EQ(armed_count, k, "%s: allocations made once nothing fails", name);
            return status == RMLP_OK ? armed_count : -1;
        }
        int memory_message = strstr(failed_message, "allocating") != NULL || strstr(failed_message, "out of memory");
        if (!CHECK(status == RMLP_ERR_OUT_OF_MEMORY && memory_message,
                   "%s (%s): allocation %ld failed, want RMLP_ERR_OUT_OF_MEMORY and a message about memory: "
                   "status %d (%s), message \"%s\"", name,
                   one_shot ? "one-shot" : "sticky", k, status, rmlp_status_string(status), failed_message))
            return -1;
        if (one_shot) record_once(name, failed_message);
    }
    CHECK(0, "%s: still failing after %d attempts", name, MAX_ATTEMPTS);
    return -1;
}

/* ---- the planner --------------------------------------------------------------------------------- */

typedef struct planner_case {
    tu_batch small, large;    /* small: within the reservation; large: grows the planner */
    rmlp_plan_params small_params, large_params;
    rmlp_plan small_want, large_want; /* owned copies from a planner that never failed */
} planner_case;

/* Builds batch b with the hook disarmed and compares with the reference. */
static void check_builds(rmlp_planner *planner, const tu_batch *b, const rmlp_plan_params *params,
                         const rmlp_plan *want, const char *what) {
    rmlp_plan plan;
    char why[256];
    rmlp_status status = rmlp_plan_build(planner, b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, params, &plan);
    if (CHECK(status == RMLP_OK, "%s: the planner fails afterwards: %s", what, rmlp_last_error()))
        CHECK(tu_plan_diff(&plan, want, why, sizeof why) == 0, "%s: the planner builds wrongly afterwards: %s", what,
              why);
}

static rmlp_status planner_scenario(void *ctx) {
    planner_case *c = ctx;
    rmlp_planner *planner = (rmlp_planner *)1;
    rmlp_plan plan;
    char why[256];
    rmlp_status status = observe(rmlp_planner_create(&planner));
    if (status != RMLP_OK) {
        CHECK(planner == NULL, "rmlp_planner_create leaves *out set after failing");
        return status;
    }
    const char *step = "rmlp_planner_reserve";
    status = observe(rmlp_planner_reserve(planner, c->small.n_tokens, c->small.n_seqs, 8));
    if (status == RMLP_OK) {
        step = "the first rmlp_plan_build";
        status = observe(rmlp_plan_build(planner, c->small.ids, c->small.pos, c->small.n_tokens, c->small.cu,
                                         c->small.n_seqs, &c->small_params, &plan));
        if (status == RMLP_OK)
            CHECK(tu_plan_diff(&plan, &c->small_want, why, sizeof why) == 0, "small batch: %s", why);
    }
    if (status == RMLP_OK) {
        step = "the growing rmlp_plan_build";
        status = observe(rmlp_plan_build(planner, c->large.ids, c->large.pos, c->large.n_tokens, c->large.cu,
                                         c->large.n_seqs, &c->large_params, &plan));
        if (status == RMLP_OK)
            CHECK(tu_plan_diff(&plan, &c->large_want, why, sizeof why) == 0, "large batch: %s", why);
    }
    if (status != RMLP_OK) { /* the planner is as good as before: both batches build, either order */
        if (strcmp(step, "rmlp_planner_reserve") != 0)
            CHECK(plan.n_tokens == 0 && plan.scatter == NULL, "%s: the plan is not cleared after failing", step);
        check_builds(planner, &c->large, &c->large_params, &c->large_want, step);
        check_builds(planner, &c->small, &c->small_params, &c->small_want, step);
    }
    rmlp_planner_free(planner);
    return status;
}

static void test_planner(void) {
    planner_case c;
    uint64_t rng = 0xa110c;
    tu_batch_shape small = {6, 14, 4, 9, 0}, large = {40, 30, 4, 12, 0};
    c.small = tu_random_batch(&rng, &small);
    c.large = tu_random_batch(&rng, &large);
    c.small_params = tu_params(0.95, 8);
    c.large_params = tu_params(1.0, 16);
    rmlp_planner *reference = NULL;
    rmlp_plan plan;
    if (!CHECK(rmlp_planner_create(&reference) == RMLP_OK, "reference planner")) return;
    CHECK(rmlp_plan_build(reference, c.small.ids, c.small.pos, c.small.n_tokens, c.small.cu, c.small.n_seqs,
                          &c.small_params, &plan) == RMLP_OK, "reference small: %s", rmlp_last_error());
    c.small_want = tu_plan_copy(&plan);
    CHECK(rmlp_plan_build(reference, c.large.ids, c.large.pos, c.large.n_tokens, c.large.cu, c.large.n_seqs,
                          &c.large_params, &plan) == RMLP_OK, "reference large: %s", rmlp_last_error());
    c.large_want = tu_plan_copy(&plan);
    rmlp_planner_free(reference);
    /* The batches must exercise what the scenario claims: sharing, padding, growth. */
    CHECK(c.small_want.use_radix && c.small_want.n_compact < c.small_want.n_tokens &&
              c.small_want.n_compact_padded > c.small_want.n_compact,
          "small batch: radix %d, N=%u, N'=%u, padded %u", c.small_want.use_radix, c.small_want.n_tokens,
          c.small_want.n_compact, c.small_want.n_compact_padded);
    CHECK(c.large.n_tokens > c.small.n_tokens + 8 && c.large.n_seqs > c.small.n_seqs, "large batch is not larger");

    for (one_shot = 0; one_shot < 2; one_shot++) {
        long n = sweep("planner", planner_scenario, &c);
        printf("planner create + reserve + 2 builds (%s): %ld allocations, each failed in turn\n",
               one_shot ? "one-shot" : "sticky", n);
        CHECK(n < 0 || n >= 5, "planner: only %ld allocations seen; the hook is not reached", n);
    }
    tu_plan_copy_free(&c.small_want);
    tu_plan_copy_free(&c.large_want);
    tu_batch_free(&c.small);
    tu_batch_free(&c.large);
}

/* ---- checkpoints ----------------------------------------------------------------------------------- */

static char *root; /* the temporary folder */

static const char *at(const char *dir, const char *name) {
    static char path[2][1024];
    static int which;
    which ^= 1;
    snprintf(path[which], sizeof path[which], "%s/%s%s%s", root, dir, name[0] ? "/" : "", name);
    return path[which];
}

static rmlp_model_config tiny_config(rmlp_arch arch, int bias, int tied) {
    rmlp_model_config c = {.architecture = arch, .vocab_size = 40, .hidden_size = 16, .intermediate_size = 24,
                           .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 2, .head_dim = 8,
                           .max_position_embeddings = 64, .rms_norm_eps = 1e-6, .rope_theta = 10000.0,
                           .attention_bias = bias, .tie_word_embeddings = tied, .qk_norm = arch == RMLP_ARCH_QWEN3};
    return c;
}

/* The tensors of dir/model.safetensors into w (BF16: the top 16 bits of each F32 value). */
static void read_tensors(const char *dir, int to_bf16, stw *w) {
    st_file *file = NULL;
    if (!CHECK(st_open(at(dir, "model.safetensors"), &file) == RMLP_OK, "reading back %s: %s", dir,
               rmlp_last_error()))
        exit(tu_summary());
    for (size_t i = 0; i < st_count(file); i++) {
        const st_tensor *t = st_at(file, i);
        size_t n = t->nbytes / 4;
        unsigned char *bytes = tu_xmalloc(t->nbytes);
        const unsigned char *src = t->data;
        for (size_t e = 0; e < n; e++) {
            if (to_bf16)
                memcpy(bytes + 2 * e, src + 4 * e + 2, 2); /* little-endian: the high half */
            else
                memcpy(bytes + 4 * e, src + 4 * e, 4);
        }
        stw_add(w, t->name, to_bf16 ? "BF16" : "F32", t->ndim, t->shape, bytes, to_bf16 ? 2 * n : t->nbytes);
        free(bytes);
    }
    st_close(file);
}

/* Writes the three checkpoints under root: f32/, bf16/, sharded/. */
static int write_checkpoints(void) {
    rmlp_model_config qwen3 = tiny_config(RMLP_ARCH_QWEN3, 0, 0), qwen2 = tiny_config(RMLP_ARCH_QWEN2, 1, 1);
    const char *dirs[3] = {"f32", "bf16", "sharded"};
    for (int i = 0; i < 3; i++) mkdir(at(dirs[i], ""), 0700);
    if (tiny_model_write(at("f32", ""), &qwen3, 11) != 0 || tiny_model_write(at("bf16", ""), &qwen2, 12) != 0 ||
        tiny_model_write(at("sharded", ""), &qwen3, 11) != 0)
        return -1;
    stw w = {0};
    read_tensors("bf16", 1, &w);
    stw_write(&w, at("bf16", "model.safetensors"), 1);
    stw_free(&w);

    read_tensors("sharded", 0, &w);
    unlink(at("sharded", "model.safetensors"));
    static const char *shard_names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    stw shards[2] = {{0}, {0}};
    stw_json map = {0}, index = {0};
    char quoted[96];
    for (size_t i = 0; i < w.n; i++) {
        int s = i >= w.n / 2;
        stw_add(&shards[s], w.t[i].name, w.t[i].dtype, w.t[i].ndim, w.t[i].shape, w.t[i].data, w.t[i].nbytes);
        snprintf(quoted, sizeof quoted, "\"%s\"", shard_names[s]);
        stw_json_set(&map, w.t[i].name, quoted);
    }
    char *map_text = stw_json_string(&map);
    stw_json_set(&index, "metadata", "{\"total_size\": 1}");
    stw_json_set(&index, "weight_map", map_text);
    for (int s = 0; s < 2; s++) stw_write(&shards[s], at("sharded", shard_names[s]), 1);
    stw_json_write(&index, at("sharded", "model.safetensors.index.json"));
    free(map_text);
    stw_free(&shards[0]);
    stw_free(&shards[1]);
    stw_free(&w);
    stw_json_free(&map);
    stw_json_free(&index);
    return 0;
}

/* ---- forwards ------------------------------------------------------------------------------------ */

/* A batch with a shared prefix, planned with padding, and the forward's output size. */
typedef struct forward_case {
    const rmlp_model *model;
    rmlp_plan plan; /* owned copy */
    size_t out_floats;
    float *want;    /* (n_tokens, hidden) from a context that never failed */
    float *got;
} forward_case;

static const uint32_t fw_ids[9] = {3, 9, 4, 3, 9, 4, 7, 3, 9}, fw_pos[9] = {0, 1, 2, 0, 1, 2, 3, 0, 1};
static const uint32_t fw_cu[4] = {0, 3, 7, 9};

static int forward_case_init(forward_case *f, const rmlp_model *model) {
    rmlp_model_config cfg;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params params = tu_params(1.0, 4);
    memset(f, 0, sizeof *f);
    f->model = model;
    if (!CHECK(rmlp_model_get_config(model, &cfg) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK &&
                   rmlp_plan_build(planner, fw_ids, fw_pos, 9, fw_cu, 3, &params, &plan) == RMLP_OK,
               "forward setup: %s", rmlp_last_error())) {
        rmlp_planner_free(planner);
        return -1;
    }
    f->plan = tu_plan_copy(&plan);
    rmlp_planner_free(planner);
    f->out_floats = (size_t)9 * cfg.hidden_size;
    f->want = tu_xmalloc(f->out_floats * sizeof(float));
    f->got = tu_xmalloc(f->out_floats * sizeof(float));
    return 0;
}

static void forward_case_free(forward_case *f) {
    tu_plan_copy_free(&f->plan);
    free(f->want);
    free(f->got);
}

/* A forward on a new context (hook disarmed) into f->got. */
static rmlp_status forward_fresh(forward_case *f) {
    rmlp_context *ctx = NULL;
    rmlp_status status = rmlp_context_create(f->model, 12, &ctx);
    if (status == RMLP_OK) status = rmlp_forward(ctx, &f->plan, NULL, NULL, f->got);
    rmlp_context_free(ctx);
    return status;
}

static int same_output(const forward_case *f) { return memcmp(f->got, f->want, f->out_floats * sizeof(float)) == 0; }

/* ---- model loads ----------------------------------------------------------------------------------- */

typedef struct load_case {
    const char *path;
    rmlp_model_params params; /* cpu_weight_dtype F32 or BF16 */
    rmlp_model_config config; /* of a load that never failed */
    forward_case forward;     /* its output, the reference */
} load_case;

static rmlp_status load_scenario(void *ctx) {
    load_case *c = ctx;
    rmlp_model *model = (rmlp_model *)1;
    rmlp_status status = observe(rmlp_model_load(c->path, &c->params, &model));
    disarm(); /* the checks below allocate */
    if (status != RMLP_OK) {
        CHECK(model == NULL, "%s: rmlp_model_load leaves *out set after failing", c->path);
        /* Nothing global was damaged: the same checkpoint loads now. */
        CHECK(rmlp_model_load(c->path, &c->params, &model) == RMLP_OK, "%s: loading after a failed load: %s", c->path,
              rmlp_last_error());
        rmlp_model_free(model);
        return status;
    }
    rmlp_model_config cfg;
    rmlp_model_get_config(model, &cfg);
    CHECK(memcmp(&cfg, &c->config, sizeof cfg) == 0, "%s: the configuration differs from a plain load", c->path);
    c->forward.model = model;
    CHECK(forward_fresh(&c->forward) == RMLP_OK && same_output(&c->forward), "%s: the forward differs: %s", c->path,
          rmlp_last_error());
    rmlp_model_free(model);
    return RMLP_OK;
}

static void test_load(const char *name, const char *dir, rmlp_dtype weights) {
    load_case c;
    memset(&c, 0, sizeof c);
    c.params = rmlp_model_default_params();
    c.params.cpu_weight_dtype = weights;
    /* the widening path, so that the allocations (and docs/errors.md's rows) do not depend on the CPU:
     * the default takes oneDNN where the CPU runs bf16, whose own failures test_bf16_onednn covers */
    if (weights == RMLP_DTYPE_BF16) c.params.cpu_bf16_gemm = RMLP_CPU_BF16_GEMM_WIDEN;
    c.path = at(dir, "");
    char path[1024];
    snprintf(path, sizeof path, "%s", c.path);
    c.path = path;
    rmlp_model *model = NULL;
    if (!CHECK(rmlp_model_load(path, &c.params, &model) == RMLP_OK, "%s: plain load: %s", name, rmlp_last_error()))
        return;
    rmlp_model_get_config(model, &c.config);
    if (forward_case_init(&c.forward, model) == 0) {
        CHECK(forward_fresh(&c.forward) == RMLP_OK, "%s: reference forward: %s", name, rmlp_last_error());
        memcpy(c.forward.want, c.forward.got, c.forward.out_floats * sizeof(float));
        for (one_shot = 0; one_shot < 2; one_shot++) {
            long n = sweep(name, load_scenario, &c);
            printf("rmlp_model_load %s (%s): %ld allocations, each failed in turn\n", name,
                   one_shot ? "one-shot, jansson not failed" : "sticky, jansson's too", n);
            CHECK(n < 0 || n >= 10, "%s: only %ld allocations seen; the hook is not reached", name, n);
        }
        forward_case_free(&c.forward);
    }
    rmlp_model_free(model);
}

/* ---- context create + forward ---------------------------------------------------------------------- */

static rmlp_status context_scenario(void *ctx) {
    forward_case *f = ctx;
    rmlp_context *context = (rmlp_context *)1;
    rmlp_status status = observe(rmlp_context_create(f->model, 12, &context));
    if (status != RMLP_OK) {
        CHECK(context == NULL, "rmlp_context_create leaves *out set after failing");
        /* The model is untouched: a new context computes the same output. */
        CHECK(forward_fresh(f) == RMLP_OK && same_output(f), "the model after a failed context: %s",
              rmlp_last_error());
        return status;
    }
    memset(f->got, 0, f->out_floats * sizeof(float));
    status = observe(rmlp_forward(context, &f->plan, NULL, NULL, f->got));
    if (status == RMLP_OK) CHECK(same_output(f), "the forward of a context made under the hook differs");
    rmlp_context_free(context);
    return status;
}

static void test_context(void) {
    rmlp_model *model = NULL;
    forward_case f;
    if (!CHECK(rmlp_model_load(at("f32", ""), NULL, &model) == RMLP_OK, "load: %s", rmlp_last_error())) return;
    uint32_t threads_before = rmlp_cpu_threads();
    /* 2 threads whatever the machine: the context's pool is allocated too (and its message fixed) */
    if (CHECK(rmlp_set_cpu_threads(2) == RMLP_OK, "2 threads: %s", rmlp_last_error()) &&
        forward_case_init(&f, model) == 0) {
        CHECK(forward_fresh(&f) == RMLP_OK, "reference forward: %s", rmlp_last_error());
        memcpy(f.want, f.got, f.out_floats * sizeof(float));
        for (one_shot = 0; one_shot < 2; one_shot++) {
            long n = sweep("context", context_scenario, &f);
            printf("rmlp_context_create + rmlp_forward (%s): %ld allocations, each failed in turn\n",
                   one_shot ? "one-shot" : "sticky", n);
            CHECK(n < 0 || n >= 2, "context: only %ld allocations seen; the hook is not reached", n);
        }
        forward_case_free(&f);
    }
    rmlp_set_cpu_threads(threads_before);
    rmlp_model_free(model);
}

/* ---- a generation session ------------------------------------------------------------------------------ */

/* Prompts sharing a prefix, planned without padding; a cached context; the logits of a begin and
 * one step that never failed. The scenario runs on 3 CPU threads, so the session also starts its
 * decode attention's pool (cpu/workers.c), whose allocations fail in turn too. */
typedef struct generate_case {
    rmlp_context *ctx;
    rmlp_plan plan; /* owned copy */
    float want[2][3 * 40], got[2][3 * 40]; /* begin's and the step's logits (3 sequences, vocab 40) */
} generate_case;

static const uint32_t gen_ids[8] = {3, 9, 4, 3, 9, 5, 3, 7}, gen_pos[8] = {0, 1, 2, 0, 1, 2, 0, 1};
static const uint32_t gen_cu[4] = {0, 3, 6, 8}, gen_next[3] = {11, 12, 13};

static rmlp_status generate_run(generate_case *g) {
    rmlp_status status = observe(rmlp_generate_begin(g->ctx, &g->plan, NULL, g->got[0]));
    if (status != RMLP_OK) {
        /* no session was left behind: a step is refused, and a begin without the hook works */
        CHECK(rmlp_generate_step(g->ctx, gen_next, 3, g->got[1]) == RMLP_ERR_INVALID_ARGUMENT,
              "a step after a failed rmlp_generate_begin was not refused");
        return status;
    }
    status = observe(rmlp_generate_step(g->ctx, gen_next, 3, g->got[1]));
    CHECK(rmlp_generate_end(g->ctx) == RMLP_OK, "rmlp_generate_end after a step under the hook: %s", rmlp_last_error());
    return status;
}

static rmlp_status generate_scenario(void *ctx) {
    generate_case *g = ctx;
    memset(g->got, 0, sizeof g->got);
    rmlp_status status = generate_run(g);
    if (status == RMLP_OK) CHECK(memcmp(g->got, g->want, sizeof g->got) == 0, "logits made under the hook differ");
    return status;
}

static void test_generate(rmlp_dtype weights) {
    rmlp_model_params mp = rmlp_model_default_params();
    mp.cpu_weight_dtype = weights; /* bf16: the session's widened rows are allocated too */
    if (weights == RMLP_DTYPE_BF16) mp.cpu_bf16_gemm = RMLP_CPU_BF16_GEMM_WIDEN; /* as in load_case's */
    rmlp_model *model = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    rmlp_plan_params params = tu_params(1.0, 0);
    rmlp_context_params cp = rmlp_context_default_params();
    cp.cache_bytes = 1 << 20;
    generate_case g = {0};
    uint32_t threads_before = rmlp_cpu_threads();
    if (!CHECK(rmlp_model_load(at("f32", ""), &mp, &model) == RMLP_OK && rmlp_planner_create(&planner) == RMLP_OK &&
                   rmlp_plan_build(planner, gen_ids, gen_pos, 8, gen_cu, 3, &params, &plan) == RMLP_OK &&
                   rmlp_context_create_with_params(model, 16, &cp, &g.ctx) == RMLP_OK &&
                   rmlp_set_cpu_threads(3) == RMLP_OK,
               "generation setup: %s", rmlp_last_error())) {
        rmlp_context_free(g.ctx), rmlp_planner_free(planner), rmlp_model_free(model);
        return;
    }
    g.plan = tu_plan_copy(&plan);
    rmlp_planner_free(planner);
    CHECK(generate_run(&g) == RMLP_OK, "reference generation: %s", rmlp_last_error());
    memcpy(g.want, g.got, sizeof g.want);
    for (one_shot = 0; one_shot < 2; one_shot++) {
        long n = sweep("generate", generate_scenario, &g);
        printf("rmlp_generate_begin + rmlp_generate_step on 3 threads, %s weights (%s): %ld allocations, each failed "
               "in turn\n", weights == RMLP_DTYPE_BF16 ? "bf16" : "f32", one_shot ? "one-shot" : "sticky", n);
        CHECK(n < 0 || n >= 20, "generate: only %ld allocations seen; the hook is not reached", n);
    }
    rmlp_set_cpu_threads(threads_before);
    tu_plan_copy_free(&g.plan);
    rmlp_context_free(g.ctx);
    rmlp_model_free(model);
}

/* ---- the hook itself -------------------------------------------------------------------------------- */

static void test_hook(void) {
    rmlp_alloc_fail_after(2, 1);
    void *a = rmlp_malloc(8), *b = rmlp_calloc(2, 8), *c = rmlp_malloc(8), *d = rmlp_strdup("x");
    CHECK(a && b && !c && d, "one-shot at 2: %p %p %p %p", a, b, c, d);
    CHECK(rmlp_alloc_count() == 4 && rmlp_alloc_failures() == 1, "one-shot counts %ld %ld", rmlp_alloc_count(),
          rmlp_alloc_failures());
    free(a), free(b), free(d);
    rmlp_alloc_fail_after(1, 0);
    a = rmlp_malloc(8), b = rmlp_realloc(NULL, 8), c = rmlp_malloc(8);
    CHECK(a && !b && !c, "sticky at 1: %p %p %p", a, b, c);
    CHECK(rmlp_alloc_count() == 3 && rmlp_alloc_failures() == 2, "sticky counts %ld %ld", rmlp_alloc_count(),
          rmlp_alloc_failures());
    free(a);
    rmlp_alloc_fail_after(-1, 0);
    a = rmlp_malloc(8);
    CHECK(a != NULL && rmlp_alloc_failures() == 0, "disarmed");
    free(a);
}

int main(void) {
    json_set_alloc_funcs(json_alloc, free);
    test_hook();
    test_planner();
    root = stw_mkdtemp();
    tu_scrub_dir = root;
    if (CHECK(write_checkpoints() == 0, "writing the checkpoints under %s", root)) {
        test_load("F32", "f32", RMLP_DTYPE_F32);
        test_load("F32 into bf16 weight matrices", "f32", RMLP_DTYPE_BF16);
        test_load("BF16 with biases and tied embeddings", "bf16", RMLP_DTYPE_F32);
        test_load("sharded", "sharded", RMLP_DTYPE_F32);
        test_load("by file path", "f32/model.safetensors", RMLP_DTYPE_F32);
        test_context();
        test_generate(RMLP_DTYPE_F32);
        test_generate(RMLP_DTYPE_BF16);
    }
    stw_rmtree(root);
    free(root);
    return tu_summary();
}
