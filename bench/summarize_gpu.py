#!/usr/bin/env python3
"""The tables of a GPU benchmark session (scripts/device/gpu_session.sh): the gather kernel's bandwidth
(bench_gather --json), then per model shape (told apart by hidden_size) and case, `radixmlp bench
--device cuda --json` (radix off vs on vs on with attention in compact space, predicted speedup,
their errors against off) beside the transformers peer (bench/peer_transformers.py --json: its
time on the padded batch, how far its outputs are from ours and from float32). Standard library
only.

    bench/summarize_gpu.py BENCH.jsonl [PEER.jsonl]

Lines that are not JSON objects (a run cut off by its time limit) are skipped; a case measured
twice keeps its last line. Rows of `radixmlp bench --gpu-variant` (one per case and variant, the key
"variant": "default" or the setting such as "RADIX_MLP_GPU_FULL_KV=scatter"; rows without it are
the default's) are printed side by side in a table of their own after each shape's: per case, each
variant's off / on / compact times, the default's time over each (above 1: the variant is faster),
how far its on output is from the default's, and the attention kernel each side ran.
"""
import json
import math
import sys

# The published figures (RadixMLP, H100, FP16, FlashAttention-2, b32_p2048_s256): speedup by hidden size.
PUBLISHED = {1024: "Qwen3-0.6B 394 -> 144 ms (2.74x)", 2560: "Qwen3-4B 4.14x", 4096: "Qwen3-8B 4.98x"}
ORDER = ["b32_p128_s32", "b32_p128_s64", "b32_p448_s32", "b32_p448_s64", "b32_p128_s256", "b32_p448_s256",
         "b32_p2048_s32", "b32_p2048_s64", "b32_p2048_s256", "rerank_msmarco_32", "no_sharing_b32_s512"]


