#!/usr/bin/env python3
"""nginx_routing.py LIBRARY: the routing key of docs/deploying-routing.md through a real NGINX on
loopback. Four upstream stubs (NGINX servers answering "replica N") behind a front server whose
upstream block is the documented one (`hash $http_x_prefix_key consistent;`); the keys come from
the library (rmlp_route_key up to a separator, rmlp_route_key_format). Checks: requests with the
same key land on the same replica every time; 200 rerank queries spread over all four replicas;
with one replica removed, every key that was not on it stays where it was (ketama's consistency),
and the removed replica's keys spread over the others. Exits 77 (CTest: skipped) with a message
when nginx is not installed (Debian: apt-get install nginx-light)."""
import ctypes
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SEPARATOR = 1
HEADER = "X-Prefix-Key"


class RouteParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("prefix_tokens", ctypes.c_uint32), ("use_separator", ctypes.c_bool),
                ("separator", ctypes.c_uint32)]


def key_header(lib, tokens):
    """The header value of a request's routing key, as a host computes it."""
    params = lib.rmlp_route_default_params()
    params.prefix_tokens, params.use_separator, params.separator = 256, True, SEPARATOR
    ids = (ctypes.c_uint32 * len(tokens))(*tokens)
    key, text = ctypes.c_uint64(), ctypes.create_string_buffer(17)
    if lib.rmlp_route_key(ids, len(tokens), ctypes.byref(params), ctypes.byref(key), None) != 0:
        sys.exit("rmlp_route_key failed: %s" % lib.rmlp_last_error().decode())
    if lib.rmlp_route_key_format(key.value, text, len(text)) != 0:
        sys.exit("rmlp_route_key_format failed")
    return text.value.decode()


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def config(front, replicas):
    """The front server with the documented upstream block, and the replica stubs."""
    stubs = "\n".join("    server { listen 127.0.0.1:%d; location / { return 200 \"replica %d\\n\"; } }" % (p, i)
                      for i, p in replicas)
    servers = "\n".join("        server 127.0.0.1:%d;" % p for _, p in replicas)
    return """pid nginx.pid;
error_log error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp; uwsgi_temp_path tmp; scgi_temp_path tmp;
    upstream radix_mlp {
        hash $http_x_prefix_key consistent;   # the routing key the host sets
%s
    }
    server {
        listen 127.0.0.1:%d;
        location / { proxy_pass http://radix_mlp; }
    }
%s
}
""" % (servers, front, stubs)


def ask(port, key):
    for attempt in range(50):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("POST", "/rerank", body=b"{}", headers={HEADER: key})
            body = conn.getresponse().read().decode().strip()
            conn.close()
            return body
        except OSError:
            time.sleep(0.1)
    sys.exit("nginx did not answer on port %d" % port)


def run(prefix, front, replicas, keys):
    with open(os.path.join(prefix, "nginx.conf"), "w") as f:
        f.write(config(front, replicas))
    os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
    proc = subprocess.Popen(["nginx", "-p", prefix, "-c", "nginx.conf", "-g", "daemon off;"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        return {k: ask(front, k) for k in keys}, [ask(front, k) for k in keys[:20]]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: nginx_routing.py LIBRARY")
    if shutil.which("nginx") is None:
        print("SKIP: nginx is not installed (apt-get install nginx-light); the NGINX routing config is untested here")
        return 77
    lib = ctypes.CDLL(sys.argv[1])
    lib.rmlp_route_default_params.restype = RouteParams
    lib.rmlp_last_error.restype = ctypes.c_char_p
    # 200 rerank queries: a shared template, the query, the separator, then a passage of its own.
    queries = [[5, 6, 7, 8] + [100 + q, 200 + q % 7, 300 + q % 13] + [SEPARATOR] for q in range(200)]
    keys = [key_header(lib, query + [900 + n, 901]) for n, query in enumerate(queries)]
    same = key_header(lib, queries[0] + [42, 43, 44])
    ok = True
    if same != keys[0]:
        print("FAIL: two passages of one query got different keys: %s %s" % (keys[0], same))
        ok = False
    front, *ports = free_ports(5)
    with tempfile.TemporaryDirectory() as prefix:
        four, repeat = run(prefix, front, list(enumerate(ports)), keys)
        three, _ = run(prefix, front, [(i, p) for i, p in enumerate(ports) if i != 2], keys)
    if any(four[k] != r for k, r in zip(keys, repeat)):
        print("FAIL: a key landed on another replica when sent again")
        ok = False
    spread = {r: sum(1 for k in keys if four[k] == r) for r in set(four.values())}
    print("4 replicas: %s" % ", ".join("%s: %d keys" % (r, n) for r, n in sorted(spread.items())))
    if len(spread) != 4 or min(spread.values()) < 20:
        print("FAIL: 200 keys did not spread over the 4 replicas")
        ok = False
    moved = [k for k in keys if four[k] != "replica 2" and three[k] != four[k]]
    if moved:
        print("FAIL: %d keys not on the removed replica moved" % len(moved))
        ok = False
    print("replica 2 removed: %d of its %d keys moved to %d others; no other key moved"
          % (spread.get("replica 2", 0), spread.get("replica 2", 0),
             len({three[k] for k in keys if four[k] == "replica 2"})))
    print("nginx routing: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
