/*
 * cmd_generate.c: `radixmlp generate`: text generation from a checkpoint with an LM head, every
 * prompt of the input in one batch (rmlp_generate_*: the prompts prefilled once through the prefix
 * cache, shared prefixes shared, then one decode step for all active sequences at a time).
 *   radixmlp generate --model DIR --input IN.jsonl [--output OUT.jsonl] [--max-new-tokens N]
 *                     [--temperature T] [--top-k K] [--top-p P] [--seed S] [--eos ID[,ID...]]
 *                     [--tokenizer tokenizer.json] [--cache-mb N] [--no-shared-prefix]
 * Each input line is {"input_ids": [...]}. Greedy by default (temperature 0); with a temperature,
 * the logits / T keep their top K (0: all) and the smallest set of most likely tokens whose
 * probability reaches P (1: all), and a token is drawn from them with a generator seeded from S
 * and the line's index (so a prompt's draw does not depend on the others). A sequence finishes at
 * an EOS id (--eos, else eos_token_id of DIR/generation_config.json or DIR/config.json; none when
 * neither has one) or after N new tokens (default 32). Each output line, in input order:
 * {"index": i, "prompt_tokens": n, "generated_ids": [...], "finish_reason": "eos"|"length"} and
 * "text" when --tokenizer gives a Hugging Face tokenizer.json (its vocabulary, byte-level BPE tokens
 * decoded to bytes; every token's id must be one of the model's, or the file is refused naming the
 * token). Timing and counters go to stderr; a library error is printed as the library said it,
 * before rmlp_generate_end (which, like every call, clears the thread's last error).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/cli.h"
#include "commands.h"
#include "radix_mlp.h"

typedef struct gen_args {
    const char *model, *input, *output, *tokenizer;
    unsigned long max_new, top_k, seed, cache_mb;
    double temperature, top_p;
    uint32_t eos[16];
    size_t n_eos;
    int eos_given, no_shared;
} gen_args;

static int gen_usage(FILE *to) {
    fprintf(to, "usage: radixmlp generate --model DIR --input IN.jsonl [--output OUT.jsonl] [--max-new-tokens N]\n"
                "                         [--temperature T] [--top-k K] [--top-p P] [--seed S] [--eos ID[,ID...]]\n"
                "                         [--tokenizer tokenizer.json] [--cache-mb N] [--no-shared-prefix]\n");
    return to == stdout ? 0 : 2;
}

#define MAX_EOS (sizeof ((gen_args *)0)->eos / sizeof ((gen_args *)0)->eos[0])

static int parse_eos(const char *text, gen_args *a) {
    unsigned long ids[MAX_EOS];
    if (cli_parse_ulong_list("--eos", text, UINT32_MAX, ids, MAX_EOS, &a->n_eos) != 0) return -1;
    for (size_t e = 0; e < a->n_eos; e++) a->eos[e] = (uint32_t)ids[e];
    return 0;
}

static int parse_gen_args(int argc, char **argv, gen_args *a) {
    *a = (gen_args){.max_new = 32, .top_p = 1.0};
    for (int i = 0; i < argc; i++) {
        const char *flag = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) return gen_usage(stdout), 1;
        if (strcmp(flag, "--no-shared-prefix") == 0) {
            a->no_shared = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "radixmlp: unknown option or missing value: %s\n", flag);
            return -1;
        }
        i++;
        int rc = 0;
        if (strcmp(flag, "--model") == 0) a->model = v;
        else if (strcmp(flag, "--input") == 0) a->input = v;
        else if (strcmp(flag, "--output") == 0) a->output = v;
        else if (strcmp(flag, "--tokenizer") == 0) a->tokenizer = v;
        else if (strcmp(flag, "--max-new-tokens") == 0) rc = cli_parse_count(flag, v, 1u << 20, &a->max_new);
        else if (strcmp(flag, "--top-k") == 0) rc = cli_parse_ulong(flag, v, UINT32_MAX, &a->top_k);
        else if (strcmp(flag, "--seed") == 0) rc = cli_parse_ulong(flag, v, ULONG_MAX, &a->seed);
        else if (strcmp(flag, "--cache-mb") == 0) rc = cli_parse_count(flag, v, 1ul << 24, &a->cache_mb);
        else if (strcmp(flag, "--eos") == 0) rc = parse_eos(v, a), a->eos_given = 1;
        else if (strcmp(flag, "--temperature") == 0) {
            rc = cli_parse_double(flag, v, &a->temperature);
            if (rc == 0 && a->temperature < 0) rc = -1, fprintf(stderr, "radixmlp: --temperature must be >= 0\n");
        } else if (strcmp(flag, "--top-p") == 0) {
            rc = cli_parse_double(flag, v, &a->top_p);
            if (rc == 0 && !(a->top_p > 0 && a->top_p <= 1)) rc = -1, fprintf(stderr, "radixmlp: --top-p must be in (0, 1]\n");
        } else {
            fprintf(stderr, "radixmlp: unknown option: %s\n", flag);
            return -1;
        }
        if (rc != 0) return -1;
    }
    if (!a->model || !a->input) {
        fprintf(stderr, "radixmlp: generate needs --model and --input\n");
        return -1;
    }
    return 0;
}

/* The JSON of the file at `path` if it is a regular file, as json_load_file reads it; NULL with
 * error->text set when it cannot be read or parsed, and *irregular set when it is not a regular file
 * (a FIFO is opened without blocking, then refused: json_load_file would wait for a writer). */
