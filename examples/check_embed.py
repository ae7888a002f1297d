#!/usr/bin/env python3
"""check_embed.py EMBED FIXTURE: runs examples/embed.c's program on the qwen3_tiny fixture and checks
what it prints: N and N' as its batch implies (counted here from the batch, independently of the
planner), each sequence's vector against transformers' final hidden states in the fixture's
expected.safetensors (max abs error 1e-4, the fixtures' tolerance), the same vectors with radix off
(RADIX_MLP_THRESHOLD=0), and a missing model folder refused with the library's message (exit 1)."""
import json
import os
import re
import struct
import subprocess
import sys

TOL = 1e-4


def run(exe, args, env=None):
    proc = subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, **(env or {})), timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def read_tensor(path, name):
    """One F32 tensor of a safetensors file, as a list of rows."""
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        info = header[name]
        assert info["dtype"] == "F32", info
        begin, end = info["data_offsets"]
        f.seek(8 + header_len + begin)
        data = f.read(end - begin)
    rows, cols = info["shape"]
    values = struct.unpack("<%df" % (rows * cols), data)
    return [values[r * cols:(r + 1) * cols] for r in range(rows)]


def parse(out):
    head = re.search(r"^N=(\d+) N'=(\d+) radix=(on|off)$", out, re.M)
    vectors = [tuple(float(x) for x in m.group(2).split()) for m in
               re.finditer(r"^sequence (\d+): ((?:-?\d+\.\d+ ?){4}) \.\.\.$", out, re.M)]
    if not head or len(vectors) != 3:
        sys.exit("check_embed: unexpected output:\n" + out)
    return int(head.group(1)), int(head.group(2)), head.group(3), vectors


def main():
    exe, fixture = sys.argv[1], sys.argv[2]
    batch = json.load(open(os.path.join(fixture, "batch.json")))
    ids = batch["input_ids"]
    # The example's batch: the fixture's sequence 4, its first 12 tokens, and sequence 5.
    seqs = [ids[4], ids[4][:12], ids[5]]
    offsets = [sum(len(s) for s in ids[:k]) for k in range(len(ids))]
    rows = [offsets[4] + 19, offsets[4] + 11, offsets[5] + 2]  # each sequence's last row in the fixture
    assert [len(s) for s in seqs] == [20, 12, 3], "the fixture's batch changed: update embed.c"
    n_tokens = sum(len(s) for s in seqs)
    n_distinct = len({tuple(s[:i + 1]) for s in seqs for i in range(len(s))})  # distinct paths
    last_hidden = read_tensor(os.path.join(fixture, "expected.safetensors"), "last_hidden")
    expected = [last_hidden[r][:4] for r in rows]

    failures = []
    results = {}
    for mode, env in (("on", {}), ("off", {"RADIX_MLP_THRESHOLD": "0"})):
        rc, out, err = run(exe, [fixture], env)
        if rc != 0:
            sys.exit("check_embed: radix %s: exit %d\n%s%s" % (mode, rc, out, err))
        n, n_compact, radix, vectors = parse(out)
        want_compact = n_distinct if mode == "on" else n_tokens
        if (n, n_compact, radix) != (n_tokens, want_compact, mode):
            failures.append("radix %s: printed N=%d N'=%d radix=%s, expected N=%d N'=%d radix=%s"
                            % (mode, n, n_compact, radix, n_tokens, want_compact, mode))
        for s, (got, want) in enumerate(zip(vectors, expected)):
            err = max(abs(a - b) for a, b in zip(got, want))
            if not err <= TOL:
                failures.append("radix %s: sequence %d: %s vs transformers %s (max error %.3g)" % (mode, s, got, want, err))
        results[mode] = vectors
    for s in range(3):
        err = max(abs(a - b) for a, b in zip(results["on"][s], results["off"][s]))
        if not err <= 1e-5:
            failures.append("sequence %d: radix on %s vs off %s" % (s, results["on"][s], results["off"][s]))

    rc, out, err = run(exe, [os.path.join(fixture, "no_such_folder")])
    if rc != 1 or "rmlp_model_load" not in err:
        failures.append("a missing model folder: exit %d, stderr %r (expected 1 and the library's message)" % (rc, err))
    rc, out, err = run(exe, [])
    if rc != 2 or "usage" not in err:
        failures.append("no argument: exit %d, stderr %r (expected 2 and the usage)" % (rc, err))

    for f in failures:
        print("FAIL", f)
    if failures:
        return 1
    print("check_embed: N=%d N'=%d, 3 vectors within %g of transformers with radix on and off" % (n_tokens, n_distinct, TOL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
