#!/usr/bin/env python3
"""test_clients.py: tei-host on the real SmolLM2-135M-Instruct checkpoint, driven by clients nobody
here wrote (run.sh installs them from PyPI): `openai`'s embeddings.create against /v1/embeddings
(base64, its default, and float), `huggingface_hub`'s InferenceClient.feature_extraction against the
TEI routes, plain HTTP for /rerank; and the host's outputs equal to `radixmlp run` on the same token
ids (the `tokenizers` package on the model's tokenizer.json, as the host's workers use it), radix on
and off, with the library's attention and the host's (--attention host).

Usage: test_clients.py --host BIN --radixmlp BIN --model DIR --pydeps DIR
(--pydeps: the folder with `tokenizers`, which the host's tokenizer workers get as PYTHONPATH).
Every host it starts runs in its own process group and is stopped at exit, also on failure.
Prints one line per check and ends with 'N passed, M failed'; exit status 1 if any failed.
"""
import argparse
import base64
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "..", "..", ".."))
sys.path.insert(0, os.path.join(root, "tools"))
sys.path.insert(0, os.path.join(here, "..", "bench"))
import common  # noqa: E402
import real_model_texts as texts  # noqa: E402

ABS = 1e-4  # integration_tests/real_model/compare.py's limit for pooled vectors and scores
TEMPLATE = common.TEMPLATE
DOCUMENTS = [texts.embed_text(d) for d in texts.EMBED_DOCUMENTS] + texts.RERANK_PASSAGES[:10]
PASSAGES = texts.RERANK_PASSAGES[:24]

def start_host(args, extra=(), env=None):
    """tei-host on the model with the rerank template and `extra` flags (bench/common.py's Host: its own
    process group, killed at exit)."""
    return common.Host(args.host, args.model, ["--cpu-threads", "2", *extra], env, args.pydeps, log=sys.stderr)


def stop(host):
    """SIGTERM: a graceful stop must end with status 0 within 30 s."""
    code = host.stop(timeout=30)
    if code != 0:
        raise AssertionError("tei-host exited %s after SIGTERM (None: killed after 30 s)" % code)


