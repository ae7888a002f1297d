"""The C library's reading of config.json against transformers itself: every key of a checkpoint's
config is implemented, refused by name, or reported as one transformers does not read either; and
configs nobody chose load to transformers' numbers or are refused by name.

1. Every key transformers reads for an architecture is known to the library: for each of the seven
   architectures, the names transformers looks up on the config while it builds the model and runs
   forwards (traced: eager and sdpa, with and without padding, base model and causal LM), with those
   its modeling file reads with getattr, are each written into a checkpoint's config.json: the load
   either refuses naming the key, or loads and does not list it among the keys "transformers does
   not read" (model/config_keys.c).
2. Random configs (drawn here, not chosen): architecture, sizes, GQA, head_dim, eps, theta, biases,
   tying, dtype, prefix, and each of a list of keys set at random (refused and inert ones alike,
   and a key transformers does not know). transformers builds and saves each one; the library then
   refuses it naming a key the draw set, or its hidden states (radix off, on and compact attention;
   a bf16 checkpoint also with its weights held in bf16) match transformers' within 1e-4 of each
   row's norm, a causal LM's greedy decode steps (shared prefixes read once, and each sequence
   alone) give transformers' logits for the same tokens, and its load report names the unknown key.
   RADIX_MLP_CONFIG_DRAWS (default 48) and RADIX_MLP_CONFIG_SEED (default 0) pick the draws.
"""

import inspect
import json
import os
import re
import tempfile
import unittest
import warnings

import numpy as np
import torch
import transformers
from transformers import (Gemma2Config, Gemma3TextConfig, GemmaConfig, LlamaConfig, MistralConfig, Qwen2Config,
                          Qwen3Config)

import radix_mlp
from _common import randomize

CLASSES = {"qwen3": Qwen3Config, "qwen2": Qwen2Config, "llama": LlamaConfig, "mistral": MistralConfig,
           "gemma": GemmaConfig, "gemma2": Gemma2Config, "gemma3_text": Gemma3TextConfig}
UNREAD_LINE = "that transformers' %s model does not read"
ROW_TOL = 1e-4  # per row: |library - transformers| <= ROW_TOL * |transformers row| (L2)


def small_kwargs(**extra):
    kw = dict(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)
    kw.update(extra)
    return kw


def traced_names(model_type):
    """Config attribute names transformers reads for model_type: traced while building and running
    the base model and the causal LM, plus getattr(config, "...") reads of its modeling file."""
    cls = CLASSES[model_type]
    seen = set()

    class Recording(cls):
        def __getattribute__(self, name):
            if not name.startswith("__"):
                seen.add(name)
            return super().__getattribute__(name)

    Recording.__name__ = cls.__name__
    config = Recording(**small_kwargs())
    ids = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    for auto in (transformers.AutoModel, transformers.AutoModelForCausalLM):
        for impl in ("eager", "sdpa"):
            config._attn_implementation = impl
            torch.manual_seed(0)
            try:
                model = auto.from_config(config).eval()
            except ValueError:  # Gemma 2 runs eager attention only (its soft-capping)
                if impl == "eager":
                    raise
                continue
            with torch.no_grad():
                model(input_ids=ids, attention_mask=mask)
                model(input_ids=ids[:1])
    source = inspect.getsource(inspect.getmodule(transformers.MODEL_MAPPING[cls]))
    seen.update(re.findall(r'getattr\((?:self\.)?config, "(\w+)"', source))
    keys = set()
    params = set(inspect.signature(cls.__init__).parameters)
    for name in seen:
        if name.startswith("_"):
            continue  # transformers' internals (_attn_implementation, ...), set by code, not by config.json
        missing = object()
        on_class = inspect.getattr_static(cls, name, missing)
        if callable(on_class) and not isinstance(on_class, property):
            continue  # a method
        if on_class is not missing and name not in params and name != "per_layer_config":
            continue  # a class attribute or property (parallelism plans, sub_configs, ...), not a config.json key
        keys.add(name)
    return sorted(keys)


