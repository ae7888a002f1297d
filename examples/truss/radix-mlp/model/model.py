"""model.py: a Truss model serving libradix_mlp through its Python bindings (radix_mlp), on the CPU.

``load()`` loads the checkpoint that config.yaml names (``model_metadata.checkpoint``: a folder
with config.json and model.safetensors, and tokenizer.json for text inputs) and reads the
deployment's switches from the environment (config.yaml's ``environment_variables``):

- ``RADIX_MLP_THRESHOLD``, ``RADIX_MLP_PAD``, ``RADIX_MLP_GATE``: the plan, read by the library
  (``plan_params_from_env``; ``RADIX_MLP_THRESHOLD=0`` turns RadixMLP off);
- ``RADIX_MLP_ATTENTION`` (full, compact, auto: where attention runs), ``RADIX_MLP_CACHE_MB`` (the
  context's prefix KV cache, 0: none), ``RADIX_MLP_POOLING`` (last, mean, first),
  ``RADIX_MLP_MAX_BATCH_TOKENS`` (the largest request, in tokens).

A value that is set but invalid stops the load with a message naming the variable.

``predict()`` takes the bodies of text-embeddings-inference's routes and answers in their shapes:
``{"inputs": ..., "normalize": true}`` (TEI's /embed: a text, token ids, or a list of either) gives
one vector per input; ``{"query": ..., "texts": [...], "raw_scores": false, "return_text": false}``
(TEI's /rerank) gives ``[{"index", "score", "text"?}, ...]``, highest score first: p(yes) against
p(no) at the last token of each prompt (``model_metadata.rerank_template`` around the query and the
text, or the query's ids then the text's). Each request is one batch, so the sequences it sends
share their prefixes (a rerank query) through RadixMLP. What a request did goes to the log and to
the answer's ``x-radix-mlp`` header (radix on or off, tokens, compact rows, attention, cache hits);
``x-compute-time`` and ``x-compute-tokens`` are TEI's. A bad body gets TEI's error body
(``{"error", "error_type": "Validation"}``) with status 422.
"""
import json
import logging
import os
import threading
import time

import numpy as np

import radix_mlp

log = logging.getLogger(__name__)

POOLINGS = ("last", "mean", "first")
ATTENTIONS = ("full", "compact", "auto")


class BadRequest(ValueError):
    """A request body TEI would refuse (422)."""


def _env_choice(name, default, choices):
    value = os.environ.get(name) or default
    if value not in choices:
        raise ValueError("%s=%r: expected one of %s" % (name, value, ", ".join(choices)))
    return value


def _env_count(name, default, minimum):
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < minimum:
        raise ValueError("%s=%r: expected a whole number of at least %d" % (name, raw, minimum))
    return value


def _is_ids(x):
    return isinstance(x, list) and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in x)


