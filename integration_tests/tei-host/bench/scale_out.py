#!/usr/bin/env python3
"""scale_out.py: four tei-host replicas behind NGINX on loopback (Debian's nginx-light), the same
rerank trace routed two ways, each on fresh replicas (empty prefix caches): `hash $http_x_prefix_key
consistent` (docs/deploying-routing.md; the client sets X-Prefix-Key to the library's routing key of
the prompt's leading prefix, the system turn and the query) against round robin. Reports requests/s,
latency, and the prefix cache's hit rate over the four replicas. Then, on consistent hashing, one
replica is killed with SIGKILL in the middle of the load: NGINX moves its keys to the next replicas
on the ring, clients retry what failed (a 502 or a dropped connection), and every request must end
answered. Every process it starts is in its own process group and killed at exit.

Usage: scale_out.py --host BIN --model DIR --pydeps DIR --lib LIBRADIX_MLP [--seconds 60] [--clients 8]"""
import argparse
import ctypes
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import common

REPLICAS = 4


class RouteParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("prefix_tokens", ctypes.c_uint32), ("use_separator", ctypes.c_bool),
                ("separator", ctypes.c_uint32)]


def route_key(lib, ids):
    """The X-Prefix-Key value of a prompt prefix's ids (rmlp_route_key over all of them)."""
    params = lib.rmlp_route_default_params()
    params.prefix_tokens = len(ids)
    arr = (ctypes.c_uint32 * len(ids))(*ids)
    key, text = ctypes.c_uint64(), ctypes.create_string_buffer(17)
    if lib.rmlp_route_key(arr, len(ids), ctypes.byref(params), ctypes.byref(key), None) != 0:
        raise SystemExit("rmlp_route_key failed")
    lib.rmlp_route_key_format(key.value, text, len(text))
    return text.value.decode()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def nginx_config(hash_port, rr_port, replica_ports):
    servers = "\n".join("        server 127.0.0.1:%d;" % p for p in replica_ports)
    common_proxy = ("proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_read_timeout 600s; "
                    "client_max_body_size 10m;")
    return """pid nginx.pid;
error_log error.log;
worker_processes 1;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp; uwsgi_temp_path tmp; scgi_temp_path tmp;
    upstream by_prefix {
        hash $http_x_prefix_key consistent;   # the routing key the client sets
%s
        keepalive 32;
    }
    upstream round_robin {
%s
        keepalive 32;
    }
    server { listen 127.0.0.1:%d; location / { proxy_pass http://by_prefix; %s } }
    server { listen 127.0.0.1:%d; location / { proxy_pass http://round_robin; %s } }
}
""" % (servers, servers, hash_port, common_proxy, rr_port, common_proxy)


def start_replicas(args):
    flags = ["--cpu-threads", "1", "--cache-mb", "256", "--max-concurrent-requests", "64"]
    env = {"RADIX_MLP_THRESHOLD": "1", "RADIX_MLP_BATCHER": "prefix"}
    return [common.Host(args.host, args.model, flags, env, args.pydeps) for _ in range(REPLICAS)]


def totals(replicas, alive=None):
    keys = ("te_radix_mlp_cache_hit_tokens", "te_radix_mlp_cache_lookup_tokens", "te_batch_next_tokens_sum",
            "te_radix_mlp_computed_tokens")
    out = dict.fromkeys(keys, 0.0)
    counts = []
    for i, r in enumerate(replicas):
        if alive is not None and i not in alive:
            counts.append(None)
            continue
        m = r.metrics()
        for k in keys:
            out[k] += m.get(k, 0.0)
        counts.append(int(m.get('te_request_success{method="batch"}', 0)))
    return out, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--host", "--model", "--pydeps", "--lib"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    if shutil.which("nginx") is None:
        print("SKIP: nginx is not installed (apt-get install nginx-light)")
        return 0
    sys.path.insert(0, args.pydeps)
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    lib = ctypes.CDLL(args.lib)
    lib.rmlp_route_default_params.restype = RouteParams
    trace = common.traffic("rerank", 2000, seed=11, queries=32, passages=4)
    keys = {}
    for _, _, query in trace:
        if query not in keys:
            prefix = common.TEMPLATE.split("{text}")[0].format(query=query)
            keys[query] = route_key(lib, tokenizer.encode(prefix).ids)
    header = lambda r: {"X-Prefix-Key": keys[r[2]]}  # noqa: E731
    print("| routing | requests | req/s | p50 ms | p99 ms | prefix cache hit | N/computed | requests per replica |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as prefix:
        os.makedirs(os.path.join(prefix, "tmp"))
        for mode in ("consistent hash", "round robin", "kill"):
            replicas = start_replicas(args)
            hash_port, rr_port = free_port(), free_port()
            with open(os.path.join(prefix, "nginx.conf"), "w") as f:
                f.write(nginx_config(hash_port, rr_port, [r.port for r in replicas]))
            nginx = subprocess.Popen(["nginx", "-p", prefix, "-c", "nginx.conf", "-g", "daemon off;"],
                                     start_new_session=True)
            common._started.append(nginx)
            while common.status(hash_port, "/health") != 200:
                time.sleep(0.1)
            port = rr_port if mode == "round robin" else hash_port
            try:
                if mode != "kill":
                    result, wall = common.run_load(lambda r: port, trace, args.clients, args.seconds, header)
                    t, counts = totals(replicas)
                    ok = result.codes.get(200, 0)
                    print("| %s | %d | %.2f | %.0f | %.0f | %.1f%% | %.2f | %s |" % (
                        mode, ok, ok / wall, common.percentile(result.latencies, 50) * 1e3,
                        common.percentile(result.latencies, 99) * 1e3,
                        100 * t["te_radix_mlp_cache_hit_tokens"] / max(1, t["te_radix_mlp_cache_lookup_tokens"]),
                        t["te_batch_next_tokens_sum"] / max(1, t["te_radix_mlp_computed_tokens"]),
                        "/".join(map(str, counts))), flush=True)
                    if set(result.codes) != {200}:
                        print("FAIL: answers other than 200: %s" % result.codes)
                        return 1
                else:
                    killer = threading.Timer(args.seconds / 2, replicas[2].kill)
                    killer.start()
                    result, wall = common.run_load(lambda r: port, trace, args.clients, args.seconds, header, retry=True)
                    killer.join()
                    _, counts = totals(replicas, alive={0, 1, 3})
                    ok, lost = result.codes.get(200, 0), sum(n for c, n in result.codes.items() if c != 200)
                    print("\nSIGKILL of replica 2 after %.0f s of %.0f s: %d requests answered 200, %d retried, "
                          "%d lost; survivors' requests: %s" % (args.seconds / 2, args.seconds, ok, result.retries, lost,
                                                                "/".join(str(c) for c in counts if c is not None)))
                    if lost:
                        print("FAIL: %d requests were not answered: %s" % (lost, result.codes))
                        return 1
            finally:
                nginx.terminate()
                nginx.wait(timeout=10)
                for r in replicas:
                    r.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
