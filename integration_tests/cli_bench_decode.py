#!/usr/bin/env python3
"""`radixmlp bench --decode` on the built-in model, 1 layer, 2 steps, the smallest case (standard
library only):
- on the CPU: p1024_m1 with positive tokens/s for the three ways, batched over one-at-a-time
  consistent with them, a finite positive reference cost per row and ceiling, attention shares
  in (0, 1], the CPU thread count it ran on (1 under OPENBLAS_NUM_THREADS=1);
- `--device cuda`: a build without CUDA or a machine without a device exits 1 saying so; with a
  device, p1024_m1 runs in bf16 (no ceiling, no attention figures) with positive tokens/s;
- the argument checks of --decode.
Usage: cli_bench_decode.py RADIXMLP
"""
import json
import math
import os
import subprocess
import sys

from cli_checks import Checks, device_present

check = Checks()


def bench(radixmlp, *args, env=None):
    cmd = [radixmlp, "bench", "--decode", "--layers", "1", "--decode-steps", "2", "--case", "p1024_m1", "--json", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=env)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, rows


def check_ways(row):
    for key in ("tokens_per_s_shared", "tokens_per_s_per_seq_attention", "tokens_per_s_one_at_a_time"):
        check(row[key] > 0 and math.isfinite(row[key]), f"{key} in {row}")
    want = row["tokens_per_s_shared"] / row["tokens_per_s_one_at_a_time"]
    check(abs(row["batched_over_one"] - want) <= 1e-3 * want + 1e-3, f"batched_over_one in {row}")


def main(radixmlp):
    done, rows = bench(radixmlp)
    print(f"CPU: rc={done.returncode}\n{done.stdout}{done.stderr.strip()}")
    check(done.returncode == 0, f"exit status {done.returncode}")
    check([r["case"] for r in rows] == ["p1024_m1"], f"cases {[r['case'] for r in rows]}")
    for row in rows:
        check(row["device"] == "cpu" and row["prefix"] == 1024 and row["m"] == 1 and row["steps"] == 2, f"row {row}")
        ref_ms = row["reference_position_wise_ms_per_row"]
        # positive and finite only: whether batching lowers the cost per row is a measurement
        # (docs/bench/generation-cpu.md), and under the sanitizers our own kernels slow down, OpenBLAS's do not
        check(0 < ref_ms and math.isfinite(ref_ms), f"reference cost per row {ref_ms} in {row}")
        check_ways(row)
        check(0 < row["batched_over_one_ceiling"] and math.isfinite(row["batched_over_one_ceiling"]), f"ceiling {row}")
        for key in ("attention_share_shared", "attention_share_per_seq"):
            check(0 < row[key] <= 1, f"{key} in {row}")
        check(isinstance(row["cpu_threads"], int) and row["cpu_threads"] >= 1, f"cpu_threads in {row}")
        check(row["cpu_kernels"] in ("avx512vl", "avx-fma", "baseline"), f"cpu_kernels in {row}")
    done, rows = bench(radixmlp, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    check(done.returncode == 0 and [r["cpu_threads"] for r in rows] == [1],
          f"OPENBLAS_NUM_THREADS=1: rc={done.returncode}, rows {rows}")

    version = subprocess.run([radixmlp, "version"], capture_output=True, text=True, check=True).stdout
    cuda_build, device = ", CUDA" in version, device_present()
    done, rows = bench(radixmlp, "--device", "cuda", "--dtype", "bf16")
    print(f"CUDA: rc={done.returncode}\n{done.stdout}{done.stderr.strip()}")
    if not cuda_build or not device:
        want = "built without CUDA" if not cuda_build else "no CUDA device"
        check(done.returncode == 1 and want in done.stderr and rows == [], f"rc={done.returncode}, want 1 and {want!r}")
    else:
        check(done.returncode == 0, f"exit status {done.returncode}")
        check([r["case"] for r in rows] == ["p1024_m1"], f"cases {[r['case'] for r in rows]}")
        for row in rows:
            check(row["device"] not in ("", "cpu") and "batched_over_one_ceiling" not in row, f"row {row}")
            check_ways(row)

    for args, text in [(["--decode", "--trace", "rerank"], "without --quick, --batches or --trace"),
                       (["--decode", "--quick"], "without --quick, --batches or --trace"),
                       (["--decode", "--decode-steps", "0"], "--decode-steps"),
                       (["--decode", "--case", "nothing"], "no case matches")]:
        check.refused([radixmlp, "bench", "--layers", "1", *args], text)
    return check.summary()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
