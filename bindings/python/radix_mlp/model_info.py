"""The records a model and its contexts report, read from the library's structs: ModelConfig
(``rmlp_model_config``), CacheStats (``rmlp_cache_stats``), GenerateStats (``rmlp_generate_stats``)
and CpuBf16GemmInfo (``rmlp_model_cpu_bf16_gemm``). Model and Context (model.py) return them."""

from dataclasses import dataclass
from typing import Optional

from . import _abi

__all__ = ["ModelConfig", "CacheStats", "GenerateStats", "CpuBf16GemmInfo"]


@dataclass(frozen=True)
class ModelConfig:
    """A model's configuration as the library read it (``rmlp_model_config``).
    ``architecture`` is "qwen3", "qwen2", "llama", "mistral", "gemma", "gemma2" or "gemma3_text"
    (``architecture_id`` the code); ``activation`` "silu", "gelu_pytorch_tanh" or "gelu"."""

    architecture: str
    architecture_id: int
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    sliding_window: int
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool
    attention_bias: bool
    qk_norm: bool
    has_lm_head: bool
    o_proj_bias: bool
    mlp_bias: bool
    norm_weight_plus_one: bool
    sandwich_norms: bool
    activation: str
    embedding_scale: float
    final_logit_softcapping: float
    query_pre_attn_scalar: float
    attn_logit_softcapping: float

    @classmethod
    def _from_c(cls, c):
        arch = int(c.architecture)
        return cls(
            architecture=_abi.ARCH_NAMES.get(arch, "unknown(%d)" % arch),
            architecture_id=arch,
            vocab_size=c.vocab_size,
            hidden_size=c.hidden_size,
            intermediate_size=c.intermediate_size,
            num_hidden_layers=c.num_hidden_layers,
            num_attention_heads=c.num_attention_heads,
            num_key_value_heads=c.num_key_value_heads,
            head_dim=c.head_dim,
            max_position_embeddings=c.max_position_embeddings,
            sliding_window=c.sliding_window,
            rms_norm_eps=c.rms_norm_eps,
            rope_theta=c.rope_theta,
            tie_word_embeddings=bool(c.tie_word_embeddings),
            attention_bias=bool(c.attention_bias),
            qk_norm=bool(c.qk_norm),
            has_lm_head=bool(c.has_lm_head),
            o_proj_bias=bool(c.o_proj_bias),
            mlp_bias=bool(c.mlp_bias),
            norm_weight_plus_one=bool(c.norm_weight_plus_one),
            sandwich_norms=bool(c.sandwich_norms),
            activation=_abi.ACTIVATION_NAMES.get(int(c.activation), "unknown(%d)" % c.activation),
            embedding_scale=c.embedding_scale,
            final_logit_softcapping=c.final_logit_softcapping,
            query_pre_attn_scalar=c.query_pre_attn_scalar,
            attn_logit_softcapping=c.attn_logit_softcapping,
        )


@dataclass(frozen=True)
class CacheStats:
    """What a context's prefix cache did since the context was made (``rmlp_cache_stats``, from
    ``Context.cache_stats()``; all zero without a cache). Tokens are compact rows: a batch's
    distinct (token, position) paths. ``batches`` run on the context, of them ``bypassed`` (run
    without the cache: their new rows did not fit); ``lookups`` rows looked up, of them
    ``hit_tokens`` found (nothing computed for them); ``computed_tokens`` computed and cached,
    ``evicted_tokens`` evicted to make room; ``slots`` in the cache (``bytes_budget //
    bytes_per_slot``), ``slots_used`` holding a row, ``bytes_in_use`` theirs."""

    batches: int
    bypassed: int
    lookups: int
    hit_tokens: int
    computed_tokens: int
    evicted_tokens: int
    slots: int
    slots_used: int
    bytes_per_slot: int
    bytes_budget: int
    bytes_in_use: int


@dataclass(frozen=True)
class GenerateStats:
    """What a context's generation session did since ``generate_begin`` (``rmlp_generate_stats``,
    from ``Context.generate_stats()``; all zero without a session): ``n_seqs`` sequences, of them
    ``n_active`` still active; ``steps`` run, ``rows`` appended in them (one per active sequence
    and step), of those ``rows_computed`` (the others were cached already, or shared with another
    sequence's row of the same step); ``step_ms`` the steps' wall time, ``attention_ms`` their
    attention's."""

    n_seqs: int
    n_active: int
    steps: int
    rows: int
    rows_computed: int
    step_ms: float
    attention_ms: float


@dataclass(frozen=True)
class CpuBf16GemmInfo:
    """Which GEMM a model's layers run on bf16 matrices (``rmlp_model_cpu_bf16_gemm``, from
    ``Model.cpu_bf16_gemm()``): ``kind`` "widen" or "onednn" for a model loaded with
    ``cpu_weight_dtype="bf16"`` on the CPU, None for any other model; ``fallbacks`` the GEMMs
    oneDNN failed at run time, which the widening path ran instead; ``detail`` which oneDNN and
    ISA run it, or why the widening path was taken."""

    kind: Optional[str]
    fallbacks: int
    detail: str
