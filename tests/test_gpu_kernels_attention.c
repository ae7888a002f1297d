/*
 * test_gpu_kernels_attention.c: the CUDA attention kernels of gpu/kernels.h against the CPU path
 * (cpu/cpu_ops.h): attention in the full layout and in compact space on planner-built plans, and a
 * decode step's attention by chains against cpu/decode_attention.h, in fp32, fp16 and bf16, on odd
 * sizes, outputs poisoned before each launch (gpu_kernels_util.h: tolerances, stream). Each case
 * takes a layer variant of model/model_ext.h in turn: plain causal attention, sliding windows of 5
 * and 40 keys (shorter than most sequences and shared prefixes: a shared prefix longer than the
 * window), a logit soft-cap, another scale; the chains with a window get each chain's depth and
 * each query's position. Without a CUDA device it prints SKIP and exits 77.
 * RMLP_GPU_KERNELS_QUICK=1 skips f16.
 */
#include "gpu_kernels_util.h"
#include "cpu/decode_attention.h"

/* Variant i of a layer's attention for head_dim hd: plain, window 5, window 40 with soft-cap 4,
 * soft-cap 2 with scale 0.3. */
static layer_attention variant(size_t i, size_t hd) {
    static const layer_attention v[] = {{0, 0.0f, 0.0f, 0}, {5, 0.0f, 0.0f, 0}, {40, 4.0f, 0.0f, 0}, {0, 2.0f, 0.3f, 0}};
    layer_attention la = v[i % COUNT(v)];
    if (la.scale == 0.0f) la.scale = 1.0f / sqrtf((float)hd);
    return la;
}

/* Causal varlen attention over batches of uneven sequences (one empty), GQA 4:1 and 1:1. */
static void test_attention(uint64_t *rng, int di) {
    static const uint32_t batches[][4] = {{1, 5, 67, 130}, {17, 0, 64, 33}, {15, 16, 33, 1}, {16, 16, 0, 31}};
    static const size_t head_dims[] = {16, 20, 24, 128, 256};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_dtype dt = DTYPES[di];
    for (size_t bi = 0; bi < COUNT(batches); bi++)
        for (size_t a = 0; a < COUNT(head_dims); a++)
            for (size_t h = 0; h < COUNT(heads); h++) {
                size_t n_seqs = 4, max_len = 0, hd = head_dims[a], nh = heads[h][0], nkv = heads[h][1];
                uint32_t cu[5] = {0};
                for (size_t s = 0; s < n_seqs; s++) {
                    cu[s + 1] = cu[s] + batches[bi][s];
                    if (batches[bi][s] > max_len) max_len = batches[bi][s];
                }
                size_t nt = cu[n_seqs], nq = nt * nh * hd, nk = nt * nkv * hd;
                layer_attention la = variant(bi + a + h, hd);
                float *q = random_values(rng, nq, -3, 3, dt), *k = random_values(rng, nk, -1, 1, dt);
                float *v = random_values(rng, nk, -1, 1, dt), *ref = tu_xmalloc(nq * 4);
                float *scratch = tu_xmalloc(cpu_attention_scratch_floats(max_len, hd) * 4);
                cpu_attention(q, k, v, cu, n_seqs, nh, nkv, hd, &la, scratch, ref);

                void *d_q = upload(q, nq, dt), *d_k = upload(k, nk, dt), *d_v = upload(v, nk, dt);
                void *d_out = poisoned(nq, dt);
                uint32_t *d_cu = upload_u32(cu, n_seqs + 1);
                char what[160];
                snprintf(what, sizeof what, "attention %s lengths=%u,%u,%u,%u heads=%zu/%zu head_dim=%zu window=%u "
                         "softcap=%g", DTYPE_NAMES[di], batches[bi][0], batches[bi][1], batches[bi][2], batches[bi][3],
                         nh, nkv, hd, la.window, la.softcap);
                if (launched(gpu_attention(d_q, d_k, d_v, d_out, d_cu, n_seqs, nt, nh, nkv, hd, la, dt, stream),
                             what)) {
                    float *got = download_as(d_out, nq, dt);
                    compare(what, got, ref, nq, TOLS[di]);
                    free(got);
                }
                cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out), cudaFree(d_cu);
                free(q), free(k), free(v), free(ref), free(scratch);
            }
}

