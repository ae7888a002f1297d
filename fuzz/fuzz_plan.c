/*
 * fuzz_plan.c: libFuzzer target for rmlp_plan_build, through the public ABI only, with one
 * planner reused across all inputs (as a host reuses it across batches, errors included).
 *
 * The input bytes decode into plan parameters (padding on or off with a multiple that may be
 * 0 or past RMLP_MAX_PAD_MULTIPLE, a gate threshold that may be 0, -0, 1, NaN, negative,
 * infinite or above 1, or NULL params) and a batch: sequences built from a small alphabet
 * with prefixes copied from earlier sequences (so paths are shared), token ids that may be
 * the extremes of uint32, positions counting up from 0 or from a base, or raw; or raw
 * cu_seqlens (mostly invalid); or a valid batch with one entry of cu_seqlens or n_tokens
 * corrupted; rarely NULL arrays or a wrong struct_size, or an rmlp_planner_reserve first; or the
 * other gate rule (RMLP_GATE_TEI), a struct from 0.1.0 (without `gate`), one from a newer header
 * (extra bytes zero or not), or a gate that is no rule.
 * fuzz/make_plan_seeds.py writes the seeds in this layout; RMLP_FUZZ_DUMP=1 prints what an
 * input decodes to (a failure prints it too, ready to become a case in tests/test_bad_input.c).
 *
 * Oracle. The harness works out which preconditions of the header's contract this input
 * breaks. None: the build must succeed, clear rmlp_last_error(), pass bench/plan_verify.c
 * (maps, padding rows never scattered to, minimality, counts), obey the gate (threshold 0:
 * identity without the trie; else radix iff threshold >= 1 or n_distinct/n_tokens <
 * threshold), report the true number of distinct paths, and for small batches equal
 * tests/naive_plan.c element by element. Some: the status must be one a broken precondition
 * explains, with a "rmlp_plan_build: ..." message, and *out zeroed. A plan names the planner and
 * a generation above every earlier plan's. The struct_size rule (an earlier release's size or
 * this header's, or larger with zero extra bytes) and both gate rules are stated here again,
 * independently of the library. Any violation prints the
 * reason and aborts, which libFuzzer reports as a crash with the input saved.
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tests/naive_plan.h"
#include "bench/plan_verify.h"
#include "radix_mlp.h"

#define MAX_SEQS 16      /* structured batches: sequences */
#define MAX_SEQ_LEN 48   /* structured batches: rows per sequence */
#define MAX_RAW_SEQS 8   /* raw cu_seqlens: sequences */
#define NAIVE_MAX 256    /* batches up to this many rows are also compared with the O(N^2 L) reference */

/* The fuzz input, consumed front to back; past its end every read is 0. */
typedef struct reader {
    const uint8_t *at;
    size_t left;
} reader;

static uint8_t take_u8(reader *r) {
    if (r->left == 0) return 0;
    r->left--;
    return *r->at++;
}

static uint16_t take_u16(reader *r) { return (uint16_t)(take_u8(r) | (unsigned)take_u8(r) << 8); }

static uint32_t take_u32(reader *r) { return (uint32_t)take_u16(r) | (uint32_t)take_u16(r) << 16; }

