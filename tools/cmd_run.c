/*
 * cmd_run.c: `radixmlp run`: a checkpoint on a JSONL batch.
 *   radixmlp run --model DIR --input IN.jsonl --output OUT.jsonl [--pooling last|mean|first|none]
 *                [--normalize] [--score-tokens A,B] [--threshold T] [--pad M] [--gate distinct|tei]
 *                [--no-radix] [--attention full|compact|auto] [--cache-mb N] [--max-batch-tokens N]
 *                [--cpu-weights f32|bf16]
 * Each input line is {"input_ids": [...]} (one sequence, positions 0..len-1). The file is one
 * batch, or batches of at most N tokens. Each output line, in input order, is
 * {"index": i, "embedding": [...]} (pooling), {"index": i, "hidden_states": [[...], ...]}
 * (--pooling none) or {"index": i, "score": p, "logits": [a, b]} (--score-tokens: the reranker
 * probability of token A against token B at the last position). Scores and last pooling run
 * rmlp_forward_last (the last layer's post-attention on each sequence's last row only).
 * --attention compact runs attention in compact space (rmlp_forward_compact for the other
 * poolings, read through the plan's scatter); auto does so when the gate chose radix. A summary
 * per batch (N, N', ratio, gate, attention, plan and forward time) goes to stderr. --cache-mb N
 * gives the context a prefix KV cache of N MB (rows seen in an earlier batch are not computed
 * again); its counters go to stderr at the end. --cpu-weights bf16 holds the layers' weight
 * matrices in bf16 (rmlp_model_params::cpu_weight_dtype).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli.h"
#include "commands.h"
#include "radix_mlp.h"

typedef struct run_args {
    const char *model, *input, *output;
    rmlp_pooling pooling; /* 0: none */
    bool normalize, score;
    uint32_t score_a, score_b;
    unsigned long max_batch_tokens;
    rmlp_plan_params params;
    rmlp_attention_space attention;
    unsigned long cache_mb;
    rmlp_dtype cpu_weights;
} run_args;

typedef cli_sequences sequences;

static int run_usage(FILE *to) {
    fprintf(to, "usage: radixmlp run --model DIR --input IN.jsonl --output OUT.jsonl [--pooling last|mean|first|none]\n"
                "                    [--normalize] [--score-tokens A,B] [--threshold T] [--pad M] [--gate distinct|tei]\n"
                "                    [--no-radix] [--attention full|compact|auto] [--cache-mb N] [--max-batch-tokens N]\n"
                "                    [--cpu-weights f32|bf16]\n");
    return to == stdout ? 0 : 2;
}