# Values that ask for something other than the default, per key (others: the saved value, else 3).
PROBES = {"is_causal": False, "sliding_window": 3, "attention_chunk_size": 2, "kv_sharing_modes": ["none", "reuse"],
          "per_layer_config": {"1": {"intermediate_size": 8}}, "pad_token_id": 3, "attention_dropout": 0.5,
          "hidden_act": "gelu", "rms_norm_eps": 0.1, "auto_map": {"AutoModel": "custom.Model"},
          "tie_word_embeddings": True, "use_cache": False, "output_hidden_states": True}


def probe_value(name, config_dict):
    """A value for key `name` in a config.json: PROBES', else the saved one, else 3."""
    if name in PROBES:
        return PROBES[name]
    if name == "head_dim":
        return config_dict.get("head_dim") or config_dict["hidden_size"] // config_dict["num_attention_heads"]
    value = config_dict.get(name)
    return value if value is not None else 3


def transformers_model(folder, base):
    """The checkpoint in folder as transformers loads it (eager attention, float32, eval)."""
    config = transformers.AutoConfig.from_pretrained(folder)
    config._attn_implementation = "eager"
    auto = transformers.AutoModel if base else transformers.AutoModelForCausalLM
    return auto.from_pretrained(folder, config=config, dtype=torch.float32).eval()


def transformers_rows(folder, seqs, base, model=None):
    """transformers' last hidden state of each sequence (run alone) from folder."""
    model = model if model is not None else transformers_model(folder, base)
    body = model if base else getattr(model, "model", model)
    with torch.no_grad():
        return [body(input_ids=torch.tensor([s])).last_hidden_state[0].numpy() for s in seqs]


def save_checkpoint(folder, model_type, config_changes, seed=0, dtype=torch.float32, base=False, **kwargs):
    """A random tiny checkpoint of model_type saved by transformers into folder, its config.json
    then changed by config_changes (value None: key removed). Returns the model (float32)."""
    config = CLASSES[model_type](**small_kwargs(**kwargs))
    torch.manual_seed(seed)
    auto = transformers.AutoModel if base else transformers.AutoModelForCausalLM
    model = randomize(auto.from_config(config), seed).to(dtype)
    model.save_pretrained(folder)
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        saved = json.load(f)
    for key, value in config_changes.items():
        if value is None:
            saved.pop(key, None)
        else:
            saved[key] = value
    with open(path, "w") as f:
        json.dump(saved, f)
    return model.float()


