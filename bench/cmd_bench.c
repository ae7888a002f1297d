/*
 * cmd_bench.c: `radixmlp bench`: RadixMLP off vs on, in one run, on a built-in random model shaped
 * like Qwen3-0.6B (hidden 1024, intermediate 3072, 16 query / 8 KV heads of 128; --shape 4b or 8b:
 * like Qwen3-4B or -8B; --shape gemma-2b: like Gemma-2B, the yes/no reranker bge-reranker-v2-gemma's
 * (hidden 2048, GeGLU 16,384, 8 query heads / 1 KV head of 256); a vocabulary of 8,192, as these
 * forwards only look rows up; written to a
 * temporary folder, or to --keep-model DIR, and loaded like any checkpoint; --model DIR loads
 * another one instead). Cases (--full): the synthetic grid (32 sequences, shared prefix 128/448/2048,
 * suffix 32/64/256), a reranking batch shaped like MS MARCO (template + query of 40-80 tokens, 32
 * passages of 40-120), and a batch with nothing shared (where the default gate picks the
 * identity). Without --full, --quick or --case, the main job: one case per regime (deep sharing,
 * a reranker's batch, nothing shared), a minute or so on 2 cores; before each case stderr says
 * how far the run is and about how long the rest takes (a cost model of the forwards' arithmetic,
 * scaled by what the finished cases took); --list prints the cases and that estimate and runs
 * nothing. Per case: N, N', ratio, ms off, ms on, measured speedup, the model-predicted speedup
 * 1/((1-f)+f/r) with f the position-wise share of the off run's time and r = N/N', and the max
 * |off - on| of the last hidden states; on the CPU also "compact": radix on with the whole forward
 * in compact space (rmlp_forward_compact, attention over paths), its time, speedup over off and
 * max |off - compact|, and "last": rmlp_forward_last on a context with attention in compact space
 * (each sequence's last row only, the last layer's post-attention work on those rows: what a
 * last-token embedder or a reranker needs), its time, speedup over off and max |off - last| over
 * the last rows. --quick: the three smallest grid cases; --case NAME: only
 * the cases whose name contains NAME (may be given several times); --dump-batches FILE: each
 * case's batch and pooled outputs as a JSON line (bench_dump.h), for bench/peer_transformers.py;
 * --batches FILE: the batches of FILE (bench_batches.h: real text, or what --dump-batches wrote)
 * instead of the built-in cases, radix on at threshold 1 (always).
 *
 * --device cpu (default): fp32, 2 layers by default; --repeat R alternates R off/on/last/compact runs and
 * keeps the fastest of each, timed with the wall clock, with the built-in attention; under each case
 * where each mode's time went (bench_cpu.h: GEMMs, attention, elementwise work, gathers, planning).
 * --device cuda: the model on CUDA device 0 in --dtype (bf16 by default), all the shape's layers by
 * default (28 or 36: the published figures are whole-model), timed on the device (bench_cuda.c):
 * off, on, on with attention in compact space and last, a warm-up round, then R rounds (default
 * 5), median and min; also the rel-norm of on - off, compact - off and last - off's last rows. --gpu-variant
 * NAME=VALUE[,NAME=VALUE...] (repeatable; NAME a RADIX_MLP_GPU_* variable of gpu/options.h) adds a
 * context made with those variables set, whose sides run in the same rounds (bench_cuda.h): one
 * row per case and variant ("variant": "default" or the setting), with the kernel each side ran.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_batches.h"
#include "bench_cpu.h"
#include "bench_cuda.h"
#include "bench_decode.h"
#include "bench_serve.h"
#include "bench_dump.h"
#include "bench_trace.h"
#include "cli.h"
#include "model/arch.h"
#include "radix_mlp.h"
#include "tiny_model.h"
#include "workload.h"

typedef struct bench_case {
    const char *name;
    size_t n_seqs, prefix, suffix; /* suffix 0: the reranking batch */
    double threshold;              /* of the "on" run */
    const char *regime;            /* what the case shows in the main job; NULL: --full only */
} bench_case;

