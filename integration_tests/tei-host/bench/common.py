"""common.py: what the tei-host benchmarks share (load.py, scale_out.py, soak.py): starting hosts in
their own process groups (all killed at exit, also on failure), the real-model traffic (rerank calls
of one query with its passages, embedding calls behind an instruction, and texts that share
nothing), a closed-loop load generator on loopback with keep-alive connections and a bounded run
time, and the percentiles. Standard library only (plus `tokenizers` for token-id traffic)."""
import atexit
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "..", "..", ".."))
sys.path.insert(0, os.path.join(root, "tools"))
import real_model_texts as texts  # noqa: E402

TEMPLATE = texts.RERANK_TEMPLATE.replace("{passage}", "{text}")
WORDS = ("river stone light paper garden engine winter copper signal orchard harbor violin market planet "
         "thread candle meadow bridge lantern forest silver canvas desert ladder island pepper rocket").split()

_started = []


def _stop_all():
    for proc in _started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


atexit.register(_stop_all)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


class Host:
    """A tei-host process on a free loopback port (its own process group; `nofile`: its descriptor
    limit)."""

    def __init__(self, binary, model, flags=(), env=None, pydeps=None, log=None, nofile=None):
        environment = dict(os.environ, **(env or {}))
        if pydeps:
            environment["PYTHONPATH"] = pydeps
        command = [binary, "--model", model, "--port", "0", "--python", "/usr/bin/python3",
                   "--rerank-template", TEMPLATE, *flags]

        def limits():  # `ulimit -n nofile` for the host alone
            if nofile:
                import resource
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL,
                                     env=environment, start_new_session=True, preexec_fn=limits)
        _started.append(self.proc)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            raise SystemExit("tei-host did not start: %r" % line)
        self.addr = line.split()[-1]
        self.url = "http://" + self.addr
        self.port = int(self.addr.rsplit(":", 1)[1])
        deadline = time.time() + 180
        while status(self.port, "/health") != 200:
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit("tei-host did not become ready")
            time.sleep(0.2)

    def metrics(self):
        return read_metrics(self.port)

    def rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024

    def cpu_seconds(self):
        """User and system CPU time of the host so far."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout=60):
        """SIGTERM (a graceful stop); SIGKILL after `timeout` s. Returns the exit status, None if killed."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def arguments(doc):
    """An argument parser with the flags every benchmark takes: --host, --model, --pydeps."""
    import argparse
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    for flag in ("--host", "--model", "--pydeps"):
        parser.add_argument(flag, required=True)
    return parser


def status(port, path):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", path)
        code = c.getresponse().status
        c.close()
        return code
    except OSError:
        return None


def read_metrics(port):
    """{name{labels}: value} of /metrics."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def random_text(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words)) + " %d" % rng.randrange(10 ** 6)


TRAFFICS = ("rerank", "rerank32", "embed", "no_sharing")


def traffic(kind, n_requests, seed=1, queries=16, passages=8):
    """[(path, body, prefix text)] of one kind: `rerank` (`queries` queries, each call one query with
    `passages` of the 64 passages, each with a number of its own so that no prompt repeats whole),
    `rerank32` (the same with 32 passages a call: a reranker's calls score 32 to 1000 passages
    against one query, and 32 is the smallest of them), `embed` (calls of 4 texts of random words
    behind the instruction: only the instruction is shared), or `no_sharing` (calls of 4 texts of
    random words)."""
    if kind == "rerank32":
        kind, passages = "rerank", 32
    rng = random.Random(seed)
    query_texts = [texts.RERANK_QUERY] + ["What do we know about %s and %s?" % (rng.choice(WORDS), rng.choice(WORDS))
                                          for _ in range(queries - 1)]
    out = []
    for _ in range(n_requests):
        if kind == "rerank":
            q = rng.choice(query_texts)
            docs = ["%s (%d)" % (p, rng.randrange(10 ** 6)) for p in rng.sample(texts.RERANK_PASSAGES, passages)]
            out.append(("/rerank", {"query": q, "texts": docs}, q))
        elif kind == "embed":
            docs = [random_text(rng, rng.randrange(20, 40)) for _ in range(4)]  # only the instruction shared
            out.append(("/embed", {"inputs": [texts.embed_text(d) for d in docs]}, texts.EMBED_INSTRUCTION))
        elif kind == "no_sharing":
            out.append(("/embed", {"inputs": [random_text(rng, rng.randrange(20, 40)) for _ in range(4)]}, ""))
        else:
            raise SystemExit("unknown traffic %r" % kind)
    return out


class Result:
    def __init__(self):
        self.latencies, self.codes, self.retries, self.lock = [], {}, 0, threading.Lock()

    def add(self, code, seconds):
        with self.lock:
            self.codes[code] = self.codes.get(code, 0) + 1
            if code == 200:
                self.latencies.append(seconds)


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def run_load(port_of, requests, clients, seconds, headers_of=lambda r: {}, retry=False, count=None, backoff=0.0):
    """Closed loop: `clients` threads take the next request of `requests` (cycling) until `seconds`
    have passed (or `count` requests were taken). `port_of(request)` picks the port. With `retry`, a request that fails for the
    connection or with 502/503 is sent again (up to 20 times), as a client behind a balancer does.
    After a 429 a client waits `backoff` seconds. Returns (Result, wall seconds)."""
    result, next_index, lock = Result(), [0], threading.Lock()
    deadline = time.time() + seconds

    def client():
        conns = {}
        while time.time() < deadline:
            with lock:
                if count is not None and next_index[0] >= count:
                    return
                request = requests[next_index[0] % len(requests)]
                next_index[0] += 1
            path, body, _ = request
            data = json.dumps(body)
            for attempt in range(20 if retry else 1):
                port = port_of(request)
                start = time.time()
                try:
                    conn = conns.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                    conns[port] = conn
                    conn.request("POST", path, body=data, headers={"Content-Type": "application/json",
                                                                   **headers_of(request)})
                    response = conn.getresponse()
                    response.read()
                    code = response.status
                except (OSError, http.client.HTTPException):
                    conns.pop(port, None)
                    code = None
                if code in (200, 400, 413, 422, 424, 429) or not retry:
                    break
                with result.lock:
                    result.retries += 1
                time.sleep(0.05)
            result.add(code, time.time() - start)
            if code == 429 and backoff:
                time.sleep(backoff)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result, time.time() - start
