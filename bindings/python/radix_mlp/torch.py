"""radix_mlp.torch: training (forward and backward) of a transformers model on the library's plan.

``RadixMLP(model)`` wraps a Hugging Face transformers Qwen3, Qwen2, Llama, Mistral, Gemma, Gemma 2 or
Gemma 3 (text) model (its own modules and weights: nothing is copied, so an optimizer over
``model.parameters()`` trains it) and runs every position-wise part of each layer (embedding, with
Gemma's sqrt(hidden) scale inside its embedding module, RMSNorms, Q/K/V projections, q/k norms, RoPE,
O projection, Gemma 2/3's post-attention and pre/post-feedforward norms, residual adds, the MLP, the
final norm) once per compact row of a plan built by this library's planner, instead of once per batch
row. The index maps are torch tensors on the model's device; gathers are ``index_select`` (their
backward is an index-add), so autograd gives the backward, and it equals the plain model's: the
wrapped forward is the same function of the weights.

Attention uses the model's own attention function (``config._attn_implementation``: ``"eager"`` or
``"sdpa"``) on a padded batch of sequences with an additive causal mask:

- ``attention="full"``: each sequence's queries, keys and values are its batch rows (compact rows
  through ``scatter``); a compact row takes the output of its first occurrence (``fold_gather``);
- ``attention="compact"``: only the compact rows a sequence owns (``qo_indptr[s]:qo_indptr[s+1]``,
  the last q_s rows of its path) are queries, attending over its path ``scatter[cu_seqlens[s]:
  cu_seqlens[s+1]]`` causally aligned bottom-right (query t sees keys 0 .. L_s - q_s + t); a
  sequence that owns no row is left out, and owned rows are cut into pieces of at most the median
  owned count (each over the keys up to its last query), so the first sequence of a group, which
  owns the shared query, does not pad every sequence's queries to its length.

Gemma 2's attention logit soft-cap (``attn_logit_softcapping``) and every model's attention scale
(Gemma 2/3's ``query_pre_attn_scalar``) are passed to the attention function as the model's own
attention passes them; Gemma 3 reads ``attn_logit_softcapping`` and does not apply it, nor does the
wrapper. Gemma 3's RoPE is the one of each layer's type (local for sliding layers, global for full
ones). ``forward`` returns hidden states; ``RadixMLP.logits(hidden)`` applies ``lm_head`` and Gemma
2/3's ``config.final_logit_softcapping`` (tanh(logits / cap) * cap), as the CausalLM's forward does.

What it cannot honour it refuses by name (``UnsupportedModel``, a ValueError): another model type,
bidirectional attention (``is_causal`` false, Gemma's ``use_bidirectional_attention``), an attention
implementation other than eager/sdpa, Gemma 2's attention soft-cap with sdpa (torch's sdpa has no
soft-cap: transformers 5.19's sdpa function drops ``softcap``, 5.23's raises), RoPE types whose
frequencies depend on the batch (``dynamic``, ``longrope``, ...), attention dropout > 0 in training
mode. Sliding windows (Mistral's, Qwen's and Gemma 2/3's sliding layers) are in each layer's mask: a
query sees the last ``sliding_window`` keys of its path, as transformers' sliding-window mask.

torch is imported here only; ``import radix_mlp`` never imports it.
"""

import functools
import sys

import numpy as np
import torch
import torch.utils.checkpoint
from torch import nn

from .planner import Plan, PlanParams, Planner

__all__ = ["RadixMLP", "TorchPlan", "UnsupportedModel", "SUPPORTED_MODEL_TYPES", "SUPPORTED_ROPE_TYPES",
           "SUPPORTED_ATTENTION_IMPLEMENTATIONS"]

