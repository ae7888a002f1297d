#!/usr/bin/env python3
"""test_truss.py: the Truss examples (examples/truss/) under truss's own code, from PyPI (run.sh pins
it): its config loader and image builder, its model server, and the custom server's endpoints probed
as Baseten's proxy maps them; every answer against `radixmlp run` on the same token ids.

- config: both config.yaml files load with TrussConfig.from_yaml, and truss writes their image
  build folders (docker_build_setup): the model server's entry point, the custom server's proxy
  (Baseten's /v1/models/model, /v1/models/model:predict and / rewritten to the three endpoints) and
  its supervisor running the start command.
- radix-mlp on a fixture (qwen3_tiny, token ids): truss's ModelWrapper (what its server runs) imports
  model/model.py and runs load() and predict() in this process, with the config's
  environment_variables set as Baseten sets them; each RADIX_MLP_* switch changes the answer or its
  x-radix-mlp report as it should; a bad switch fails the load naming it; a bad body gets 422.
- radix-mlp on the real SmolLM2 (when integration_tests/real_model/run.sh converted it): truss's
  server itself (main.py in a folder laid out as the image's /app) over HTTP, texts and rerank.
- tei-host: the docker_server's start_command run as Baseten's supervisor runs it, on the fixture
  and on SmolLM2, its liveness, readiness and predict endpoints probed.

Usage: test_truss.py --radixmlp BIN --tei-host BIN --fixtures DIR [--model SMOLLM2_DIR]
Prints one line per check and 'N passed, M failed'; exit status 1 if any failed.
"""
import argparse
import asyncio
import copy
import json
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

here = Path(__file__).resolve().parent
root = here.parent.parent
sys.path.insert(0, str(root / "integration_tests" / "tei-host" / "clients"))
sys.path.insert(0, str(root / "integration_tests" / "tei-host" / "bench"))
import common  # noqa: E402  (tei-host's bench helpers: process groups killed at exit, the rerank template)
import real_model_texts as texts  # noqa: E402
import test_clients  # noqa: E402  (radixmlp_run, max_abs, Checks)
import yaml  # noqa: E402  (truss's dependency)
from truss.base.truss_config import TrussConfig  # noqa: E402
from truss.truss_handle.truss_handle import TrussHandle  # noqa: E402

EXAMPLES = root / "examples" / "truss"
FIXTURE_ABS = 1e-5  # the same library on the same plan: fp32 rounding of the normalisation only
REAL_ABS = test_clients.ABS  # 1e-4, as the other real-model checks
SCORE_TOKENS = [7, 3]  # the fixture has no tokenizer: the rerank pair as ids


def post(url, body, timeout=300):
    """(status, parsed JSON, headers) of a POST."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), dict(e.headers)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, path, seconds, proc):
    deadline = time.time() + seconds
    while common.status(port, path) != 200:
        if proc.poll() is not None:
            raise AssertionError("the server exited with %s before %s answered 200" % (proc.returncode, path))
        if time.time() > deadline:
            raise AssertionError("%s did not answer 200 within %d s" % (path, seconds))
        time.sleep(0.5)


def truss_copy(tmp, name, checkpoint, metadata=None, env=None):
    """examples/truss/NAME copied to tmp with model_metadata.checkpoint (and more) replaced."""
    dst = Path(tmp) / name
    shutil.copytree(EXAMPLES / name, dst)
    config = yaml.safe_load((dst / "config.yaml").read_text())
    config.setdefault("model_metadata", {}).update(checkpoint=str(checkpoint), **(metadata or {}))
    config["environment_variables"].update(env or {})
    (dst / "config.yaml").write_text(yaml.safe_dump(config))
    return dst


def app_folder(truss_dir, build_dir):
    """truss's image build folder for truss_dir, and /app as its Dockerfile lays it out: the server's
    code, model/, data/ and the config truss wrote."""
    TrussHandle(truss_dir).docker_build_setup(build_dir)
    app = build_dir / "app"
    shutil.copytree(build_dir / "server", app)
    for part in ("model", "data", "config.yaml"):
        (shutil.copytree if (build_dir / part).is_dir() else shutil.copy)(build_dir / part, app / part)
    return app


def baseten_env(config, extra=None):
    """The process environment with the config's environment_variables, as Baseten sets them."""
    return dict(os.environ, **config["environment_variables"], **(extra or {}))


def fixture_batch(args):
    batch = json.loads((Path(args.fixtures) / "qwen3_tiny" / "batch.json").read_text())
    return [list(s) for s in batch["input_ids"]]