/* qo_indptr (n_seqs + 1): the compact rows whose first occurrence lies in sequence s. */
static void owned_ranges(const rmlp_plan *plan, uint32_t *qo_indptr) {
    uint32_t j = 0;
    for (uint32_t s = 0; s <= plan->n_seqs; s++) {
        while (j < plan->n_compact && plan->fold_gather[j] < plan->cu_seqlens[s]) j++;
        qo_indptr[s] = j;
    }
}

/* Attention in compact space against cpu_compact_attention on planner-built plans of batches
 * sharing prefixes (deep trees, empty sequences), GQA 4:1 and 1:1; q/k/v separate or the columns
 * of one fused buffer; the rows past n_compact must stay untouched. */
static void test_compact_attention(uint64_t *rng, int di) {
    static const tu_batch_shape shapes[] = {{1, 40, 3, 0, 0}, {9, 70, 2, 33, 0}, {24, 20, 2, 17, 0},
                                            {5, 150, 50, 100, 0}};
    static const size_t head_dims[] = {20, 64, 128};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_dtype dt = DTYPES[di];
    size_t es = elem_size(dt);
    rmlp_planner *planner = NULL;
    if (!CHECK(rmlp_planner_create(&planner) == RMLP_OK, "planner: %s", rmlp_last_error())) return;
    rmlp_plan_params params = tu_params(1.0, 0);
    for (size_t sh = 0; sh < COUNT(shapes); sh++) {
        tu_batch b = tu_random_batch(rng, &shapes[sh]);
        rmlp_plan plan;
        if (b.n_tokens == 0 ||
            !CHECK(rmlp_plan_build(planner, b.ids, b.pos, b.n_tokens, b.cu, b.n_seqs, &params, &plan) == RMLP_OK,
                   "plan: %s", rmlp_last_error())) {
            tu_batch_free(&b);
            continue;
        }
        size_t nc = plan.n_compact, ns = plan.n_seqs, longest = 0;
        for (size_t s = 0; s < ns; s++)
            if (b.cu[s + 1] - b.cu[s] > longest) longest = b.cu[s + 1] - b.cu[s];
        uint32_t *qo = tu_xmalloc((ns + 1) * sizeof(uint32_t));
        owned_ranges(&plan, qo);
        uint32_t *d_qo = upload_u32(qo, ns + 1), *d_cu = upload_u32(b.cu, ns + 1);
        uint32_t *d_idx = upload_u32(plan.scatter, b.n_tokens);
        float *scratch = tu_xmalloc(cpu_attention_scratch_floats(longest, 256) * 4);
        for (size_t a = 0; a < COUNT(head_dims); a++)
            for (size_t h = 0; h < COUNT(heads); h++)
                for (int fused = 0; fused < 2; fused++) {
                    size_t hd = head_dims[a], nh = heads[h][0], nkv = heads[h][1];
                    size_t qd = nh * hd, kvd = nkv * hd, width = qd + 2 * kvd, extra = 3;
                    float *qkv = random_values(rng, nc * width, -3, 3, dt), *ref = tu_xmalloc(nc * qd * 4);
                    size_t qs = fused ? width : qd, ks = fused ? width : kvd;
                    /* separate: q, k, v packed one after the other, each dense */
                    const float *q = qkv, *k = fused ? qkv + qd : qkv + nc * qd;
                    const float *v = fused ? qkv + qd + kvd : qkv + nc * (qd + kvd);
                    cpu_attention_rows rows = {q, k, v, ref, qs, ks, ks, qd, 0};
                    layer_attention la = variant(sh + a + h + (size_t)fused, hd);
                    cpu_compact_attention(&rows, qo, b.cu, plan.scatter, ns, nh, nkv, hd, &la, scratch);
                    void *d_qkv = upload(qkv, nc * width, dt), *d_out = poisoned((nc + extra) * qd, dt);
                    char *base = d_qkv;
                    gpu_compact_rows d_rows = {base, base + (size_t)(k - qkv) * es, base + (size_t)(v - qkv) * es,
                                               d_out, qs, ks, ks, qd};
                    char what[200];
                    snprintf(what, sizeof what, "compact attention %s N=%zu N'=%zu seqs=%zu heads=%zu/%zu "
                             "head_dim=%zu %s window=%u softcap=%g", DTYPE_NAMES[di], b.n_tokens, nc, ns, nh, nkv, hd,
                             fused ? "fused" : "separate", la.window, la.softcap);
                    if (launched(gpu_compact_attention(&d_rows, d_qo, d_cu, d_idx, ns, nc, nh, nkv, hd, la, dt,
                                                       stream),
                                 what)) {
                        float *got = download_as(d_out, (nc + extra) * qd, dt);
                        compare(what, got, ref, nc * qd, TOLS[di]);
                        size_t written = 0;
                        for (size_t i = nc * qd; i < (nc + extra) * qd; i++) written += !isnan(got[i]);
                        CHECK(written == 0, "%s: %zu elements past the compact rows written", what, written);
                        free(got);
                    }
                    cudaFree(d_qkv), cudaFree(d_out);
                    free(qkv), free(ref);
                }
        cudaFree(d_qo), cudaFree(d_cu), cudaFree(d_idx);
        free(qo), free(scratch);
        tu_batch_free(&b);
    }
    rmlp_planner_free(planner);
}