SUPPORTED_MODEL_TYPES = ("qwen3", "qwen2", "llama", "mistral", "gemma", "gemma2", "gemma3_text")
GEMMA_MODEL_TYPES = ("gemma", "gemma2", "gemma3_text")
# The model types whose Attention.forward passes ``softcap=attn_logit_softcapping`` to the attention
# function (Gemma 3 keeps the key but passes nothing).
ATTENTION_SOFTCAP_MODEL_TYPES = ("gemma2",)
# RoPE whose cos/sin depend on the position alone (not on the batch's longest sequence).
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")
SUPPORTED_ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
ATTENTION_SPACES = ("full", "compact")


class UnsupportedModel(ValueError):
    """A model, config key or setting the wrapper cannot honour exactly (named in the message)."""


def _long(array, device):
    return torch.as_tensor(np.asarray(array, dtype=np.int64), device=device)


def _plan_params(threshold, pad_multiple_of, gate):
    """PlanParams with ``threshold=None`` meaning the library's default gate."""
    return PlanParams(threshold=PlanParams.threshold if threshold is None else threshold,
                      pad_multiple_of=pad_multiple_of, gate=gate)


class _Layout:
    """One attention space's padded batch of ``n_att`` pieces, each a run of consecutive queries of
    one sequence over the keys of its path up to the last of them; ``q_max`` and ``k_max`` the
    longest query and key lists. In full space a piece is a whole sequence. In compact space a
    sequence's owned rows are cut into pieces of at most the median owned count, so that one
    sequence owning a long shared prefix (the first of a group) does not pad every other sequence's
    queries to its length. Index tensors (long, on the device): ``q_index`` (n_att*q_max,) and
    ``k_index`` (n_att*k_max,) compact rows (padding reads row 0), ``out_index`` (n_compact_padded,)
    the flat (piece, query) slot each compact row takes its output from (n_att*q_max: a zero row, for
    padding rows); ``allowed`` (n_att, 1, q_max, k_max) bool; ``behind`` (the same shape) how many
    positions each key lies behind its query (0 for padding queries), for sliding windows."""

    def __init__(self, plan, space, device):
        cu = plan.cu_seqlens.astype(np.int64)
        scatter = plan.scatter.astype(np.int64)
        lengths = cu[1:] - cu[:-1]
        pieces = []                                   # (sequence, first owned query, queries, keys)
        if space == "compact":
            qo = plan.qo_indptr.astype(np.int64)
            q_lens = qo[1:] - qo[:-1]
            active = np.flatnonzero(q_lens > 0)
            chunk = max(1, int(np.median(q_lens[active]))) if active.size else 1
            for s in active:
                q_s, first_key = int(q_lens[s]), int(lengths[s] - q_lens[s])
                for t0 in range(0, q_s, chunk):
                    n_q = min(chunk, q_s - t0)
                    pieces.append((s, t0, n_q, first_key + t0 + n_q))
        else:
            pieces = [(s, 0, int(lengths[s]), int(lengths[s])) for s in range(plan.n_seqs)]
        n_att = len(pieces)
        q_max = max((p[2] for p in pieces), default=0)
        k_max = max((p[3] for p in pieces), default=0)
        q_index = np.zeros((n_att, q_max), dtype=np.int64)
        k_index = np.zeros((n_att, k_max), dtype=np.int64)
        out_index = np.full(plan.n_compact_padded, n_att * q_max, dtype=np.int64)
        t = np.arange(q_max)[:, None]
        j = np.arange(k_max)[None, :]
        allowed = np.zeros((n_att, 1, q_max, k_max), dtype=bool)
        behind = np.zeros((n_att, 1, q_max, k_max), dtype=np.int32)
        slot_of_batch_row = np.full(plan.n_tokens, -1, dtype=np.int64)
        for b, (s, t0, n_queries, n_keys) in enumerate(pieces):
            path = scatter[cu[s]:cu[s] + n_keys]
            k_index[b, :n_keys] = path
            slots = b * q_max + np.arange(n_queries)
            if space == "compact":
                rows = qo[s] + t0 + np.arange(n_queries)   # = path[n_keys - n_queries:], owned rows
                q_index[b, :n_queries] = rows
                out_index[rows] = slots
            else:
                q_index[b, :n_queries] = path
                slot_of_batch_row[cu[s]:cu[s] + n_queries] = slots
            # Causal, bottom-right: query t sits at key position n_keys - n_queries + t. Padding
            # queries (t >= n_queries) see every key, so no softmax row is empty.
            allowed[b, 0] = (j <= n_keys - n_queries + t) & (j < n_keys)
            behind[b, 0, :n_queries] = (n_keys - n_queries + t[:n_queries]) - j
        if space == "full":
            n = plan.n_compact
            out_index[:n] = slot_of_batch_row[plan.fold_gather[:n].astype(np.int64)]
        self.space = space
        self.n_att, self.q_max, self.k_max = n_att, q_max, k_max
        self.q_index = _long(q_index.reshape(-1), device)
        self.k_index = _long(k_index.reshape(-1), device)
        self.out_index = _long(out_index, device)
        self.allowed = torch.as_tensor(allowed, device=device)
        self.behind = torch.as_tensor(behind, device=device)
        self._masks = {}

    def mask(self, dtype, window=None):
        """The additive mask (n_att, 1, q_max, k_max) in ``dtype``: 0 where allowed (and, with a
        sliding ``window``, less than ``window`` positions behind the query), the dtype's lowest
        value elsewhere (as transformers' own masks)."""
        m = self._masks.get((dtype, window))
        if m is None:
            allowed = self.allowed if window is None else self.allowed & (self.behind < int(window))
            m = torch.zeros(self.allowed.shape, dtype=dtype, device=self.allowed.device)
            m.masked_fill_(~allowed, torch.finfo(dtype).min)
            self._masks[(dtype, window)] = m
        return m