static json_t *load_regular_json(const char *path, json_error_t *error, bool *irregular) {
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *f = NULL;
    *irregular = fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode);
    if (fd >= 0 && !*irregular) f = fdopen(fd, "rb");
    if (f == NULL) {
        snprintf(error->text, sizeof error->text, "%s", *irregular ? "not a regular file" : strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    json_t *root = json_loadf(f, 0, error);
    fclose(f);
    return root;
}

/* eos_token_id (an id, a list of ids, or null) of DIR/generation_config.json, else of
 * DIR/config.json; 0, or -1 after printing why when it is anything else. */
static int read_eos(const char *dir, gen_args *a) {
    static const char *const files[] = {"generation_config.json", "config.json"};
    int rc = 0;
    for (size_t f = 0; f < 2 && a->n_eos == 0 && rc == 0; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        json_error_t error;
        bool irregular;
        json_t *root = load_regular_json(path, &error, &irregular);
        json_t *eos = root ? json_object_get(root, "eos_token_id") : NULL;
        if (irregular) { /* a missing file is no eos; one that cannot be read as a file is an error */
            fprintf(stderr, "radixmlp: %s: not a regular file; give --eos\n", path);
            rc = -1;
        }
        size_t n = json_is_array(eos) ? json_array_size(eos) : eos != NULL && !json_is_null(eos);
        for (size_t i = 0; i < n && rc == 0; i++) {
            json_t *id = json_is_array(eos) ? json_array_get(eos, i) : eos;
            if (i == MAX_EOS || !json_is_integer(id) || json_integer_value(id) < 0 ||
                json_integer_value(id) > UINT32_MAX) {
                fprintf(stderr, "radixmlp: %s: eos_token_id%s is not a token id (or more than %zu of them); "
                        "give --eos\n", path, json_is_array(eos) ? " list" : "", MAX_EOS);
                rc = -1;
            } else {
                a->eos[a->n_eos++] = (uint32_t)json_integer_value(id);
            }
        }
        json_decref(root);
    }
    return rc;
}

/* ---- sampling --------------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct scored {
    float logit;
    uint32_t id;
} scored;

static int by_logit(const void *a, const void *b) {
    const scored *x = a, *y = b;
    return x->logit > y->logit ? -1 : x->logit < y->logit ? 1 : (x->id > y->id) - (x->id < y->id);
}

/* The next token from logits (vocab): the argmax (lowest id on ties) at temperature 0, else a draw
 * from the top-k / top-p filtered softmax of logits / T. order: (vocab) scratch. */
static uint32_t sample(const float *logits, uint32_t vocab, const gen_args *a, uint64_t *rng, scored *order) {
    if (a->temperature == 0.0) {
        uint32_t best = 0;
        for (uint32_t v = 1; v < vocab; v++)
            if (logits[v] > logits[best]) best = v;
        return best;
    }
    for (uint32_t v = 0; v < vocab; v++) order[v] = (scored){logits[v], v};
    qsort(order, vocab, sizeof *order, by_logit);
    size_t keep = a->top_k != 0 && a->top_k < vocab ? a->top_k : vocab;
    double total = 0.0;
    for (size_t i = 0; i < keep; i++) total += exp(((double)order[i].logit - order[0].logit) / a->temperature);
    double mass = 0.0;
    for (size_t i = 0; i < keep; i++) { /* the nucleus: the fewest tokens whose probability reaches top_p */
        mass += exp(((double)order[i].logit - order[0].logit) / a->temperature) / total;
        if (mass >= a->top_p) {
            keep = i + 1;
            break;
        }
    }
    double sum = 0.0;
    for (size_t i = 0; i < keep; i++) sum += exp(((double)order[i].logit - order[0].logit) / a->temperature);
    double u = (double)(mix64(rng) >> 11) * 0x1p-53 * sum;
    for (size_t i = 0; i < keep; i++) {
        u -= exp(((double)order[i].logit - order[0].logit) / a->temperature);
        if (u < 0) return order[i].id;
    }
    return order[keep - 1].id;
}

/* ---- text: a tokenizer.json's vocabulary, byte-level tokens decoded -------------------------- */

typedef struct vocab_text {
    char **piece; /* (n) the token's bytes, NUL-terminated; NULL where the vocabulary has no entry */
    size_t n;
} vocab_text;

/* GPT-2's byte-level alphabet: the byte a code point stands for, or -1. */
static int byte_of(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    int extra = 0; /* the other bytes, in order, were mapped to 256, 257, ... */
    for (int b = 0; b < 256; b++) {
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) continue;
        if (cp == (uint32_t)(256 + extra)) return b;
        extra++;
    }
    return -1;
}

