#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_forged_plans.c into fuzz/corpus/fuzz_forged_plans/
(deterministic). Layout of an input: one byte of cache slots (& 63), then steps: a head byte
(sequences 1 + (head & 7) % 6; 0x08 compact output, 0x10 padding, 0x20 radix off, 0x40 forged,
0x80 clear the cache after), per sequence a length byte (% 13) and token bytes (% 3, about two
tokens per byte); a forged step then has a count byte (1 + % 4 mutations) and three bytes per
mutation: the array (% 8: scatter, fold_gather, compact_parent, compact_input_ids,
compact_position_ids, qo_indptr, run_indptr, run_start), the element, the change (low 2 bits:
+1, -1, value byte >> 2, RMLP_NO_PARENT)."""
import os
import random

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_forged_plans")
os.makedirs(here, exist_ok=True)
random.seed(31)

FORGED, COMPACT = 0x40, 0x08
SCATTER, GATHER, PARENT, IDS, POS, QO, RUN_INDPTR, RUN_START = range(8)


def seed(name, data):
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes(data))


# Two sequences [a b c d] and [a b e f g h] (token bytes: two tokens each), then forged.
batch_a = [1, 4, 0x00, 0x00, 6, 0x00, 0x01, 0x02]


def forged(*mutations, head=FORGED | 1):
    return [head] + batch_a[1:] + [len(mutations) - 1] + [b for m in mutations for b in m]


genuine = [1] + batch_a[1:]
seed("parent_not_scatters", [40] + forged((PARENT, 5, 2 << 2 | 2)) + genuine + [1 | COMPACT] + batch_a[1:])
seed("parent_out_of_range", [40] + forged((PARENT, 5, 63 << 2 | 2)) + genuine)
seed("parent_no_parent", [40] + forged((PARENT, 3, 3)) + genuine)
seed("qo_indptr_off", [40] + forged((QO, 1, 1)) + forged((QO, 1, 0), head=FORGED | COMPACT | 1) + genuine)
seed("scatter_wrong_in_range", [40] + forged((SCATTER, 9, 3 << 2 | 2)) + genuine)
seed("scatter_past_n_compact", [40] + forged((SCATTER, 9, 0)) + genuine)
seed("gather_not_first", [40] + forged((GATHER, 3, 1 << 2 | 2)) + genuine)
seed("runs_broken", [40] + forged((RUN_START, 2, 0), (RUN_INDPTR, 1, 1)) + genuine)
seed("consistent_other_batch", [40] + forged((IDS, 7, 1), (POS, 7, 0)) + genuine)
seed("small_cache_evictions", [3] + [b for i in range(12) for b in (forged((i % 8, i, i * 37 % 256))
                                                                     if i % 2 else genuine)])
seed("random_long", [random.randrange(64)] + [random.randrange(256) for _ in range(1500)])
seed("random_forged", [20] + [b for _ in range(30) for b in
                              [FORGED | random.randrange(256) & 0x3F, random.randrange(13), random.randrange(256),
                               random.randrange(13), random.randrange(256), 3] +
                              [random.randrange(256) for _ in range(12)] + genuine])
