"""fixture_reference.py: the independent float64 NumPy forward that tools/make_fixtures.py checks each
fixture against before writing it, from the saved safetensors and config.json alone, written from
the published definitions of each layer rather than from transformers' code:

  - the Llama family: RMSNorm, Q/K/V with optional bias, Qwen3's per-head q/k norm, rotate-half RoPE
    (plain, linear, llama3, yarn), causal GQA softmax attention with sliding windows, SwiGLU;
  - Gemma: every RMSNorm scales by 1 + w, the embedding rows times sqrt(hidden_size), GeGLU (GELU's
    tanh form, or the activation config.json names), tied head; Gemma 2 and 3 also norm each
    sublayer's output before its residual add, scale scores by query_pre_attn_scalar^-0.5, slide by
    layer_types; Gemma 2 soft-caps the scores and the logits (cap tanh(x / cap)); Gemma 3 norms q and
    k per head and rotates its sliding layers by their own RoPE (rope_parameters per layer type).
"""

import math

import numpy as np
import safetensors.torch

GEMMA = ("gemma", "gemma2", "gemma3_text")


def numpy_weights(outdir):
    """Every tensor of the checkpoint as float64, `model.` prefix dropped."""
    w = {}
    for f in sorted(outdir.glob("*.safetensors")):
        for k, v in safetensors.torch.load_file(f).items():
            w[k.removeprefix("model.")] = v.double().numpy()
    return w


def rms_norm(x, w, eps, plus_one=False):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1 + w if plus_one else w)


def rope_frequencies(cfg, d, r=None):
    """(inverse frequencies (d/2), factor of cos and sin) of a RoPE object r (default: config.json's
    one), in float64, from the published definitions: plain, linear (over factor), llama3 (Llama 3.1's
    three bands), yarn (the YaRN paper's ramp between the plain and interpolated frequencies,
    attention factor 0.1 ln s + 1)."""
    r = r if r is not None else cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = r.get("rope_theta", cfg.get("rope_theta", 1e4))
    kind = r.get("rope_type", r.get("type", "default"))
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    if kind == "linear":
        return inv / r["factor"], 1.0
    orig = cfg.get("original_max_position_embeddings", r.get("original_max_position_embeddings"))
    if kind == "llama3":
        wavelen = 2 * np.pi / inv
        low, high = orig / r["low_freq_factor"], orig / r["high_freq_factor"]
        smooth = (orig / wavelen - r["low_freq_factor"]) / (r["high_freq_factor"] - r["low_freq_factor"])
        mid = (1 - smooth) * inv / r["factor"] + smooth * inv
        return np.where(wavelen > low, inv / r["factor"], np.where(wavelen < high, inv, mid)), 1.0
    if kind == "yarn":
        dim_of = lambda turns: d * np.log(orig / (turns * 2 * np.pi)) / (2 * np.log(theta))
        lo, hi = max(np.floor(dim_of(r.get("beta_fast") or 32)), 0), min(np.ceil(dim_of(r.get("beta_slow") or 1)), d - 1)
        ramp = np.clip((np.arange(d // 2) - lo) / ((hi - lo) or 0.001), 0, 1)
        return inv / r["factor"] * ramp + inv * (1 - ramp), 0.1 * np.log(r["factor"]) + 1
    assert kind == "default", kind
    return inv, 1.0


def rope(x, pos, inv, factor):
    """Rotate-half RoPE on x (n, heads, d) by frequencies inv (d/2), cos and sin times factor."""
    d = x.shape[-1]
    ang = np.concatenate([pos[:, None] * inv] * 2, axis=-1)[:, None, :]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * np.cos(ang) * factor + rot * np.sin(ang) * factor


def layer_windows(cfg):
    """Each layer's sliding window (0: full) as config.json declares it: Mistral's sliding_window in
    every layer; Gemma 2 and 3's layer_types (as transformers saves them); Qwen's layer_types, else
    the layers from max_window_layers on, with use_sliding_window."""
    n = cfg["num_hidden_layers"]
    if cfg["model_type"] == "mistral":
        return [cfg.get("sliding_window") or 0] * n
    if cfg["model_type"] == "gemma":
        return [0] * n
    gemma = cfg["model_type"] in GEMMA
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window") or gemma else None
    kinds = cfg.get("layer_types") or ["sliding_attention" if window and i >= cfg.get("max_window_layers", 28)
                                       else "full_attention" for i in range(n)]
    return [window if kind == "sliding_attention" else 0 for kind in kinds]


def activation(cfg, g):
    """The MLP gate's activation: hidden_act (Gemma 2 and 3: hidden_activation); Gemma's "gelu" is
    the tanh form (its config class's rewrite of the official releases' value)."""
    gemma = cfg["model_type"] in GEMMA
    name = cfg.get("hidden_activation" if cfg["model_type"] in GEMMA[1:] else "hidden_act") or \
        ("gelu_pytorch_tanh" if gemma else "silu")
    if name == "silu":
        return g / (1 + np.exp(-g))
    if name == "gelu_pytorch_tanh" or (name == "gelu" and cfg["model_type"] == "gemma"):
        return 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)))
    assert name == "gelu", name
    return 0.5 * g * (1 + np.vectorize(math.erf)(g / np.sqrt(2)))


