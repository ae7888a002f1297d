#!/usr/bin/env python3
"""faults.py: tei-host on the real model under load and faults (issue 49), each scenario with a host
of its own, bounded in time, figures as a markdown table:
- overload: --clients closed-loop clients (embedding calls of texts; 100 ms pause after a 429)
  against --max-concurrent-requests 8: every request answered 200 or 429, none lost; latency of
  the 200s; the host's RSS before and after;
- abandoning clients: 4 live clients for --seconds, alone and then beside 16 clients that send 32
  inputs each and disconnect at once, over and over: the live clients' latency both times, 429s
  (none: dead work is not load), the sequences the backend ran for clients that had gone;
- killed tokenizer workers: 4 clients sending texts while a worker is killed every second: answers
  by status (a worker that dies twice on one call is 424; none lost);
- SIGTERM: 16 keep-alive clients sending until the host is gone and 16 that sent GET /info 2 s
  before the signal and wait, SIGTERM after a third of --seconds, the waiting ones sending an
  embedding call 0.2 s after it: answers 200 (those in flight at the signal with `Connection: close`), 503 with `Connection:
  close` for those sent after it, requests sent on an open connection and never answered (must be
  0), the exit status and the time to exit;
- out of descriptors: the host under `ulimit -n 64`, 200 idle connections held: /health on a new
  connection (50 probes: answered, p50, p99) and the host's CPU while they are held.

Usage: faults.py --host BIN --model DIR --pydeps DIR [--seconds 30] [--clients 64]"""
import http.client
import json
import os
import signal
import socket
import threading
import time

import common


def embed_calls(n, seed):
    return [r for r in common.traffic("embed", n, seed=seed)]


def overload(args):
    host = common.Host(args.host, args.model, ["--cpu-threads", "2", "--max-concurrent-requests", "8"],
                       pydeps=args.pydeps)
    try:
        rss0 = host.rss_mb()
        result, wall = common.run_load(lambda r: host.port, embed_calls(400, 11), args.clients, args.seconds,
                                       backoff=0.1)
        rss1 = host.rss_mb()
    finally:
        host.stop()
    lost = result.codes.get(None, 0)
    others = {k: v for k, v in result.codes.items() if k not in (200, 429, None)}
    return [("overload: %d clients, --max-concurrent-requests 8, 100 ms after a 429, %.0f s" % (args.clients, wall),
             "200: %d, 429: %d, other: %s, lost: %d; p50 %.0f ms, p99 %.0f ms of the 200s; RSS %.0f -> %.0f MB"
             % (result.codes.get(200, 0), result.codes.get(429, 0), others or "none", lost,
                common.percentile(result.latencies, 50) * 1e3, common.percentile(result.latencies, 99) * 1e3,
                rss0, rss1))]


def abandon_loop(port, stop, sent):
    """Sends 32-input calls and disconnects at once, until `stop`."""
    body = json.dumps({"inputs": ["abandoned text %d %s" % (i, "word " * 40) for i in range(32)]}).encode()
    head = ("POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % len(body)).encode()
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(head + body)
            s.close()
            sent[0] += 32
        except OSError:
            pass
        stop.wait(0.5)


def abandoning(args):
    host = common.Host(args.host, args.model, ["--cpu-threads", "2"], pydeps=args.pydeps)
    rows = []
    try:
        calls = embed_calls(200, 12)
        base, _ = common.run_load(lambda r: host.port, calls, 4, args.seconds)
        m0 = host.metrics()
        stop, sent = threading.Event(), [0]
        abandoners = [threading.Thread(target=abandon_loop, args=(host.port, stop, sent)) for _ in range(16)]
        for t in abandoners:
            t.start()
        loaded, _ = common.run_load(lambda r: host.port, calls, 4, args.seconds)
        stop.set()
        for t in abandoners:
            t.join()
        time.sleep(1)
        m1 = host.metrics()
    finally:
        host.stop()
    live_seqs = 4 * loaded.codes.get(200, 0)
    ran = m1.get("te_batch_next_size_sum", 0) - m0.get("te_batch_next_size_sum", 0)
    for name, r in (("alone", base), ("beside 16 abandoning clients", loaded)):
        rows.append(("abandoning clients: 4 live clients %s, %d s" % (name, args.seconds),
                     "200: %d, 429: %d, other: %s; p50 %.0f ms, p99 %.0f ms"
                     % (r.codes.get(200, 0), r.codes.get(429, 0),
                        {k: v for k, v in r.codes.items() if k not in (200, 429)} or "none",
                        common.percentile(r.latencies, 50) * 1e3, common.percentile(r.latencies, 99) * 1e3)))
    rows.append(("abandoning clients: dead work", "%d sequences sent by clients that left; %d sequences run in all, "
                 "%d of them the live clients' (%d for the gone ones, in the batch they were in when they left); "
                 "te_queue_size after: %d" % (sent[0], ran, live_seqs, max(0, ran - live_seqs),
                                              m1.get("te_queue_size", -1))))
    return rows


def worker_pids(pid):
    pids = []
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task)) as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def killed_workers(args):
    host = common.Host(args.host, args.model, ["--cpu-threads", "2", "--tokenization-workers", "2"],
                       pydeps=args.pydeps)
    stop, kills = threading.Event(), [0]

    def killer():
        while not stop.wait(1.0):
            for p in worker_pids(host.proc.pid)[:1]:
                try:
                    os.kill(p, signal.SIGKILL)
                    kills[0] += 1
                except ProcessLookupError:
                    pass

    k = threading.Thread(target=killer)
    try:
        k.start()
        result, wall = common.run_load(lambda r: host.port, embed_calls(200, 13), 4, args.seconds)
    finally:
        stop.set()
        k.join()
        host.stop()
    return [("killed tokenizer workers: 4 clients, a worker killed every second, %.0f s" % wall,
             "%d kills; 200: %d, 424: %d, other: %s" % (kills[0], result.codes.get(200, 0), result.codes.get(424, 0),
                                                       {c: n for c, n in result.codes.items() if c not in (200, 424)}
                                                       or "none"))]


