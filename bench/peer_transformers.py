#!/usr/bin/env python3
"""The peer of `radixmlp bench`: Hugging Face transformers on the same checkpoint and batches.

`radixmlp bench --keep-model DIR --dump-batches FILE` writes its random checkpoint (config.json +
model.safetensors, Qwen3) to DIR and, per case, one JSON line with the batch as it ran it
(input_ids, position_ids, cu_seqlens), its times (ms_off, ms_on) and the radix-on run's last
hidden states pooled per sequence (last_on: last token, mean_on: mean). This script loads DIR
with transformers' AutoModel (the base model: its last_hidden_state is what rmlp_forward
writes) and runs every case as a user without TEI would: one padded batch (right padding, the
attention mask, the dumped position_ids), timed with torch.cuda.Event (warm-up, then median and
min of --repeat), once per attention implementation ("sdpa", and "flash_attention_2" when
flash_attn is importable). It prints per case the padding cost (padded rows B*L against the N
real ones), its time beside ours, and how far its pooled outputs are from ours (relative norm
error, max abs, min cosine), plus, with a float32 load of the same checkpoint, how far each of
the two is from float32, so that a difference can be told from rounding. Offline: nothing is
downloaded (HF_HUB_OFFLINE is set).

    python3 bench/peer_transformers.py --model DIR --batches FILE [--device cuda|cpu]
        [--dtype auto|bfloat16|float16|float32] [--attn auto|sdpa,flash_attention_2,eager]
        [--repeat R] [--warmup W] [--case NAME]... [--no-fp32-check] [--budget SECONDS]
        [--json OUT.jsonl]

Needs torch and transformers (and nothing else); --help works without them.
"""

import argparse
import importlib.util
import json
import math
import os
import re
import statistics
import sys
import time

DTYPE_OF_DUMP = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="checkpoint folder (radixmlp bench --keep-model DIR)")
    p.add_argument("--batches", required=True, help="JSON lines (radixmlp bench --dump-batches FILE)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"],
                   help="auto (default): the dtype the bench ran in (the dump's 'dtype')")
    p.add_argument("--attn", default="auto",
                   help="comma-separated attention implementations; auto: sdpa, and flash_attention_2 "
                        "when flash_attn is importable (default)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per case (median and min; default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    p.add_argument("--case", action="append", default=[],
                   help="only cases whose name contains this (may be given several times)")
    p.add_argument("--no-fp32-check", action="store_true",
                   help="skip the float32 run that both outputs are compared with")
    p.add_argument("--budget", type=float, default=0.0,
                   help="seconds since start after which no new case is started (0: no limit)")
    p.add_argument("--json", metavar="FILE", help="also write one JSON line per case and implementation here")
    args = p.parse_args(argv)
    if args.repeat < 1 or args.warmup < 0:
        p.error("--repeat must be >= 1 and --warmup >= 0")
    return args


def attn_implementations(spec, device, dtype_name):
    if spec != "auto":
        return [s.strip() for s in spec.split(",") if s.strip()]
    impls = ["sdpa"]
    if device == "cuda" and dtype_name != "float32" and importlib.util.find_spec("flash_attn") is not None:
        impls.append("flash_attention_2")
    return impls