def read_jsonl(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except OSError as e:
        print(f"# {path}: {e.strerror}")
    return rows


def fmt(x, spec):
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return "-"
    return format(x, spec)


def print_variants(hidden, variants):
    """The variants of this shape's cases side by side (nothing when every case has the default only)."""
    cases = {c: v for (h, c), v in variants.items() if h == hidden and len(v) > 1}
    if not cases:
        return
    print("# variants, timed in the same rounds as the default: x = the default's time over the variant's "
          "(above 1: faster); ~dflt = ||default - variant|| / ||default|| of the on output; kernels off/on/cmp")
    print(f"{'case':<20} {'variant':<48} {'off ms':>8} {'on ms':>8} {'cmp ms':>8} {'off x':>6} {'on x':>6} "
          f"{'cmp x':>6} {'~dflt':>8} {'fb':>3} kernels")
    for name in [n for n in ORDER if n in cases] + sorted(set(cases) - set(ORDER)):
        per = cases[name]
        base = per.get("default", {})
        for i, (variant, r) in enumerate(sorted(per.items(), key=lambda kv: (kv[0] != "default", kv[0]))):
            ratios = []
            for side in ("off", "on", "compact"):
                ms, base_ms = r.get("ms_" + side), base.get("ms_" + side)
                ratios.append(base_ms / ms if ms and base_ms else None)
            kernels = "/".join(f"{r.get('kernel_' + s, '?')}" for s in ("off", "on", "compact"))
            layouts = "/".join(f"{r.get('layout_' + s, '?')}" for s in ("off", "on", "compact"))
            print(f"{name if i == 0 else '':<20} {variant[:48]:<48} {fmt(r.get('ms_off'), '8.2f'):>8} "
                  f"{fmt(r.get('ms_on'), '8.2f'):>8} {fmt(r.get('ms_compact'), '8.2f'):>8} "
                  f"{fmt(ratios[0], '5.2f'):>5}x {fmt(ratios[1], '5.2f'):>5}x {fmt(ratios[2], '5.2f'):>5}x "
                  f"{fmt(r.get('rel_norm_vs_default_on'), '8.1e'):>8} {fmt(r.get('fallbacks'), '3d'):>3} "
                  f"{kernels} ({layouts})")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    rows = read_jsonl(argv[1])
    cuda = [r for r in rows if "case" in r and r.get("device") == "cuda"]
    ours = {(r.get("hidden_size"), r["case"]): r for r in cuda if r.get("variant", "default") == "default"}
    variants = {}  # (hidden, case) -> {variant: row}, the default's first
    for r in cuda:
        variants.setdefault((r.get("hidden_size"), r["case"]), {})[r.get("variant", "default")] = r
    gather = [r for r in rows if r.get("bench") == "gather"]
    peer = {}
    for r in read_jsonl(argv[2]) if len(argv) > 2 else []:
        peer.setdefault((r.get("hidden_size"), r.get("case")), {})[r.get("attn")] = r
    impls = sorted({impl for per_case in peer.values() for impl in per_case})
    if not ours and not peer and not gather:
        print("# no results to summarize")
        return 1
    if gather:
        print(f"# the row gather (bench_gather, {gather[0].get('device_name')}) against a device-to-device copy of "
              f"as many bytes; target: ratio >= 0.8")
        print(f"{'dtype':<5} {'dim':>5} {'direction':<9} {'rows':>7} {'gather GB/s':>11} {'memcpy GB/s':>11} {'ratio':>6}")
        for r in gather:
            print(f"{r.get('dtype', '?'):<5} {fmt(r.get('dim'), '5d'):>5} {r.get('direction', '?'):<9} "
                  f"{fmt(r.get('rows'), '7d'):>7} {fmt(r.get('gather_gbps'), '11.1f'):>11} "
                  f"{fmt(r.get('memcpy_gbps'), '11.1f'):>11} {fmt(r.get('ratio'), '6.3f'):>6}")
    ratio_head = "N'/N"
    head = (f"{'case':<20} {'N':>6} {ratio_head:>5} {'off ms':>8} {'on ms':>8} {'speedup':>7} {'pred':>6} {'f':>5} "
            f"{'pw spd':>7} {'off~on':>8} {'cmp ms':>8} {'spd cmp':>7} {'off~cmp':>8} {'last ms':>8} {'spd lst':>7} "
            f"{'off~lst':>8}")
    for impl in impls:
        tag = impl.replace("flash_attention_2", "fa2")[:5]
        head += f" {tag + ' ms':>9} {'pad%':>5} {'/on':>6} {'~peer':>8} {'~f32':>8} {'p~f32':>8}"
    for hidden in sorted({h for h, _ in set(ours) | set(peer)}, key=lambda h: (h is None, h or 0)):
        any_row = next((r for (h, _), r in ours.items() if h == hidden), None)
        if any_row:
            kernels = "/".join(str(any_row.get("kernel_" + s, "?")) for s in ("off", "on", "compact", "last"))
            print(f"# ours: {any_row.get('model', 'hidden ' + str(hidden))}, {any_row.get('device_name')}, "
                  f"{any_row.get('dtype')}, {any_row.get('layers')} layers, median of {any_row.get('repeat')} "
                  f"(CUDA events), built-in attention ({any_row.get('attention', '?')}: {kernels} off/on/cmp/last)")
        if hidden in PUBLISHED:
            print(f"# published (H100, FP16, FlashAttention-2, b32_p2048_s256): {PUBLISHED[hidden]}")
        print(head)
        cases = {c for h, c in set(ours) | set(peer) if h == hidden}
        for name in [n for n in ORDER if n in cases] + sorted(cases - set(ORDER) - {None}):
            o = ours.get((hidden, name), {})
            ratio = o["n_compact"] / o["n_tokens"] if o.get("n_tokens") else None
            line = (f"{name:<20} {fmt(o.get('n_tokens'), '6d'):>6} {fmt(ratio, '5.3f'):>5} "
                    f"{fmt(o.get('ms_off'), '8.2f'):>8} {fmt(o.get('ms_on'), '8.2f'):>8} "
                    f"{fmt(o.get('speedup'), '6.2f'):>6}x {fmt(o.get('predicted_speedup'), '5.2f'):>5}x "
                    f"{fmt(o.get('f_position_wise'), '5.2f'):>5} {fmt(o.get('position_wise_speedup'), '6.2f'):>6}x "
                    f"{fmt(o.get('rel_norm_diff'), '8.1e'):>8} {fmt(o.get('ms_compact'), '8.2f'):>8} "
                    f"{fmt(o.get('speedup_compact'), '6.2f'):>6}x {fmt(o.get('rel_norm_diff_compact'), '8.1e'):>8} "
                    f"{fmt(o.get('ms_last'), '8.2f'):>8} {fmt(o.get('speedup_last'), '6.2f'):>6}x "
                    f"{fmt(o.get('rel_norm_diff_last'), '8.1e'):>8}")
            for impl in impls:
                p = peer.get((hidden, name), {}).get(impl, {})
                ms = p.get("ms")
                over_on = ms / o["ms_on"] if ms and o.get("ms_on") else None
                rel = (p.get("vs_ours_last") or {}).get("rel_norm")
                o32 = (p.get("ours_vs_fp32_last") or {}).get("rel_norm")
                p32 = (p.get("peer_vs_fp32_last") or {}).get("rel_norm")
                pad = 100 * p["pad_fraction"] if "pad_fraction" in p else None
                line += (f" {fmt(ms, '9.2f'):>9} {fmt(pad, '5.1f'):>5} {fmt(over_on, '5.2f'):>5}x {fmt(rel, '8.1e'):>8}"
                         f" {fmt(o32, '8.1e'):>8} {fmt(p32, '8.1e'):>8}")
            print(line)
        print_variants(hidden, variants)
    print("# pred: 1/((1-f)+f*N'/N), f the position-wise share of the off run; pw spd: "
          "the position-wise part alone, off over on; off~on: ||off-on||/||off|| "
          "(all rows); cmp: radix on with attention in compact space, its time, off over it, ||off-cmp||/||off||; "
          "lst: rmlp_forward_last (compact attention, each sequence's last row), its time, off over it, against "
          "off's last rows; "
          "<impl> ms: transformers on the padded batch; /on: its time over ours with radix on; "
          "~peer: ||ours-peer||/||peer||, ~f32 / p~f32: ours / peer against transformers float32 (last-token rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