static int parse_run_args(int argc, char **argv, run_args *a) {
    *a = (run_args){.pooling = RMLP_POOLING_LAST, .params = rmlp_plan_default_params()};
    for (int i = 0; i < argc; i++) {
        const char *flag = argv[i];
        unsigned long number = 0;
        if (strcmp(flag, "--normalize") == 0) a->normalize = true;
        else if (strcmp(flag, "--no-radix") == 0) a->params.threshold = 0.0;
        else if (i + 1 >= argc) {
            fprintf(stderr, "radixmlp: unknown option or missing value: %s\n", flag);
            return -1;
        } else {
            const char *value = argv[++i];
            if (strcmp(flag, "--model") == 0) a->model = value;
            else if (strcmp(flag, "--input") == 0) a->input = value;
            else if (strcmp(flag, "--output") == 0) a->output = value;
            else if (strcmp(flag, "--threshold") == 0) {
                if (cli_parse_double(flag, value, &a->params.threshold) != 0) return -1;
            } else if (strcmp(flag, "--pad") == 0) {
                if (cli_parse_ulong(flag, value, RMLP_MAX_PAD_MULTIPLE, &number) != 0) return -1;
                a->params.pad = true;
                a->params.pad_multiple_of = (uint32_t)number;
            } else if (strcmp(flag, "--max-batch-tokens") == 0) {
                if (cli_parse_count(flag, value, UINT32_MAX, &a->max_batch_tokens) != 0) return -1;
            } else if (strcmp(flag, "--gate") == 0) {
                if (cli_parse_gate(flag, value, &a->params.gate) != 0) return -1;
            } else if (strcmp(flag, "--cache-mb") == 0) {
                if (cli_parse_ulong(flag, value, 1ul << 20, &a->cache_mb) != 0) return -1;
            } else if (strcmp(flag, "--cpu-weights") == 0) {
                if (strcmp(value, "f32") != 0 && strcmp(value, "bf16") != 0) {
                    fprintf(stderr, "radixmlp: --cpu-weights expects f32 or bf16, got '%s'\n", value);
                    return -1;
                }
                a->cpu_weights = strcmp(value, "bf16") == 0 ? RMLP_DTYPE_BF16 : RMLP_DTYPE_F32;
            } else if (strcmp(flag, "--attention") == 0) {
                if (cli_parse_attention(flag, value, &a->attention) != 0) return -1;
            } else if (strcmp(flag, "--pooling") == 0) {
                static const char *const names[] = {"none", "last", "mean", "first"};
                a->pooling = -1;
                for (int p = 0; p < 4; p++)
                    if (strcmp(value, names[p]) == 0) a->pooling = p;
                if (a->pooling < 0) {
                    fprintf(stderr, "radixmlp: --pooling expects last, mean, first or none, got '%s'\n", value);
                    return -1;
                }
            } else if (strcmp(flag, "--score-tokens") == 0) {
                unsigned long pair[2];
                size_t n = 0;
                if (cli_parse_ulong_list(flag, value, UINT32_MAX, pair, 2, &n) != 0) return -1;
                if (n != 2) {
                    fprintf(stderr, "radixmlp: --score-tokens expects two token ids A,B, got '%s'\n", value);
                    return -1;
                }
                a->score = true, a->score_a = (uint32_t)pair[0], a->score_b = (uint32_t)pair[1];
            } else {
                fprintf(stderr, "radixmlp: unknown option: %s\n", flag);
                return -1;
            }
        }
    }
    if (!a->model || !a->input || !a->output) {
        fprintf(stderr, "radixmlp: run needs --model, --input and --output\n");
        return -1;
    }
    return 0;
}