def read_cases(path, only):
    """The dumped cases (dicts), in file order, filtered by name."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                case = json.loads(line)
            except json.JSONDecodeError as e:  # a bench run stopped by its time limit mid-line
                print(f"# peer: {path}:{n}: skipped, not JSON ({str(e)[:80]})", flush=True)
                continue
            if not only or any(o in case["case"] for o in only):
                yield case


# The one weight a base model may leave unused: the LM head of a checkpoint with untied embeddings
# (the 8B shape writes one, as Qwen3-8B ships one: tie_word_embeddings false). AutoModel is the
# model below the head, whose last hidden states the bench computes, so the head takes no part.
LM_HEAD_KEYS = ("lm_head.weight",)


def loading_faults(info, has_lm_head):
    """What a load left unloaded or unused that would change the function the peer computes, from
    transformers' loading info: every missing or mismatched weight, and every unexpected one but
    an LM head where the loaded model has none (a base model). {kind: [keys]}, empty when none."""
    bad = {k: sorted(str(x) for x in (info.get(k) or [])) for k in ("missing_keys", "mismatched_keys",
                                                                     "unexpected_keys")}
    if not has_lm_head:
        bad["unexpected_keys"] = [k for k in bad["unexpected_keys"] if k not in LM_HEAD_KEYS]
    return {k: v for k, v in bad.items() if v}


def load_model(torch, path, dtype, impl, device):
    """AutoModel in dtype with the given attention; refuses a load that left weights at random or
    unused (loading_faults), and says when it left the checkpoint's LM head out."""
    import transformers
    from transformers import AutoModel

    version = tuple(int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
    kw = {"attn_implementation": impl, "output_loading_info": True}
    kw["dtype" if version >= (4, 56) else "torch_dtype"] = dtype
    model, info = AutoModel.from_pretrained(path, **kw)
    has_lm_head = getattr(model, "lm_head", None) is not None
    faults = loading_faults(info, has_lm_head)
    if faults:
        sys.exit(f"peer: loading {path} with transformers left weights unloaded or unused: {faults}; "
                 "the peer would not compute the bench's function")
    head = [k for k in (info.get("unexpected_keys") or []) if k in LM_HEAD_KEYS]
    if head:
        print(f"# peer: {path}'s {', '.join(head)} is not loaded: the base model's last hidden states, "
              "which the bench computes, do not use the LM head", flush=True)
    if model.dtype != dtype:
        sys.exit(f"peer: asked for {dtype}, transformers loaded {model.dtype}")
    return model.to(device).eval()


def padded_batch(torch, case, device):
    """Right-padded (B, L) input_ids, position_ids and attention mask, and the lengths."""
    cu = case["cu_seqlens"]
    lens = [cu[i + 1] - cu[i] for i in range(len(cu) - 1)]
    if min(lens) < 1:
        raise ValueError(f"{case['case']}: an empty sequence cannot be pooled")
    B, L = len(lens), max(lens)
    flat_ids = torch.tensor(case["input_ids"], dtype=torch.long)
    flat_pos = torch.tensor(case["position_ids"], dtype=torch.long)
    ids = torch.zeros(B, L, dtype=torch.long)
    pos = torch.zeros(B, L, dtype=torch.long)
    mask = torch.zeros(B, L, dtype=torch.long)
    for b, n in enumerate(lens):
        ids[b, :n] = flat_ids[cu[b]:cu[b + 1]]
        pos[b, :n] = flat_pos[cu[b]:cu[b + 1]]
        mask[b, :n] = 1
    return ids.to(device), pos.to(device), mask.to(device), lens


def pool(torch, hidden, lens):
    """(B, L, H) last hidden states -> last-token and mean rows (B, H), float64 on the CPU."""
    h = hidden.float()
    B, L, _ = h.shape
    n = torch.tensor(lens, device=h.device)
    last = h[torch.arange(B, device=h.device), n - 1]
    keep = (torch.arange(L, device=h.device)[None, :] < n[:, None]).to(h.dtype)
    mean = (h * keep[:, :, None]).sum(1) / n[:, None].to(h.dtype)
    return last.double().cpu(), mean.double().cpu()


def compare(torch, got, ref):
    """Relative norm error ||got - ref|| / ||ref||, max |got - ref| and the smallest cosine of the rows."""
    got, ref = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(ref, dtype=torch.float64)
    if got.shape != ref.shape:
        raise ValueError(f"shapes differ: {tuple(got.shape)} vs {tuple(ref.shape)}")
    if not torch.isfinite(got).all() or not torch.isfinite(ref).all():
        return {"rel_norm": math.nan, "max_abs": math.nan, "cos_min": math.nan}
    diff = got - ref
    cos = torch.nn.functional.cosine_similarity(got, ref, dim=1)
    return {"rel_norm": (diff.norm() / ref.norm()).item(), "max_abs": diff.abs().max().item(),
            "cos_min": cos.min().item()}


def timed_runs(torch, fn, device, warmup, repeat):
    """fn() warmup times, then repeat times timed (CUDA events or the wall clock); the last output."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    if device == "cuda":
        torch.cuda.synchronize()
    for _ in range(repeat):
        if device == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        else:
            t0 = time.perf_counter()
            out = fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return out, times


def fmt(x, spec):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main(argv=None):
    args = parse_args(argv)
    started = time.monotonic()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("peer: --device cuda but torch sees no CUDA device")
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    config = json.load(open(os.path.join(args.model, "config.json")))
    cases = list(read_cases(args.batches, args.case))
    if not cases:
        sys.exit(f"peer: no case in {args.batches}" + (f" matching {args.case}" if args.case else ""))
    if args.dtype == "auto":
        args.dtype = DTYPE_OF_DUMP.get(cases[0].get("dtype"), "bfloat16")
    dtype = getattr(torch, args.dtype)
    impls = attn_implementations(args.attn, args.device, args.dtype)
    print(f"# peer: torch {torch.__version__}, transformers {transformers.__version__}, {device_name}, "
          f"{args.dtype}, attention {', '.join(impls)}; padded batches (right padding + attention mask), "
          f"median/min of {args.repeat} after {args.warmup} warm-up", flush=True)
    for case in cases:
        if case.get("layers") != config["num_hidden_layers"] or case.get("hidden_size") != config["hidden_size"]:
            sys.exit(f"peer: {case['case']} ran on {case.get('layers')} layers of {case.get('hidden_size')}, "
                     f"{args.model} has {config['num_hidden_layers']} of {config['hidden_size']}: not the same model")

    models = {}
    for impl in impls:
        t0 = time.monotonic()
        models[impl] = load_model(torch, args.model, dtype, impl, args.device)
        print(f"# loaded {args.model} ({impl}, {args.dtype}) in {time.monotonic() - t0:.1f} s", flush=True)
    fp32 = None
    if not args.no_fp32_check and dtype != torch.float32:
        fp32 = load_model(torch, args.model, torch.float32, "sdpa", args.device)

    out_json = open(args.json, "w") if args.json else None
    header = (f"{'case':<20} {'attn':<8} {'B':>3} {'N':>6} {'B*L':>6} {'pad%':>5} {'ms':>9} {'min':>9} "
              f"{'ours off':>9} {'ours on':>9} {'/off':>6} {'/on':>6} {'rel last':>9} {'rel mean':>9} "
              f"{'cos min':>8} {'ours~f32':>9} {'peer~f32':>9}")
    print(header, flush=True)
    failed = 0
    for case in cases:
        if args.budget and time.monotonic() - started > args.budget:
            print(f"# budget of {args.budget:.0f} s spent: {case['case']} and later cases not run", flush=True)
            break
        try:
            ids, pos, mask, lens = padded_batch(torch, case, args.device)
            B, L = ids.shape
            ours_last, ours_mean = case.get("last_on"), case.get("mean_on")
            ref32 = None
            with torch.inference_mode():
                if fp32 is not None:
                    h = fp32(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).last_hidden_state
                    ref32 = pool(torch, h, lens)
                    del h
                for impl, model in models.items():
                    def forward(model=model, ids=ids, mask=mask, pos=pos):
                        return model(input_ids=ids, attention_mask=mask, position_ids=pos,
                                     use_cache=False).last_hidden_state
                    hidden, times = timed_runs(torch, forward, args.device, args.warmup, args.repeat)
                    last, mean = pool(torch, hidden, lens)
                    del hidden
                    med, best = statistics.median(times), min(times)
                    row = {"case": case["case"], "attn": impl, "dtype": args.dtype, "device": device_name,
                           "hidden_size": config["hidden_size"], "layers": config["num_hidden_layers"],
                           "n_seqs": B, "n_tokens": sum(lens), "padded_tokens": B * L,
                           "pad_fraction": 1.0 - sum(lens) / (B * L), "ms": med, "ms_min": best,
                           "times_ms": times, "ours_device": case.get("device"), "ours_dtype": case.get("dtype"),
                           "ours_ms_off": case.get("ms_off"), "ours_ms_on": case.get("ms_on"),
                           "n_compact": case.get("n_compact")}
                    row["peer_over_ours_off"] = med / row["ours_ms_off"] if row["ours_ms_off"] else None
                    row["peer_over_ours_on"] = med / row["ours_ms_on"] if row["ours_ms_on"] else None
                    if ours_last is not None:
                        row["vs_ours_last"] = compare(torch, ours_last, last)
                    if ours_mean is not None:
                        row["vs_ours_mean"] = compare(torch, ours_mean, mean)
                    if ref32 is not None:
                        row["peer_vs_fp32_last"] = compare(torch, last, ref32[0])
                        if ours_last is not None:
                            row["ours_vs_fp32_last"] = compare(torch, ours_last, ref32[0])
                    get = lambda k, m="rel_norm": row.get(k, {}).get(m)  # noqa: E731
                    print(f"{case['case']:<20} {impl[:8]:<8} {B:>3} {sum(lens):>6} {B * L:>6} "
                          f"{100 * row['pad_fraction']:>5.1f} {med:>9.2f} {best:>9.2f} "
                          f"{fmt(row['ours_ms_off'], '9.2f'):>9} {fmt(row['ours_ms_on'], '9.2f'):>9} "
                          f"{fmt(row['peer_over_ours_off'], '5.2f'):>5}x {fmt(row['peer_over_ours_on'], '5.2f'):>5}x "
                          f"{fmt(get('vs_ours_last'), '9.2e'):>9} {fmt(get('vs_ours_mean'), '9.2e'):>9} "
                          f"{fmt(get('vs_ours_last', 'cos_min'), '8.5f'):>8} "
                          f"{fmt(get('ours_vs_fp32_last'), '9.2e'):>9} {fmt(get('peer_vs_fp32_last'), '9.2e'):>9}",
                          flush=True)
                    if out_json:
                        out_json.write(json.dumps(row) + "\n")
                        out_json.flush()
            del ids, pos, mask
            if args.device == "cuda":
                torch.cuda.empty_cache()
        except (RuntimeError, ValueError) as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
            failed += 1
            print(f"# {case['case']}: failed: {type(e).__name__}: {str(e)[:400]}", flush=True)
            if args.device == "cuda":
                torch.cuda.empty_cache()
    print("# columns: ms/min = peer forward (padded batch); ours off/on = radixmlp bench's times "
          "(its own timing: see the dump's 'timing'); /off, /on = peer ms over ours; rel last/mean = "
          "||ours - peer|| / ||peer|| of the pooled last hidden states; ~f32 = the same against a float32 "
          "transformers run", flush=True)
    if out_json:
        out_json.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