static double take_f64(reader *r) {
    uint64_t bits = (uint64_t)take_u32(r) | (uint64_t)take_u32(r) << 32;
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* One decoded call of rmlp_plan_build. Arrays have a spare row so n_tokens may be corrupted
 * upwards by one without the harness itself reading out of bounds. */
typedef struct batch {
    uint32_t ids[MAX_SEQS * MAX_SEQ_LEN + 1];       /* (n_rows + 1) */
    uint32_t pos[MAX_SEQS * MAX_SEQ_LEN + 1];       /* (n_rows + 1) */
    uint32_t cu[MAX_SEQS + 1];                      /* (n_seqs + 1) */
    size_t n_rows;                                  /* rows actually written */
    size_t n_tokens, n_seqs;                        /* as passed */
    int null_ids, null_pos, null_cu, null_params;
    size_t reserve_extra; /* > 0: rmlp_planner_reserve(n_tokens + reserve_extra, ...) first */
    struct {
        rmlp_plan_params params;  /* as passed, struct_size included */
        unsigned char newer[16];  /* the fields of a newer header, when struct_size says so */
    } caller;
    rmlp_plan_params params; /* what the library must read from caller: the gate's default from a 0.1.0 struct */
} batch;

static batch current; /* the input being run (large, hence static; one input at a time) */

/* The decoded call, so a finding can be turned into a test case without decoding it by hand. */
static void dump(FILE *to, const batch *b) {
    const rmlp_plan_params *p = &b->caller.params;
    fprintf(to,
            "call: n_tokens=%zu n_seqs=%zu params=%s struct_size=%u pad=%d pad_multiple_of=%u threshold=%.17g "
            "gate=%d newer bytes:",
            b->n_tokens, b->n_seqs, b->null_params ? "NULL" : "set", p->struct_size, (int)p->pad, p->pad_multiple_of,
            p->threshold, p->gate);
    for (size_t i = 0; i < sizeof b->caller.newer; i++) fprintf(to, " %u", b->caller.newer[i]);
    fprintf(to, "\n");
    fprintf(to, "cu_seqlens%s:", b->null_cu ? " (passed NULL)" : "");
    for (size_t s = 0; s <= b->n_seqs; s++) fprintf(to, " %u", b->cu[s]);
    fprintf(to, "\ninput_ids%s:", b->null_ids ? " (passed NULL)" : "");
    for (size_t i = 0; i < b->n_rows; i++) fprintf(to, " %u", b->ids[i]);
    fprintf(to, "\nposition_ids%s:", b->null_pos ? " (passed NULL)" : "");
    for (size_t i = 0; i < b->n_rows; i++) fprintf(to, " %u", b->pos[i]);
    fprintf(to, "\n");
}

static void die(const char *fmt, const char *detail) {
    fprintf(stderr, "fuzz_plan: ");
    fprintf(stderr, fmt, detail);
    fprintf(stderr, "\n");
    dump(stderr, &current);
    fflush(stderr);
    abort();
}

/* A token id: mostly from an alphabet of `alpha` ids, sometimes an extreme of uint32. */
static uint32_t token(reader *r, uint32_t alpha) {
    static const uint32_t extremes[] = {0, 1, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
    uint8_t b = take_u8(r);
    return b < 240 ? b % alpha : extremes[b % (sizeof extremes / sizeof extremes[0])];
}

/* Sequences one after another; each may start with a copy of an earlier sequence's prefix. */
static void decode_structured(reader *r, batch *b) {
    uint8_t shape = take_u8(r);
    uint32_t alpha = 1 + (shape & 15u);
    int pos_kind = shape >> 4 & 3; /* 0, 1: 0.. per sequence; 2: raw; 3: offset from a base */
    b->n_seqs = 1 + take_u8(r) % MAX_SEQS;
    size_t n = 0;
    b->cu[0] = 0;
    for (size_t s = 0; s < b->n_seqs; s++) {
        size_t len = take_u8(r) % MAX_SEQ_LEN, start = n, copied = 0;
        uint8_t copy = take_u8(r);
        uint32_t base = pos_kind == 3 ? take_u8(r) : 0;
        if ((copy & 1) && s > 0) {
            size_t from = (copy >> 1) % s, from_len = b->cu[from + 1] - b->cu[from];
            copied = len < from_len ? len : from_len;
            if (take_u8(r) & 1) copied = copied / 2; /* diverge half way */
            memcpy(&b->ids[start], &b->ids[b->cu[from]], copied * sizeof(uint32_t));
            memcpy(&b->pos[start], &b->pos[b->cu[from]], copied * sizeof(uint32_t));
        }
        for (size_t k = copied; k < len; k++) {
            b->ids[start + k] = token(r, alpha);
            b->pos[start + k] = pos_kind == 2 ? take_u8(r) : base + (uint32_t)k;
        }
        n += len;
        b->cu[s + 1] = (uint32_t)n;
    }
    b->n_rows = b->n_tokens = n;
}

/* cu_seqlens straight from the input: mostly invalid, sometimes not. */
static void decode_raw(reader *r, batch *b) {
    b->n_seqs = take_u8(r) % (MAX_RAW_SEQS + 1);
    b->n_rows = b->n_tokens = take_u8(r) % 64;
    for (size_t s = 0; s <= b->n_seqs; s++) b->cu[s] = take_u8(r) & 0x80 ? take_u32(r) : take_u8(r) % 72;
    for (size_t i = 0; i < b->n_rows; i++) {
        b->ids[i] = token(r, 4);
        b->pos[i] = take_u8(r) % 8;
    }
}

/* A valid batch with one thing made wrong (which may happen to leave it valid). */
static void corrupt(reader *r, batch *b) {
    uint8_t what = take_u8(r);
    if (what & 1) {
        size_t s = take_u8(r) % (b->n_seqs + 1);
        int delta = (int)(take_u8(r) % 5) - 2;
        b->cu[s] = (uint32_t)((int64_t)b->cu[s] + delta);
    } else {
        if (what & 2)
            b->n_tokens++;
        else if (b->n_tokens > 0)
            b->n_tokens--;
    }
}

static void decode_params(reader *r, uint8_t mode, batch *b) {
    b->params = rmlp_plan_default_params();
    b->params.pad = mode & 1;
    switch (mode >> 1 & 3) {
    case 0: b->params.pad_multiple_of = 1 + take_u8(r) % 16; break;
    case 1: b->params.pad_multiple_of = take_u16(r); break;
    case 2: b->params.pad_multiple_of = 0; break;
    default: b->params.pad_multiple_of = RMLP_MAX_PAD_MULTIPLE - 1 + take_u8(r) % 3; break;
    }
    uint8_t t = take_u8(r);
    switch (mode >> 3 & 7) {
    case 0: b->params.threshold = (t & 1) ? -0.0 : 0.0; break;
    case 1: b->params.threshold = 1.0; break;
    case 2: b->null_params = 1; break; /* the defaults */
    case 3: b->params.threshold = t / 200.0; break; /* 0 .. 1.275 */
    case 4: b->params.threshold = take_f64(r); break;
    case 5: b->params.threshold = (t & 1) ? -NAN : NAN; break;
    case 6: b->params.threshold = -(t / 100.0) - 1e-300; break;
    default: b->params.threshold = (t & 1) ? INFINITY : 1.0 + t / 16.0; break;
    }
}

static void decode(const uint8_t *data, size_t size, batch *b) {
    reader r = {data, size};
    memset(b, 0, sizeof *b);
    uint8_t mode = take_u8(&r), abuse = take_u8(&r);
    decode_params(&r, mode, b);
    int kind = mode >> 6;
    if (kind == 2)
        decode_raw(&r, b);
    else
        decode_structured(&r, b);
    if (kind == 3) corrupt(&r, b);
    if ((abuse & 0xF0) == 0xE0) b->reserve_extra = 1 + (size_t)(abuse & 15) * 97;
    if ((abuse & 0xF0) == 0xF0) {
        b->null_ids = abuse & 1;
        b->null_pos = abuse >> 1 & 1;
        b->null_cu = abuse >> 2 & 1;
        if (abuse & 8) b->params.struct_size += (abuse & 1) ? 8 : (uint32_t)-4;
    }
    b->caller.params = b->params;
    if ((abuse & 0xF0) == 0xD0) { /* the gate's rule and the struct's version */
        unsigned arg = abuse >> 2 & 3;
        b->caller.params.gate = RMLP_GATE_TEI;
        switch (abuse & 3) {
        case 0: break;
        case 1: b->caller.params.struct_size = offsetof(rmlp_plan_params, gate); break; /* 0.1.0's struct */
        case 2: /* a newer header's, its extra bytes zero (arg 0) or one set */
            b->caller.params.struct_size += sizeof b->caller.newer;
            if (arg > 0) b->caller.newer[arg * 5] = (unsigned char)arg;
            break;
        default: b->caller.params.gate = arg == 0 ? -1 : 1 + (rmlp_gate)arg; break; /* no rule */
        }
    }
    /* What the library reads: a 0.1.0 struct has no gate. */
    b->params = b->caller.params;
    if (b->params.struct_size < offsetof(rmlp_plan_params, gate) + sizeof(rmlp_gate))
        b->params.gate = RMLP_GATE_DISTINCT;
}

/* The struct_size rule of versioned params: an earlier release's size (0.1.0's ended before
 * `gate`) or this header's, or larger (at most 1024) with every byte past this header's zero. */
static int struct_size_valid(const batch *b) {
    uint32_t size = b->caller.params.struct_size;
    if (size == sizeof(rmlp_plan_params) || size == offsetof(rmlp_plan_params, gate)) return 1;
    if (size < sizeof(rmlp_plan_params) || size > 1024) return 0;
    for (size_t i = sizeof(rmlp_plan_params); i < size; i++) {
        size_t k = i - sizeof(rmlp_plan_params);
        if (k >= sizeof b->caller.newer) return 0; /* the harness never makes such a size valid */
        if (b->caller.newer[k] != 0) return 0;
    }
    return 1;
}

/* Bit set of the statuses the broken preconditions of this call explain (0: none broken). */
#define WANT(status) (1u << -(status))
static unsigned explained_errors(const batch *b) {
    unsigned want = 0;
    const rmlp_plan_params *p = &b->params;
    if (!b->null_params) {
        if (!struct_size_valid(b) || isnan(p->threshold) || p->threshold < 0.0 ||
            (p->pad && (p->pad_multiple_of == 0 || p->pad_multiple_of > RMLP_MAX_PAD_MULTIPLE)) ||
            (p->gate != RMLP_GATE_DISTINCT && p->gate != RMLP_GATE_TEI))
            want |= WANT(RMLP_ERR_INVALID_ARGUMENT);
    }
    if (b->n_tokens > 0 && (b->null_ids || b->null_pos)) want |= WANT(RMLP_ERR_INVALID_ARGUMENT);
    if (b->n_seqs == 0) want |= WANT(RMLP_ERR_INVALID_SEQLENS);
    if (b->n_seqs > 0 && b->null_cu) want |= WANT(RMLP_ERR_INVALID_ARGUMENT);
    if (!b->null_cu) {
        int bad = b->cu[0] != 0 || b->cu[b->n_seqs] != b->n_tokens;
        for (size_t s = 1; s <= b->n_seqs; s++) bad |= b->cu[s] < b->cu[s - 1];
        if (bad) want |= WANT(RMLP_ERR_INVALID_SEQLENS);
    }
    return want;
}

static rmlp_planner *shared_planner(void) {
    static rmlp_planner *planner;
    if (planner == NULL && rmlp_planner_create(&planner) != RMLP_OK) die("rmlp_planner_create: %s", rmlp_last_error());
    return planner;
}

/* rmlp_planner_reserve must accept any padding multiple up to RMLP_MAX_PAD_MULTIPLE and refuse larger. */
static void reserve(const batch *b) {
    uint32_t pad = b->params.pad_multiple_of;
    rmlp_status status = rmlp_planner_reserve(shared_planner(), b->n_tokens + b->reserve_extra, b->n_seqs + 1, pad);
    rmlp_status want = pad > RMLP_MAX_PAD_MULTIPLE ? RMLP_ERR_INVALID_ARGUMENT : RMLP_OK;
    if (status != want) die("rmlp_planner_reserve returned an unexpected status: %s", rmlp_last_error());
    if (status != RMLP_OK && strncmp(rmlp_last_error(), "rmlp_planner_reserve: ", 22) != 0)
        die("rmlp_planner_reserve error without a message naming it: '%s'", rmlp_last_error());
}

/* Every plan names the shared planner and a generation above every earlier plan's. */
static void check_generation(const rmlp_plan *plan) {
    static uint64_t last;
    char detail[120];
    snprintf(detail, sizeof detail, "planner %p (shared %p), generation %llu after %llu", (const void *)plan->planner,
             (const void *)shared_planner(), (unsigned long long)plan->generation, (unsigned long long)last);
    if (plan->planner != shared_planner() || plan->generation <= last) die("plan origin: %s", detail);
    last = plan->generation;
}

static rmlp_status build(const batch *b, const rmlp_plan_params *params, rmlp_plan *plan) {
    memset(plan, 0xA5, sizeof *plan); /* garbage, so a missing "*out zeroed" shows */
    return rmlp_plan_build(shared_planner(), b->null_ids ? NULL : b->ids, b->null_pos ? NULL : b->pos, b->n_tokens,
                           b->null_cu ? NULL : b->cu, b->n_seqs, params, plan);
}

static void check_error(rmlp_status status, unsigned explained, const rmlp_plan *plan) {
    char detail[700];
    const char *message = rmlp_last_error();
    snprintf(detail, sizeof detail, "status %d (%s), explained set 0x%x: '%s'", status, rmlp_status_string(status),
             explained, message);
    if (status >= 0 || status < -31 || !(explained & WANT(status))) die("unexplained status: %s", detail);
    if (strncmp(message, "rmlp_plan_build: ", 17) != 0 || message[17] == '\0')
        die("error without a message naming rmlp_plan_build: %s", detail);
    static const rmlp_plan zero;
    if (memcmp(plan, &zero, sizeof zero) != 0) die("*out not zeroed on error: %s", detail);
}

/* The element-by-element comparison with the reference (valid batches of at most NAIVE_MAX rows). */
static void check_naive(const batch *b, const rmlp_plan *plan) {
    naive_plan ref;
    if (naive_plan_build(b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, &ref) != 0) die("naive_plan_build: %s", "OOM");
    char detail[200];
    snprintf(detail, sizeof detail, "n_distinct %u, reference %zu", plan->n_distinct, ref.n_compact);
    if (plan->n_distinct != ref.n_compact) die("distinct paths differ from the reference: %s", detail);
    if (plan->use_radix) {
        for (size_t j = 0; j < ref.n_compact; j++)
            if (plan->fold_gather[j] != ref.fold_gather[j] || plan->compact_input_ids[j] != ref.compact_ids[j] ||
                plan->compact_position_ids[j] != ref.compact_pos[j] || plan->compact_parent[j] != ref.compact_parent[j])
                die("compact row differs from the reference (%s)", detail);
        for (size_t i = 0; i < b->n_tokens; i++)
            if (plan->scatter[i] != ref.scatter[i]) die("scatter differs from the reference (%s)", detail);
    }
    naive_plan_free(&ref);
}

static void check_plan(const batch *b, const rmlp_plan_params *params, const rmlp_plan *plan) {
    char why[600];
    if (rmlp_last_error()[0] != '\0') die("success left rmlp_last_error() set: '%s'", rmlp_last_error());
    uint32_t pad = params->pad ? params->pad_multiple_of : 0;
    if (plan_verify(b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, pad, plan, why, sizeof why) != 0)
        die("plan_verify: %s", why);
    double threshold = params->threshold;
    snprintf(why, sizeof why, "threshold %.17g, gate %d, n_tokens %zu, n_distinct %u, use_radix %d", threshold,
             params->gate, b->n_tokens, plan->n_distinct, (int)plan->use_radix);
    check_generation(plan);
    /* TEI's rule: its threshold is an f32 (+inf past its range), radix off at <= 1e-6 and on empty
     * batches; else on iff threshold >= 1 or padded N' / N < threshold, in f32. */
    float tei_threshold = threshold > FLT_MAX ? INFINITY : (float)threshold;
    int tei = params->gate == RMLP_GATE_TEI;
    if (tei ? !(tei_threshold > 1e-6f) || b->n_tokens == 0 : threshold == 0.0) {
        if (plan->use_radix || plan->n_distinct != b->n_tokens) die("the gate must skip the trie: %s", why);
        return;
    }
    int want_radix;
    if (tei) {
        size_t padded = pad > 1 ? (plan->n_distinct + pad - 1) / pad * pad : plan->n_distinct;
        want_radix = tei_threshold >= 1.0f || (float)padded / (float)b->n_tokens < tei_threshold;
    } else {
        double ratio = b->n_tokens > 0 ? (double)plan->n_distinct / (double)b->n_tokens : 1.0;
        want_radix = threshold >= 1.0 || ratio < threshold;
    }
    if ((int)plan->use_radix != want_radix) die("gate decided wrongly: %s", why);
    if (b->n_tokens <= NAIVE_MAX) {
        check_naive(b, plan);
    } else if (!plan->use_radix) {
        /* The count the gate used, against a radix build of the same batch (minimal by plan_verify). */
        uint32_t n_distinct = plan->n_distinct;
        rmlp_plan_params always = rmlp_plan_default_params();
        always.threshold = 1.0;
        rmlp_plan radix;
        rmlp_status status = build(b, &always, &radix);
        if (status != RMLP_OK) die("rebuild with threshold 1 failed: %s", rmlp_last_error());
        if (plan_verify(b->ids, b->pos, b->n_tokens, b->cu, b->n_seqs, 0, &radix, why, sizeof why) != 0)
            die("plan_verify (threshold 1): %s", why);
        if (radix.n_compact != n_distinct) die("gate's n_distinct differs from the radix plan's n_compact: %s", why);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    batch *b = &current;
    decode(data, size, b);
    if (getenv("RMLP_FUZZ_DUMP") != NULL) dump(stdout, b); /* to see what a seed decodes to */
    unsigned explained = explained_errors(b);
    rmlp_plan_params defaults = rmlp_plan_default_params();
    const rmlp_plan_params *params = b->null_params ? NULL : &b->caller.params;
    rmlp_plan plan;
    if (b->reserve_extra > 0) reserve(b);
    rmlp_status status = build(b, params, &plan);
    if (explained != 0) {
        check_error(status, explained, &plan);
        fuzz_record_refusal("fuzz_plan", status, rmlp_last_error());
    } else if (status != RMLP_OK)
        die("a valid call failed: %s", rmlp_last_error());
    else
        check_plan(b, params != NULL ? &b->params : &defaults, &plan);
    return 0;
}