def load(folder, **params):
    """(model, None) or (None, the error's message); the load report's warning is not shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return radix_mlp.Model.load(folder, **params), None
        except radix_mlp.RadixMLPError as error:
            return None, str(error)


def unread_keys(report, model_type):
    """The keys the load report says transformers does not read for model_type."""
    for line in report.splitlines():
        if UNREAD_LINE % model_type in line:
            return set(re.findall(r"'([^']+)'", line.split("ignores them:", 1)[1]))
    return set()


class TestEveryKeyKnown(unittest.TestCase):
    def test_traced_keys(self):
        """Each key transformers reads, set alone to a probe value: refused by name, or the library's
        numbers are transformers' with it (and it is not reported as unread)."""
        seqs = [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 9, 8], [1, 2, 3, 4, 5, 6, 7, 10, 11]]
        compared = refused = 0
        for model_type in CLASSES:
            names = traced_names(model_type)
            self.assertIn("hidden_size", names)  # the trace works
            with tempfile.TemporaryDirectory() as folder:
                save_checkpoint(folder, model_type, {})
                with open(os.path.join(folder, "config.json")) as f:
                    saved = json.load(f)
                model, error = load(folder)
                self.assertIsNone(error, "%s: the plain checkpoint: %s" % (model_type, error))
                self.assertEqual(unread_keys(model.load_report, model_type), set(),
                                 "%s: transformers' own config.json has keys reported unread" % model_type)
                model.close()
                for name in names:
                    with self.subTest(model_type=model_type, key=name):
                        with open(os.path.join(folder, "config.json"), "w") as f:
                            json.dump(dict(saved, **{name: probe_value(name, saved)}), f)
                        model, error = load(folder)
                        if error is not None:
                            self.assertIn(name, error, "%s: %s refused without naming it" % (model_type, name))
                            refused += 1
                            continue
                        try:
                            self.assertNotIn(name, unread_keys(model.load_report, model_type),
                                             "%s: transformers reads %r, the library says it does not" %
                                             (model_type, name))
                            try:
                                want = transformers_rows(folder, seqs, base=False)
                            except Exception:  # transformers cannot run it either
                                continue
                            got = forwards(model, seqs)
                            assert_rows_match(self, got, want, "%s with %s" % (model_type, name))
                            compared += 1
                        finally:
                            model.close()
        print("\ntraced keys: %d compared with transformers, %d refused by name" % (compared, refused))
        self.assertGreater(compared, 40)
        self.assertGreater(refused, 10)

    def test_unknown_key_reported(self):
        with tempfile.TemporaryDirectory() as folder:
            save_checkpoint(folder, "qwen2", {"radix_mlp_not_a_key": 1, "mlp_bias": True,
                                              "auto_map": {"AutoConfig": "c.C", "AutoModel": "modeling_x.X"}})
            model, error = load(folder)
            self.assertIsNone(error)
            self.assertEqual(unread_keys(model.load_report, "qwen2"), {"radix_mlp_not_a_key", "mlp_bias"})
            self.assertIn("auto_map names custom code for AutoModel ('modeling_x.X')", model.load_report)
            model.close()


# Keys a draw may set, each to a random value from its list: refused and inert ones alike.
OPTIONAL = {
    "is_causal": [True, False],
    "attention_chunk_size": [4, 16],
    "kv_sharing_modes": [["none", "reuse"]],
    "partial_rotary_factor": [0.5, 1.0],
    "pretraining_tp": [1, 2],
    "pad_token_id": [0, 5],
    "attention_dropout": [0.0, 0.3],
    "initializer_range": [0.5],
    "use_cache": [False],
    "output_hidden_states": [True],
    "hidden_act": ["silu", "gelu", "gelu_pytorch_tanh", "relu"],
    "use_bidirectional_attention": [True, False],
    "rope_scaling": [{"rope_type": "linear", "factor": 2.0}],
    "radix_mlp_not_a_key": [7],
}


