#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_batcher.c into fuzz/corpus/fuzz_batcher/ (deterministic).
Layout of an input: a head byte (bit 0 FIFO; capacity 1 + (head >> 1) % 16 requests; bit 5 a context
with a prefix cache attached, of 4, 12, 40 or 200 slots by bits 6-7), a token
capacity byte (1 + b % 96), a max_wait_us byte; then operations: a byte whose low 2 bits pick push
(0: id, length % 21, tokens two per byte), next (1: max_tokens % 48, max_seqs % 9; a max_tokens byte
of 48 or more asks rmlp_batcher_next_rows, max_rows from one more byte: % 64, 255 for SIZE_MAX),
remove (2: id) or the routing key of the last push (3: a knob byte), its top 6 bits moving the clock
on."""
import os
import random

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_batcher")
os.makedirs(here, exist_ok=True)
random.seed(33)


def seed(name, data):
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes(data))


def push(id_, tokens, clock=1):
    packed = [(tokens[i] - 1) | (((tokens[i + 1] - 1) if i + 1 < len(tokens) else 0) << 4)
              for i in range(0, len(tokens), 2)]
    return [clock << 2 | 0, id_, len(tokens)] + packed


def nxt(max_tokens, max_seqs, clock=1):
    return [clock << 2 | 1, max_tokens, max_seqs]


def nxt_rows(max_tokens, max_rows, max_seqs, clock=1):
    return [clock << 2 | 1, 48 + max_tokens, max_seqs, max_rows]


# Two groups sharing 3 tokens interleaved with loners, then batches under a tight budget (prefix).
groups = []
for i in range(6):
    groups += push(i, [1, 2, 3, 1 + i % 4, 2]) + push(10 + i, [4, 4, 4, 4, 1 + i % 4]) + push(20 + i % 4, [3, 1])
seed("prefix_groups", [15 << 1, 95, 200] + groups + nxt(15, 8) * 10)
seed("fifo_groups", [15 << 1 | 1, 95, 200] + groups + nxt(15, 8) * 10)
# The age bound: an old loner and a steady stream of a sharing group.
aged = push(5, [4, 3, 2, 1, 4, 3]) + [x for i in range(12) for x in push(i % 4, [1, 1, 1, 2, 1 + i % 4], 8) + nxt(12, 3, 8)]
seed("aged_loner", [15 << 1, 95, 20] + aged)
# Full queues, duplicates, empties, oversized requests, removals, zero budgets.
seed("bad_input", [3 << 1, 12, 5] + push(1, [1, 2, 3, 4]) + push(1, [1]) + push(2, []) + push(3, [1] * 20)
     + push(4, [2, 2, 2, 2, 2, 2, 2, 2]) + push(5, [1]) + [2, 9, 2, 4] + nxt(0, 3) + nxt(3, 0) + nxt(2, 2) + nxt(40, 8))
# Routing keys with and without a separator.
seed("route_keys", [15 << 1, 95, 50] + push(7, [1, 2, 3, 4, 1, 2, 3, 4, 2, 1]) + [3, 4, 3, 0x85, 3, 0xE3, 3, 0x21]
     + push(8, [4] * 20) + [3, 0xff, 3, 0x13])
# The same with a context's prefix cache attached: large (200 slots), and small enough to evict (12).
CACHED, LARGE, SMALL = 0x20, 3 << 6, 1 << 6
seed("cached_prefix_groups", [15 << 1 | CACHED | LARGE, 95, 200] + groups + nxt(15, 8) * 10 + groups + nxt(47, 8) * 6)
seed("cached_fifo_groups", [15 << 1 | 1 | CACHED | SMALL, 95, 200] + groups + nxt(15, 8) * 10)
seed("cached_aged_loner", [15 << 1 | CACHED | SMALL, 95, 20] + aged)
seed("random_prefix", [random.randrange(256) & ~1] + [random.randrange(256) for _ in range(1500)])
seed("random_fifo", [random.randrange(256) | 1] + [random.randrange(256) for _ in range(1500)])
seed("random_cached", [random.randrange(256) & ~1 | CACHED] + [random.randrange(256) for _ in range(1500)])
# A budget of compact rows (rmlp_batcher_next_rows) below the tokens': groups fit more requests.
seed("rows_prefix_groups", [15 << 1, 95, 200] + groups + nxt_rows(30, 9, 8) * 10)
seed("rows_fifo_groups", [15 << 1 | 1, 95, 200] + groups + nxt_rows(30, 9, 8) * 10)
seed("rows_cached_groups", [15 << 1 | CACHED | LARGE, 95, 200] + groups + nxt_rows(30, 9, 8) * 10)
seed("rows_aged_loner", [15 << 1, 95, 20] + push(5, [4, 3, 2, 1, 4, 3])
     + [x for i in range(12) for x in push(i % 4, [1, 1, 1, 2, 1 + i % 4], 8) + nxt_rows(12, 7, 3, 8)])
# max_rows 0 (refused), SIZE_MAX (255), above max_tokens; a request over max_rows alone, flagged.
seed("rows_bad_input", [7 << 1, 60, 5] + push(1, [1, 2, 3, 4, 1, 2]) + push(2, [1, 2, 3, 4, 2]) + nxt_rows(10, 0, 3)
     + nxt_rows(10, 5, 3) + nxt_rows(10, 5, 3) + push(3, [1, 2]) + push(4, [1, 2, 3]) + nxt_rows(5, 255, 3)
     + push(5, [2] * 9) + nxt_rows(20, 63, 8))
# Rows used up exactly, then requests adding none (prefixes of one taken): they still fit (prefix
# mode: all aged, max_wait_us 0, so the age bound checks it).
for name, head in (("rows_used_up_fifo", 3 << 1 | 1), ("rows_used_up_prefix", 3 << 1)):
    seed(name, [head, 60, 0] + push(1, [1, 2, 3, 4]) + push(2, [1, 2]) + push(3, [1, 2, 3]) + nxt_rows(10, 4, 3))
# All aged (max_wait_us 0): the second request fits the tokens left, not the rows: left for the next.
seed("rows_aged_left", [3 << 1, 60, 0] + push(1, [1, 2, 3, 4, 1, 2]) + push(2, [3, 3, 3, 3, 3]) + nxt_rows(20, 8, 3) * 2)
