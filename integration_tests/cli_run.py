#!/usr/bin/env python3
"""`radixmlp run` end to end on a transformers fixture: the batch as JSONL in, embeddings,
hidden states and reranker scores out, compared with transformers' outputs (expected.safetensors)
to 1e-4, with the radix plan on and off and in batches split by --max-batch-tokens; every number
written reads back as the float it was (9 significant digits: '%.9g' of it as a float32).
Usage: cli_run.py RADIXMLP FIXTURES_DIR   (standard library only)
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

TOLERANCE = 1e-4


def read_f32_safetensors(path):
    """{name: (shape, flat list of floats)} of an all-F32 safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        values = struct.unpack(f"<{(end - begin) // 4}f", data[base + begin : base + end])
        tensors[name] = (info["shape"], list(values))
    return tensors


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def run(radixmlp, model, lines, *flags, raw=False):
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            f.writelines(json.dumps({"input_ids": ids}) + "\n" for ids in lines)
        done = subprocess.run([radixmlp, "run", "--model", model, "--input", src, "--output", dst, *flags],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"radixmlp run {' '.join(flags)} failed: {done.stderr}")
        with open(dst) as f:  # raw: numbers as the text written
            return [json.loads(line, parse_float=str if raw else float, parse_int=str if raw else int) for line in f]


def max_error(got, want):
    return max(abs(a - b) if not math.isnan(a) else math.inf for a, b in zip(got, want))


def main():
    radixmlp, fixtures = sys.argv[1], sys.argv[2]
    model = os.path.join(fixtures, "qwen3_tiny")
    with open(os.path.join(model, "batch.json")) as f:
        seqs = json.load(f)["input_ids"]
    expected = read_f32_safetensors(os.path.join(model, "expected.safetensors"))
    width = len(expected["pooled_last"][1]) // len(seqs)
    failures = checks = 0

    def check(ok, what):
        nonlocal failures, checks
        checks += 1
        if not ok:
            failures += 1
            print(f"FAIL {what}")

    for flags in ([], ["--no-radix"], ["--pad", "8"], ["--max-batch-tokens", "40"]):
        out = run(radixmlp, model, seqs, "--pooling", "last", *flags)
        check([o["index"] for o in out] == list(range(len(seqs))), f"indices {flags}")
        for s, o in enumerate(out):
            err = max_error(o["embedding"], expected["pooled_last"][1][s * width : (s + 1) * width])
            check(err <= TOLERANCE, f"pooled_last seq {s} {flags}: max abs error {err:.3g}")
    out = run(radixmlp, model, seqs, "--pooling", "none", raw=True)
    texts = [x for o in out for row in o["hidden_states"] for x in row]
    lost = [t for t in texts if "%.9g" % f32(float(t)) != t]
    check(not lost, f"{len(lost)} of {len(texts)} hidden values do not round-trip a float32, e.g. {lost[:3]}")
    rows = [[float(x) for x in row] for o in out for row in o["hidden_states"]]
    err = max_error([x for row in rows for x in row], expected["last_hidden"][1])
    check(err <= TOLERANCE, f"last_hidden: max abs error {err:.3g}")
    vocab = expected["logits_last"][0][1]
    out = run(radixmlp, model, seqs, "--score-tokens", "3,7")
    for s, o in enumerate(out):
        a, b = expected["logits_last"][1][s * vocab + 3], expected["logits_last"][1][s * vocab + 7]
        check(max_error(o["logits"], [a, b]) <= TOLERANCE, f"score logits seq {s}")
        check(abs(o["score"] - 1 / (1 + math.exp(b - a))) <= 1e-5, f"score seq {s}")
    bad = subprocess.run([radixmlp, "run", "--model", model, "--input", "/nonexistent.jsonl", "--output", "-"],
                         capture_output=True, text=True)
    check(bad.returncode != 0 and "/nonexistent.jsonl" in bad.stderr, "missing input is an error naming the file")
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