def draw(rng):
    """One random config: (model_type, kwargs for its config class, config.json changes, settings
    made that the library may refuse (key names), dtype, base model or not)."""
    model_type = rng.choice(sorted(CLASSES))
    kv = int(rng.integers(1, 4))
    heads = kv * int(rng.choice([1, 2, 3]))
    head_dim = int(rng.choice([4, 8, 12, 16]))
    explicit_head_dim = bool(rng.integers(0, 2)) and model_type != "qwen2"
    hidden = heads * head_dim if not explicit_head_dim else int(rng.choice([16, 24, 32, 40]))
    kwargs = dict(vocab_size=int(rng.integers(40, 120)), hidden_size=hidden,
                  intermediate_size=int(rng.integers(8, 64)), num_hidden_layers=int(rng.integers(1, 4)),
                  num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=int(rng.integers(32, 128)),
                  rms_norm_eps=float(10 ** rng.uniform(-6, -3)), tie_word_embeddings=bool(rng.integers(0, 2)))
    if explicit_head_dim:
        kwargs["head_dim"] = head_dim
    theta = float(10 ** rng.uniform(2, 6))
    kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    if model_type == "gemma3_text":  # its RoPE per layer type
        kwargs["rope_parameters"] = {"full_attention": dict(kwargs["rope_parameters"]),
                                     "sliding_attention": {"rope_type": "default", "rope_theta": theta / 10}}
    if model_type in ("llama", "qwen3", "gemma", "gemma2", "gemma3_text"):
        kwargs["attention_bias"] = bool(rng.integers(0, 2))
    if model_type == "llama":
        kwargs["mlp_bias"] = bool(rng.integers(0, 2))
    changes, risky = {}, set()
    for key, values in OPTIONAL.items():
        if rng.random() < 0.12:
            value = values[int(rng.integers(0, len(values)))]
            changes[key] = value
            risky.add(key)
    if rng.random() < 0.15:  # the older spelling of rope_type
        changes["rope_parameters"] = {"type": str(rng.choice(["default", "linear"])), "rope_theta": theta,
                                      "factor": 2.0}
        risky.add("rope_parameters")
    if rng.random() < 0.15:
        window = int(rng.integers(4, 40))
        if model_type == "mistral":
            kwargs["sliding_window"] = window
        elif model_type == "llama":
            changes["sliding_window"] = window
        else:
            kwargs.update(use_sliding_window=True, sliding_window=window,
                          max_window_layers=int(rng.integers(0, kwargs["num_hidden_layers"] + 1)))
            kwargs.pop("layer_types", None)
        risky.update({"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"})
    if model_type != "llama" and rng.random() < 0.15:  # flags this architecture does not read
        changes["mlp_bias"] = True
    dtype = torch.bfloat16 if rng.random() < 0.3 else torch.float32
    return model_type, kwargs, changes, risky, dtype, bool(rng.integers(0, 2))


def batch(rng, vocab):
    """Sequences sharing prefixes: a common head, two branches, one sequence repeated."""
    head = [int(t) for t in rng.integers(0, vocab, int(rng.integers(1, 10)))]
    seqs = [head + [int(t) for t in rng.integers(0, vocab, int(rng.integers(1, 12)))] for _ in range(4)]
    seqs.append(list(seqs[1]))
    seqs.append(seqs[0][: max(1, len(seqs[0]) - 2)])
    return seqs