def call(url, body=None, timeout=120):
    """(status, parsed JSON or None) of a GET (no body) or a POST."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except OSError:
        return None, None


def max_abs(a, b):
    assert len(a) == len(b), "lengths %d and %d" % (len(a), len(b))
    return max(abs(x - y) for x, y in zip(a, b))


def radixmlp_run(args, sequences, flags):
    """`radixmlp run` on token sequences: one output line per sequence."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            f.writelines(json.dumps({"input_ids": s}) + "\n" for s in sequences)
        done = subprocess.run([args.radixmlp, "run", "--model", args.model, "--input", src, "--output", dst, *flags],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, "radixmlp run failed: %s" % done.stderr
        with open(dst) as f:
            return [json.loads(line) for line in f]


def check_openai(args, host):
    import openai
    client = openai.OpenAI(base_url=host.url + "/v1", api_key="unused", max_retries=0)
    _, want = call(host.url + "/embed", {"inputs": DOCUMENTS[:6]})
    # Not given, the client asks for base64 and decodes it; "base64" given, it hands the text over.
    for fmt in (None, "float", "base64"):
        extra = {} if fmt is None else {"encoding_format": fmt}
        r = client.embeddings.create(model="smollm2", input=DOCUMENTS[:6], **extra)
        assert [d.index for d in r.data] == list(range(6)), [d.index for d in r.data]
        got = [d.embedding for d in r.data]
        if fmt == "base64":
            got = [list(struct.unpack("<%df" % (len(base64.b64decode(g)) // 4), base64.b64decode(g))) for g in got]
        assert len(got[0]) == 576, len(got[0])
        diff = max(max_abs(g, w) for g, w in zip(got, want))
        assert diff <= 1e-6, "openai %s embeddings differ from /embed by %g" % (fmt, diff)
        assert r.usage.prompt_tokens > 6 and r.model == "smollm2", r.usage
    try:
        client.embeddings.create(model="smollm2", input=["x"] * 33)
        raise AssertionError("33 inputs were accepted (limit 32)")
    except openai.APIStatusError as e:
        assert e.status_code == 413, e.status_code
    return "openai %s: embeddings.create (default, float, base64) equals /embed; 33 inputs -> 413" % openai.__version__


def check_huggingface_hub(args, host):
    import huggingface_hub
    from huggingface_hub import InferenceClient
    client = InferenceClient(model=host.url)
    got = client.feature_extraction(DOCUMENTS[0])
    _, want = call(host.url + "/embed", {"inputs": DOCUMENTS[0]})
    flat = [float(x) for x in got.reshape(-1)]
    diff = max_abs(flat, want[0])
    assert diff <= 1e-6, "feature_extraction differs from /embed by %g" % diff
    raw = client.feature_extraction(DOCUMENTS[0], normalize=False)
    norm = math.sqrt(sum(float(x) ** 2 for x in raw.reshape(-1)))
    assert norm > 1.5, "normalize=False did not reach the host (norm %g)" % norm
    return "huggingface_hub %s: InferenceClient.feature_extraction (normalize on and off) equals /embed" % (
        huggingface_hub.__version__)


def check_rerank_http(args, host):
    status, ranks = call(host.url + "/rerank", {"query": texts.RERANK_QUERY, "texts": PASSAGES, "return_text": True})
    assert status == 200, (status, ranks)
    assert sorted(r["index"] for r in ranks) == list(range(len(PASSAGES)))
    assert all(a["score"] >= b["score"] for a, b in zip(ranks, ranks[1:])), "not sorted"
    assert all(r["text"] == PASSAGES[r["index"]] for r in ranks)
    top = [r["index"] for r in ranks[:8]]
    hits = len(set(top) & set(texts.RERANK_RELEVANT))
    return "plain HTTP /rerank: %d passages ranked; %d of the %d answering passages in the top 8" % (
        len(PASSAGES), hits, len(texts.RERANK_RELEVANT))


def check_equality(args, tokenizer, threshold, attention):
    """The host's embeddings and scores against `radixmlp run` on the same ids."""
    doc_ids = [tokenizer.encode(d, add_special_tokens=True).ids for d in DOCUMENTS]
    prompt_ids = [tokenizer.encode(TEMPLATE.format(query=texts.RERANK_QUERY, text=p), add_special_tokens=True).ids
                  for p in PASSAGES]
    yes, no = (tokenizer.token_to_id(t) for t in texts.RERANK_TOKENS)
    radix = ["--threshold", "1"] if threshold == "1" else ["--no-radix"]
    want_vectors = [line["embedding"] for line in radixmlp_run(args, doc_ids, ["--pooling", "last", "--normalize", *radix])]
    want_scores = [line["score"] for line in radixmlp_run(args, prompt_ids, ["--score-tokens", "%d,%d" % (yes, no), *radix])]
    with start_host(args, ["--attention", attention], {"RADIX_MLP_THRESHOLD": threshold}) as host:
        for what, inputs in (("texts", DOCUMENTS), ("token ids", doc_ids)):
            status, got = call(host.url + "/embed", {"inputs": inputs})
            assert status == 200, (status, got)
            diff = max(max_abs(g, w) for g, w in zip(got, want_vectors))
            assert diff <= ABS, "radix %s, %s attention, %s: embeddings differ from radixmlp run by %g" % (
                "on" if threshold == "1" else "off", attention, what, diff)
        status, ranks = call(host.url + "/rerank", {"query": texts.RERANK_QUERY, "texts": PASSAGES})
        assert status == 200, (status, ranks)
        diff = max(abs(r["score"] - want_scores[r["index"]]) for r in ranks)
        assert diff <= ABS, "rerank scores differ from radixmlp run by %g" % diff
        _, metrics = None, urllib.request.urlopen(host.url + "/metrics").read().decode()
        gate = "radix" if threshold == "1" else "identity"
        assert 'te_radix_mlp_batches{gate="%s"}' % gate in metrics, "no %s batch in /metrics" % gate
        stop(host)
    return "radix %s, %s attention: /embed (texts and ids) and /rerank equal radixmlp run (<= %g)" % (
        "on" if threshold == "1" else "off", attention, ABS)


class Checks:
    """Runs named checks (also test_truss.py's): each a function returning what it checked, printed
    `ok   <that> (<seconds> s)`, or its exception, printed `FAIL <name>: ...`; every check runs."""

    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, name, fn, *args):
        began = time.time()
        try:
            print("ok   %s (%.1f s)" % (fn(*args), time.time() - began), flush=True)
            self.passed += 1
        except Exception as e:  # report every check, then fail
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
            self.failed += 1

    def summary(self, what):
        """Prints the counts under `what`; the exit status: 1 when a check failed, else 0."""
        print("%s: %d passed, %d failed" % (what, self.passed, self.failed))
        return 1 if self.failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--host", "--radixmlp", "--model", "--pydeps"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    sys.path.insert(0, args.pydeps)
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    check = Checks()
    host = start_host(args)
    try:
        for name, fn in (("openai", check_openai), ("huggingface_hub", check_huggingface_hub),
                         ("rerank", check_rerank_http)):
            check(name, fn, args, host)
    finally:
        check("graceful stop", lambda: stop(host) or "SIGTERM: tei-host stopped gracefully with status 0")
    for threshold, attention in (("1", "library"), ("0", "library"), ("1", "host"), ("0", "host")):
        check("equality", check_equality, args, tokenizer, threshold, attention)
    return check.summary("tei-host clients")


if __name__ == "__main__":
    sys.exit(main())