/* A token's UTF-8 text to the bytes it stands for (in place; shorter or equal). */
static void decode_piece(char *s) {
    const unsigned char *in = (const unsigned char *)s;
    char *out = s;
    while (*in) {
        uint32_t cp = *in;
        int len = cp < 0x80 ? 1 : (cp >> 5) == 6 ? 2 : (cp >> 4) == 14 ? 3 : 4;
        if (len > 1) cp &= 0xFFu >> (len + 1);
        for (int k = 1; k < len && in[k]; k++) cp = (cp << 6) | (in[k] & 0x3F);
        int b = byte_of(cp);
        if (b >= 0) *out++ = (char)b;
        else for (int k = 0; k < len && in[k]; k++) *out++ = (char)in[k];
        for (int k = 0; k < len && *in; k++) in++;
    }
    *out = '\0';
}

/* Sets piece `id` (a JSON value, checked: an integer in [0, vt->n)) of token `text`, byte-level
 * decoded or (special tokens) as is. 0, or -1 after printing why, naming WHAT[INDEX], the token and
 * the id. */
static int set_piece(const char *path, const char *what, size_t index, const char *text, json_t *id, int decode,
                     vocab_text *vt) {
    char where[64];
    snprintf(where, sizeof where, index == (size_t)-1 ? "%s" : "%s[%zu]", what, index);
    if (!json_is_integer(id) || json_integer_value(id) < 0 || (uint64_t)json_integer_value(id) >= vt->n) {
        char value[64] = "not an integer";
        if (json_is_integer(id)) snprintf(value, sizeof value, "%lld", (long long)json_integer_value(id));
        fprintf(stderr, "radixmlp: --tokenizer %s: %s: token '%.80s' has id %s, not one of the model's %zu ids (0 to %zu)\n",
                path, where, text, value, vt->n, vt->n - 1);
        return -1;
    }
    char **at = &vt->piece[json_integer_value(id)];
    free(*at);
    if ((*at = strdup(text)) == NULL) {
        fprintf(stderr, "radixmlp: --tokenizer %s: out of memory\n", path);
        return -1;
    }
    if (decode) decode_piece(*at);
    return 0;
}