class Model:
    def __init__(self, config=None, data_dir=None, **kwargs):
        self._config = config or {}
        self._metadata = self._config.get("model_metadata") or {}
        self._lock = threading.Lock()
        self.settings = None
        self.last_report = None

    def load(self):
        checkpoint = self._metadata.get("checkpoint")
        if not checkpoint:
            raise ValueError("config.yaml: model_metadata.checkpoint names no checkpoint folder")
        self.plan_params = radix_mlp.plan_params_from_env()
        attention = _env_choice("RADIX_MLP_ATTENTION", "auto", ATTENTIONS)
        cache_mb = _env_count("RADIX_MLP_CACHE_MB", 64, 0)
        self.pooling = _env_choice("RADIX_MLP_POOLING", "last", POOLINGS)
        self.max_tokens = _env_count("RADIX_MLP_MAX_BATCH_TOKENS", 16384, 1)
        self.model = radix_mlp.Model.load(checkpoint)
        self.ctx = self.model.context(self.max_tokens, attention=attention, cache_bytes=cache_mb << 20)
        self.planner = radix_mlp.Planner()
        self.tokenizer = None
        tokenizer_path = os.path.join(checkpoint, "tokenizer.json")
        if os.path.isfile(tokenizer_path):
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(tokenizer_path)
        self.template = self._metadata.get("rerank_template", "{query}\n{text}")
        self.score_tokens = self._score_tokens()
        p = self.plan_params
        self.settings = {
            "checkpoint": checkpoint,
            "threshold": p.threshold,
            "pad": p.pad_multiple_of,
            "gate": p.gate,
            "attention": attention,
            "cache_mb": cache_mb,
            "pooling": self.pooling,
            "max_batch_tokens": self.max_tokens,
            "tokenizer": self.tokenizer is not None,
            "score_tokens": self.score_tokens,
            "library": "%s (%s)" % (radix_mlp.version_string(), radix_mlp.library_path),
        }
        log.info("radix-mlp: loaded %s", json.dumps(self.settings, sort_keys=True))

    def _score_tokens(self):
        """The (yes, no) ids of the rerank score: model_metadata.score_tokens, else the ids of
        model_metadata.score_words (default yes, no) in the tokenizer; None without an LM head."""
        if not self.model.config.has_lm_head:
            return None
        if "score_tokens" in self._metadata:
            a, b = (int(t) for t in self._metadata["score_tokens"])
            return a, b
        if self.tokenizer is None:
            return None
        words = self._metadata.get("score_words", ["yes", "no"])
        if not (isinstance(words, list) and len(words) == 2 and all(isinstance(w, str) for w in words)):
            raise ValueError("config.yaml: model_metadata.score_words must be two words (quoted: YAML reads "
                             "yes and no as booleans), got %r" % (words,))
        ids = [self.tokenizer.token_to_id(w) for w in words]
        return tuple(ids) if None not in ids else None

    # ---- requests ---------------------------------------------------------------------------

    def _ids(self, x, what):
        if isinstance(x, str):
            if self.tokenizer is None:
                raise BadRequest("%s: the checkpoint has no tokenizer.json: send token ids" % what)
            return self.tokenizer.encode(x, add_special_tokens=True).ids
        if _is_ids(x) and x:
            return x
        raise BadRequest("%s: expected a text or a non-empty list of token ids" % what)

    def _embed_inputs(self, request):
        inputs = request.get("inputs")
        if isinstance(inputs, str) or _is_ids(inputs):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            raise BadRequest("inputs: expected a text, token ids, or a non-empty list of either")
        return [self._ids(x, "inputs[%d]" % i) for i, x in enumerate(inputs)]

    def _rerank_inputs(self, request):
        query, texts = request.get("query"), request.get("texts")
        if not isinstance(texts, list) or not texts:
            raise BadRequest("texts: expected a non-empty list")
        if self.score_tokens is None:
            raise BadRequest("model is not a re-ranker model: it has no LM head or no score tokens")
        prompts = []
        for i, text in enumerate(texts):
            if isinstance(query, str) and isinstance(text, str):
                prompts.append(self._ids(self.template.format(query=query, text=text), "texts[%d]" % i))
            else:
                prompts.append(self._ids(query, "query") + self._ids(text, "texts[%d]" % i))
        return prompts

    def _run(self, sequences, score):
        """One batch: plan, forward, then pooled vectors (n, hidden) or (logits, prob_a)."""
        n = sum(len(s) for s in sequences)
        if n > self.max_tokens:
            raise BadRequest("the request has %d tokens, more than RADIX_MLP_MAX_BATCH_TOKENS=%d" % (n, self.max_tokens))
        for i, s in enumerate(sequences):
            if len(s) > self.model.config.max_position_embeddings:
                raise BadRequest("input %d has %d tokens, more than the model's %d positions"
                                 % (i, len(s), self.model.config.max_position_embeddings))
        ids = np.concatenate([np.asarray(s, dtype=np.uint32) for s in sequences])
        positions = np.concatenate([np.arange(len(s), dtype=np.uint32) for s in sequences])
        cu = np.concatenate([[0], np.cumsum([len(s) for s in sequences])]).astype(np.uint32)
        if int(ids.max()) >= self.model.config.vocab_size:
            raise BadRequest("token id %d is outside the vocabulary (%d ids)" % (int(ids.max()), self.model.config.vocab_size))
        with self._lock:
            before = self.ctx.cache_stats()
            plan = self.planner.build(ids, positions, cu, params=self.plan_params)
            hidden = self.ctx.forward(plan)
            if score:
                result = self.ctx.score_pair(hidden, cu, *self.score_tokens)
            else:
                result = self.ctx.pool(hidden, cu, pooling=self.pooling, normalize=False)
            after = self.ctx.cache_stats()
        space = self.settings["attention"]
        if space == "auto":
            space = "compact" if plan.use_radix else "full"
        report = {
            "radix": "on" if plan.use_radix else "off",
            "tokens": plan.n_tokens,
            "compact_rows": plan.n_compact,
            "attention": space,
            "cache_hit_tokens": after.hit_tokens - before.hit_tokens,
        }
        return result, report

    def predict(self, request):
        start = time.perf_counter()
        try:
            if not isinstance(request, dict):
                raise BadRequest("the body must be a JSON object")
            if "query" in request or "texts" in request:
                (logits, prob_a), report = self._run(self._rerank_inputs(request), score=True)
                raw = bool(request.get("raw_scores", False))
                texts = request["texts"]
                ranks = []
                for i in range(len(texts)):
                    rank = {"index": i, "score": float(logits[i, 0] - logits[i, 1] if raw else prob_a[i])}
                    if request.get("return_text") and isinstance(texts[i], str):
                        rank["text"] = texts[i]
                    ranks.append(rank)
                body = sorted(ranks, key=lambda r: (-r["score"], r["index"]))
            else:
                vectors, report = self._run(self._embed_inputs(request), score=False)
                if request.get("normalize", True):
                    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                    vectors = vectors / np.where(norms > 0, norms, 1)
                body = vectors.tolist()
        except BadRequest as e:
            return _response({"error": str(e), "error_type": "Validation"}, 422, {})
        report["compute_ms"] = round(1000 * (time.perf_counter() - start), 3)
        self.last_report = report
        log.info("radix-mlp: %s", json.dumps(report, sort_keys=True))
        headers = {
            "x-radix-mlp": " ".join("%s=%s" % kv for kv in report.items()),
            "x-compute-time": str(report["compute_ms"]),
            "x-compute-tokens": str(report["tokens"]),
        }
        return _response(body, 200, headers)


def _response(body, status, headers):
    """A JSON answer with headers (Truss's server passes a starlette Response through as it is);
    the body itself where starlette is absent."""
    try:
        from starlette.responses import JSONResponse
    except ImportError:
        return body
    return JSONResponse(body, status_code=status, headers=headers)