def check_config(args):
    """Both configs load with truss's loader and truss writes their image build folders."""
    with tempfile.TemporaryDirectory() as tmp:
        said = []
        for name in ("radix-mlp", "tei-host"):
            config = TrussConfig.from_yaml(EXAMPLES / name / "config.yaml")
            build = Path(tmp) / name
            TrussHandle(EXAMPLES / name).docker_build_setup(build)
            dockerfile = (build / "Dockerfile").read_text()
            assert "FROM radix-mlp-truss:0.3" in dockerfile, "%s: the base image is not used" % name
            if config.docker_server is None:
                assert 'ENTRYPOINT ["/usr/local/bin/python3", "/app/main.py"]' in dockerfile, name
                assert (build / "model" / "model.py").is_file() and (build / "server" / "truss_server.py").is_file()
                said.append("%s: Truss's Python server on the base image's python" % name)
                continue
            ds = config.docker_server
            proxy = (build / "proxy.conf").read_text()
            for public, endpoint in (("^/$", ds.liveness_endpoint), ("^/v1/models/model$", ds.readiness_endpoint),
                                     ("^/v1/models/model:predict$", ds.predict_endpoint)):
                assert "rewrite %s %s break;" % (public, endpoint) in proxy, "%s: no rewrite of %s" % (name, public)
            assert "proxy_pass http://127.0.0.1:%d;" % ds.server_port in proxy
            assert "command = %s" % ds.start_command in (build / "supervisord.conf").read_text()
            said.append("%s: proxy / -> %s, readiness -> %s, predict -> %s on :%d" % (
                name, ds.liveness_endpoint, ds.readiness_endpoint, ds.predict_endpoint, ds.server_port))
    return "truss config and image build folders: " + "; ".join(said)


class Wrapped:
    """truss's ModelWrapper (its server's model loader) on an /app folder, in this process."""

    def __init__(self, app, config, env):
        self.saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        if str(app) not in sys.path:  # the server's modules (model_wrapper, _truss_common, _truss_shared)
            sys.path.insert(0, str(app))
        import model_wrapper
        import opentelemetry.sdk.trace as sdk_trace

        self.records = []
        handler = logging.Handler()
        handler.emit = lambda record: self.records.append(record)
        logging.getLogger("uvicorn").addHandler(handler)
        self.handler = handler
        cwd = os.getcwd()
        os.chdir(app)
        try:
            self.wrapper = model_wrapper.ModelWrapper(config, sdk_trace.NoOpTracer())
            self.wrapper.load()
        finally:
            os.chdir(cwd)

    def errors(self):
        """The exceptions the loader logged."""
        return "; ".join("%s: %s" % (type(r.exc_info[1]).__name__, r.exc_info[1]) for r in self.records if r.exc_info)

    def predict(self, body):
        class Connected:  # what the server hands predict: a request that is still connected
            async def is_disconnected(self):
                return False

        response = asyncio.run(self.wrapper.predict(body, Connected()))
        return response.status_code, json.loads(response.body), dict(response.headers)

    def close(self):
        logging.getLogger("uvicorn").removeHandler(self.handler)
        os.environ.clear()
        os.environ.update(self.saved)


def report(headers):
    return dict(kv.split("=", 1) for kv in headers["x-radix-mlp"].split())