/* A decode step's attention by chains (gpu_chain_attention, then gpu_merge_states) against
 * cpu_decode_attention: queries whose paths share a prefix of P slots, subgroups sharing more, each
 * path ending in the query's own slot; the chains cut with and without shared prefixes
 * (decode_build_chains), GQA 4:1 and 1:1, head_dim 20, 128 and 256 (the kernel's largest tile and
 * its shared-memory opt-in); the device gets the chains packed as generate.c packs them. */
static void test_chain_attention(uint64_t *rng, int di) {
    enum { QUERIES = 40, SLOTS = 120 + QUERIES * 30, MAX_PATH = 120 }; /* > 16 queries: a chain over several tiles */
    static const size_t head_dims[] = {20, 128, 256};
    static const size_t heads[][2] = {{8, 2}, {4, 4}};
    rmlp_dtype dt = DTYPES[di];
    uint32_t paths[QUERIES * MAX_PATH], len[QUERIES], next = 0;
    uint32_t common = tu_rand_range(rng, 1, 60), group_len[3];
    for (int g = 0; g < 3; g++) group_len[g] = tu_rand_range(rng, 0, 20);
    for (uint32_t r = 0; r < QUERIES; r++) { /* common prefix, then the group's part, then its own */
        uint32_t *p = paths + r * MAX_PATH, g = r % 3, own = tu_rand_range(rng, 1, 30), n = 0;
        for (uint32_t i = 0; i < common; i++) p[n++] = i;
        for (uint32_t i = 0; i < group_len[g]; i++) p[n++] = 60 + g * 20 + i;
        for (uint32_t i = 0; i < own; i++) p[n++] = 120 + next++;
        len[r] = n;
    }
    uint32_t *below = calloc(SLOTS, 4), *chain_of = malloc(SLOTS * 4);
    memset(chain_of, 0xFF, SLOTS * 4);
    decode_chain *chains = malloc(decode_max_chains(QUERIES) * sizeof *chains);
    uint32_t *members = malloc(decode_max_members(QUERIES, MAX_PATH) * 4);
    for (int shared = 0; shared < 2; shared++)
        for (size_t a = 0; a < COUNT(head_dims); a++)
            for (size_t h = 0; h < COUNT(heads); h++) {
                size_t hd = head_dims[a], nh = heads[h][0], nkv = heads[h][1], qd = nh * hd, kvd = nkv * hd;
                size_t nc = decode_build_chains(paths, MAX_PATH, len, QUERIES, shared, below, chain_of, chains, members);
                /* packed: keys and members by chain, memberships by row */
                uint32_t kptr[2 * QUERIES + 2] = {0}, mptr[2 * QUERIES + 2] = {0}, rptr[QUERIES + 1] = {0};
                uint32_t keys[QUERIES * MAX_PATH], rows_of[QUERIES * MAX_PATH], fill[QUERIES] = {0};
                for (size_t c = 0; c < nc; c++) {
                    memcpy(keys + kptr[c], chains[c].keys, chains[c].n_keys * 4);
                    kptr[c + 1] = kptr[c] + chains[c].n_keys, mptr[c + 1] = chains[c].first + chains[c].count;
                }
                uint32_t n_members = mptr[nc];
                for (uint32_t i = 0; i < n_members; i++) rptr[members[i] + 1]++;
                for (uint32_t r = 0; r < QUERIES; r++) rptr[r + 1] += rptr[r];
                for (uint32_t i = 0; i < n_members; i++) rows_of[rptr[members[i]] + fill[members[i]]++] = i;
                float *q = random_values(rng, QUERIES * qd, -3, 3, dt), *k = random_values(rng, SLOTS * kvd, -1, 1, dt);
                float *v = random_values(rng, SLOTS * kvd, -1, 1, dt), *ref = tu_xmalloc(QUERIES * qd * 4);
                float *scratch = tu_xmalloc(decode_scratch_floats(QUERIES, nh, nkv, hd, 1) * 4);
                layer_attention la = variant((size_t)shared + a + h, hd);
                cpu_attention_rows rows = {q, k, v, ref, qd, kvd, kvd, qd, 0};
                cpu_decode_attention(&rows, chains, nc, members, QUERIES, nh, nkv, hd, &la, len, NULL, scratch);
                uint32_t depth[2 * QUERIES + 1], row_pos[QUERIES]; /* a window's positions */
                for (size_t c = 0; c < nc; c++) depth[c] = chains[c].depth;
                for (uint32_t r = 0; r < QUERIES; r++) row_pos[r] = len[r] - 1;
                void *d_q = upload(q, QUERIES * qd, dt), *d_k = upload(k, SLOTS * kvd, dt), *d_v = upload(v, SLOTS * kvd, dt);
                void *d_out = poisoned(QUERIES * qd, dt);
                float *d_state = dev_alloc(n_members * nh * (hd + 2) * 4);
                uint32_t *d_kptr = upload_u32(kptr, nc + 1), *d_keys = upload_u32(keys, kptr[nc]);
                uint32_t *d_mptr = upload_u32(mptr, nc + 1), *d_members = upload_u32(members, n_members);
                uint32_t *d_rptr = upload_u32(rptr, QUERIES + 1), *d_rows = upload_u32(rows_of, n_members);
                gpu_compact_rows d_rows_at = {d_q, d_k, d_v, NULL, qd, kvd, kvd, qd};
                uint32_t *d_depth = upload_u32(depth, nc), *d_row_pos = upload_u32(row_pos, QUERIES);
                gpu_chain_layout lay = {d_kptr, d_keys, d_mptr, d_members, nc, n_members, d_depth, d_row_pos};
                char what[200];
                snprintf(what, sizeof what, "chain attention %s %s chains=%zu memberships=%u heads=%zu/%zu head_dim=%zu "
                         "window=%u softcap=%g", DTYPE_NAMES[di], shared ? "shared" : "per path", nc, n_members, nh, nkv,
                         hd, la.window, la.softcap);
                if (launched(gpu_chain_attention(&d_rows_at, &lay, nh, nkv, hd, la, d_state, dt, stream), what) &&
                    launched(gpu_merge_states(d_state, d_rptr, d_rows, QUERIES, nh, hd, d_out, qd, dt, stream), what)) {
                    float *got = download_as(d_out, QUERIES * qd, dt);
                    compare(what, got, ref, QUERIES * qd, TOLS[di]);
                    free(got);
                }
                cudaFree(d_q), cudaFree(d_k), cudaFree(d_v), cudaFree(d_out), cudaFree(d_state);
                cudaFree(d_kptr), cudaFree(d_keys), cudaFree(d_mptr), cudaFree(d_members), cudaFree(d_rptr), cudaFree(d_rows);
                cudaFree(d_depth), cudaFree(d_row_pos);
                free(q), free(k), free(v), free(ref), free(scratch);
            }
    free(below), free(chain_of), free(chains), free(members);
    /* a row with no membership (no key at all) merges to zeros, not 0/0 */
    uint32_t no_members[2] = {0, 0};
    uint32_t *d_none = upload_u32(no_members, 2);
    void *d_out = poisoned(2 * 8, dt);
    if (launched(gpu_merge_states((const float *)d_none, d_none, d_none, 1, 2, 8, d_out, 16, dt, stream),
                 "merge of a row with no membership")) {
        float *got = download_as(d_out, 2 * 8, dt);
        int zeros = 1;
        for (int i = 0; i < 2 * 8; i++) zeros &= got[i] == 0.0f;
        CHECK(zeros, "%s: merge of a row with no membership: not all zeros (first %g)", DTYPE_NAMES[di], got[0]);
        free(got);
    }
    cudaFree(d_none), cudaFree(d_out);
}

int main(void) {
    int rc = gpu_kernels_begin();
    if (rc >= 0) return rc;
    uint64_t rng = 0x5EEDu;
    for (int di = 0; di < (int)COUNT(DTYPES); di += gpu_kernels_dtype_step()) {
        test_attention(&rng, di);
        test_compact_attention(&rng, di);
        test_chain_attention(&rng, di);
    }
    CUDA_MUST(cudaStreamDestroy(stream));
    return tu_summary();
}
