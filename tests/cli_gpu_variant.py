#!/usr/bin/env python3
"""cli_gpu_variant.py: `radixmlp bench --gpu-variant` checks its settings before anything runs (a
name that is not a RADIX_MLP_GPU_* variable, a value outside the variable's list, a name twice, a
malformed list, no --device cuda: each refused with exit 2, saying what the names and values are),
and bench/summarize_gpu.py prints the variants of a case side by side (rows as `--json` writes
them: "variant" and the kernel keys), the default's row alone in the main table. No device needed.

    python3 tests/cli_gpu_variant.py BUILD/radixmlp SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

from cli_check import check, radixmlp, summary



def bench(exe, *args):
    return radixmlp(exe, "bench", *args)


def row(variant, ms_on, kernel_on, layout_on):
    return {"case": "b32_p128_s32", "device": "cuda", "device_name": "test device", "model": "qwen3-0.6b",
            "hidden_size": 1024, "dtype": "bf16", "n_seqs": 32, "n_tokens": 5120, "n_compact": 1152,
            "use_radix": True, "layers": 28, "repeat": 5, "ms_off": 20.0, "ms_on": ms_on, "speedup": 20.0 / ms_on,
            "ms_compact": 8.0, "speedup_compact": 2.5, "rel_norm_diff": 3e-3, "variant": variant,
            "attention": "auto", "flashinfer": True, "kernel_off": "flashinfer", "layout_off": "full",
            "kernel_on": kernel_on, "layout_on": layout_on, "kernel_compact": "flashinfer",
            "layout_compact": "compact", "rel_norm_vs_default_off": 0.0, "rel_norm_vs_default_on": 2e-3,
            "rel_norm_vs_default_compact": 0.0, "fallbacks": 0, "plan_errors": 0}


def main():
    exe, source = sys.argv[1], sys.argv[2]
    listing = "RADIX_MLP_GPU_FULL_KV=paged|scatter"
    for spec in ["RADIX_MLP_GPU_FULL_KV=bogus", "RADIX_MLP_THRESHOLD=0.5", "RADIX_MLP_GPU_FULL_KV",
                 "RADIX_MLP_GPU_FULL_KV=scatter,RADIX_MLP_GPU_FULL_KV=paged", "RADIX_MLP_GPU_ROPE=table,", "",
                 "radix_mlp_gpu_rope=table"]:
        r = bench(exe, "--device", "cuda", "--gpu-variant", spec)
        check(r.returncode == 2 and ("got '%s'" % spec) in r.stderr and listing in r.stderr,
              "--gpu-variant %r: exit %d, stderr %r" % (spec, r.returncode, r.stderr))
    r = bench(exe, "--gpu-variant", "RADIX_MLP_GPU_FULL_KV=scatter")
    check(r.returncode == 2 and "--gpu-variant" in r.stderr and "--device cuda" in r.stderr,
          "--gpu-variant without --device cuda: exit %d, stderr %r" % (r.returncode, r.stderr))
    r = bench(exe, "--help")
    check(r.returncode == 0 and "--gpu-variant" in r.stdout, "--help names --gpu-variant")

    summarize = os.path.join(source, "bench", "summarize_gpu.py")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps(row("default", 10.0, "flashinfer", "full_paged")) + "\n")
            f.write(json.dumps(row("RADIX_MLP_GPU_FULL_KV=scatter", 12.5, "flashinfer", "full")) + "\n")
            f.write(json.dumps(row("RADIX_MLP_GPU_ATTENTION=reference", 40.0, "reference", "full_paged")) + "\n")
        r = subprocess.run([sys.executable, summarize, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        lines = r.stdout.splitlines()
        main_rows = [l for l in lines if l.startswith("b32_p128_s32") and "default" not in l]
        variant_lines = [l for l in lines if "RADIX_MLP_GPU_" in l and not l.startswith("#")]
        check(r.returncode == 0, "summarize_gpu.py: exit %d, %s" % (r.returncode, r.stderr))
        check(len(main_rows) == 1 and "10.00" in main_rows[0], "the main table holds the default's row: %r" % lines)
        check(any(l.split()[:2] == ["b32_p128_s32", "default"] for l in lines), "the default's variant line: %r" % lines)
        check(len(variant_lines) == 2, "one line per variant: %r" % variant_lines)
        scatter = [l for l in variant_lines if "FULL_KV=scatter" in l]
        check(len(scatter) == 1 and "0.80x" in scatter[0] and "flashinfer/flashinfer/flashinfer (full/full/compact)"
              in scatter[0], "the scatter variant: on 10.0 / 12.5 = 0.80x and its kernels: %r" % scatter)
        reference = [l for l in variant_lines if "ATTENTION=reference" in l]
        check(len(reference) == 1 and "0.25x" in reference[0] and "flashinfer/reference/flashinfer" in reference[0],
              "the reference variant: %r" % reference)
    return summary("cli_gpu_variant")


if __name__ == "__main__":
    sys.exit(main())