class TestRandomConfigs(unittest.TestCase):
    def test_random_configs(self):
        draws = int(os.environ.get("RADIX_MLP_CONFIG_DRAWS", "48"))
        seed = int(os.environ.get("RADIX_MLP_CONFIG_SEED", "0"))
        rng = np.random.default_rng(seed)
        matched = refused = skipped = generated = 0
        for i in range(draws):
            model_type, kwargs, changes, risky, dtype, base = draw(rng)
            what = "draw %d (seed %d): %s %s, config.json changes %s, %s%s" % (
                i, seed, model_type, kwargs, changes, dtype, ", base model" if base else "")
            with self.subTest(what), tempfile.TemporaryDirectory() as folder:
                seqs = batch(rng, kwargs["vocab_size"])
                try:
                    save_checkpoint(folder, model_type, changes, seed=i, dtype=dtype, base=base, **kwargs)
                    reference = transformers_model(folder, base)
                    want = transformers_rows(folder, seqs, base, reference)
                except Exception:  # transformers itself refuses the draw (its validators raise their own types)
                    skipped += 1
                    continue
                model, error = load(folder)
                if error is not None:
                    self.assertTrue(any(key in error for key in risky), "refused naming no key the draw set: " + error)
                    refused += 1
                    continue
                if "radix_mlp_not_a_key" in changes:
                    self.assertIn("radix_mlp_not_a_key", unread_keys(model.load_report, model_type))
                generated += check_loaded(self, model, folder, seqs, want, reference, base, dtype, what)
                matched += 1
        print("\nrandom configs: %d matched transformers (%d of them generating too), %d refused by name, %d "
              "skipped (transformers refused)" % (matched, generated, refused, skipped))
        self.assertGreaterEqual(matched, draws // 3, "too few draws loaded: the test would check little")
        self.assertGreater(refused, 0, "no draw was refused: the refusals went unchecked")


GENERATE_STEPS = 4


def check_loaded(test, model, folder, seqs, want, reference, base, dtype, what, more_modes=None):
    """A loaded checkpoint (closed here) against transformers: its rows in every mode (and those of
    more_modes(model, seqs), a {mode: rows} dict), its greedy decode steps for a causal LM, and a bf16
    checkpoint's rows again with its weights held in bf16 (widened for the GEMMs). Returns 1 when the
    decode steps were compared, else 0."""
    generated = 0
    try:
        got = forwards(model, seqs)
        if more_modes is not None:
            got.update(more_modes(model, seqs))
        assert_rows_match(test, got, want, what)
        if not base:
            generated = check_generation(test, model, reference, seqs, what)
    finally:
        model.close()
    if dtype == torch.bfloat16:
        held, error = load(folder, cpu_weight_dtype="bf16", cpu_bf16_gemm="widen")
        test.assertIsNone(error, what)
        try:
            assert_rows_match(test, forwards(held, seqs), want, what + ", bf16 weights")
        finally:
            held.close()
    return generated


def check_generation(test, model, reference, seqs, what):
    """Greedy decode steps of the library (its argmax fed back, shared prefixes read once and each
    sequence alone) against transformers' logits for the same tokens; returns 1 (compared)."""
    total = sum(len(s) for s in seqs)
    slot = radix_mlp.generation._slot_bytes(model.config)  # a prefix-cache slot, as generate() sizes it
    plan = radix_mlp.planner.plan_sequences(seqs, 1.0, "test", "seqs")
    for shared in (True, False):
        with model.context(total, cache_bytes=(total + len(seqs) * GENERATE_STEPS + 64) * slot) as ctx:
            steps = [ctx.generate_begin(plan, max_new_tokens=GENERATE_STEPS, shared_prefix_attention=shared)]
            tokens = [[] for _ in seqs]
            for _ in range(GENERATE_STEPS - 1):
                chosen = [int(np.argmax(row)) for row in steps[-1]]
                for s, t in enumerate(chosen):
                    tokens[s].append(t)
                steps.append(ctx.generate_step(chosen))
            ctx.generate_end()
        for s, seq in enumerate(seqs):
            with torch.no_grad():
                logits = reference(input_ids=torch.tensor([seq + tokens[s]])).logits[0].numpy()
            want = logits[len(seq) - 1:]
            got = np.stack([step[s] for step in steps])
            err = np.linalg.norm(got - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), 1e-6)
            test.assertLessEqual(float(err.max()), ROW_TOL, "%s: generation (shared prefix attention %s), "
                                 "sequence %d" % (what, shared, s))
    return 1


def assert_rows_match(test, got, want, what):
    """Each mode's rows within ROW_TOL of transformers' (relative L2 per row)."""
    for mode, rows in got.items():
        for s, (rows_s, ref) in enumerate(zip(rows, want)):
            err = np.linalg.norm(rows_s - ref, axis=1) / np.maximum(np.linalg.norm(ref, axis=1), 1e-6)
            test.assertLessEqual(float(err.max()), ROW_TOL, "%s: %s, sequence %d" % (what, mode, s))


def forwards(model, seqs):
    """{mode: [rows of each sequence]} for radix off, on, and on with compact attention."""
    ids = np.concatenate([np.array(s, dtype=np.uint32) for s in seqs])
    pos = np.concatenate([np.arange(len(s), dtype=np.uint32) for s in seqs])
    cu = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.uint32)
    out = {}
    with radix_mlp.Planner() as planner:
        for mode, threshold, attention in (("off", 0.0, "full"), ("on", 1.0, "full"), ("compact", 1.0, "compact")):
            plan = planner.build(ids, pos, cu, threshold=threshold)
            with model.context(len(ids), attention=attention) as ctx:
                hidden = ctx.forward(plan)
            out[mode] = [hidden[cu[s]:cu[s + 1]] for s in range(len(seqs))]
    return out


if __name__ == "__main__":
    unittest.main()
