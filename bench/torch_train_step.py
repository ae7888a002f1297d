#!/usr/bin/env python3
"""One training step (forward, backward, AdamW) of a random Qwen3-0.6B-shaped model on a listwise
group, plain transformers vs radix_mlp.torch with radix off (the identity plan) and on (attention
in full space, and in compact space), in one run.

The group: one query of --query tokens and --passages passages of --passage tokens each, as
(query + passage) sequences; the loss is the listwise softmax cross-entropy of the LM head's
yes-minus-no logit at each sequence's last token (the tied head applied to those rows only).

Times: one process runs all modes on one model, step by step in turn (plain, off, on, compact, plain,
...: the machine's other load falls on every mode alike), --warmup untimed steps each, then the median
of --steps timed steps each, split into plan (the library's planner + index tensors), forward (with
the loss), backward and AdamW. Memory: each mode again in its own fresh process, so the peak of one
is not hidden by another's: peak = the process's ru_maxrss (resident set, whatever allocated it:
torch's CPU allocator is malloc, which tracemalloc does not see), at rest = its RSS after the warm-up
step (weights, gradients, AdamW state), and the step's own peak is the difference (the embedding's
dense gradient and AdamW's temporaries are most of it); "saved for backward" counts the distinct
storages autograd keeps from forward to backward in the last step (activations; parameters left
out), measured with torch.autograd.graph.saved_tensors_hooks. Those runs start from the same
weights, so their losses are compared too.

Usage: RADIX_MLP_LIB_DIR=build PYTHONPATH=bindings/python python3 bench/torch_train_step.py \
           [--layers 28] [--steps 3] [--warmup 1] [--memory-steps 1] [--threads N] [--modes plain,off,on,compact]
           [--json]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

MODES = ("plain", "off", "on", "compact")


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


class Setup:
    """The random model, the group, the optimizer and one step function per mode."""

    def __init__(self, args):
        import numpy as np
        import torch
        from transformers import Qwen3Config, Qwen3ForCausalLM

        import radix_mlp.torch as rt

        if args.threads:
            torch.set_num_threads(args.threads)
        self.torch = torch
        torch.manual_seed(0)
        config = Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                             num_hidden_layers=args.layers, num_attention_heads=16, num_key_value_heads=8,
                             head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e6}, tie_word_embeddings=True,
                             attn_implementation="sdpa")
        self.model = Qwen3ForCausalLM(config).train()
        rng = np.random.default_rng(1)
        query = rng.integers(0, config.vocab_size, args.query).tolist()
        self.sequences = [query + rng.integers(0, config.vocab_size, args.passage).tolist()
                          for _ in range(args.passages)]
        self.batch = torch.tensor(self.sequences)                                  # (B, L)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        self.wrappers = {"off": rt.RadixMLP(self.model, attention="full", threshold=0.0),
                         "on": rt.RadixMLP(self.model, attention="full", threshold=1.0),
                         "compact": rt.RadixMLP(self.model, attention="compact", threshold=1.0)}

    def step(self, mode):
        """One training step; returns its times (ms), the loss and the plan's row counts."""
        import torch.nn.functional as F

        torch, model = self.torch, self.model
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        n_tokens = self.batch.numel()
        n_compact = n_tokens
        if mode == "plain":
            t1 = time.perf_counter()
            last = model.model(input_ids=self.batch).last_hidden_state[:, -1]     # (B, H)
        else:
            wrapper = self.wrappers[mode]
            plan = wrapper.plan(self.sequences)
            n_compact = plan.plan.n_compact
            t1 = time.perf_counter()
            last = plan.pool(wrapper.forward_compact(plan), "last")               # (B, H)
        logits = model.lm_head(last)                                              # (B, vocab)
        scores = logits[:, 9693] - logits[:, 2152]                                # yes - no
        loss = F.cross_entropy(scores[None], torch.zeros(1, dtype=torch.long))
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        self.opt.step()
        t4 = time.perf_counter()
        return {"loss": loss.item(), "n_tokens": n_tokens, "n_compact": n_compact, "plan_ms": 1e3 * (t1 - t0),
                "forward_ms": 1e3 * (t2 - t1), "backward_ms": 1e3 * (t3 - t2), "optimizer_ms": 1e3 * (t4 - t3),
                "step_ms": 1e3 * (t4 - t0)}


TIMES = ("plan_ms", "forward_ms", "backward_ms", "optimizer_ms", "step_ms")


