#!/usr/bin/env python3
"""make_plan_seeds.py: writes the seed corpus of fuzz_plan (committed under fuzz/corpus/fuzz_plan/)
in the byte layout fuzz_plan.c decodes, one small input per case the harness can express: shared
prefixes under the default, always-on and off gates, thresholds above 1, infinite, NaN, negative
and -0, padding multiples at and past RMLP_MAX_PAD_MULTIPLE and 0, raw and corrupted cu_seqlens,
NULL arrays, a wrong struct_size, rmlp_planner_reserve first, extreme token ids, raw and offset
positions, a 752-row batch and the empty batch; TEI's gate rule (padded length, f32, off at <= 1e-6),
a 0.1.0 struct (without `gate`), a newer header's struct with its extra bytes zero or not, and a
gate that is no rule. Run from anywhere (replaces the folder's files):
    python3 fuzz/make_plan_seeds.py
To see what a seed decodes to: RMLP_FUZZ_DUMP=1 build-fuzz/fuzz/fuzz_plan fuzz/corpus/fuzz_plan/<seed>
"""
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus", "fuzz_plan")


def mode(pad, pad_kind, thr_kind, batch_kind):
    """The first byte: bit 0 pad, bits 1-2 padding kind, 3-5 threshold kind, 6-7 batch kind."""
    return bytes([pad | pad_kind << 1 | thr_kind << 3 | batch_kind << 6])


def structured(alpha, pos_kind, seqs):
    """A structured batch (batch kinds 0, 1, 3): alphabet size, position kind (0: from 0, 2: raw,
    3: from a base) and per sequence (len, copy byte, diverge byte or None, token bytes[, base]).
    Checks that exactly the token bytes fuzz_plan.c will read are given (pairs of token and
    position when pos_kind == 2), so the bytes after them land where intended."""
    b = bytes([(alpha - 1) | pos_kind << 4, len(seqs) - 1])
    lens = []
    for i, s in enumerate(seqs):
        ln, copy, div, toks = s[:4]
        b += bytes([ln, copy])
        if pos_kind == 3:
            b += bytes([s[4] if len(s) > 4 else 0])
        copied = 0
        if copy & 1 and i > 0:
            b += bytes([div])
            copied = min(ln, lens[(copy >> 1) % i])
            if div & 1:
                copied //= 2
        need = (ln - copied) * (2 if pos_kind == 2 else 1)
        assert len(toks) == need, (i, len(toks), need)
        b += toks
        lens.append(ln)
    return b


def hdr(pad, pad_kind, thr_kind, batch_kind, abuse=0, pad_arg=None, t=0, f64=None):
    """Mode byte, abuse byte (0xF_: NULL arrays / struct_size, 0xE_: reserve first, 0xD_: gate rule
    and struct version: low 2 bits 0 TEI's rule, 1 a 0.1.0 struct, 2 a newer one, 3 no rule), the padding
    argument its kind reads, the threshold byte, and the raw double of threshold kind 4."""
    b = mode(pad, pad_kind, thr_kind, batch_kind) + bytes([abuse])
    if pad_kind == 0 or pad_kind == 3:
        b += bytes([pad_arg or 0])
    elif pad_kind == 1:
        b += struct.pack("<H", pad_arg or 0)
    b += bytes([t])
    if thr_kind == 4:
        b += struct.pack("<d", f64)
    return b


seeds = {}
body = structured(8, 0, [(12, 0, None, bytes([1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4])),
                         (10, 1, 1, bytes([5, 6, 7, 0, 1])), (12, 3, 0, bytes([7, 7])), (5, 1, 1, bytes([1, 2, 3]))])
# defaults (NULL params), 4 sequences sharing a system prompt.
seeds["defaults_shared_prefix"] = hdr(0, 0, 2, 0, pad_arg=3) + body
# threshold 1 (always radix), pad to 8.
seeds["always_pad8"] = hdr(1, 0, 1, 0, pad_arg=7) + body
# threshold 0 (trie skipped), pad set but unused; and -0.0.
seeds["off"] = hdr(1, 0, 0, 0, pad_arg=3) + body
seeds["minus_zero"] = hdr(0, 0, 0, 0, t=1) + body
# threshold t/200 = 0.75 on a batch with little sharing (the gate says identity).
seeds["gate_ratio"] = hdr(0, 0, 3, 0, t=150) + structured(3, 0, [(4, 0, None, bytes([0, 1, 2, 0])),
                                                                  (4, 0, None, bytes([0, 1, 2, 1]))])
# threshold above 1 and infinite.
seeds["above_one"] = hdr(1, 0, 7, 0, pad_arg=4, t=6) + body
seeds["infinite"] = hdr(0, 0, 7, 0, t=1) + body
# raw cu_seqlens (a flag byte, then the entry): valid [0, 3, 3, 6] over 6 rows; decreasing; no sequences.
seeds["raw_cu"] = hdr(0, 0, 1, 2) + bytes([3, 6, 0, 0, 0, 3, 0, 3, 0, 6]) + bytes([1, 0, 2, 1, 3, 2, 1, 0, 2, 1, 3, 2])
seeds["raw_cu_bad"] = hdr(0, 0, 1, 2) + bytes([2, 4, 0, 0, 0, 5, 0, 4]) + bytes([1, 0] * 4)
seeds["no_seqs"] = hdr(0, 0, 1, 2) + bytes([0, 0, 0, 0])
# raw cu_seqlens with a 32-bit entry (flag byte >= 0x80, then 4 bytes).
seeds["raw_cu_u32"] = (hdr(0, 0, 1, 2) + bytes([1, 2, 0, 0, 0x80]) + (2**32 - 1).to_bytes(4, "little")
                      + bytes([1, 0, 1, 0]))
