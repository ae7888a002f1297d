"""What test_config_options.py and test_gemma.py share: the draws' count and seed, a random draw's
checkpoint built by transformers and checked against it (the library's rows in every mode and
through the prefix cache, cold and warm, its greedy decode steps, a bf16 checkpoint with its weights
held in bf16: test_config_keys.check_loaded), the batches those draws run (a head of 8 to 14 tokens
shared, longer than every window), and a config the library must refuse naming a key and the
reason."""

import os
import tempfile

import numpy as np

import radix_mlp
from test_config_keys import check_loaded, load, save_checkpoint, transformers_model, transformers_rows


def draw_settings(name, default_draws=24):
    """(draws, seed, rng) from RADIX_MLP_<name>_DRAWS (default default_draws) and RADIX_MLP_<name>_SEED
    (default 0)."""
    draws = int(os.environ.get("RADIX_MLP_%s_DRAWS" % name, str(default_draws)))
    seed = int(os.environ.get("RADIX_MLP_%s_SEED" % name, "0"))
    return draws, seed, np.random.default_rng(seed)


def batch(rng, vocab):
    """Sequences sharing a head of 8 to 14 tokens (longer than every window), two branches of it, a
    repeated sequence and a prefix of another."""
    head = [int(t) for t in rng.integers(0, vocab, int(rng.integers(8, 15)))]
    seqs = [head + [int(t) for t in rng.integers(0, vocab, int(rng.integers(1, 16)))] for _ in range(4)]
    seqs.append(list(seqs[1]))
    seqs.append(seqs[0][: max(1, len(seqs[0]) - 3)])
    return seqs


def cached_forwards(model, seqs):
    """{mode: rows} of the forward through a prefix cache: the first batch (cold), then again (warm)."""
    ids = np.concatenate([np.array(s, dtype=np.uint32) for s in seqs])
    pos = np.concatenate([np.arange(len(s), dtype=np.uint32) for s in seqs])
    cu = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.uint32)
    slot = radix_mlp.generation._slot_bytes(model.config)
    out = {}
    with radix_mlp.Planner() as planner, model.context(len(ids), cache_bytes=(len(ids) + 8) * slot) as ctx:
        plan = planner.build(ids, pos, cu, threshold=1.0)
        for mode in ("cache cold", "cache warm"):
            hidden = ctx.forward(plan)
            out[mode] = [hidden[cu[s]:cu[s + 1]] for s in range(len(seqs))]
    return out


def check_draw(test, rng, label, model_type, kwargs, changes, seed, dtype, base, same_architecture=False):
    """One draw, in a subtest named label: a batch drawn from rng, the checkpoint of model_type
    (config kwargs, then config.json changes; weights from seed, in dtype; a base model or a causal
    LM) saved by transformers, loaded by the library (which must not refuse it, and with
    same_architecture must read model_type as its architecture) and checked against transformers.
    Returns 1 when the greedy decode steps were compared too, 0 when not, None when the subtest
    failed (unittest records it and the caller goes on with the next draw)."""
    with test.subTest(label), tempfile.TemporaryDirectory() as folder:
        seqs = batch(rng, kwargs["vocab_size"])
        save_checkpoint(folder, model_type, changes, seed=seed, dtype=dtype, base=base, **kwargs)
        reference = transformers_model(folder, base)
        want = transformers_rows(folder, seqs, base, reference)
        model, error = load(folder)
        test.assertIsNone(error, label)
        if same_architecture:
            test.assertEqual(model.config.architecture, model_type, label)
        return check_loaded(test, model, folder, seqs, want, reference, base, dtype, label, cached_forwards)
    return None  # the subtest failed


def check_refused(test, model_type, changes, key, reason, **kwargs):
    """A checkpoint of model_type (config kwargs, then config.json changes) the library must refuse
    with a message naming key and giving reason."""
    with test.subTest(model_type=model_type, key=key), tempfile.TemporaryDirectory() as folder:
        save_checkpoint(folder, model_type, changes, **kwargs)
        model, error = load(folder)
        if model is not None:
            model.close()
        test.assertIsNotNone(error, "%s with %s, %s loaded" % (model_type, kwargs, changes))
        test.assertIn(key, error)
        test.assertIn(reason, error)
