#!/usr/bin/env python3
"""make_model_seeds.py: writes the seed corpora of fuzz_safetensors and fuzz_config (committed
under fuzz/corpus/) from the transformers fixtures in integration_tests/fixtures, so the seeds are
real headers and real config.json files, small, and reproducible. Run from anywhere:
    python3 fuzz/make_model_seeds.py

fuzz_safetensors: every fixture header with its tensors shrunk to at most 2 elements per
dimension (names, dtypes and ranks kept; a valid file of a few KB), the same headers cut after a
few data bytes (near-valid: tensors run past the end), and small hand-made files, valid (empty
tensor, scalar, metadata only, misaligned data, 8 dimensions, header order unlike data order)
and one broken rule each (a gap, trailing bytes, overlaps, ...).
fuzz_config: every fixture config.json as it is, and variants (transformers 4 style, Mistral's
sliding window, nulls, bias flags per architecture, use_sliding_window with and without sliding
layers, RoPE scaling of each kind, one broken rule each).
"""
import json
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "integration_tests", "fixtures")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}


def st_bytes(header_text, data):
    raw = header_text.encode()
    return struct.pack("<Q", len(raw)) + raw + data


def st_file(tensors, metadata=None, align8=True, fill=0x3C):
    """tensors: [(name, dtype, shape)] written back to back."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":"))
    if align8:
        text += " " * (-(8 + len(text)) % 8)
    return st_bytes(text, bytes([fill]) * offset)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), n


def write(target, name, data):
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def safetensors_seeds():
    for fixture in sorted(os.listdir(FIXTURES)):
        folder = os.path.join(FIXTURES, fixture)
        if not os.path.isdir(folder):
            continue
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".safetensors") or (file.startswith("model-") and "00001" not in file):
                continue
            path = os.path.join(folder, file)
            header, header_len = read_header(path)
            metadata = header.pop("__metadata__", None)
            shrunk = [(k, v["dtype"], [min(d, 2) for d in v["shape"]]) for k, v in header.items()]
            stem = f"{fixture}_{file.split('.')[0]}"
            write("fuzz_safetensors", f"{stem}_shrunk", st_file(shrunk, metadata))
            with open(path, "rb") as f:
                write("fuzz_safetensors", f"{stem}_cut", f.read(8 + header_len + 64))

    seeds = {
        "empty_scalar_meta": st_file([("e", "F32", [0]), ("s", "BF16", []), ("v", "F16", [3])], {"format": "pt"}),
        "metadata_only": st_file([], {"a": "b"}),
        "no_tensors": st_bytes("{}", b""),
        "misaligned": st_file([("a.weight", "F32", [2, 3]), ("b", "BF16", [5])], None, align8=False),
        "eight_dims": st_file([("t", "F16", [1, 2, 1, 2, 1, 2, 1, 2])]),
        "nine_dims": st_file([("t", "F16", [1] * 9)]),
        "dtype_i64": st_file([("ids", "I64", [4])]),
        "overlap": st_bytes('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                            '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', bytes(12)),
        "unordered": st_bytes('{"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},'
                              '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(8)),
        "gap": st_bytes('{"b":{"dtype":"F16","shape":[2],"data_offsets":[12,16]},'
                        '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(16)),
        "trailing_bytes": st_file([("a.weight", "F32", [2, 3])]) + b"\0",
        "empty_inside": st_bytes('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                 '"e":{"dtype":"F16","shape":[0],"data_offsets":[4,4]}}', bytes(8)),
        "offsets_mismatch": st_bytes('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', bytes(8)),
        "offsets_reversed": st_bytes('{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}', bytes(8)),
        "offsets_past_end": st_bytes('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', bytes(8)),
        "offsets_huge": st_bytes('{"a":{"dtype":"F32","shape":[4611686018427387904],'
                                 '"data_offsets":[0,9223372036854775807]}}', b""),
        "offsets_negative": st_bytes('{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}', bytes(4)),
        "shape_fraction": st_bytes('{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', bytes(4)),
        "duplicate_key": st_bytes('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                  '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
        "metadata_not_string": st_bytes('{"__metadata__":{"n":1}}', b""),
        "header_not_object": st_bytes("[1,2]", b""),
        "header_not_json": st_bytes('{"a":', b""),
        "header_len_too_big": struct.pack("<Q", 1 << 40) + b"{}",
        "header_len_short": struct.pack("<Q", 1) + b"{",
        "seven_bytes": b"\x02\x00\x00\x00\x00\x00\x00",
    }
    for name, data in seeds.items():
        write("fuzz_safetensors", name, data)


def config_seeds():
    configs = {}
    for fixture in sorted(os.listdir(FIXTURES)):
        path = os.path.join(FIXTURES, fixture, "config.json")
        if os.path.exists(path):
            with open(path, "rb") as f:
                write("fuzz_config", f"{fixture}_config.json", f.read())
            with open(path) as f:
                configs[fixture] = json.load(f)

    base = configs["qwen3_tiny"]

    def variant(name, **changes):
        c = dict(base)
        for key, value in changes.items():
            if value is ...:
                c.pop(key, None)
            else:
                c[key] = value
        write("fuzz_config", name + ".json", json.dumps(c, indent=1).encode())

    variant("transformers4_rope_theta", rope_parameters=..., rope_theta=1e6, layer_types=...)
    variant("mistral_window", model_type="mistral", sliding_window=4096, head_dim=..., rope_parameters=...)
    variant("llama_nulls", model_type="llama", head_dim=None, num_key_value_heads=None, rope_scaling=None,
            use_sliding_window=None)
    variant("qwen2_bias", model_type="qwen2", attention_bias=False, tie_word_embeddings=True)
    variant("bad_kv_heads", num_key_value_heads=3)
    variant("bad_head_dim_derived", head_dim=..., hidden_size=66)
    variant("rope_scaling_linear", rope_scaling={"type": "linear", "factor": 2.0})
    variant("bad_rope_type", rope_parameters={"rope_type": "yarn", "rope_theta": 1e6})
    variant("rope_llama3", model_type="llama", rope_parameters=..., rope_theta=5e5,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 64})
    variant("rope_yarn", model_type="qwen2", rope_parameters=..., rope_theta=1e6,
            rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128})
    variant("rope_yarn_mscale", rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0,
                                                 "mscale": 0.7, "mscale_all_dim": 1.0, "beta_fast": 16,
                                                 "truncate": False}, original_max_position_embeddings=256)
    variant("bad_rope_dynamic", rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    variant("bad_rope_longrope", rope_parameters={"rope_type": "longrope", "factor": 2.0, "short_factor": [1.0],
                                                  "long_factor": [2.0]})
    variant("bad_rope_partial", rope_scaling={"rope_type": "linear", "factor": 2.0}, partial_rotary_factor=0.5)
    variant("bad_act", hidden_act="relu")
    variant("llama_gelu", model_type="llama", hidden_act="gelu")
    variant("gemma_plain", model_type="gemma", hidden_act="gelu_pytorch_tanh", layer_types=...)
    variant("bad_gemma_bidirectional", model_type="gemma", use_bidirectional_attention=True, layer_types=...)
    variant("bad_gemma3_multimodal", model_type="gemma3", layer_types=...)
    variant("gemma2_softcaps", model_type="gemma2", hidden_activation="gelu", final_logit_softcapping=None,
            attn_logit_softcapping=None, query_pre_attn_scalar=32, hidden_act=..., layer_types=...)
    variant("bad_act_null", hidden_act=None)
    variant("qwen3_sliding_past_max", use_sliding_window=True, layer_types=..., sliding_window=..., max_window_layers=1)
    variant("qwen2_sliding_layer_types", model_type="qwen2", use_sliding_window=True, sliding_window=5,
            layer_types=["full_attention", "sliding_attention", "sliding_attention"])
    variant("mistral_window_default", model_type="mistral", sliding_window=..., head_dim=..., rope_parameters=...)
    variant("bad_sliding_no_window", use_sliding_window=True, sliding_window=None,
            layer_types=["full_attention", "sliding_attention", "full_attention"])
    variant("bad_max_window_layers", use_sliding_window=True, layer_types=..., max_window_layers=-1)
    variant("bad_mistral_sliding_layer", model_type="mistral", sliding_window=8,
            layer_types=["full_attention", "sliding_attention", "full_attention"])
    variant("qwen2_sliding_all_full", model_type="qwen2", use_sliding_window=True, sliding_window=8,
            max_window_layers=3, layer_types=...)
    variant("qwen3_sliding_layer_types", use_sliding_window=True, sliding_window=8)
    variant("bad_layer_types_short", layer_types=["full_attention"])
    variant("llama_biases", model_type="llama", attention_bias=True, mlp_bias=True)
    variant("mistral_bias_flags", model_type="mistral", attention_bias=True, mlp_bias=True, head_dim=...,
            rope_parameters=...)
    variant("bad_mlp_bias", mlp_bias="yes")
    variant("bad_layer_types", layer_types=["full_attention", "sliding_attention", "full_attention"])
    variant("bad_is_causal", is_causal=False)
    variant("is_causal_true", is_causal=True)
    variant("bad_chunked", attention_chunk_size=8)
    variant("bad_kv_sharing", kv_sharing_modes=["none", "reuse", "none"])
    variant("bad_per_layer", per_layer_config={"1": {"intermediate_size": 8}})
    variant("bad_text_config", text_config={"hidden_size": 8})
    variant("bad_llama_window", model_type="llama", sliding_window=8, layer_types=...)
    variant("rope_legacy_type", rope_parameters={"type": "default", "rope_theta": 1e4})
    variant("rope_legacy_type_linear", rope_parameters={"type": "linear", "rope_theta": 1e4, "factor": 2.0})
    variant("bad_rope_per_layer", rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4}})
    variant("bad_eps", rms_norm_eps=0)
    variant("bad_size_float", hidden_size=64.0)
    variant("bad_size_huge", vocab_size=4294967296)
    variant("missing_model_type", model_type=...)
    variant("unknown_model_type", model_type="gpt2")
    write("fuzz_config", "not_object.json", b"[1]")
    write("fuzz_config", "not_json.json", b'{"model_type": "qwen3",')
    write("fuzz_config", "duplicate_key.json", b'{"model_type": "qwen3", "model_type": "llama"}')


def main():
    for target in ("fuzz_safetensors", "fuzz_config"):
        shutil.rmtree(os.path.join(CORPUS, target), ignore_errors=True)
        os.makedirs(os.path.join(CORPUS, target))
    safetensors_seeds()
    config_seeds()


if __name__ == "__main__":
    main()
