"""gguf_tokenizer.py: the tokenizer a GGUF file describes, as Hugging Face tokenizer files
(tokenizer.json for the `tokenizers` package, tokenizer_config.json, special_tokens_map.json),
written by gguf_to_hf.py. Only what is needed for a GPT-2 style byte-level BPE
(`tokenizer.ggml.model` "gpt2") is built; other tokenizer models are refused by name.

From the GGUF metadata (llama.cpp's keys):
- tokenizer.ggml.tokens: the vocabulary, already spelled in the byte-level alphabet (' ' is 'Ġ');
  the id of a token is its index.
- tokenizer.ggml.merges: the BPE merges, "left right", best first.
- tokenizer.ggml.token_type: 3 (CONTROL) marks the special tokens (<|im_start|> ...): they become
  added tokens matched whole, never split by BPE.
- tokenizer.ggml.pre: how text is split before BPE. For "smollm" llama.cpp first isolates every
  digit (\\p{N}), then applies GPT-2's split; that is the `Digits(individual_digits=True)` +
  `ByteLevel` pre-tokenizer of the original SmolLM2 tokenizer.json. "gpt2" is GPT-2's split alone.
- tokenizer.ggml.add_bos_token: whether a BOS id is prepended (false for SmolLM2: none is).
"""
import json
import os

CONTROL = 3

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
PRE_TOKENIZERS = {
    "gpt2": BYTE_LEVEL,
    "smollm": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, BYTE_LEVEL]},
}


class TokenizerError(Exception):
    pass


def _field(reader, key, default=None):
    f = reader.fields.get("tokenizer.ggml." + key)
    return default if f is None else f.contents()


def tokenizer_json(reader):
    """The tokenizer.json object."""
    model = _field(reader, "model")
    if model != "gpt2":
        raise TokenizerError("tokenizer.ggml.model is %r: only gpt2 (byte-level BPE) is converted" % model)
    pre = _field(reader, "pre", "gpt2")
    if pre not in PRE_TOKENIZERS:
        raise TokenizerError("tokenizer.ggml.pre is %r: known are %s" % (pre, sorted(PRE_TOKENIZERS)))
    tokens = _field(reader, "tokens")
    types = _field(reader, "token_type", [1] * len(tokens))
    merges = _field(reader, "merges")
    if len(set(tokens)) != len(tokens):
        raise TokenizerError("tokenizer.ggml.tokens has duplicates")
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, (t, kind) in enumerate(zip(tokens, types)) if kind == CONTROL]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": PRE_TOKENIZERS[pre],
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }


def write_tokenizer_files(reader, out_dir):
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json into out_dir."""
    tok = tokenizer_json(reader)
    if _field(reader, "add_bos_token", False):
        raise TokenizerError("tokenizer.ggml.add_bos_token is true: a BOS post-processor is not built here")
    tokens = _field(reader, "tokens")
    special = {}
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"), ("unk_token", "unknown_token_id"),
                      ("pad_token", "padding_token_id")):
        token_id = _field(reader, key)
        if token_id is not None:
            special[name] = tokens[int(token_id)]
    config = dict(special, tokenizer_class="PreTrainedTokenizerFast", add_bos_token=False, add_eos_token=False,
                  clean_up_tokenization_spaces=False,
                  additional_special_tokens=[a["content"] for a in tok["added_tokens"] if a["content"] not in
                                             special.values()])
    template = reader.fields.get("tokenizer.chat_template")
    if template is not None:
        config["chat_template"] = template.contents()
    for name, obj in (("tokenizer.json", tok), ("tokenizer_config.json", config), ("special_tokens_map.json", special)):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=None if name == "tokenizer.json" else 2)
            f.write("\n")