int cli_read_jsonl(const char *path, cli_sequences *seqs) {
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (in == NULL) {
        fprintf(stderr, "radixmlp: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    *seqs = (sequences){0};
    size_t cap_tokens = 0, cap_seqs = 0, line_no = 0, len = 0;
    char *line = NULL, where[4200];
    int rc = 0;
    for (ssize_t got; rc == 0 && (got = getline(&line, &len, in)) > 0;) {
        snprintf(where, sizeof where, "%s:%zu", path, ++line_no);
        int kind = cli_line_kind(where, line, (size_t)got);
        if (kind != 0) {
            rc = kind < 0 ? -1 : 0;
            continue;
        }
        json_error_t error;
        json_t *root = json_loads(line, 0, &error);
        json_t *ids = root ? json_object_get(root, "input_ids") : NULL;
        if (!json_is_array(ids) || json_array_size(ids) == 0) {
            fprintf(stderr, "radixmlp: %s:%zu: expected {\"input_ids\": [...]} with at least one id%s%s\n", path,
                    line_no, root ? "" : ": ", root ? "" : error.text);
            rc = -1;
        }
        size_t n = rc == 0 ? json_array_size(ids) : 0;
        if (rc == 0 && (seqs->n_tokens + n > cap_tokens || seqs->n_seqs + 2 > cap_seqs)) {
            cap_tokens = 2 * (seqs->n_tokens + n), cap_seqs = 2 * (seqs->n_seqs + 2);
            uint32_t *grown_ids = realloc(seqs->ids, cap_tokens * sizeof(uint32_t));
            if (grown_ids) seqs->ids = grown_ids;
            uint32_t *grown_starts = realloc(seqs->starts, cap_seqs * sizeof(uint32_t));
            if (grown_starts) seqs->starts = grown_starts;
            if (!grown_ids || !grown_starts) rc = -1;
        }
        for (size_t t = 0; rc == 0 && t < n; t++) {
            json_t *id = json_array_get(ids, t);
            if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > UINT32_MAX) {
                fprintf(stderr, "radixmlp: %s:%zu: input_ids[%zu] is not a token id\n", path, line_no, t);
                rc = -1;
            } else {
                seqs->ids[seqs->n_tokens + t] = (uint32_t)json_integer_value(id);
            }
        }
        if (rc == 0) {
            seqs->starts[seqs->n_seqs] = (uint32_t)seqs->n_tokens;
            seqs->n_tokens += n;
            seqs->starts[++seqs->n_seqs] = (uint32_t)seqs->n_tokens;
        }
        json_decref(root);
    }
    free(line);
    if (rc == 0 && ferror(in)) {
        fprintf(stderr, "radixmlp: reading %s failed: %s\n", path, strerror(errno));
        rc = -1;
    }
    if (in != stdin) fclose(in);
    if (rc == 0 && seqs->n_seqs == 0) {
        fprintf(stderr, "radixmlp: %s has no sequences\n", path);
        rc = -1;
    }
    if (rc != 0) free(seqs->ids), free(seqs->starts), *seqs = (sequences){0};
    return rc;
}

/* Floats are written with 9 significant digits, enough for each to read back as the same float. */
static void write_floats(FILE *out, const float *values, size_t n) {
    fputc('[', out);
    for (size_t i = 0; i < n; i++) fprintf(out, i ? ", %.9g" : "%.9g", values[i]);
    fputc(']', out);
}

typedef struct runner {
    const run_args *args;
    rmlp_model_config cfg;
    rmlp_context *ctx;
    rmlp_planner *planner;
    uint32_t *pos, *cu;  /* batch scratch: (max tokens), (max seqs + 1) */
    float *hidden, *pooled, *logits, *probs;
} runner;

/* Runs sequences [first, last) as one batch and writes their lines. */
static int run_batch(runner *r, const sequences *seqs, size_t first, size_t last, FILE *out) {
    const run_args *a = r->args;
    size_t n_seqs = last - first, base = seqs->starts[first], n_tokens = seqs->starts[last] - base, hsz = r->cfg.hidden_size;
    for (size_t s = 0; s <= n_seqs; s++) r->cu[s] = seqs->starts[first + s] - (uint32_t)base;
    for (size_t s = 0; s < n_seqs; s++)
        for (uint32_t row = r->cu[s]; row < r->cu[s + 1]; row++) r->pos[row] = row - r->cu[s];
    rmlp_plan plan;
    double start = cli_now_ms();
    rmlp_status status =
        rmlp_plan_build(r->planner, seqs->ids + base, r->pos, n_tokens, r->cu, n_seqs, &a->params, &plan);
    double planned = cli_now_ms();
    /* compact: r->hidden holds the compact rows, batch row i being row plan.scatter[i] */
    bool compact = a->attention == RMLP_ATTENTION_COMPACT || (a->attention == RMLP_ATTENTION_AUTO && plan.use_radix);
    /* scores and last pooling read each sequence's last row only: rmlp_forward_last, its rows
     * read as sequences of one row (r->cu then 0, 1, ..., n_seqs) */
    bool last_rows = a->score || a->pooling == RMLP_POOLING_LAST;
    bool read_compact = compact && !last_rows;
    size_t rows = n_tokens; /* the rows r->hidden holds through r->cu */
    if (status == RMLP_OK && last_rows) {
        status = rmlp_forward_last(r->ctx, &plan, NULL, NULL, r->hidden);
        for (size_t s = 0; s <= n_seqs; s++) r->cu[s] = (uint32_t)s;
        rows = n_seqs;
    } else if (status == RMLP_OK) {
        status = compact ? rmlp_forward_compact(r->ctx, &plan, NULL, NULL, r->hidden)
                         : rmlp_forward(r->ctx, &plan, NULL, NULL, r->hidden);
    }
    double forward_ms = cli_now_ms() - planned;
    if (status == RMLP_OK && a->score)
        status = read_compact
                     ? rmlp_score_pair_compact(r->ctx, &plan, r->hidden, a->score_a, a->score_b, r->logits, r->probs)
                     : rmlp_score_pair(r->ctx, r->hidden, rows, r->cu, n_seqs, a->score_a, a->score_b, r->logits,
                                       r->probs);
    else if (status == RMLP_OK && a->pooling != 0)
        status = read_compact
                     ? rmlp_context_pool_compact(r->ctx, &plan, r->hidden, a->pooling, a->normalize, r->pooled)
                     : rmlp_pool(r->hidden, rows, (uint32_t)hsz, r->cu, n_seqs, a->pooling, a->normalize, r->pooled);
    if (status != RMLP_OK) {
        fprintf(stderr, "radixmlp: batch of lines %zu-%zu: %s\n", first + 1, last, rmlp_last_error());
        return -1;
    }
    for (size_t s = 0; s < n_seqs; s++) {
        fprintf(out, "{\"index\": %zu, ", first + s);
        if (a->score) {
            fprintf(out, "\"score\": %.9g, \"logits\": [%.9g, %.9g]", r->probs[s], r->logits[2 * s],
                    r->logits[2 * s + 1]);
        } else if (a->pooling != 0) {
            fputs("\"embedding\": ", out);
            write_floats(out, r->pooled + s * hsz, hsz);
        } else {
            fputs("\"hidden_states\": [", out);
            for (uint32_t row = r->cu[s]; row < r->cu[s + 1]; row++) {
                if (row > r->cu[s]) fputs(", ", out);
                write_floats(out, r->hidden + (size_t)(compact ? plan.scatter[row] : row) * hsz, hsz);
            }
            fputc(']', out);
        }
        fputs("}\n", out);
    }
    fprintf(stderr,
            "radixmlp run: lines %zu-%zu: B=%zu N=%zu N'=%u ratio=%.4f gate=%s attention=%s plan=%.1fus "
            "forward=%.1fms\n",
            first + 1, last, n_seqs, n_tokens, plan.n_compact, plan.compact_ratio, plan.use_radix ? "radix" : "identity",
            compact ? "compact" : "full", (planned - start) * 1e3, forward_ms);
    return 0;
}

/* End of the batch starting at line `first`: consecutive lines up to max_tokens tokens (0: all;
 * a longer line is a batch of its own). */
static size_t batch_end(const sequences *seqs, size_t first, unsigned long max_tokens) {
    if (max_tokens == 0) return seqs->n_seqs;
    size_t last = first + 1;
    while (last < seqs->n_seqs && seqs->starts[last + 1] - seqs->starts[first] <= max_tokens) last++;
    return last;
}

int cmd_run(int argc, char **argv) {
    run_args a;
    if (argc > 0 && strcmp(argv[0], "--help") == 0) return run_usage(stdout);
    if (parse_run_args(argc, argv, &a) != 0) return run_usage(stderr);
    sequences seqs;
    if (cli_read_jsonl(a.input, &seqs) != 0) return 1;

    size_t max_tokens = 0, max_seqs = 0;
    for (size_t first = 0, last; first < seqs.n_seqs; first = last) {
        last = batch_end(&seqs, first, a.max_batch_tokens);
        size_t tokens = seqs.starts[last] - seqs.starts[first];
        max_tokens = tokens > max_tokens ? tokens : max_tokens;
        max_seqs = last - first > max_seqs ? last - first : max_seqs;
    }
    runner r = {.args = &a};
    rmlp_model *model = NULL;
    FILE *out = strcmp(a.output, "-") == 0 ? stdout : fopen(a.output, "w");
    if (out == NULL) {
        fprintf(stderr, "radixmlp: cannot open --output %s: %s\n", a.output, strerror(errno));
        free(seqs.ids), free(seqs.starts);
        return 1;
    }
    rmlp_model_params model_params = rmlp_model_default_params();
    model_params.cpu_weight_dtype = a.cpu_weights;
    rmlp_status status = rmlp_model_load(a.model, &model_params, &model);
    const char *report = "";
    if (status == RMLP_OK) status = rmlp_model_load_report(model, &report);
    if (status == RMLP_OK && report[0] != '\0') fprintf(stderr, "radixmlp: %s: %s", a.model, report);
    if (status == RMLP_OK) status = rmlp_model_get_config(model, &r.cfg);
    rmlp_context_params context_params = rmlp_context_default_params();
    context_params.cache_bytes = (uint64_t)a.cache_mb << 20;
    context_params.attention_space = a.attention; /* where rmlp_forward_last runs attention */
    if (status == RMLP_OK) status = rmlp_context_create_with_params(model, max_tokens, &context_params, &r.ctx);
    if (status == RMLP_OK) status = rmlp_planner_create(&r.planner);
    int rc = 0;
    if (status != RMLP_OK) {
        fprintf(stderr, "radixmlp: %s\n", rmlp_last_error());
        rc = 1;
    } else {
        r.pos = malloc(max_tokens * sizeof(uint32_t));
        r.cu = malloc((max_seqs + 1) * sizeof(uint32_t));
        /* batch rows, or compact rows padded to at most RMLP_MAX_PAD_MULTIPLE - 1 more */
        r.hidden = malloc((max_tokens + RMLP_MAX_PAD_MULTIPLE) * r.cfg.hidden_size * sizeof(float));
        r.pooled = malloc(max_seqs * r.cfg.hidden_size * sizeof(float));
        r.logits = malloc(max_seqs * 2 * sizeof(float));
        r.probs = malloc(max_seqs * sizeof(float));
        if (!r.pos || !r.cu || !r.hidden || !r.pooled || !r.logits || !r.probs)
            rc = 1, fprintf(stderr, "radixmlp: out of memory for a batch of %zu tokens\n", max_tokens);
        /* a write that failed (a full disk) stops the run: cli_finish_output says why */
        for (size_t first = 0, last; rc == 0 && !ferror(out) && first < seqs.n_seqs; first = last) {
            last = batch_end(&seqs, first, a.max_batch_tokens);
            rc = run_batch(&r, &seqs, first, last, out) == 0 ? 0 : 1;
        }
    }
    rmlp_cache_stats st;
    if (rc == 0 && a.cache_mb != 0 && rmlp_context_cache_stats(r.ctx, &st) == RMLP_OK)
        fprintf(stderr,
                "radixmlp run: prefix cache: %llu batches (%llu bypassed), %llu of %llu rows hit (%.1f%%), %llu computed, "
                "%llu evicted, %llu of %llu slots used (%.1f of %lu MB)\n",
                (unsigned long long)st.batches, (unsigned long long)st.bypassed, (unsigned long long)st.hit_tokens,
                (unsigned long long)st.lookups, st.lookups ? 100.0 * st.hit_tokens / st.lookups : 0.0,
                (unsigned long long)st.computed_tokens, (unsigned long long)st.evicted_tokens,
                (unsigned long long)st.slots_used, (unsigned long long)st.slots, st.bytes_in_use / 1048576.0, a.cache_mb);
    free(r.pos), free(r.cu), free(r.hidden), free(r.pooled), free(r.logits), free(r.probs);
    free(seqs.ids), free(seqs.starts);
    rmlp_planner_free(r.planner);
    rmlp_context_free(r.ctx);
    rmlp_model_free(model);
    if (cli_finish_output(out, strcmp(a.output, "-") == 0 ? "standard output" : a.output) != 0) rc = 1;
    return rc;
}