# a valid batch with one cu entry moved, or n_tokens one too many.
seeds["corrupt_cu"] = hdr(0, 0, 1, 3) + body + bytes([1, 2, 4])
seeds["corrupt_n"] = hdr(0, 0, 1, 3) + body + bytes([2])
# NaN, a raw double (-inf), a negative threshold.
seeds["nan"] = hdr(0, 0, 5, 0) + body
seeds["raw_threshold"] = hdr(0, 0, 4, 0, f64=float("-inf")) + body
seeds["negative"] = hdr(0, 0, 6, 0, t=20) + body
# pad multiple 4097 (one past the limit), 4096 (the limit), 0; a u16 pad multiple.
seeds["pad_too_big"] = hdr(1, 3, 1, 0, pad_arg=2) + body
seeds["pad_limit"] = hdr(1, 3, 1, 0, pad_arg=1) + body
seeds["pad_zero"] = hdr(1, 2, 1, 0) + body
seeds["pad_u16"] = hdr(1, 1, 1, 0, pad_arg=300) + body
# NULL input_ids and cu_seqlens; a wrong struct_size.
seeds["null_arrays"] = hdr(0, 0, 1, 0, abuse=0xF5) + body
seeds["struct_size"] = hdr(0, 0, 1, 0, abuse=0xF8) + body
# rmlp_planner_reserve first (abuse byte 0xE_): a valid padding multiple, and 5000 (refused).
seeds["reserve"] = hdr(1, 0, 1, 0, abuse=0xE3, pad_arg=7) + body
seeds["reserve_bad_pad"] = hdr(1, 1, 1, 0, abuse=0xE1, pad_arg=5000) + body
# extreme token ids with raw positions.
seeds["extremes_raw_pos"] = hdr(0, 0, 1, 0) + structured(4, 2, [
    (6, 0, None, bytes([255, 0, 250, 1, 251, 2, 0, 3, 255, 4, 240, 0])),
    (6, 1, 1, bytes([255, 0, 250, 1, 0, 0])), (3, 0, None, bytes([252, 255, 253, 255, 254, 255]))])
# positions from a base offset.
seeds["base_positions"] = hdr(1, 0, 1, 0, pad_arg=3) + structured(2, 3, [
    (5, 0, None, bytes([0, 1, 0, 1, 0]), 10), (5, 1, 0, bytes([]), 10), (5, 1, 1, bytes([1, 1, 1]), 11)])
# a big batch: 16 sequences of 47 rows, each copying a prefix of sequence 0.
big = [(47, 0, None, bytes((i * 7) % 16 for i in range(47)))]
for s in range(1, 16):
    big.append((47, 1, s % 2, bytes((s + i) % 16 for i in range(24 if s % 2 else 0))))
seeds["big_shared"] = hdr(1, 0, 2, 0, pad_arg=7) + structured(16, 0, big)
seeds["big_shared_gate"] = hdr(0, 0, 3, 0, t=100) + structured(16, 0, big)
# TEI's gate rule (abuse 0xD0): threshold 0.85 on the shared-prefix batch, padded to 64 (the padded
# length decides), and at a threshold of 1e-7 (radix off, no trie); a 0.1.0 struct that holds TEI's
# rule where `gate` would be (0xD1: read as the default rule); a newer header's struct, its extra
# bytes zero (0xD2) or one set (0xD6, refused); a gate that is no rule (0xD3: -1, 0xD7: 2).
seeds["gate_tei_pad64"] = hdr(1, 1, 3, 0, abuse=0xD0, pad_arg=64, t=170) + body
seeds["gate_tei_tiny_threshold"] = hdr(0, 0, 4, 0, abuse=0xD0, f64=1e-7) + body
seeds["struct_size_0_1"] = hdr(1, 1, 3, 0, abuse=0xD1, pad_arg=64, t=170) + body
seeds["struct_size_newer_zero"] = hdr(1, 1, 3, 0, abuse=0xD2, pad_arg=64, t=170) + body
seeds["struct_size_newer_set"] = hdr(1, 1, 3, 0, abuse=0xD6, pad_arg=64, t=170) + body
seeds["gate_negative"] = hdr(0, 0, 1, 0, abuse=0xD3) + body
seeds["gate_two"] = hdr(0, 0, 1, 0, abuse=0xD7) + body
# the empty batch: one sequence of length 0.
seeds["empty"] = hdr(0, 0, 1, 0) + structured(1, 0, [(0, 0, None, b"")])
os.makedirs(OUT, exist_ok=True)
for name in os.listdir(OUT):
    os.remove(os.path.join(OUT, name))
for name, data in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {OUT}")
