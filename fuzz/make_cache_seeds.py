#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_cache.c into fuzz/corpus/fuzz_cache/ (deterministic).
Layout of an input: one byte of pool size (& 63 slots), then batches: a head byte (sequences
1 + head % 6; 0x40 radix off, 0x80 padding, 0x20 end as failed, low 5 bits all set: clear after),
per sequence a length byte (% 13) and token bytes (% 3, about two tokens per byte)."""
import os
import random

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_cache")
os.makedirs(here, exist_ok=True)
random.seed(7)


def seed(name, data):
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes(data))


seed("empty_pool", [0, 5, 8, 1, 2, 3, 4, 8, 1, 2, 3, 4])
seed("one_slot", [1, 2, 4, 1, 1, 4, 1, 1, 3, 2, 2])
seed("small_pool_evictions", [7] + [random.randrange(256) for _ in range(300)])
seed("large_pool_hits", [63] + [x for _ in range(20) for x in [3, 10, 0, 0, 0, 0, 0, 10, 0, 0, 0, 1, 1, 10, 0, 0, 2, 2, 2,
                                                                10, 0, 0, 0, 0, 0]])
seed("identity_repeats", [40] + [x for _ in range(10) for x in [0x41, 6, 0, 0, 0, 6, 0, 0, 0]])
seed("failures_and_clears", [30] + [x for i in range(40)
                                    for x in [(0x20 if i % 3 == 0 else 0) | (0x1F if i % 7 == 0 else 2), 5, 1, 1, 2,
                                              5, 1, 1, 1]])
seed("padded", [20] + [x for _ in range(15) for x in [0x82, 7, 2, 1, 0, 1, 9, 2, 1, 0, 2, 2]])
seed("random_long", [random.randrange(64)] + [random.randrange(256) for _ in range(2000)])