static const bench_case cases[] = {
    {"b32_p128_s32", 32, 128, 32, 1.0, NULL},
    {"b32_p128_s64", 32, 128, 64, 1.0, NULL},
    {"b32_p448_s32", 32, 448, 32, 1.0, NULL},
    {"b32_p448_s64", 32, 448, 64, 1.0, "deep sharing"},
    {"b32_p128_s256", 32, 128, 256, 1.0, NULL},
    {"b32_p448_s256", 32, 448, 256, 1.0, NULL},
    {"b32_p2048_s32", 32, 2048, 32, 1.0, NULL},
    {"b32_p2048_s64", 32, 2048, 64, 1.0, NULL},
    {"b32_p2048_s256", 32, 2048, 256, 1.0, NULL},
    {"rerank_msmarco_32", 32, 0, 0, 1.0, "a reranker's batch"},
    {"no_sharing_b32_s512", 32, 0, 512, RMLP_DEFAULT_THRESHOLD, "nothing shared"},
};
#define N_CASES (sizeof cases / sizeof cases[0])


/* ---- the CUDA path ------------------------------------------------------------------------- */

/* s as the inside of a JSON string (quotes, backslashes and control characters escaped), cut to fit cap. */
static const char *jstr(char *buf, size_t cap, const char *s) {
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') buf[n++] = '\\', buf[n++] = (char)ch;
        else if (ch < 0x20) n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", ch);
        else buf[n++] = (char)ch;
    }
    buf[n] = '\0';
    return buf;
}

/* A JSON number, or null where it is not finite. */
static const char *jnum(char *buf, size_t cap, const char *format, double v) {
    if (isfinite(v)) snprintf(buf, cap, format, v);
    else snprintf(buf, cap, "null");
    return buf;
}

