#!/usr/bin/env python3
"""The summary of one command of the GPU window (scripts/device/window.sh, gpu/CHECKLIST.md), rebuilt after every
step from the JSON lines the command already wrote in its output folder:
  steps.jsonl   one line per step (scripts/device/device_steps.sh): its status, time, limit and what to read;
  bench.jsonl   `radixmlp bench --device cuda --json` and `bench_gather --json` rows, with peer.jsonl
                (bench/peer_transformers.py): their tables are bench/summarize_gpu.py's, printed here;
  decode.jsonl  `radixmlp bench --decode --json` rows (CUDA and CPU): one table per device, variant
                and thread count, and on CUDA each variant's shared-prefix tok/s over the default's.
The failed steps are named first and again last (the end of the output is what a caller sees first).
Standard library only.

    scripts/device/summarize_window.py OUT_DIR
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
sys.dont_write_bytecode = True  # no __pycache__ beside the bench's scripts
from summarize_gpu import fmt, read_jsonl as read_rows  # noqa: E402 (the bench's tables' own helpers)


def read_jsonl(path):
    """The JSON objects of a file's lines; none when the file is not there (a command without it)."""
    return read_rows(path) if os.path.exists(path) else []


def step_state(s):
    """'ok', 'skipped' (a test's 77), 'not run' or 'FAILED' (a status, a time limit, a failure)."""
    rc = s.get("rc")
    if rc == 0:
        return "ok"
    if rc == 77:
        return "skipped"
    if isinstance(rc, str) and rc.startswith("not run"):
        return "not run"
    return "FAILED"


def rc_text(rc):
    if rc == 124:
        return "rc=124 (time limit)"
    if rc == 137:
        return "rc=137 (killed)"
    if rc == 77:
        return "rc=77 (skipped)"
    return f"rc={rc}" if isinstance(rc, int) else str(rc)


def not_ok(steps):
    """The lines naming what failed, was cut off or not run, and what skipped (a GPU test that did not
    see the device, say), or an empty list."""
    bad = [s for s in steps if step_state(s) in ("FAILED", "not run")]
    skipped = [s.get("step") for s in steps if step_state(s) == "skipped"]
    lines = ["# NOT OK: " + "; ".join(f"{s.get('step')} ({rc_text(s.get('rc'))})" for s in bad)] if bad else []
    return lines + (["# SKIPPED: " + "; ".join(skipped)] if skipped else [])


def print_steps(steps):
    bad = [s for s in steps if step_state(s) in ("FAILED", "not run")]
    print(f"# {len(steps)} steps, {len(bad)} failed, cut off or not run; rebuilt after each step from steps.jsonl")
    for line in not_ok(steps):
        print(line)
    for s in steps:
        limit = f" of at most {s['limit']}" if s.get("limit") else ""
        print(f"[{s.get('at', 0):4d} s] {s.get('step')}: {rc_text(s.get('rc'))}, {s.get('seconds', 0)} s{limit}")
        for line in s.get("lines", []):
            print(f"         {line[:240]}")


def print_bench(out):
    bench = os.path.join(out, "bench.jsonl")
    if not read_jsonl(bench):
        return
    args = [sys.executable, os.path.join(HERE, "..", "..", "bench", "summarize_gpu.py"), bench]
    peer = os.path.join(out, "peer.jsonl")
    if read_jsonl(peer):
        args.append(peer)
    run = subprocess.run(args, capture_output=True, text=True, check=False)
    print(run.stdout, end="")
    if run.returncode != 0 or run.stderr:
        print(f"# bench/summarize_gpu.py: rc={run.returncode} {run.stderr.strip()[-500:]}")


def print_decode(rows):
    if not rows:
        return
    groups = {}
    for r in rows:
        key = (r.get("device", "?"), r.get("variant", "default"), r.get("cpu_threads"))
        groups.setdefault(key, {})[r.get("case")] = r  # a case measured twice keeps its last line
    default = {(d, t): g for (d, v, t), g in groups.items() if v == "default"}
    print("# decode (radixmlp bench --decode): tok/s of a batched step with shared-prefix attention (sh), "
          "per-sequence attention (ps), M sessions one at a time (one); ceil: batched/one at a 128-row step's "
          "position-wise cost (CPU); attn: ms per step (CPU); vs def: sh tok/s over the default variant's; "
          "kernel: what the steps' attention ran on (CUDA)")
    order = lambda kv: (str(kv[0][0]), kv[0][1] != "default", str(kv[0][1]), kv[0][2] or 0)
    for (device, variant, threads), cases in sorted(groups.items(), key=order):
        where = f"{device}, {threads} threads" if threads is not None else device
        print(f"# {where}, variant {variant}")
        print(f"{'case':<11} {'M':>3} {'tok/s sh':>10} {'tok/s ps':>10} {'tok/s one':>10} {'batch/one':>9} "
              f"{'ceil':>6} {'attn sh':>8} {'attn ps':>8} {'vs def':>7}  kernel")
        base = default.get((device, threads), {})
        for name in sorted(cases, key=lambda c: (cases[c].get("prefix", 0), cases[c].get("m", 0))):
            r = cases[name]
            ref = base.get(name, {}).get("tokens_per_s_shared") if variant != "default" else None
            rel = r["tokens_per_s_shared"] / ref if ref and r.get("tokens_per_s_shared") else None
            print(f"{name:<11} {fmt(r.get('m'), '3d'):>3} {fmt(r.get('tokens_per_s_shared'), '10.1f'):>10} "
                  f"{fmt(r.get('tokens_per_s_per_seq_attention'), '10.1f'):>10} "
                  f"{fmt(r.get('tokens_per_s_one_at_a_time'), '10.1f'):>10} {fmt(r.get('batched_over_one'), '8.2f'):>8}x "
                  f"{fmt(r.get('batched_over_one_ceiling'), '5.2f'):>5}x "
                  f"{fmt(r.get('attention_ms_per_step_shared'), '8.3f'):>8} "
                  f"{fmt(r.get('attention_ms_per_step_per_seq'), '8.3f'):>8} {fmt(rel, '6.3f'):>6}x  "
                  f"{r.get('decode_attention', '-')}")


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__)
        return 2
    out = argv[1]
    steps = read_jsonl(os.path.join(out, "steps.jsonl"))
    print_steps(steps)
    print_bench(out)
    print_decode(read_jsonl(os.path.join(out, "decode.jsonl")))
    for line in not_ok(steps) or [f"# all {len(steps)} steps ok so far"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
