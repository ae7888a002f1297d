#!/usr/bin/env python3
"""peer_loading.py: bench/peer_transformers.py's check of what transformers loaded, without torch,
transformers or a GPU (a stand-in transformers module answers AutoModel.from_pretrained):
  - a base model that leaves exactly the checkpoint's lm_head.weight unused (the 8B shape's untied
    head) loads, and the peer says it left the head out;
  - any other unused weight (beside the head or alone), a missing or a mismatched one, and an
    unused lm_head.weight on a model that has an LM head of its own are refused by name (exit
    with the message), as are a load in another dtype.

    python3 tests/peer_loading.py SOURCE_DIR
"""
import contextlib
import io
import os
import sys
import types

sys.dont_write_bytecode = True  # nothing written into the source tree
from cli_check import check, summary  # noqa: E402


class FakeModel:
    def __init__(self, dtype, lm_head):
        self.dtype = dtype
        if lm_head:
            self.lm_head = object()

    def to(self, device):
        return self

    def eval(self):
        return self


def fake_transformers(info, dtype="bf16", lm_head=False):
    """A transformers module whose AutoModel.from_pretrained returns a model and `info`."""
    module = types.ModuleType("transformers")
    module.__version__ = "5.17.0"

    class AutoModel:
        @staticmethod
        def from_pretrained(path, **kw):
            assert kw.get("output_loading_info") is True, kw
            return FakeModel(dtype, lm_head), info

    module.AutoModel = AutoModel
    return module


def load(peer, info, **fake):
    """peer.load_model through the stand-in: (model or None, exit message or None, stdout)."""
    sys.modules["transformers"] = fake_transformers(info, **fake)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            return peer.load_model(None, "/tmp/ckpt", "bf16", "sdpa", "cuda"), None, out.getvalue()
    except SystemExit as e:
        return None, str(e.code), out.getvalue()
    finally:
        del sys.modules["transformers"]


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
    import peer_transformers as peer

    head = {"missing_keys": [], "mismatched_keys": [], "unexpected_keys": ["lm_head.weight"]}
    model, message, out = load(peer, head)
    check(model is not None and message is None, f"a base model leaving lm_head.weight unused loads: {message}")
    check("lm_head.weight is not loaded" in out, f"the peer says it left the head out: {out!r}")

    model, message, out = load(peer, {"missing_keys": [], "unexpected_keys": []})
    check(model is not None and message is None and out == "", f"a clean load loads, silently: {message} {out!r}")
    model, message, _ = load(peer, {})
    check(model is not None, f"a load with no keys listed loads: {message}")

    refused = [
        ("another unused weight beside the head",
         {"unexpected_keys": ["lm_head.weight", "model.layers.0.mlp.extra.weight"]}, {},
         "model.layers.0.mlp.extra.weight"),
        ("an unused weight alone", {"unexpected_keys": ["score.weight"]}, {}, "score.weight"),
        ("a missing weight", {"missing_keys": ["model.norm.weight"], "unexpected_keys": ["lm_head.weight"]}, {},
         "model.norm.weight"),
        ("a mismatched weight",
         {"mismatched_keys": [("model.embed_tokens.weight", (10, 4), (12, 4))]}, {}, "model.embed_tokens.weight"),
        ("an unused lm_head.weight on a model with an LM head", head, {"lm_head": True}, "lm_head.weight"),
        ("another dtype", {}, {"dtype": "f32"}, "asked for bf16"),
    ]
    for what, info, fake, named in refused:
        model, message, _ = load(peer, info, **fake)
        check(model is None and message is not None and named in message,
              f"{what}: refused naming {named!r}: {message}")
        if "lm_head" not in named and model is None and message is not None and "unloaded or unused" in message:
            check("lm_head" not in message, f"{what}: the head, expected unused, is not among the faults: {message}")

    check(peer.loading_faults(head, has_lm_head=False) == {}, "loading_faults: the base model's head is no fault")
    check(peer.loading_faults(head, has_lm_head=True) == {"unexpected_keys": ["lm_head.weight"]},
          "loading_faults: a head model's unused head is")
    return summary("peer_loading")


if __name__ == "__main__":
    sys.exit(main())