static int cuda_case(const bench_args *a, const char *device_name, rmlp_model *model, const rmlp_model_config *cfg,
                     const bench_case *c, const workload *w, FILE *dump) {
    size_t pooled = w->n_seqs * cfg->hidden_size;
    float *last = dump ? malloc(2 * pooled * sizeof(float)) : NULL;
    bench_cuda_result results[1 + sizeof a->variants / sizeof a->variants[0]];
    if ((dump && last == NULL) || bench_cuda_case(model, a->dtype, w, c->threshold, a->repeat, a->variants,
                                                  a->n_variants, last, last ? last + pooled : NULL, results) != 0) {
        fprintf(stderr, "radixmlp bench: %s failed\n", c->name);
        free(last);
        return 1;
    }
    enum { OFF = BENCH_OFF, ON = BENCH_ON, CMP = BENCH_COMPACT, LAST = BENCH_LAST };
    for (size_t v = 0; v <= a->n_variants; v++) { /* a row per variant, the default's first */
    const bench_cuda_result r = results[v];
    char keys[1024];
    double f = 1.0 - r.attn_ms[OFF] / r.fwd_ms[OFF], ratio = (double)r.n_compact / w->n_tokens;
    double predicted = 1.0 / ((1.0 - f) + f * ratio);
    double speedup = r.ms[OFF] / r.ms[ON], speedup_min = r.ms_min[OFF] / r.ms_min[ON];
    double speedup_cmp = r.ms[OFF] / r.ms[CMP], speedup_cmp_min = r.ms_min[OFF] / r.ms_min[CMP];
    double speedup_last = r.ms[OFF] / r.ms[LAST], speedup_last_min = r.ms_min[OFF] / r.ms_min[LAST];
    /* The position-wise part alone (forward minus attention, from the instrumented runs): what
     * RadixMLP compacts, whatever attention the host brings. */
    double pw_off = r.fwd_ms[OFF] - r.attn_ms[OFF], pw_on = r.fwd_ms[ON] - r.attn_ms[ON], pw_speedup = pw_off / pw_on;
    if (a->json) {
        char b[9][32], device_json[512], model_json[512];
        printf("{\"case\": \"%s\", \"device\": \"cuda\", \"device_name\": \"%s\", \"model\": \"%s\", "
               "\"hidden_size\": %u, \"dtype\": \"%s\", \"n_seqs\": %zu, \"n_tokens\": %zu, \"n_compact\": %u, "
               "\"use_radix\": %s, \"layers\": %lu, \"repeat\": %lu, "
               "\"ms_off\": %.3f, \"ms_on\": %.3f, \"ms_off_min\": %.3f, \"ms_on_min\": %.3f, \"speedup\": %.3f, "
               "\"speedup_min\": %.3f, \"plan_us_off\": %.1f, \"plan_us\": %.1f, \"set_plan_us_off\": %.1f, "
               "\"set_plan_us_on\": %.1f, \"attention_ms_off\": %.3f, \"forward_ms_off_timed_attention\": %.3f, "
               "\"attention_ms_on\": %.3f, \"forward_ms_on_timed_attention\": %.3f, \"f_position_wise\": %s, "
               "\"predicted_speedup\": %s, \"position_wise_ms_off\": %.3f, \"position_wise_ms_on\": %.3f, "
               "\"position_wise_speedup\": %s, \"max_abs_diff\": %s, \"rel_norm_diff\": %s, "
               "\"ms_compact\": %.3f, \"ms_compact_min\": %.3f, \"speedup_compact\": %.3f, "
               "\"speedup_compact_min\": %.3f, \"set_plan_us_compact\": %.1f, \"attention_ms_compact\": %.3f, "
               "\"forward_ms_compact_timed_attention\": %.3f, \"max_abs_diff_compact\": %s, "
               "\"rel_norm_diff_compact\": %s, \"ms_last\": %.3f, \"ms_last_min\": %.3f, \"speedup_last\": %.3f, "
               "\"speedup_last_min\": %.3f, \"attention_ms_last\": %.3f, \"forward_ms_last_timed_attention\": %.3f, "
               "\"max_abs_diff_last\": %s, \"rel_norm_diff_last\": %s%s}\n",
               c->name, jstr(device_json, sizeof device_json, device_name),
               jstr(model_json, sizeof model_json, a->model_name), cfg->hidden_size, BENCH_DTYPE_NAMES[a->dtype], w->n_seqs,
               w->n_tokens, r.n_compact, r.use_radix ? "true" : "false", a->layers, a->repeat, r.ms[OFF], r.ms[ON],
               r.ms_min[OFF], r.ms_min[ON], speedup, speedup_min, r.plan_us[OFF], r.plan_us[ON], r.set_plan_us[OFF],
               r.set_plan_us[ON], r.attn_ms[OFF], r.fwd_ms[OFF], r.attn_ms[ON], r.fwd_ms[ON],
               jnum(b[0], 32, "%.4f", f), jnum(b[1], 32, "%.3f", predicted), pw_off, pw_on,
               jnum(b[4], 32, "%.3f", pw_speedup), jnum(b[2], 32, "%.3g", r.max_abs_diff[ON]),
               jnum(b[3], 32, "%.3g", r.rel_norm_diff[ON]), r.ms[CMP], r.ms_min[CMP], speedup_cmp, speedup_cmp_min,
               r.set_plan_us[CMP], r.attn_ms[CMP], r.fwd_ms[CMP], jnum(b[5], 32, "%.3g", r.max_abs_diff[CMP]),
               jnum(b[6], 32, "%.3g", r.rel_norm_diff[CMP]), r.ms[LAST], r.ms_min[LAST], speedup_last, speedup_last_min,
               r.attn_ms[LAST], r.fwd_ms[LAST], jnum(b[7], 32, "%.3g", r.max_abs_diff[LAST]),
               jnum(b[8], 32, "%.3g", r.rel_norm_diff[LAST]), bench_cuda_json_keys(&r, keys, sizeof keys));
    } else {
        printf("%-20s %6zu %6u %6.3f %9.2f %9.2f %7.2fx %9.2f %9.2f %7.2fx %9.2f %7.2fx %9.2f %8.2fx %6.3f %8.2fx "
               "%8.2fx %11.3g %9.2g %9.2g %9.2g %8.1f %8.1f%s\n",
               c->name, w->n_tokens, r.n_compact, ratio, r.ms[OFF], r.ms[ON], speedup, r.ms_min[OFF], r.ms_min[ON],
               speedup_min, r.ms[CMP], speedup_cmp, r.ms[LAST], speedup_last, f, predicted, pw_speedup,
               r.max_abs_diff[ON], r.rel_norm_diff[ON], r.rel_norm_diff[CMP], r.rel_norm_diff[LAST], r.plan_us[ON],
               r.set_plan_us[ON], bench_cuda_text_keys(&r, keys, sizeof keys));
    }
    }
    const bench_cuda_result r = results[0];
    int rc = cli_finish_output(stdout, "standard output") == 0 ? 0 : 1;
    if (rc == 0 && dump) {
        bench_dump_row row = {c->name, "cuda", BENCH_DTYPE_NAMES[a->dtype], "median", a->layers, cfg->hidden_size,
                              r.n_compact, r.ms[OFF], r.ms[ON], last, last + pooled};
        rc = bench_dump_write(dump, a->dump_path, w, &row) == 0 ? 0 : 1;
    }
    free(last);
    return rc;
}