def softcap(x, cap):
    return cap * np.tanh(x / cap) if cap else x


def numpy_forward(w, cfg, seq):
    """Independent float64 forward of one sequence: returns (final hidden (n, H), logits or None)."""
    eps, nh, nkv = cfg["rms_norm_eps"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    gemma, later = cfg["model_type"] in GEMMA, cfg["model_type"] in GEMMA[1:]
    tables = {"full_attention": rope_frequencies(cfg, hd)}
    if cfg["model_type"] == "gemma3_text":  # RoPE per layer type
        tables = {kind: rope_frequencies(cfg, hd, r) for kind, r in cfg["rope_parameters"].items()}
    scale = cfg.get("query_pre_attn_scalar", 256) ** -0.5 if later else hd ** -0.5
    attn_cap = cfg.get("attn_logit_softcapping") if cfg["model_type"] == "gemma2" else None
    norm = lambda t, weight: rms_norm(t, weight, eps, gemma)
    n, pos = len(seq), np.arange(len(seq), dtype=np.float64)
    x = w["embed_tokens.weight"][seq] * (np.sqrt(cfg["hidden_size"]) if gemma else 1.0)
    for i, window in enumerate(layer_windows(cfg)):
        behind = np.arange(n)[:, None] - np.arange(n)[None, :]  # query - key
        causal = np.where((behind >= 0) & ((window == 0) | (behind < window)), 0.0, -np.inf)
        inv, factor = tables["sliding_attention" if window and len(tables) > 1 else "full_attention"]
        p = lambda name: w[f"layers.{i}.{name}"]
        lin = lambda t, name: t @ p(name + ".weight").T + w.get(f"layers.{i}.{name}.bias", 0.0)
        h = norm(x, p("input_layernorm.weight"))
        q = lin(h, "self_attn.q_proj").reshape(n, nh, hd)
        k = lin(h, "self_attn.k_proj").reshape(n, nkv, hd)
        v = lin(h, "self_attn.v_proj").reshape(n, nkv, hd)
        if f"layers.{i}.self_attn.q_norm.weight" in w:   # Qwen3, Gemma 3: per-head RMSNorm before RoPE
            q = norm(q, p("self_attn.q_norm.weight"))
            k = norm(k, p("self_attn.k_norm.weight"))
        q, k = rope(q, pos, inv, factor), rope(k, pos, inv, factor)
        att = np.empty((n, nh, hd))
        for head in range(nh):
            kv = head // (nh // nkv)
            s = softcap(q[:, head] @ k[:, kv].T * scale, attn_cap) + causal
            e = np.exp(s - s.max(-1, keepdims=True))
            att[:, head] = (e / e.sum(-1, keepdims=True)) @ v[:, kv]
        out = lin(att.reshape(n, nh * hd), "self_attn.o_proj")
        x = x + (norm(out, p("post_attention_layernorm.weight")) if later else out)
        h = norm(x, p("pre_feedforward_layernorm.weight" if later else "post_attention_layernorm.weight"))
        g, u = lin(h, "mlp.gate_proj"), lin(h, "mlp.up_proj")
        out = lin(activation(cfg, g) * u, "mlp.down_proj")
        x = x + (norm(out, p("post_feedforward_layernorm.weight")) if later else out)
    x = norm(x, w["norm.weight"])
    head = w.get("lm_head.weight", w["embed_tokens.weight"] if cfg.get("tie_word_embeddings") else None)
    logits = x[-1] @ head.T if head is not None and cfg["architectures"][0].endswith("CausalLM") else None
    if logits is not None and later:
        logits = softcap(logits, cfg.get("final_logit_softcapping"))
    return x, logits