class TorchPlan:
    """A plan (``radix_mlp.Plan``) with its maps as torch tensors on ``device``.

    Tensors (long): ``input_ids``, ``position_ids`` (n_compact_padded,): the compact rows' tokens
    and positions; ``scatter`` (n_tokens,): batch row i is compact row ``scatter[i]``;
    ``cu_seqlens`` (n_seqs + 1,); ``last_rows`` / ``first_rows`` (n_seqs,): the compact row of each
    sequence's last / first token; ``seq_of_row`` (n_tokens,): the sequence of each batch row.
    ``plan`` is the numpy Plan (counts, ``use_radix``, ``qo_indptr``, ...). The attention layouts
    are built on first use and kept."""

    def __init__(self, plan, device="cpu"):
        if not isinstance(plan, Plan):
            raise TypeError("TorchPlan needs a radix_mlp.Plan, got %r" % (plan,))
        device = torch.device(device)
        cu = plan.cu_seqlens.astype(np.int64)
        if plan.n_seqs and np.any(cu[1:] == cu[:-1]):
            s = int(np.flatnonzero(cu[1:] == cu[:-1])[0])
            raise ValueError("radix_mlp.torch: sequence %d is empty (cu_seqlens[%d] == cu_seqlens[%d] == %d)"
                             % (s, s, s + 1, cu[s]))
        self.plan = plan
        self.device = device
        self.input_ids = _long(plan.compact_input_ids, device)
        self.position_ids = _long(plan.compact_position_ids, device)
        self.scatter = _long(plan.scatter, device)
        self.cu_seqlens = _long(cu, device)
        self.last_rows = _long(plan.scatter[cu[1:] - 1] if plan.n_seqs else [], device)
        self.first_rows = _long(plan.scatter[cu[:-1]] if plan.n_seqs else [], device)
        self.seq_of_row = _long(np.repeat(np.arange(plan.n_seqs), cu[1:] - cu[:-1]), device)
        self.lengths = cu[1:] - cu[:-1]
        self.max_token_id = int(plan.compact_input_ids.max()) if plan.n_compact_padded else -1
        self._layouts = {}

    @classmethod
    def from_sequences(cls, sequences, device="cpu", *, position_ids=None, planner=None, params=None,
                       threshold=None, pad_multiple_of=None, gate="distinct"):
        """Plans a batch given as a list of token-id lists (positions 0..len-1 unless
        ``position_ids``, a list of lists of the same shapes, is given). ``threshold`` (None: the
        library's default), ``pad_multiple_of``, ``gate`` or ``params`` as ``Planner.build``;
        ``threshold=0`` gives the identity plan (radix off)."""
        sequences = [list(map(int, s)) for s in sequences]
        if position_ids is None:
            position_ids = [list(range(len(s))) for s in sequences]
        elif [len(p) for p in position_ids] != [len(s) for s in sequences]:
            raise ValueError("position_ids must have one list per sequence, of the same lengths")
        cu = np.concatenate([[0], np.cumsum([len(s) for s in sequences], dtype=np.int64)])
        ids = np.array([t for s in sequences for t in s], dtype=np.int64)
        pos = np.array([p for ps in position_ids for p in ps], dtype=np.int64)
        if params is None:
            params = _plan_params(threshold, pad_multiple_of, gate)
        own = planner is None
        planner = Planner() if own else planner
        try:
            plan = planner.build(ids, pos, cu, params=params)
        finally:
            if own:
                planner.close()
        return cls(plan, device)

    def layout(self, space):
        if space not in ATTENTION_SPACES:
            raise ValueError("attention must be %s, got %r" % (" or ".join(map(repr, ATTENTION_SPACES)), space))
        lay = self._layouts.get(space)
        if lay is None:
            lay = self._layouts[space] = _Layout(self.plan, space, self.device)
        return lay

    def to_batch(self, hidden_c):
        """Compact rows (n_compact_padded, ...) -> batch rows (n_tokens, ...)."""
        if not self.plan.use_radix and hidden_c.shape[0] == self.plan.n_tokens:
            return hidden_c
        return hidden_c.index_select(0, self.scatter)

    def pool(self, hidden_c, pooling="last"):
        """(n_seqs, H) from compact rows: ``"last"``, ``"first"`` or ``"mean"`` token of each sequence."""
        if pooling == "last":
            return hidden_c.index_select(0, self.last_rows)
        if pooling == "first":
            return hidden_c.index_select(0, self.first_rows)
        if pooling == "mean":
            rows = self.to_batch(hidden_c)
            sums = rows.new_zeros((self.plan.n_seqs,) + tuple(rows.shape[1:])).index_add_(0, self.seq_of_row, rows)
            counts = torch.as_tensor(self.lengths, dtype=rows.dtype, device=rows.device)
            return sums / counts.view((-1,) + (1,) * (rows.dim() - 1))
        raise ValueError("pooling must be 'last', 'first' or 'mean', got %r" % (pooling,))

    def __repr__(self):
        return "TorchPlan(%r, device=%s)" % (self.plan, self.device)