/* ---- the command --------------------------------------------------------------------------- */

/* The built-in model's config: the shape's, --layers layers, a vocabulary of 8,192. */
static rmlp_model_config builtin_config(const bench_args *a) {
    const model_shape *sh = a->shape;
    const arch_info *row = arch_by_id(sh->arch); /* its q/k norm and activation */
    return (rmlp_model_config){.architecture = sh->arch, .vocab_size = 8192, .hidden_size = sh->hidden,
                               .intermediate_size = sh->intermediate, .num_hidden_layers = (uint32_t)a->layers,
                               .num_attention_heads = sh->heads, .num_key_value_heads = sh->kv_heads,
                               .head_dim = sh->head_dim, .max_position_embeddings = 40960, .rms_norm_eps = 1e-6,
                               .rope_theta = sh->rope_theta, .tie_word_embeddings = sh->tie_word_embeddings,
                               .qk_norm = row->qk_norm, .activation = row->activation_default};
}

/* The built-in model (written to a temporary folder, removed after loading, or to --keep-model
 * DIR, kept), or --model DIR; loaded on the bench's device in its dtype. */
static int load_model(const bench_args *a, rmlp_model_config *cfg, rmlp_model **model) {
    rmlp_model_params params = rmlp_model_default_params();
    params.device = a->cuda ? RMLP_DEVICE_CUDA : RMLP_DEVICE_CPU;
    params.dtype = a->dtype;
    params.cpu_weight_dtype = a->cpu_weights;
    char tmp[] = "/tmp/radixmlp-bench-XXXXXX";
    const char *dir = a->model_dir ? a->model_dir : a->keep_model ? a->keep_model : tmp;
    double start = cli_now_ms();
    bool written = true;
    if (a->model_dir == NULL) {
        *cfg = builtin_config(a);
        if (a->keep_model && mkdir(dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "radixmlp: --keep-model %s: %s\n", dir, strerror(errno));
            return 1;
        }
        if (!a->keep_model && mkdtemp(tmp) == NULL) {
            fprintf(stderr, "radixmlp: cannot create a temporary folder %s: %s\n", tmp, strerror(errno));
            return 1;
        }
        written = tiny_model_write(dir, cfg, 1) == 0; /* says why when not */
    }
    rmlp_status status = written ? rmlp_model_load(dir, &params, model) : RMLP_ERR_IO;
    if (a->model_dir == NULL && a->keep_model == NULL) {
        char path[128];
        snprintf(path, sizeof path, "%s/model.safetensors", tmp), unlink(path);
        snprintf(path, sizeof path, "%s/config.json", tmp), unlink(path);
        rmdir(tmp);
    }
    if (!written) return 1;
    if (status == RMLP_OK) status = rmlp_model_get_config(*model, cfg);
    if (status != RMLP_OK) {
        fprintf(stderr, "radixmlp: %s\n", rmlp_last_error());
        return 1;
    }
    rmlp_cpu_bf16_gemm kind = RMLP_CPU_BF16_GEMM_NONE;
    const char *detail = "";
    if (rmlp_model_cpu_bf16_gemm(*model, &kind, NULL, &detail) == RMLP_OK && kind != RMLP_CPU_BF16_GEMM_NONE)
        fprintf(stderr, "radixmlp bench: bf16 GEMMs: %s\n", detail);
    rmlp_cpu_sgemm_kind sgemm;
    if (!a->cuda && rmlp_cpu_sgemm(&sgemm, &detail) == RMLP_OK)
        fprintf(stderr, "radixmlp bench: fp32 GEMMs: %s\n", detail);
    fprintf(stderr, "radixmlp bench: model %s%s%s (%u layers, hidden %u) on %s in %s, ready in %.1f s\n",
                a->model_dir ? dir : a->shape->name, a->keep_model ? ", written to " : "", a->keep_model ? dir : "",
                cfg->num_hidden_layers, cfg->hidden_size,
                a->cuda ? "cuda" : "cpu", a->cpu_weights == RMLP_DTYPE_BF16 ? "f32, bf16 weight matrices"
                : BENCH_DTYPE_NAMES[a->dtype], (cli_now_ms() - start) / 1e3);
    return 0;
}