def child_timing(args):
    """All modes in one process, step by step in turn (mode 1, 2, 3, 4, mode 1, ...), so that the
    machine's other load falls on every mode alike; the median of each mode's timed steps."""
    setup = Setup(args)
    modes = args.modes.split(",")
    runs = {m: [] for m in modes}
    for r in range(args.warmup + args.steps):
        for mode in modes:
            result = setup.step(mode)
            if r >= args.warmup:
                runs[mode].append(result)
    out = {m: dict({k: statistics.median(x[k] for x in runs[m]) for k in TIMES}, n_tokens=runs[m][0]["n_tokens"],
                   n_compact=runs[m][0]["n_compact"], threads=setup.torch.get_num_threads(),
                   steps_ms=[round(x["step_ms"]) for x in runs[m]]) for m in modes}
    print(json.dumps(out))


def child_memory(args):
    """One mode from a fresh process: peak RSS, RSS at rest after the warm-up step, the losses, and
    the bytes autograd saves for backward in a step (distinct storages, parameters left out)."""
    setup = Setup(args)
    losses = [setup.step(args.mode)["loss"] for _ in range(args.warmup)]
    rest = rss_kib()
    params = {p.untyped_storage().data_ptr() for p in setup.model.parameters()}
    saved = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    for i in range(args.memory_steps):
        if i == args.memory_steps - 1:
            with setup.torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                losses.append(setup.step(args.mode)["loss"])
        else:
            losses.append(setup.step(args.mode)["loss"])
    print(json.dumps({"peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "rest_kib": rest,
                      "saved_kib": sum(saved.values()) // 1024, "losses": losses}))


def run_child(args, extra):
    cmd = [sys.executable, os.path.abspath(__file__)] + extra + \
          ["--%s=%s" % (k.replace("_", "-"), getattr(args, k))
           for k in ("layers", "query", "passage", "passages", "steps", "warmup", "threads", "modes", "memory_steps")]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--query", type=int, default=64)
    ap.add_argument("--passage", type=int, default=128)
    ap.add_argument("--passages", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per mode")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps per mode first")
    ap.add_argument("--memory-steps", type=int, default=1, help="steps after the warm-up in each memory process")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--mode", help=argparse.SUPPRESS)            # a memory child
    ap.add_argument("--timing", action="store_true", help=argparse.SUPPRESS)  # the timing child
    args = ap.parse_args()
    if args.timing:
        return child_timing(args)
    if args.mode:
        return child_memory(args)
    modes = args.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error("unknown mode(s) %s (choose from %s)" % (",".join(bad), ",".join(MODES)))
    print("timing (all modes in one process, in turn) ...", file=sys.stderr)
    rows = run_child(args, ["--timing"])
    for mode in modes:
        print("memory: %s (its own process) ..." % mode, file=sys.stderr)
        rows[mode].update(run_child(args, ["--mode", mode]))
    if args.json:
        print(json.dumps({"layers": args.layers, "modes": rows}))
        return
    base = rows["off"] if "off" in rows else rows[modes[0]]
    print("Qwen3-0.6B-shaped (hidden 1024, intermediate 3072, 16/8 heads of 128, vocab 151936, tied), %d layers, "
          "fp32 CPU, %d torch threads; one query of %d + %d passages of %d tokens; median of %d steps per mode, "
          "modes in turn" % (args.layers, base["threads"], args.query, args.passages, args.passage, args.steps))
    print("| mode | N | N' | plan ms | forward ms | backward ms | AdamW ms | step ms | step vs off | peak RSS MiB "
          "| at rest MiB | step peak MiB | saved for backward MiB | loss step 1 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode in modes:
        r = rows[mode]
        print("| %s | %d | %d | %.1f | %.0f | %.0f | %.0f | %.0f | %.2fx | %.0f | %.0f | %.0f | %.0f | %.6f |"
              % (mode, r["n_tokens"], r["n_compact"], r["plan_ms"], r["forward_ms"], r["backward_ms"],
                 r["optimizer_ms"], r["step_ms"], base["step_ms"] / r["step_ms"], r["peak_kib"] / 1024,
                 r["rest_kib"] / 1024, (r["peak_kib"] - r["rest_kib"]) / 1024, r["saved_kib"] / 1024,
                 r["losses"][0]))
    print("step ms of each timed step: %s" % "; ".join("%s %s" % (m, " ".join(map(str, rows[m]["steps_ms"])))
                                                     for m in modes))
    ref = rows[modes[0]]["losses"]
    print("max |loss - %s's loss| over the %d steps of the memory runs (same initial weights): %s" % (
        modes[0], len(ref), ", ".join("%s %.2e" % (m, max(abs(a - b) for a, b in zip(rows[m]["losses"], ref)))
                                      for m in modes[1:])))


if __name__ == "__main__":
    main()