def check_fixture_model(args):
    """radix-mlp's model.py under truss's ModelWrapper on qwen3_tiny, each switch checked."""
    seqs = fixture_batch(args)
    fixture = Path(args.fixtures) / "qwen3_tiny"
    run_args = argparse.Namespace(radixmlp=args.radixmlp, model=str(fixture))

    def want_vectors(flags):
        return [line["embedding"] for line in test_clients.radixmlp_run(run_args, seqs, ["--normalize", *flags])]

    query, texts_ids = seqs[0][:10], [s[10:] or [1] for s in seqs]
    prompts = [query + t for t in texts_ids]
    want_scores = [line["score"] for line in test_clients.radixmlp_run(
        run_args, prompts, ["--score-tokens", "%d,%d" % tuple(SCORE_TOKENS)])]
    said = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [  # (switches, radixmlp run's flags, what the report must say)
            ({}, ["--pooling", "last"], {"radix": "on", "attention": "compact"}),
            ({"RADIX_MLP_THRESHOLD": "0"}, ["--pooling", "last", "--no-radix"], {"radix": "off", "attention": "full"}),
            ({"RADIX_MLP_THRESHOLD": "1", "RADIX_MLP_ATTENTION": "full"}, ["--pooling", "last", "--threshold", "1"],
             {"radix": "on", "attention": "full"}),
            ({"RADIX_MLP_POOLING": "mean", "RADIX_MLP_PAD": "8"}, ["--pooling", "mean", "--pad", "8"], {"radix": "on"}),
        ]
        for i, (switches, flags, says) in enumerate(cases):
            truss = truss_copy(Path(tmp) / str(i), "radix-mlp", fixture, {"score_tokens": SCORE_TOKENS}, switches)
            app = app_folder(truss, Path(tmp) / str(i) / "build")
            config = yaml.safe_load((app / "config.yaml").read_text())
            w = Wrapped(app, config, baseten_env(config))
            try:
                assert w.wrapper.ready, "%s: load failed: %s" % (switches, w.errors())
                status, got, headers = w.predict({"inputs": seqs})
                assert status == 200, (status, got)
                diff = max(test_clients.max_abs(g, v) for g, v in zip(got, want_vectors(flags)))
                assert diff <= FIXTURE_ABS, "%s: embeddings differ from radixmlp run %s by %g" % (switches, flags, diff)
                r = report(headers)
                assert all(r[k] == v for k, v in says.items()), "%s: reported %s" % (switches, r)
                assert int(r["tokens"]) == sum(map(len, seqs)), r
                if not switches:
                    # the prefix cache (RADIX_MLP_CACHE_MB=64): the same request again is found in it
                    _, again, headers = w.predict({"inputs": seqs})
                    assert again == got and int(report(headers)["cache_hit_tokens"]) > 0, report(headers)
                    status, ranks, _ = w.predict({"query": query, "texts": texts_ids, "raw_scores": False})
                    assert status == 200, (status, ranks)
                    assert [r["index"] for r in ranks] == sorted(range(len(prompts)), key=lambda j: -want_scores[j])
                    diff = max(abs(r["score"] - want_scores[r["index"]]) for r in ranks)
                    assert diff <= FIXTURE_ABS, "rerank scores differ from radixmlp run by %g" % diff
                    status, body, _ = w.predict({"inputs": "a text"})
                    assert status == 422 and body["error_type"] == "Validation", (status, body)
                    assert "no tokenizer.json" in body["error"], body
                said.append("%s: %s" % (" ".join("%s=%s" % kv for kv in switches.items()) or "config as is",
                                        " ".join("%s=%s" % kv for kv in says.items())))
            finally:
                w.close()
        truss = truss_copy(Path(tmp) / "bad", "radix-mlp", fixture, env={"RADIX_MLP_THRESHOLD": "fast"})
        app = app_folder(truss, Path(tmp) / "bad" / "build")
        config = yaml.safe_load((app / "config.yaml").read_text())
        w = Wrapped(app, config, baseten_env(config))
        try:
            assert w.wrapper.load_failed, "RADIX_MLP_THRESHOLD=fast loaded"
            assert "RADIX_MLP_THRESHOLD" in w.errors(), w.errors()
        finally:
            w.close()
    return "radix-mlp under truss's ModelWrapper on qwen3_tiny equals radixmlp run (<= %g): %s; rerank; cache " \
           "hits; 422; RADIX_MLP_THRESHOLD=fast fails the load naming it" % (FIXTURE_ABS, "; ".join(said))


def start(command, env, cwd=None):
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=sys.stderr, stderr=sys.stderr, start_new_session=True)
    common._started.append(proc)  # killed at exit, also on failure
    return proc


def stop(proc):
    os.killpg(proc.pid, 15)
    return proc.wait(timeout=60)


def real_model_sequences(args):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    docs = test_clients.DOCUMENTS
    doc_ids = [tokenizer.encode(d, add_special_tokens=True).ids for d in docs]
    passages = test_clients.PASSAGES
    prompts = [tokenizer.encode(common.TEMPLATE.format(query=texts.RERANK_QUERY, text=p), add_special_tokens=True).ids
               for p in passages]
    yes_no = [tokenizer.token_to_id(t) for t in texts.RERANK_TOKENS]
    run_args = argparse.Namespace(radixmlp=args.radixmlp, model=args.model)
    vectors = [l["embedding"] for l in test_clients.radixmlp_run(run_args, doc_ids, ["--pooling", "last", "--normalize"])]
    scores = [l["score"] for l in test_clients.radixmlp_run(run_args, prompts, ["--score-tokens", "%d,%d" % tuple(yes_no)])]
    return docs, doc_ids, passages, vectors, scores