static int make_workload(const bench_case *c, workload *w) {
    if (c->suffix == 0) return workload_rerank(w, c->n_seqs, 7);
    return workload_shared_prefix(w, c->n_seqs, c->prefix + c->suffix, c->prefix, 7);
}

/* Whether --case picks any of the first n cases (of the --batches file, else built in); when it
 * picks none, says so and names them. */
static bool any_case_wanted(const bench_args *a, const bench_batch *batches, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (cli_case_wanted(batches ? batches[k].name : cases[k].name, a->only, a->n_only)) return true;
    fprintf(stderr, "radixmlp bench: no case%s matches the --case names given; the cases are:", a->quick ? " of --quick" : "");
    for (size_t k = 0; k < n; k++) fprintf(stderr, " %s", batches ? batches[k].name : cases[k].name);
    fputc('\n', stderr);
    return false;
}

static void clamp_ids(workload *w, uint32_t vocab) {
    for (size_t i = 0; i < w->n_tokens; i++) w->input_ids[i] %= vocab;
}

/* ---- the cases of a run and the estimate of their time ------------------------------------- */

/* Whether built-in case k runs: --case picks by name (among the first three with --quick), --quick
 * takes the three smallest, --full all, and the main job one case per regime. */
static bool builtin_wanted(const bench_args *a, size_t k) {
    if (a->quick && k >= 3) return false;
    if (a->n_only) return cli_case_wanted(cases[k].name, a->only, a->n_only);
    return a->quick || a->full || cases[k].regime != NULL;
}

/* A case of the run: its batch (made here, ids within the model's vocabulary, or a --batches
 * file's), the size of its on run's plan, and its forwards' time by the cost model below. */
typedef struct planned_case {
    bench_case c;
    workload w;
    bool owned; /* w made here */
    uint32_t n_compact;
    double work_s;
} planned_case;

/* The cost model: a forward's GEMM flops per row and attention flops per (query, key) pair, at the
 * rates of one CPU thread of the reference machine (2 vCPUs of an AMD EPYC, OpenBLAS, fp32):
 * about 80 GFLOP/s of GEMM and 25 of attention, fitted to docs/bench/cpu-model.md's runs (within
 * 10% of each mode's time there). A run scales it by what its finished cases took. */
#define REF_GEMM_FLOPS_PER_THREAD 80e9
#define REF_ATTENTION_FLOPS_PER_THREAD 25e9

/* The (query, key) pairs of causal attention over rows at these positions. */
static double key_pairs(const uint32_t *pos, size_t rows) {
    double pairs = 0.0;
    for (size_t i = 0; i < rows; i++) pairs += (double)pos[i] + 1.0;
    return pairs;
}

/* Seconds of the case's forwards (--repeat rounds of off, on, compact and last) at the reference
 * rates; last counts as compact (one layer's MLP on fewer rows is within the model's error). */
