/*
 * fuzz_cache.c: libFuzzer target for the prefix cache's index (cache/kv_pool.c, internal), driven
 * by random traces: one input is a pool size (0 to 63 slots) and a sequence of batches, each a few
 * sequences from a 3-token alphabet (so batches share, extend, diverge from and re-enter earlier
 * paths), planned by the library's planner with radix on or off and padding on or off; every batch
 * is begun, sometimes ended as failed, and the pool is sometimes cleared.
 *
 * Oracle, after every begin: a bypassed batch took no slot; otherwise every compact row has a used
 * slot whose key is its own (token, position) under its parent's slot, every computed row is the
 * end of the rows its sequence owns, the counters add up (hits + computed = rows looked up), and
 * the pool never holds more rows than slots. After every end: kv_pool_check (nothing locked, slot
 * accounting balanced, the tree consistent). Any violation aborts with the reason.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/kv_pool.h"
#include "harness.h"
#include "radix_mlp.h"

#define MAX_SEQS 6
#define MAX_LEN 12
#define MAX_ROWS (MAX_SEQS * MAX_LEN + RMLP_MAX_PAD_MULTIPLE)

static const char TARGET[] = "fuzz_cache";

static void fail(const char *what, int batch) {
    char detail[64];
    snprintf(detail, sizeof detail, "batch %d", batch);
    fuzz_violation(TARGET, what, detail);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static rmlp_planner *planner;
    if (planner == NULL && rmlp_planner_create(&planner) != RMLP_OK) return 0;
    if (size == 0) return 0;
    kv_pool *pool = kv_pool_new(data[0] & 63);
    if (pool == NULL) return 0;
    uint32_t ids[MAX_ROWS], pos[MAX_ROWS], cu[MAX_SEQS + 1];
    uint32_t slot_of[MAX_ROWS], computed[MAX_ROWS], cqo[MAX_SEQS + 1];
    size_t at = 1;
    for (int batch = 0; at + 2 <= size; batch++) {
        uint8_t head = data[at++];
        uint32_t n_seqs = 1 + head % MAX_SEQS, n = 0;
        cu[0] = 0;
        for (uint32_t s = 0; s < n_seqs; s++) {
            uint32_t len = at < size ? data[at++] % (MAX_LEN + 1) : 0; /* past the input's end: empty */
            for (uint32_t t = 0; t < len; t++) {
                ids[n] = at < size ? 1 + data[at] % 3 : 1; /* a small alphabet: paths repeat */
                at += t % 2 == 1;                          /* two tokens per byte, roughly */
                pos[n++] = t;
            }
            cu[s + 1] = n;
        }
        rmlp_plan_params params = rmlp_plan_default_params();
        params.threshold = head & 0x40 ? 0.0 : 1.0;
        params.pad = (head & 0x80) != 0;
        rmlp_plan plan;
        if (rmlp_plan_build(planner, ids, pos, n, cu, n_seqs, &params, &plan) != RMLP_OK) break;
        kv_pool_counts before = kv_pool_counts_of(pool);
        kv_batch b = {slot_of, computed, cqo, 0};
        if (kv_pool_begin(pool, &plan, &b) != 0) {
            kv_pool_counts after = kv_pool_counts_of(pool);
            if (after.used > before.used || after.lookups != before.lookups) fail("a bypassed batch changed the pool", batch);
        } else {
            kv_pool_counts after = kv_pool_counts_of(pool);
            if (after.lookups - before.lookups != plan.n_compact ||
                after.hits - before.hits + b.n_computed != plan.n_compact)
                fail("hits + computed != rows looked up", batch);
            if (after.used > after.slots) fail("more rows than slots", batch);
            for (uint32_t j = 0; j < plan.n_compact; j++) {
                uint32_t parent, token, position, pc = plan.compact_parent[j];
                if (kv_pool_key(pool, slot_of[j], &parent, &token, &position) != 0 ||
                    token != plan.compact_input_ids[j] || position != plan.compact_position_ids[j] ||
                    parent != (pc == RMLP_NO_PARENT ? RMLP_NO_PARENT : slot_of[pc]))
                    fail("a row's slot holds another key", batch);
            }
            for (uint32_t s = 0; s < plan.n_seqs; s++)
                for (uint32_t q = cqo[s]; q < cqo[s + 1]; q++)
                    if (computed[q] != plan.qo_indptr[s + 1] - (cqo[s + 1] - q))
                        fail("a computed row is not at the end of its sequence's", batch);
            kv_pool_end(pool, &plan, &b, (head & 0x20) == 0);
        }
        char why[200];
        if (kv_pool_check(pool, why, sizeof why) != 0) fuzz_violation(TARGET, "kv_pool_check", why);
        if ((head & 0x1F) == 0x1F) kv_pool_clear(pool);
    }
    kv_pool_free(pool);
    return 0;
}