def check_real_model_server(args):
    """radix-mlp's model.py in truss's own server (main.py, as the image runs it) on SmolLM2, over HTTP."""
    docs, doc_ids, passages, want_vectors, want_scores = real_model_sequences(args)
    with tempfile.TemporaryDirectory() as tmp:
        truss = truss_copy(tmp, "radix-mlp", args.model, {"rerank_template": common.TEMPLATE})
        app = app_folder(truss, Path(tmp) / "build")
        config = yaml.safe_load((app / "config.yaml").read_text())
        port = free_port()
        proc = start([sys.executable, "main.py"], baseten_env(config, {"INFERENCE_SERVER_PORT": str(port)}), cwd=app)
        try:
            wait_for(port, "/v1/models/model", 300, proc)  # Baseten's readiness probe
            url = "http://127.0.0.1:%d/v1/models/model:predict" % port
            for what, inputs in (("texts", docs), ("token ids", doc_ids)):
                status, got, headers = post(url, {"inputs": inputs})
                assert status == 200, (status, got)
                diff = max(test_clients.max_abs(g, w) for g, w in zip(got, want_vectors))
                assert diff <= REAL_ABS, "%s: embeddings differ from radixmlp run by %g" % (what, diff)
                assert int(report(headers)["tokens"]) == sum(map(len, doc_ids)), headers
            status, ranks, headers = post(url, {"query": texts.RERANK_QUERY, "texts": passages, "return_text": True})
            assert status == 200, (status, ranks)
            diff = max(abs(r["score"] - want_scores[r["index"]]) for r in ranks)
            assert diff <= REAL_ABS, "rerank scores differ from radixmlp run by %g" % diff
            assert all(r["text"] == passages[r["index"]] for r in ranks)
            said = report(headers)
            assert said["radix"] == "on", "the passages behind one prompt and query: %s" % said
        finally:
            stop(proc)
    return "radix-mlp in truss's server on SmolLM2: /embed (texts, ids) and /rerank equal radixmlp run (<= %g); " \
           "rerank reported %s" % (REAL_ABS, " ".join("%s=%s" % kv for kv in said.items()))


def check_docker_server(args, checkpoint, sequences, want, limit):
    """tei-host's start_command as Baseten's supervisor runs it; liveness, readiness, predict."""
    config = TrussConfig.from_yaml(EXAMPLES / "tei-host" / "config.yaml")
    ds = config.docker_server
    port = free_port()
    env = baseten_env(config.to_dict(), {
        "TEI_HOST_MODEL": str(checkpoint), "TEI_HOST_PORT": str(port),
        "PATH": "%s:%s" % (os.path.dirname(os.path.abspath(args.tei_host)), os.environ["PATH"]),
    })
    proc = start(shlex.split(ds.start_command), env)  # supervisord's `command =`
    try:
        deadline = time.time() + 60
        while common.status(port, ds.liveness_endpoint) != 200:  # alive before it is ready
            assert proc.poll() is None and time.time() < deadline, "liveness %s never answered" % ds.liveness_endpoint
            time.sleep(0.2)
        wait_for(port, ds.readiness_endpoint, 300, proc)
        status, got, _ = post("http://127.0.0.1:%d%s" % (port, ds.predict_endpoint), {"inputs": sequences})
        assert status == 200, (status, got)
        diff = max(test_clients.max_abs(g, w) for g, w in zip(got, want))
        assert diff <= limit, "predict differs from radixmlp run by %g" % diff
        code = stop(proc)
        assert code == 0, "tei-host exited %s after SIGTERM" % code
    finally:
        if proc.poll() is None:
            stop(proc)
    return "tei-host docker_server on %s: %s alive, %s ready, %s equals radixmlp run (<= %g), SIGTERM exits 0" % (
        os.path.basename(str(checkpoint)), ds.liveness_endpoint, ds.readiness_endpoint, ds.predict_endpoint, limit)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--radixmlp", "--tei-host", "--fixtures"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--model", help="the converted SmolLM2 folder (integration_tests/real_model/run.sh)")
    args = parser.parse_args()
    for name in ("radixmlp", "tei_host", "fixtures", "model"):  # the loader runs in the app's folder
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    check = test_clients.Checks()
    check("config", check_config, args)
    check("radix-mlp on the fixture", check_fixture_model, args)
    seqs = fixture_batch(args)
    fixture = Path(args.fixtures) / "qwen3_tiny"
    fixture_want = [l["embedding"] for l in test_clients.radixmlp_run(
        argparse.Namespace(radixmlp=args.radixmlp, model=str(fixture)), seqs, ["--pooling", "last", "--normalize"])]
    check("tei-host on the fixture", check_docker_server, args, fixture, seqs, fixture_want, FIXTURE_ABS)
    if args.model and os.path.isfile(os.path.join(args.model, "tokenizer.json")):
        check("radix-mlp on SmolLM2", check_real_model_server, args)
        docs, _, _, vectors, _ = real_model_sequences(args)
        check("tei-host on SmolLM2", check_docker_server, args, args.model, docs, vectors, REAL_ABS)
    else:
        print("SKIPPED the SmolLM2 checks: no converted model with tokenizer.json (integration_tests/real_model/run.sh)")
    return check.summary("truss examples")


if __name__ == "__main__":
    sys.exit(main())