static double case_work_s(const bench_args *a, const rmlp_model_config *cfg, const workload *w, const rmlp_plan *on) {
    double q = (double)cfg->num_attention_heads * cfg->head_dim, kv = (double)cfg->num_key_value_heads * cfg->head_dim;
    double row_flops = 2.0 * cfg->hidden_size * (2.0 * q + 2.0 * kv + 3.0 * cfg->intermediate_size);
    double full_pairs = key_pairs(w->position_ids, w->n_tokens);
    double compact_rows = on->use_radix ? on->n_compact_padded : (double)w->n_tokens;
    double compact_pairs = on->use_radix ? key_pairs(on->compact_position_ids, on->n_compact) : full_pairs;
    double gemm = row_flops * ((double)w->n_tokens + 3.0 * compact_rows);  /* off, on, compact, last */
    double attention = 4.0 * q * (2.0 * full_pairs + 2.0 * compact_pairs);  /* full space twice, paths twice */
    double threads = rmlp_cpu_threads();
    return (double)a->layers * a->repeat *
           (gemm / (REF_GEMM_FLOPS_PER_THREAD * threads) + attention / (REF_ATTENTION_FLOPS_PER_THREAD * threads));
}

static void planned_free(planned_case *p, size_t n) {
    for (size_t k = 0; p && k < n; k++)
        if (p[k].owned) workload_free(&p[k].w);
    free(p);
}

/* The run's cases in order, each planned as its on run plans it. Returns 0, or 1 after saying why. */
static int plan_cases(const bench_args *a, const rmlp_model_config *cfg, const bench_batch *batches, size_t n_batches,
                      planned_case **out, size_t *n_out) {
    size_t cap = batches ? n_batches : N_CASES, n = 0;
    planned_case *p = calloc(cap, sizeof *p);
    rmlp_planner *planner = NULL;
    if (p == NULL || rmlp_planner_create(&planner) != RMLP_OK) {
        fprintf(stderr, "radixmlp bench: out of memory planning the cases\n");
        free(p);
        return 1;
    }
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < cap; k++) {
        planned_case *c = &p[n];
        if (batches) {
            if (!cli_case_wanted(batches[k].name, a->only, a->n_only)) continue;
            *c = (planned_case){.c = {batches[k].name, 0, 0, 0, 1.0, NULL}, .w = batches[k].w};
        } else {
            if (!builtin_wanted(a, k)) continue;
            *c = (planned_case){.c = cases[k], .owned = true};
            if (make_workload(&cases[k], &c->w) != 0) {
                fprintf(stderr, "radixmlp bench: %s: out of memory building the batch\n", cases[k].name);
                rc = 1;
                break;
            }
            clamp_ids(&c->w, cfg->vocab_size); /* a file's ids are the model's, or refused */
        }
        n++;
        rmlp_plan_params params = rmlp_plan_default_params();
        params.threshold = c->c.threshold;
        rmlp_plan on;
        if (rmlp_plan_build(planner, c->w.input_ids, c->w.position_ids, c->w.n_tokens, c->w.cu_seqlens, c->w.n_seqs,
                            &params, &on) != RMLP_OK) {
            fprintf(stderr, "radixmlp bench: %s: %s\n", c->c.name, rmlp_last_error());
            rc = 1;
            break;
        }
        c->n_compact = on.n_compact;
        c->work_s = case_work_s(a, cfg, &c->w, &on);
    }
    rmlp_planner_free(planner);
    if (rc != 0) {
        planned_free(p, n);
        return 1;
    }
    *out = p, *n_out = n;
    return 0;
}

/* Seconds cases [k, n) should take: their work scaled by what the finished ones took, or at the
 * reference rates before any has finished (on the CPU; NAN on CUDA, whose rates it does not know). */
static double seconds_left(const bench_args *a, const planned_case *p, size_t k, size_t n, double done_work,
                           double done_s) {
    double work = 0.0;
    for (size_t j = k; j < n; j++) work += p[j].work_s;
    if (done_work > 0.0) return work * done_s / done_work;
    return a->cuda ? NAN : work;
}

