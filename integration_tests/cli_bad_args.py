#!/usr/bin/env python3
"""`radixmlp`'s bad arguments and input lines, each refused with a message (issue 31, point 8;
standard library only). Every numeric option of every command, given a negative number, a sign, a
space, trailing text, an overflow or nothing (and 0 where it is a count), exits 2 saying
"radixmlp: FLAG expects ..." (`bench --layers 0`, `--repeat 0` and `--passages 0` exited 2 without a
word; `--score-tokens -1,2` took -1 as 4294967295). `bench --case` matching nothing is an error
naming the cases, before any model is written (it exited 0 having run nothing); a JSONL line
holding a NUL byte is refused, not skipped as blank; options that do nothing in the mode given are
refused.

    cli_bad_args.py RADIXMLP FIXTURES_DIR
"""
import json
import os
import sys
import tempfile

from cli_checks import Checks

# (command, flag, largest value, whether 0 is refused: a count)
NUMERIC = [
    ("plan", "--passages", 1000000, True), ("plan", "--seed", 2**64 - 1, False),
    ("plan", "--repeat", 1000000, True), ("plan", "--pad", 2**20, False),
    ("run", "--pad", 4096, False), ("run", "--max-batch-tokens", 2**32 - 1, True),
    ("run", "--cache-mb", 2**20, False),
    ("generate", "--max-new-tokens", 2**20, True), ("generate", "--top-k", 2**32 - 1, False),
    ("generate", "--seed", 2**64 - 1, False), ("generate", "--cache-mb", 2**24, True),
    ("bench", "--layers", 64, True), ("bench", "--repeat", 100, True), ("bench", "--cache-mb", 2**20, True),
    ("bench", "--decode-steps", 100000, True), ("bench", "--passages", 4096, True),
]
DOUBLES = [("plan", "--threshold"), ("run", "--threshold"), ("generate", "--temperature"), ("generate", "--top-p")]


def main(radixmlp, fixtures):
    check = Checks()
    model = os.path.join(fixtures, "qwen3_tiny")
    for command, flag, largest, count in NUMERIC:
        bad = ["-1", "+1", " 1", "1x", "0x10", "", str(largest + 1), "9" * 30] + (["0"] if count else [])
        for value in bad:
            want = f"radixmlp: {flag} expects a whole number {'from 1' if count else 'up'} to {largest}, got '{value}'"
            check.refused([radixmlp, command, flag, value], want, rc=2)
    for command, flag in DOUBLES:
        for value in ("nan", "inf", "1e999", "0.5x", ""):
            check.refused([radixmlp, command, flag, value], f"radixmlp: {flag} expects a number, got '{value}'", rc=2)

    for value, text in [("-1,2", "--score-tokens expects a whole number up to 4294967295, got '-1'"),
                        ("1,4294967296", "got '4294967296'"), ("1", "--score-tokens expects two token ids A,B"),
                        ("1,2,3", "--score-tokens takes at most 2 numbers"), ("1,", "separated by commas")]:
        check.refused([radixmlp, "run", "--score-tokens", value], text, rc=2)
    check.refused([radixmlp, "run", "--cpu-weights", "f16"], "radixmlp: --cpu-weights expects f32 or bf16, got 'f16'",
                  rc=2)

    for args, text in [
        (["--nosuch", "1"], "radixmlp: unknown option: --nosuch"),
        (["--layers"], "radixmlp: unknown option or missing value: --layers"),
        (["--case", "x"] * 17, "--case may be given at most 16 times"),
        (["--trace", "rerank", "--case", "x"], "without --quick, --batches or --case"),
        (["--decode", "--dump-batches", "x.jsonl"], "--dump-batches writes the cases' batches; --decode has none"),
        (["--trace", "rerank", "--dump-batches", "x.jsonl"], "--trace has none to write"),
        (["--cache-mb", "8"], "--cache-mb sizes the traces: it needs --trace"),
        (["--passages", "8"], "--passages sizes the traces: it needs --trace"),
        (["--decode-steps", "2"], "--decode-steps needs --decode"),
        (["--cpu-weights", "f16"], "radixmlp: --cpu-weights expects f32 or bf16, got 'f16'"),
        (["--device", "cuda", "--cpu-weights", "bf16"], "--cpu-weights is for --device cpu"),
        (["--case", "nosuch"], "no case matches the --case names given; the cases are: b32_p128_s32 "),
        (["--quick", "--case", "p2048"], "no case of --quick matches"),
    ]:
        check.refused([radixmlp, "bench", "--layers", "1", *args], text, rc=2, timeout=30)

    with tempfile.TemporaryDirectory() as tmp:
        batches = os.path.join(tmp, "batches.jsonl")
        with open(batches, "w") as f:
            f.write(json.dumps({"case": "tiny", "input_ids": [5, 6, 7, 5, 6, 8], "cu_seqlens": [0, 3, 6]}) + "\n")
        check.refused([radixmlp, "bench", "--model", model, "--batches", batches, "--case", "nosuch"],
                      "no case matches the --case names given; the cases are: tiny", rc=2)
        with open(batches, "ab") as f:
            f.write(b"\0" * 8 + b"\n")
        check.refused([radixmlp, "bench", "--model", model, "--batches", batches],
                      f"radixmlp: --batches {batches}:2: the line holds a NUL byte at byte 1", rc=1)
        nul = os.path.join(tmp, "nul.jsonl")
        with open(nul, "wb") as f:
            f.write(b'{"input_ids": [1, 2]}\n' + b"\0" * 8 + b"\n")
        for command, extra in (("run", ["--output", os.path.join(tmp, "out.jsonl")]), ("generate", [])):
            check.refused([radixmlp, command, "--model", model, "--input", nul, *extra],
                          f"radixmlp: {nul}:2: the line holds a NUL byte at byte 1", rc=1)
    return check.summary()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