/* The tokens of tokenizer.json `path` by id; every id must be one of the model's vocab_size. */
static int read_vocab(const char *path, uint32_t vocab_size, vocab_text *vt) {
    json_error_t error;
    bool irregular;
    json_t *root = load_regular_json(path, &error, &irregular);
    json_t *vocab = root ? json_object_get(json_object_get(root, "model"), "vocab") : NULL;
    if (irregular) {
        fprintf(stderr, "radixmlp: --tokenizer %s: not a regular file\n", path);
        return -1;
    }
    if (!json_is_object(vocab)) {
        fprintf(stderr, "radixmlp: --tokenizer %s: no model.vocab object%s%s\n", path, root ? "" : ": ",
                root ? "" : error.text);
        json_decref(root);
        return -1;
    }
    vt->n = vocab_size;
    vt->piece = calloc(vocab_size ? vocab_size : 1, sizeof *vt->piece);
    int rc = vt->piece ? 0 : -1;
    if (rc != 0) fprintf(stderr, "radixmlp: --tokenizer %s: out of memory\n", path);
    const char *key;
    json_t *id;
    json_object_foreach(vocab, key, id) if (rc == 0) rc = set_piece(path, "model.vocab", (size_t)-1, key, id, 1, vt);
    json_t *added = json_object_get(root, "added_tokens");
    if (rc == 0 && added != NULL && !json_is_array(added))
        rc = -1, fprintf(stderr, "radixmlp: --tokenizer %s: added_tokens is not an array\n", path);
    for (size_t i = 0; rc == 0 && i < json_array_size(added); i++) { /* special tokens: their text as is */
        json_t *t = json_array_get(added, i), *content = json_object_get(t, "content");
        if (!json_is_string(content)) {
            fprintf(stderr, "radixmlp: --tokenizer %s: added_tokens[%zu] has no \"content\" string\n", path, i);
            rc = -1;
        } else {
            rc = set_piece(path, "added_tokens", i, json_string_value(content), json_object_get(t, "id"), 0, vt);
        }
    }
    json_decref(root);
    return rc;
}

static void vocab_free(vocab_text *vt) {
    for (size_t i = 0; vt->piece && i < vt->n; i++) free(vt->piece[i]);
    free(vt->piece);
}

/* ---- the run ---------------------------------------------------------------------------------- */

typedef struct gen_state {
    uint32_t *out;      /* (n_seqs, max_new) generated ids */
    uint32_t *n_out;    /* (n_seqs) */
    int *by_eos;        /* (n_seqs) */
    uint64_t *rng;      /* (n_seqs) */
} gen_state;

static void write_results(FILE *out, const cli_sequences *seqs, const gen_state *g, const gen_args *a,
                          const vocab_text *vt) {
    for (size_t s = 0; s < seqs->n_seqs; s++) {
        json_t *line = json_object(), *ids = json_array();
        json_object_set_new(line, "index", json_integer((json_int_t)s));
        json_object_set_new(line, "prompt_tokens", json_integer(seqs->starts[s + 1] - seqs->starts[s]));
        size_t bytes = 1;
        for (uint32_t t = 0; t < g->n_out[s]; t++) {
            uint32_t id = g->out[s * a->max_new + t];
            json_array_append_new(ids, json_integer(id));
            if (vt->piece && id < vt->n && vt->piece[id]) bytes += strlen(vt->piece[id]);
        }
        json_object_set_new(line, "generated_ids", ids);
        json_object_set_new(line, "finish_reason", json_string(g->by_eos[s] ? "eos" : "length"));
        if (vt->piece) {
            char *text = calloc(bytes, 1);
            for (uint32_t t = 0; text && t < g->n_out[s]; t++) {
                uint32_t id = g->out[s * a->max_new + t];
                if (id < vt->n && vt->piece[id]) strcat(text, vt->piece[id]);
            }
            json_object_set_new(line, "text", json_stringn_nocheck(text ? text : "", text ? strlen(text) : 0));
            free(text);
        }
        char *dumped = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
        if (dumped) fprintf(out, "%s\n", dumped);
        free(dumped);
        json_decref(line);
    }
}

