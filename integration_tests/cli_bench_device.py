#!/usr/bin/env python3
"""`radixmlp bench --device cuda` as this build and machine allow it (standard library only):
- a build without CUDA: exit status 1 and a message saying the build has no CUDA;
- a CUDA build on a machine without a device: exit status 1 and a message naming the missing device;
- a CUDA build with a device (nvidia-smi lists one): one small case (1 layer, b32_p128_s32) runs,
  its JSON line has the plan's N and N', positive times, finite off-vs-on and off-vs-compact
  errors within the bf16 bound, and the --dump-batches line holds the batch and finite pooled rows.
In the two failing cases the bench must fail before writing a checkpoint (--keep-model stays
empty), and quickly. Also the CPU side's argument checks that came with --device, and the
built-in model's --shape (Qwen3-4B and -8B: the config.json written, one layer).
Usage: cli_bench_device.py RADIXMLP
"""
import json
import math
import os
import subprocess
import sys

from cli_checks import Checks, device_present
import tempfile
import time

check = Checks()


def main(radixmlp):
    version = subprocess.run([radixmlp, "version"], capture_output=True, text=True, check=True).stdout
    cuda_build = ", CUDA" in version
    device = device_present()
    with tempfile.TemporaryDirectory() as tmp:
        keep, dump = os.path.join(tmp, "model"), os.path.join(tmp, "batches.jsonl")
        cmd = [radixmlp, "bench", "--device", "cuda", "--layers", "1", "--case", "b32_p128_s32", "--repeat", "2",
               "--json", "--keep-model", keep, "--dump-batches", dump]
        t0 = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
        seconds = time.monotonic() - t0
        err = done.stderr.strip()
        if not cuda_build or not device:
            want = "built without CUDA" if not cuda_build else "no CUDA device"
            print(f"{'CPU-only build' if not cuda_build else 'CUDA build, no device'}: rc={done.returncode}: {err}")
            check(done.returncode == 1, f"exit status {done.returncode}, want 1")
            check(want in err, f"stderr {err!r} does not say {want!r}")
            check(done.stdout == "", f"stdout not empty: {done.stdout!r}")
            check(not os.path.exists(os.path.join(keep, "model.safetensors")), "a checkpoint was written")
            check(seconds < 30, f"took {seconds:.1f} s to fail")
        else:
            print(f"CUDA device present: rc={done.returncode}, {seconds:.1f} s\n{done.stdout}{err}")
            check(done.returncode == 0, f"exit status {done.returncode}: {err}")
            rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            check(len(rows) == 1, f"{len(rows)} JSON lines, want 1")
            for r in rows:
                check(r["device"] == "cuda" and r["dtype"] == "bf16" and r["layers"] == 1, f"row {r}")
                check(r["model"] == "qwen3-0.6b" and r["hidden_size"] == 1024, f"model in {r}")
                check(r["n_tokens"] == 5120 and r["n_compact"] == 1152 and r["use_radix"], f"plan in {r}")
                check(r["ms_off"] > 0 and r["ms_on"] > 0 and r["ms_off_min"] <= r["ms_off"], f"times in {r}")
                check(0 < r["attention_ms_off"] < r["forward_ms_off_timed_attention"], f"attention time in {r}")
                check(r["ms_compact"] > 0 and r["ms_compact_min"] <= r["ms_compact"], f"compact times in {r}")
                check(0 < r["attention_ms_compact"] < r["forward_ms_compact_timed_attention"], f"compact attention in {r}")
                for key in ("rel_norm_diff", "rel_norm_diff_compact"):
                    rel = r[key]
                    check(rel is not None and math.isfinite(rel) and rel <= 2e-2, f"{key} {rel}")
            lines = open(dump).read().splitlines() if os.path.exists(dump) else []
            check(len(lines) == 1, f"{len(lines)} dumped lines, want 1")
            for line in lines:
                d = json.loads(line)
                check(len(d["input_ids"]) == 5120 and len(d["cu_seqlens"]) == 33, "dumped batch shape")
                last = d.get("last_on") or []
                check(len(last) == 32 and all(len(x) == 1024 for x in last), "dumped last_on shape")
                check(all(v is not None and math.isfinite(v) for x in last for v in x), "dumped last_on finite")
            check(os.path.exists(os.path.join(keep, "model.safetensors")), "--keep-model wrote no checkpoint")

    # The CPU path's argument checks (no model is written for any of them).
    for args, rc, text in [(["--dtype", "bf16"], 2, "needs --device cuda"),
                           (["--device", "gpu"], 2, "expects cpu or cuda"),
                           (["--model", "x", "--keep-model", "y"], 2, "give one"),
                           (["--model", "x", "--layers", "2"], 2, "has its own"),
                           (["--model", "x", "--shape", "4b"], 2, "has its own"),
                           (["--shape", "9b"], 2, "expects 0.6b, 4b or 8b")]:
        check.refused([radixmlp, "bench", *args], text, rc, timeout=30)

    # --shape: the built-in model's config as Qwen3's (one layer, written and loaded on the CPU, one
    # batch of 4 tokens run: a --case matching nothing is refused before any model is written).
    want = {"4b": (2560, 9728, 32, 8, True), "qwen3-8b": (4096, 12288, 32, 8, False)}
    for shape, (hidden, inter, heads, kv_heads, tied) in want.items():
        with tempfile.TemporaryDirectory() as tmp:
            keep, batch = os.path.join(tmp, "model"), os.path.join(tmp, "batch.jsonl")
            with open(batch, "w") as f:
                f.write(json.dumps({"case": "four", "input_ids": [1, 2, 1, 3], "cu_seqlens": [0, 2, 4]}) + "\n")
            done = subprocess.run([radixmlp, "bench", "--shape", shape, "--layers", "1", "--keep-model", keep,
                                   "--batches", batch, "--json"], capture_output=True, text=True, timeout=300)
            check(done.returncode == 0, f"--shape {shape}: exit status {done.returncode}: {done.stderr}")
            check('"case": "four"' in done.stdout, f"--shape {shape}: stdout {done.stdout!r}")
            refused = subprocess.run([radixmlp, "bench", "--shape", shape, "--layers", "1", "--keep-model",
                                      os.path.join(tmp, "none"), "--case", "none"], capture_output=True, text=True,
                                     timeout=30)
            check(refused.returncode == 2 and "no case matches" in refused.stderr and
                  not os.path.exists(os.path.join(tmp, "none")), f"--case none: {refused.stderr!r}")
            path = os.path.join(keep, "config.json")
            cfg = json.load(open(path)) if os.path.exists(path) else {}
            got = tuple(cfg.get(k) for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                             "num_key_value_heads", "tie_word_embeddings"))
            check(got == (hidden, inter, heads, kv_heads, tied), f"--shape {shape}: config {got}")
            check(cfg.get("num_hidden_layers") == 1 and cfg.get("head_dim") == 128, f"--shape {shape}: {cfg}")
            print(f"--shape {shape}: config {got}")
    return check.summary()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