/* --list: the cases a run would time, with N, N', what each shows and its estimate; runs nothing. */
static int print_list(const bench_args *a, const planned_case *p, size_t n) {
    double total = seconds_left(a, p, 0, n, 0.0, 0.0);
    char all[64] = "";
    if (!isnan(total)) snprintf(all, sizeof all, "; about %.0f s in all, plus the model's setup", total);
    if (!a->json)
        printf("# the cases of `radixmlp bench%s`: N, N' of the on run, the regime each shows, and the seconds its\n"
               "# off, on, compact and last forwards (--repeat %lu, %lu layers) should take on %u CPU threads at the\n"
               "# reference machine's rates (- on CUDA)%s\n%-22s %7s %7s %6s %8s  %s\n",
               a->full ? " --full" : a->quick ? " --quick" : "", a->repeat, a->layers, rmlp_cpu_threads(), all, "case",
               "N", "N'", "ratio", "est s", "regime");
    for (size_t k = 0; k < n; k++) {
        const planned_case *c = &p[k];
        char est[32], regime[64];
        double ratio = (double)c->n_compact / c->w.n_tokens, s = seconds_left(a, p, k, k + 1, 0.0, 0.0);
        snprintf(est, sizeof est, isnan(s) ? (a->json ? "null" : "-") : "%.1f", s);
        snprintf(regime, sizeof regime, c->c.regime ? (a->json ? "\"%s\"" : "%s") : (a->json ? "null" : "-"),
                 c->c.regime);
        if (a->json)
            printf("{\"case\": \"%s\", \"n_seqs\": %zu, \"n_tokens\": %zu, \"n_compact\": %u, \"regime\": %s, "
                   "\"estimate_s\": %s}\n", c->c.name, c->w.n_seqs, c->w.n_tokens, c->n_compact, regime, est);
        else
            printf("%-22s %7zu %7u %6.3f %8s  %s\n", c->c.name, c->w.n_tokens, c->n_compact, ratio, est, regime);
    }
    return cli_finish_output(stdout, "standard output") == 0 ? 0 : 1;
}

/* --list: the run's cases and their estimate, from the built-in model's config (nothing written)
 * or --model's. */