/* Picks each active sequence's next token from its logits row; finishes those at EOS or the
 * budget (a failed finish goes to *status). The tokens of the sequences still active go to next
 * (ascending). Returns how many. */
static size_t pick(rmlp_context *ctx, const float *logits, const uint32_t *active, size_t n_active, uint32_t vocab,
                   const gen_args *a, gen_state *g, scored *order, uint32_t *next, uint32_t *still,
                   rmlp_status *status) {
    size_t kept = 0;
    for (size_t i = 0; i < n_active && *status == RMLP_OK; i++) {
        uint32_t s = active[i], t = sample(logits + i * (size_t)vocab, vocab, a, &g->rng[s], order);
        g->out[s * a->max_new + g->n_out[s]++] = t;
        for (size_t e = 0; e < a->n_eos; e++) g->by_eos[s] |= t == a->eos[e];
        if (g->by_eos[s] || g->n_out[s] == a->max_new) {
            *status = rmlp_generate_finish(ctx, s);
        } else {
            next[kept] = t;
            still[kept++] = s;
        }
    }
    return kept;
}

int cmd_generate(int argc, char **argv) {
    gen_args a;
    int rc = parse_gen_args(argc, argv, &a);
    if (rc != 0) return rc > 0 ? 0 : gen_usage(stderr);
    cli_sequences seqs = {0};
    if ((!a.eos_given && read_eos(a.model, &a) != 0) || cli_read_jsonl(a.input, &seqs) != 0) return 1;
    FILE *out = a.output ? fopen(a.output, "w") : stdout;
    if (out == NULL) {
        fprintf(stderr, "radixmlp: cannot open --output %s: %s\n", a.output, strerror(errno));
        free(seqs.ids), free(seqs.starts);
        return 1;
    }
    rmlp_model *model = NULL;
    rmlp_model_config cfg;
    rmlp_context *ctx = NULL;
    rmlp_planner *planner = NULL;
    rmlp_plan plan;
    gen_state g = {0};
    vocab_text vt = {0};
    float *logits = NULL;
    scored *order = NULL;
    uint32_t *pos = malloc(seqs.n_tokens * sizeof(uint32_t)), *next = malloc(seqs.n_seqs * 2 * sizeof(uint32_t));
    rmlp_status status = rmlp_model_load(a.model, NULL, &model);
    if (status == RMLP_OK) status = rmlp_model_get_config(model, &cfg);
    /* the tokenizer's ids are checked against the model's vocabulary */
    if (status == RMLP_OK && a.tokenizer && read_vocab(a.tokenizer, cfg.vocab_size, &vt) != 0) rc = 1;
    if (status == RMLP_OK && rc == 0) {
        /* the cache: every prompt row and every row generated, unless --cache-mb says otherwise */
        uint64_t slot = (2ull * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim + cfg.hidden_size) * 4;
        rmlp_context_params cp = rmlp_context_default_params();
        cp.cache_bytes = a.cache_mb ? (uint64_t)a.cache_mb << 20
                                    : (seqs.n_tokens + (uint64_t)seqs.n_seqs * a.max_new + 64) * slot;
        status = rmlp_context_create_with_params(model, seqs.n_tokens, &cp, &ctx);
    }
    if (status == RMLP_OK && rc == 0) status = rmlp_planner_create(&planner);
    size_t vocab = status == RMLP_OK ? cfg.vocab_size : 0;
    g.out = calloc(seqs.n_seqs * a.max_new, sizeof *g.out), g.n_out = calloc(seqs.n_seqs, sizeof *g.n_out);
    g.by_eos = calloc(seqs.n_seqs, sizeof *g.by_eos), g.rng = calloc(seqs.n_seqs, sizeof *g.rng);
    logits = malloc(seqs.n_seqs * (vocab ? vocab : 1) * sizeof(float));
    order = a.temperature > 0 ? malloc((vocab ? vocab : 1) * sizeof *order) : NULL;
    if (status == RMLP_OK && rc == 0 && (!pos || !next || !g.out || !g.n_out || !g.by_eos || !g.rng || !logits ||
                                         (a.temperature > 0 && !order))) {
        fprintf(stderr, "radixmlp: out of memory for %zu prompts and a vocabulary of %zu\n", seqs.n_seqs, vocab);
        rc = 1;
    }
    for (size_t s = 0; s < seqs.n_seqs; s++) {
        for (uint32_t t = seqs.starts[s]; pos && t < seqs.starts[s + 1]; t++) pos[t] = t - seqs.starts[s];
        if (g.rng) g.rng[s] = (uint64_t)a.seed * 0x9E3779B97F4A7C15ull ^ (s + 1) * 0xD1B54A32D192ED03ull;
    }
    rmlp_plan_params pp = rmlp_plan_default_params();
    pp.threshold = 1.0; /* always merge: the prompts' shared rows are computed and cached once */
    rmlp_generate_params gp = rmlp_generate_default_params();
    gp.max_new_tokens = (uint32_t)a.max_new;
    gp.shared_prefix_attention = !a.no_shared;
    double start = cli_now_ms(), prefill_ms = 0.0;
    if (status == RMLP_OK && rc == 0)
        status = rmlp_plan_build(planner, seqs.ids, pos, seqs.n_tokens, seqs.starts, seqs.n_seqs, &pp, &plan);
    if (status == RMLP_OK && rc == 0) status = rmlp_generate_begin(ctx, &plan, &gp, logits);
    prefill_ms = cli_now_ms() - start;
    uint32_t *active = next + seqs.n_seqs;
    size_t n_active = seqs.n_seqs;
    for (size_t s = 0; active && s < seqs.n_seqs; s++) active[s] = (uint32_t)s;
    while (status == RMLP_OK && rc == 0 && n_active > 0) {
        n_active = pick(ctx, logits, active, n_active, (uint32_t)vocab, &a, &g, order, next, active, &status);
        if (status == RMLP_OK && n_active > 0) status = rmlp_generate_step(ctx, next, n_active, logits);
    }
    rmlp_generate_stats st = {0};
    if (status == RMLP_OK && rc == 0) status = rmlp_generate_get_stats(ctx, &st);
    if (status != RMLP_OK) { /* said before rmlp_generate_end, which clears the thread's last error */
        fprintf(stderr, "radixmlp: %s\n", rmlp_last_error());
        rc = 1;
    }
    if (ctx && rmlp_generate_end(ctx) != RMLP_OK && rc == 0)
        rc = 1, fprintf(stderr, "radixmlp: %s\n", rmlp_last_error());
    if (rc == 0) {
        write_results(out, &seqs, &g, &a, &vt);
        double total = cli_now_ms() - start;
        fprintf(stderr, "radixmlp generate: %zu prompts (%zu tokens, %u compact rows), prefill %.1f ms; %llu steps, "
                "%llu tokens (%llu computed rows) in %.1f ms: %.1f tokens/s, attention %.0f%% of the steps\n",
                seqs.n_seqs, seqs.n_tokens, plan.n_compact, prefill_ms, (unsigned long long)st.steps,
                (unsigned long long)st.rows, (unsigned long long)st.rows_computed, total - prefill_ms,
                st.step_ms > 0 ? 1e3 * (double)st.rows / st.step_ms : 0.0,
                st.step_ms > 0 ? 100.0 * st.attention_ms / st.step_ms : 0.0);
    }
    if (cli_finish_output(out, a.output ? a.output : "standard output") != 0) rc = 1;
    rmlp_planner_free(planner);
    rmlp_context_free(ctx);
    rmlp_model_free(model);
    free(g.out), free(g.n_out), free(g.by_eos), free(g.rng), free(logits), free(order), free(pos), free(next);
    free(seqs.ids), free(seqs.starts);
    vocab_free(&vt);
    return rc;
}