def _rope_types(base):
    """The RoPE types of the model's rotary module ("default", "llama3", ...): one, or Gemma 3's one per
    layer type."""
    rope = getattr(base, "rotary_emb", None)
    kind = getattr(rope, "rope_type", None)
    if isinstance(kind, dict):
        return sorted(set(kind.values()))
    if kind is None:
        params = getattr(base.config, "rope_parameters", None) or getattr(base.config, "rope_scaling", None) or {}
        kind = params.get("rope_type", params.get("type", "default")) if isinstance(params, dict) else "default"
    return [kind]


def _rope_per_layer_type(base):
    """Whether the rotary module takes the layer type (Gemma 3: local RoPE for sliding layers)."""
    return isinstance(getattr(base.rotary_emb, "rope_type", None), dict)


class RadixMLP(nn.Module):
    """A transformers Qwen3/Qwen2/Llama/Mistral/Gemma/Gemma 2/Gemma 3 text model (a base model or one
    with a head: the base is ``model.base_model``) run on compact rows. ``model`` is registered as a
    submodule, so ``RadixMLP(model).parameters()`` are the model's own; ``train()``/``eval()`` reach it.

    ``attention``: ``"full"`` or ``"compact"`` (see the module's docstring); ``threshold``,
    ``pad_multiple_of``, ``gate``: how ``plan()`` builds plans (threshold None: the library's
    default gate, 0: radix off, 1: always on).

    ``plan(sequences)`` -> TorchPlan on the model's device; ``forward_compact(plan)`` -> the final-normed
    compact rows (n_compact_padded, H); ``forward(plan)`` (or calling the module) -> the batch rows
    (n_tokens, H), what the base model's ``last_hidden_state`` holds for each sequence run alone;
    ``logits(rows)`` -> the head's (final soft-capped) logits of such rows.
    """

    def __init__(self, model, attention="full", threshold=None, pad_multiple_of=None, gate="distinct"):
        super().__init__()
        if attention not in ATTENTION_SPACES:
            raise ValueError("attention must be %s, got %r" % (" or ".join(map(repr, ATTENTION_SPACES)), attention))
        self.model = model
        self.attention = attention
        self.plan_params = _plan_params(threshold, pad_multiple_of, gate)
        self._planner = None
        self._check_static(self.base)

    # -- checks --------------------------------------------------------------------------------
    @property
    def base(self):
        return getattr(self.model, "base_model", self.model)

    @staticmethod
    def _check_static(base):
        config = getattr(base, "config", None)
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedModel("radix_mlp.torch: config.model_type=%r is not supported (supported: %s)"
                                   % (model_type, ", ".join(SUPPORTED_MODEL_TYPES)))
        for name in ("embed_tokens", "layers", "norm", "rotary_emb"):
            if not hasattr(base, name):
                raise UnsupportedModel("radix_mlp.torch: the %s model has no %r module (a %s, expected the base "
                                       "model or a model with one)" % (model_type, name, type(base).__name__))
        if getattr(config, "use_bidirectional_attention", False):
            raise UnsupportedModel("radix_mlp.torch: config.use_bidirectional_attention=%r: the %s model then attends "
                                   "in both directions, so a token's state depends on later tokens and no prefix is "
                                   "shared" % (config.use_bidirectional_attention, model_type))
        if model_type in GEMMA_MODEL_TYPES and not hasattr(base.embed_tokens, "embed_scale"):
            raise UnsupportedModel("radix_mlp.torch: the %s model's embedding (%s) does not scale by sqrt(hidden_size) "
                                   "itself (transformers 5's Gemma embeddings do): not supported"
                                   % (model_type, type(base.embed_tokens).__name__))
        if not getattr(config, "is_causal", True):
            raise UnsupportedModel("radix_mlp.torch: config.is_causal=%r: transformers then attends in both "
                                   "directions, so a token's state depends on later tokens and no prefix is shared"
                                   % (config.is_causal,))
        for kind in _rope_types(base):
            if kind not in SUPPORTED_ROPE_TYPES:
                raise UnsupportedModel("radix_mlp.torch: rope_type %r (config.rope_parameters / rope_scaling) is not "
                                       "supported: only %s, whose cos/sin depend on the position alone"
                                       % (kind, ", ".join(SUPPORTED_ROPE_TYPES)))

    def _windows(self):
        """The sliding window of each layer (None: full causal attention), as the model applies it."""
        base = self.base
        config = base.config
        if config.model_type == "mistral":
            return [getattr(config, "sliding_window", None)] * len(base.layers)
        return [getattr(layer.self_attn, "sliding_window", None) for layer in base.layers]

    def _check_batch(self, plan):
        base = self.base
        config = base.config
        impl = getattr(config, "_attn_implementation", None) or "eager"
        if impl not in SUPPORTED_ATTENTION_IMPLEMENTATIONS:
            raise UnsupportedModel("radix_mlp.torch: config._attn_implementation=%r is not supported (%s); load the "
                                   "model with attn_implementation='sdpa' or 'eager'"
                                   % (impl, ", ".join(SUPPORTED_ATTENTION_IMPLEMENTATIONS)))
        if impl == "sdpa" and self._softcap(base.layers[0].self_attn) is not None:
            raise UnsupportedModel("radix_mlp.torch: config.attn_logit_softcapping=%g with "
                                   "config._attn_implementation='sdpa': sdpa cannot apply the soft-cap (transformers' "
                                   "sdpa attention drops or refuses it); load the model with "
                                   "attn_implementation='eager'"
                                   % config.attn_logit_softcapping)
        dropout = float(getattr(config, "attention_dropout", 0.0) or 0.0)
        if base.training and dropout > 0:
            raise UnsupportedModel("radix_mlp.torch: config.attention_dropout=%g in training mode: rows shared by "
                                   "several sequences would share their dropout masks; set it to 0 or call eval()"
                                   % dropout)
        vocab = base.embed_tokens.num_embeddings
        if plan.max_token_id >= vocab:
            raise ValueError("radix_mlp.torch: token id %d is outside the vocabulary (%d tokens)"
                             % (plan.max_token_id, vocab))
        if plan.device != base.embed_tokens.weight.device:
            raise ValueError("radix_mlp.torch: the plan is on %s, the model on %s"
                             % (plan.device, base.embed_tokens.weight.device))
        return impl

    # -- planning ------------------------------------------------------------------------------
    def plan(self, sequences, position_ids=None):
        """A TorchPlan of ``sequences`` (lists of token ids) on the model's device, built with this
        wrapper's plan parameters and planner."""
        if self._planner is None or self._planner.closed:
            self._planner = Planner()
        device = self.base.embed_tokens.weight.device
        return TorchPlan.from_sequences(sequences, device, position_ids=position_ids, planner=self._planner,
                                        params=self.plan_params)

    # -- forward -------------------------------------------------------------------------------
    def forward(self, plan):
        """(n_tokens, H): the final-normed hidden state of every batch row."""
        hidden_c = self.forward_compact(plan)
        return plan.to_batch(hidden_c)

    def logits(self, hidden):
        """(..., vocab): the model's ``lm_head`` on final-normed rows ``hidden`` (..., H), soft-capped by
        ``config.final_logit_softcapping`` (Gemma 2/3: tanh(logits / cap) * cap) as its CausalLM does."""
        head = getattr(self.model, "lm_head", None)
        if head is None:
            raise ValueError("radix_mlp.torch: the %s has no lm_head (a base model)" % type(self.model).__name__)
        logits = head(hidden)
        cap = getattr(self.base.config, "final_logit_softcapping", None)
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def forward_compact(self, plan):
        """(n_compact_padded, H): the final-normed hidden state of every compact row."""
        if not isinstance(plan, TorchPlan):
            raise TypeError("RadixMLP needs a TorchPlan (RadixMLP.plan(...) or TorchPlan(plan, device)), got %r"
                            % (plan,))
        impl = self._check_batch(plan)
        base = self.base
        layout = plan.layout(self.attention)
        hidden = base.embed_tokens(plan.input_ids)                          # (N'pad, H), Gemma's scaled
        layers = base.layers[: base.config.num_hidden_layers]
        if _rope_per_layer_type(base):                                      # Gemma 3: local / global RoPE
            types = base.config.layer_types[: len(layers)]
            by_type = {t: base.rotary_emb(hidden, plan.position_ids[None], t) for t in set(types)}
            rope = [by_type[t] for t in types]
        else:
            rope = [base.rotary_emb(hidden, plan.position_ids[None])] * len(layers)  # (1, N'pad, head_dim) each
        for layer, window, (cos, sin) in zip(layers, self._windows(), rope):
            if layer.training and getattr(layer, "gradient_checkpointing", False):
                # model.activation_checkpointing_enable() (gradient_checkpointing_enable) marks the layers and
                # gives them its checkpoint function.
                checkpoint = getattr(layer, "_gradient_checkpointing_func", None)
                if checkpoint is None:
                    checkpoint = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)
                hidden = checkpoint(self._layer, layer, hidden, cos, sin, layout, impl, window)
            else:
                hidden = self._layer(layer, hidden, cos, sin, layout, impl, window)
        return base.norm(hidden)

    def _layer(self, layer, hidden, cos, sin, layout, impl, window):
        """One decoder layer on compact rows, as the model's DecoderLayer.forward computes it
        (window: the layer's sliding window, or None)."""
        attended = self._self_attention(layer.self_attn, layer.input_layernorm(hidden), cos, sin, layout, impl, window)
        if hasattr(layer, "pre_feedforward_layernorm"):                     # Gemma 2/3: norms around both blocks
            hidden = hidden + layer.post_attention_layernorm(attended)
            return hidden + layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(hidden)))
        hidden = hidden + attended
        return hidden + layer.mlp(layer.post_attention_layernorm(hidden))

    def _softcap(self, attn):
        """The attention logit soft-cap the model's Attention.forward passes (None: none)."""
        if self.base.config.model_type not in ATTENTION_SOFTCAP_MODEL_TYPES:
            return None
        return getattr(attn, "attn_logit_softcapping", None)

    def _self_attention(self, attn, x, cos, sin, layout, impl, window):
        """The model's Attention.forward with its position-wise parts on compact rows.
        x: (N'pad, H) -> (N'pad, H)."""
        n, d = x.shape[0], attn.head_dim
        q = attn.q_proj(x).view(1, n, -1, d)                                # (1, N'pad, heads, d)
        k = attn.k_proj(x).view(1, n, -1, d)                                # (1, N'pad, kv_heads, d)
        v = attn.v_proj(x).view(n, -1, d)                                   # (N'pad, kv_heads, d)
        if hasattr(attn, "q_norm"):
            q, k = attn.q_norm(q), attn.k_norm(k)
        modeling = sys.modules[type(attn).__module__]
        q, k = modeling.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
        out = self._attend(attn, q[0], k[0], v, layout, impl, modeling, window,
                           self._softcap(attn))                             # (N'pad, heads*d)
        return attn.o_proj(out)

    @staticmethod
    def _attend(attn, q, k, v, layout, impl, modeling, window, softcap):
        """Attention through the model's own attention function on the layout's padded batch (with
        ``softcap``, Gemma 2's logit soft-cap, where the model passes one).
        q: (N'pad, heads, d), k, v: (N'pad, kv_heads, d) -> (N'pad, heads*d)."""
        n_att, q_max, k_max = layout.n_att, layout.q_max, layout.k_max
        heads, d = q.shape[1], q.shape[2]
        if n_att == 0:
            return q.new_zeros(q.shape[0], heads * d)
        qp = q.index_select(0, layout.q_index).view(n_att, q_max, heads, d).transpose(1, 2)
        kp = k.index_select(0, layout.k_index).view(n_att, k_max, -1, d).transpose(1, 2)
        vp = v.index_select(0, layout.k_index).view(n_att, k_max, -1, d).transpose(1, 2)
        eager = modeling.eager_attention_forward
        interfaces = modeling.ALL_ATTENTION_FUNCTIONS
        if hasattr(interfaces, "get_interface"):
            fn = interfaces.get_interface(impl, eager)
        else:
            fn = eager if impl == "eager" else interfaces[impl]
        extra = {} if softcap is None else {"softcap": softcap}
        out, _ = fn(attn, qp, kp, vp, layout.mask(qp.dtype, window), dropout=0.0, scaling=attn.scaling, **extra)
        out = out.reshape(n_att * q_max, heads * d)                         # (n_att*q_max, heads*d)
        out = torch.cat([out, out.new_zeros(1, heads * d)])
        return out.index_select(0, layout.out_index)