static int list_cases(const bench_args *a, const bench_batch *batches, size_t n_batches) {
    rmlp_model_config cfg = builtin_config(a);
    bench_args listed = *a;
    if (a->model_dir) {
        rmlp_model *model = NULL;
        if (load_model(a, &cfg, &model) != 0) return 1;
        rmlp_model_free(model);
        listed.layers = cfg.num_hidden_layers;
    }
    planned_case *p = NULL;
    size_t n = 0;
    if (plan_cases(&listed, &cfg, batches, n_batches, &p, &n) != 0) return 1;
    int rc = print_list(&listed, p, n);
    planned_free(p, n);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    if (bench_serve_wanted(argc, argv)) return bench_serve(argc, argv); /* its own options: bench_serve.h */
    bench_args a;
    int rc = bench_args_parse(argc, argv, &a);
    if (rc != 0) return rc < 0 ? 0 : rc; /* --help: -1 */
    char device_name[256] = "cpu";
    /* Before writing a model of 1.8 GB: is there a device to run it on? */
    if (a.cuda && !a.list && bench_cuda_available(device_name, sizeof device_name) != 0) return 1;
    if (a.cuda && !a.list) fprintf(stderr, "radixmlp bench: cuda device 0: %s\n", device_name);
    bench_batch *batches = NULL; /* --batches: the cases, in place of the built-in ones */
    size_t n_batches = 0;
    if (a.batches_path && bench_batches_read(a.batches_path, &batches, &n_batches) != 0) return 1;
    size_t n_cases = batches ? n_batches : a.quick ? 3 : N_CASES;
    if (!a.decode && !a.trace && !any_case_wanted(&a, batches, n_cases)) { /* before writing a model */
        bench_batches_free(batches, n_batches);
        return 2;
    }
    if (a.list) {
        rc = list_cases(&a, batches, n_batches);
        bench_batches_free(batches, n_batches);
        return rc;
    }
    FILE *dump = NULL;
    if (a.dump_path && (dump = fopen(a.dump_path, "w")) == NULL) {
        fprintf(stderr, "radixmlp: --dump-batches %s: %s\n", a.dump_path, strerror(errno));
        bench_batches_free(batches, n_batches);
        return 1;
    }
    double start = cli_now_ms();
    rmlp_model_config cfg;
    rmlp_model *model = NULL;
    if (load_model(&a, &cfg, &model) != 0) {
        if (dump) fclose(dump);
        bench_batches_free(batches, n_batches);
        return 1;
    }
    if (a.model_dir) a.layers = cfg.num_hidden_layers;
    if (a.decode) {
        static const size_t elem_bytes[] = {4, 2, 2}; /* f32, f16, bf16 */
        decode_options o = {a.decode_steps, a.repeat, a.cuda ? device_name : NULL, elem_bytes[a.dtype],
                            a.only, a.n_only, a.json, a.variants, a.n_variants};
        rc = bench_decode(model, &cfg, &o);
        rmlp_model_free(model);
        if (dump) fclose(dump);
        return rc;
    }
    if (a.trace) {
        rc = bench_trace(a.trace, model, &cfg, a.cache_mb, a.passages, a.json);
        rmlp_model_free(model);
        if (dump) fclose(dump);
        return rc;
    }
    planned_case *p = NULL;
    size_t n = 0;
    if (plan_cases(&a, &cfg, batches, n_batches, &p, &n) != 0) {
        rmlp_model_free(model);
        bench_batches_free(batches, n_batches);
        if (dump) fclose(dump);
        return 1;
    }
    if (!batches && !a.quick && !a.full && !a.n_only) {
        fprintf(stderr, "radixmlp bench: the main job, one case per regime:");
        for (size_t k = 0; k < n; k++) fprintf(stderr, "%s %s (%s)", k ? "," : "", p[k].c.name, p[k].c.regime);
        fprintf(stderr, "; --full runs the whole grid (%zu cases), --list lists a run's cases\n", N_CASES);
    }
    if (!a.cuda) bench_cpu_print_header(&a);
    if (!a.json && a.cuda) {
        printf("# %s, %s, %s, %lu layers; ms: CUDA events around the forward, median and min of %lu rounds of off, "
               "on, cmp (on, attention in compact space: rmlp_forward_compact) and last (on, compact attention, each "
               "sequence's last row only: rmlp_forward_last) in turn after a warm-up round; f: "
               "position-wise share of the off run (built-in attention timed apart); pw spd: speedup of the "
               "position-wise part alone; rel-norm: of on - off, of cmp - off, of last - off's last rows; plan/set "
               "us: host, on run\n",
               device_name, a.model_name, BENCH_DTYPE_NAMES[a.dtype], a.layers, a.repeat);
        printf("%-20s %6s %6s %6s %9s %9s %8s %9s %9s %8s %9s %8s %9s %9s %6s %9s %9s %11s %9s %9s %9s %8s %8s\n",
               "case", "N", "N'", "ratio", "ms off", "ms on", "speedup", "min off", "min on", "spd min", "ms cmp",
               "spd cmp", "ms last", "spd last", "f", "predicted", "pw spd", "max|off-on|", "rel-norm", "rel cmp",
               "rel last", "plan us", "set us");
    }
    /* Progress on stderr: before each case, how far the run is and about how long the rest takes. */
    double done_work = 0.0, done_s = 0.0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        const planned_case *c = &p[k];
        double left = seconds_left(&a, p, k, n, done_work, done_s);
        char eta[48] = "";
        if (!isnan(left)) snprintf(eta, sizeof eta, ", about %.0f s left", left);
        fprintf(stderr, "radixmlp bench: [%zu/%zu] %s (%zu tokens, %lu layers)%s...\n", k + 1, n, c->c.name,
                c->w.n_tokens, a.layers, eta);
        double case_start = cli_now_ms();
        rc = a.cuda ? cuda_case(&a, device_name, model, &cfg, &c->c, &c->w, dump)
                    : bench_cpu_case(&a, model, &cfg, c->c.name, c->c.threshold, &c->w, dump);
        done_s += (cli_now_ms() - case_start) / 1e3;
        done_work += c->work_s;
    }
    if (rc == 0)
        fprintf(stderr, "radixmlp bench: %zu case%s in %.1f s\n", n, n == 1 ? "" : "s", (cli_now_ms() - start) / 1e3);
    planned_free(p, n);
    rmlp_model_free(model);
    bench_batches_free(batches, n_batches);
    if (dump && rc != 0) fclose(dump); /* the failure said why */
    else if (dump && cli_finish_output(dump, a.dump_path) != 0) rc = 1;
    return rc;
}