def sigterm(args):
    host = common.Host(args.host, args.model, ["--cpu-threads", "2"], pydeps=args.pydeps)
    counts, lock, calls = {}, threading.Lock(), embed_calls(100, 14)
    signaled = threading.Event()

    def count(what):
        with lock:
            counts[what] = counts.get(what, 0) + 1

    def exchange(conn, j, method="POST"):
        """One request on `conn` (GET /info, or an embedding call); the connection to go on with
        (None: closed)."""
        path, body, _ = calls[j % len(calls)]
        after = " (sent after the signal)" if signaled.is_set() else ""
        try:
            if method == "GET":
                conn.request("GET", "/info")
            else:
                conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        except OSError:
            count("closed before the request was sent")
            return None
        try:
            r = conn.getresponse()
            r.read()
        except (OSError, http.client.HTTPException):
            count("sent on an open connection, never answered (lost)")
            return None
        closing = (r.getheader("connection") or "").lower() == "close"
        count("%s %d%s%s" % (method, r.status, " + Connection: close" if closing else "", after))
        if closing:
            conn.close()
            return None
        return conn

    def busy(i):  # sends until the host is gone
        conn, j = None, i
        while True:
            if conn is None:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", host.port, timeout=300)
                    conn.connect()
                except OSError:
                    count("new connection refused (the host is gone)")
                    return
            conn = exchange(conn, j)
            j += 1

    def idle(i):  # GET /info 2 s before the signal (within the idle timeout), then an embedding call
        time.sleep(max(0, args.seconds / 3 - 2))
        conn = http.client.HTTPConnection("127.0.0.1", host.port, timeout=300)
        conn = exchange(conn, i, "GET")
        signaled.wait()
        time.sleep(0.2)
        if conn is not None:
            exchange(conn, i + 1)

    threads = [threading.Thread(target=busy, args=(i,)) for i in range(16)]
    threads += [threading.Thread(target=idle, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    time.sleep(args.seconds / 3)
    start = time.time()
    os.killpg(host.proc.pid, signal.SIGTERM)
    signaled.set()
    code = host.proc.wait(timeout=300)
    exited = time.time() - start
    for t in threads:
        t.join()
    detail = ", ".join("%s: %d" % kv for kv in sorted(counts.items()))
    return [("SIGTERM under load: 16 busy keep-alive clients, 16 idle ones sending 0.2 s after the signal "
             "(after %.0f s)" % (args.seconds / 3), "%s; exit status %s %.1f s after the signal" % (detail, code, exited))]


def descriptors(args):
    host = common.Host(args.host, args.model, ["--cpu-threads", "2"], pydeps=args.pydeps, nofile=64)
    held, probes, failed = [], [], 0
    try:
        for _ in range(200):
            try:
                held.append(socket.create_connection(("127.0.0.1", host.port), timeout=2))
            except OSError:
                break
        time.sleep(1)
        cpu0, t0 = host.cpu_seconds(), time.time()
        for _ in range(50):
            start = time.time()
            code = common.status(host.port, "/health")
            if code == 200:
                probes.append(time.time() - start)
            else:
                failed += 1
            time.sleep(0.1)
        cpu = (host.cpu_seconds() - cpu0) / (time.time() - t0)
    finally:
        for s in held:
            s.close()
        host.stop()
    return [("out of descriptors: ulimit -n 64, %d idle connections opened" % len(held),
             "/health: %d of 50 answered 200, p50 %.1f ms, p99 %.1f ms; host CPU %.0f%% of a core while held"
             % (len(probes), common.percentile(probes, 50) * 1e3, common.percentile(probes, 99) * 1e3, cpu * 100))]


SCENARIOS = {"overload": overload, "abandoning": abandoning, "killed_workers": killed_workers, "sigterm": sigterm,
             "descriptors": descriptors}


def main():
    parser = common.arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    rows = []
    for name in args.only or SCENARIOS:
        print("== %s" % name, flush=True)
        rows += SCENARIOS[name](args)
        print("| %s |" % " | ".join(rows[-1]), flush=True)
    print("\n| scenario | figures |\n| --- | --- |")
    for r in rows:
        print("| %s |" % " | ".join(r))


if __name__ == "__main__":
    main()
