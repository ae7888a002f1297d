"""Shared helpers: the package from this checkout, the fixtures, a tiny safetensors reader."""

import json
import os
import struct
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bindings/python: the radix_mlp package of this checkout

REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.join(REPO, "integration_tests", "fixtures")
HEADER = os.path.join(REPO, "ffi", "include", "radix_mlp.h")
FIXTURE_NAMES = ["qwen3_tiny", "qwen3_bf16", "qwen2_sharded", "llama_tiny", "qwen3_embedding_noprefix", "llama_bias",
                 "qwen3_bias", "qwen2_bias", "mistral_bias", "qwen2_window", "mistral_window", "llama3_rope",
                 "qwen2_yarn", "qwen3_linear", "gemma_bias", "gemma2_window", "gemma3_text"]

if not (os.environ.get("RADIX_MLP_LIB") or os.environ.get("RADIX_MLP_LIB_DIR")):
    sys.stderr.write("note: neither RADIX_MLP_LIB nor RADIX_MLP_LIB_DIR is set; the loader's default search is used\n")


def read_safetensors(path):
    """name -> numpy array for the F32/F16/I32/I64/U32 tensors of a .safetensors file."""
    dtypes = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U32": "<u4"}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=dtypes[info["dtype"]])
        out[name] = array.reshape(info["shape"])
    return out


def load_fixture(name):
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "batch.json")) as f:
        batch = json.load(f)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    expected = read_safetensors(os.path.join(folder, "expected.safetensors"))
    return folder, batch, config, expected


@pytest.fixture(scope="session")
def rm():
    import radix_mlp

    return radix_mlp
