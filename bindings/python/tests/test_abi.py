"""The ctypes declarations against the header, version checks, status strings, library loading."""

import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

import radix_mlp
from radix_mlp import _abi
from conftest import HEADER, HERE

STRUCTS = ["rmlp_plan_params", "rmlp_model_params", "rmlp_model_config", "rmlp_plan", "rmlp_attention_args",
           "rmlp_context_params", "rmlp_cpu_profile", "rmlp_cache_stats", "rmlp_gpu_stats", "rmlp_generate_params", "rmlp_generate_stats",
           "rmlp_batcher_params", "rmlp_batch", "rmlp_route_params", "rmlp_layer_attention"]

# Offsets of selected fields, as a C program compiled against ffi/include/radix_mlp.h printed
# them (sizeof/offsetof, LP64): the layout the bindings rely on.
KNOWN_OFFSETS = {
    ("rmlp_plan_params", "pad"): 4,
    ("rmlp_plan_params", "pad_multiple_of"): 8,
    ("rmlp_plan_params", "threshold"): 16,
    ("rmlp_plan_params", "gate"): 24,
    ("rmlp_model_params", "dtype"): 12,
    ("rmlp_model_config", "sliding_window"): 36,
    ("rmlp_model_config", "rms_norm_eps"): 40,
    ("rmlp_model_config", "rope_theta"): 48,
    ("rmlp_model_config", "has_lm_head"): 59,
    ("rmlp_plan", "use_radix"): 20,
    ("rmlp_plan", "compact_ratio"): 24,
    ("rmlp_plan", "build_us"): 32,
    ("rmlp_plan", "fold_gather"): 40,
    ("rmlp_plan", "compact_parent"): 72,
    ("rmlp_plan", "cu_seqlens"): 80,
    ("rmlp_plan", "planner"): 88,
    ("rmlp_plan", "generation"): 96,
    ("rmlp_plan", "qo_indptr"): 104,
    ("rmlp_plan", "n_runs"): 112,
    ("rmlp_plan", "run_indptr"): 120,
    ("rmlp_plan", "run_start"): 128,
    ("rmlp_attention_args", "scale"): 24,
    ("rmlp_attention_args", "cu_seqlens"): 32,
    ("rmlp_attention_args", "stream"): 72,
    ("rmlp_attention_args", "max_seqlen"): 88,
    ("rmlp_attention_args", "layout"): 92,
    ("rmlp_attention_args", "n_compact"): 96,
    ("rmlp_attention_args", "qo_indptr"): 104,
    ("rmlp_attention_args", "kv_indices_device"): 144,
    ("rmlp_attention_args", "sliding_window"): 152,
    ("rmlp_attention_args", "softcap"): 156,
    ("rmlp_context_params", "attention_space"): 4,
    ("rmlp_context_params", "cache_bytes"): 8,
    ("rmlp_context_params", "gpu_attention"): 16,
    ("rmlp_gpu_stats", "attention"): 8,
    ("rmlp_gpu_stats", "decode_flashinfer"): 16,
    ("rmlp_gpu_stats", "flashinfer_full"): 24,
    ("rmlp_gpu_stats", "fallback_launcher"): 120,
    ("rmlp_gpu_stats", "first_plan_error"): 128,
    ("rmlp_gpu_stats", "sm90"): 528,
    ("rmlp_gpu_stats", "sm90_fallbacks"): 552,
    ("rmlp_gpu_stats", "nonfinite_outputs"): 560,
    ("rmlp_gpu_stats", "nonfinite_row"): 568,
    ("rmlp_gpu_stats", "nonfinite_col"): 572,
    ("rmlp_cache_stats", "hit_tokens"): 24,
    ("rmlp_cache_stats", "bytes_in_use"): 80,
    ("rmlp_generate_params", "shared_prefix_attention"): 8,
    ("rmlp_generate_stats", "step_ms"): 40,
    ("rmlp_generate_stats", "attention_ms"): 48,
}


@pytest.mark.parametrize("name", STRUCTS)
def test_struct_sizes(name):
    assert ctypes.sizeof(getattr(_abi, name)) == _abi.STRUCT_SIZES[name]


def test_known_offsets():
    for (struct, field), offset in KNOWN_OFFSETS.items():
        assert getattr(getattr(_abi, struct), field).offset == offset, (struct, field)
    assert _abi.STRUCT_SIZES["rmlp_plan_params"] == 32  # 24 in 0.1.0, before `gate`
    assert _abi.STRUCT_SIZES["rmlp_plan"] == 136  # 88 in 0.1.0, before `planner` ... `run_start`
    # 96 in 0.1.0, before `layout` ... `kv_indices_device`; 152 in 0.2, before `sliding_window`, `softcap`
    assert _abi.STRUCT_SIZES["rmlp_attention_args"] == 160
    assert _abi.STRUCT_SIZES["rmlp_context_params"] == 24  # 8 before `cache_bytes`, 16 before `gpu_attention`


def test_layout_matches_header_compiled():
    """Every field's offset and every struct's size, printed by a C program built from the header."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler: layout checked against the recorded sizes only")
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "radix_mlp.h"', "int main(void) {"]
    for name in STRUCTS:
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (name, name))
        for field, _ in getattr(_abi, name)._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (name, field, name, field))
    consts = ["RMLP_VERSION_MAJOR", "RMLP_VERSION_MINOR", "RMLP_VERSION_PATCH", "RMLP_MAX_PAD_MULTIPLE",
              "RMLP_DEFAULT_PAD_MULTIPLE", "RMLP_POOLING_LAST", "RMLP_POOLING_MEAN", "RMLP_POOLING_FIRST",
              "RMLP_DEVICE_CPU", "RMLP_DEVICE_CUDA", "RMLP_DTYPE_F32", "RMLP_DTYPE_F16", "RMLP_DTYPE_BF16",
              "RMLP_ARCH_QWEN3", "RMLP_ARCH_QWEN2", "RMLP_ARCH_LLAMA", "RMLP_ARCH_MISTRAL", "RMLP_BUILD_CUDA",
              "RMLP_GATE_DISTINCT", "RMLP_GATE_TEI", "RMLP_ATTENTION_FULL", "RMLP_ATTENTION_COMPACT",
              "RMLP_ATTENTION_AUTO", "RMLP_GPU_ATTENTION_AUTO", "RMLP_GPU_ATTENTION_FLASHINFER",
              "RMLP_GPU_ATTENTION_REFERENCE", "RMLP_BATCH_PREFIX", "RMLP_BATCH_FIFO", "RMLP_BATCH_OVERSIZED",
              "RMLP_BATCH_AGED", "RMLP_BATCH_CACHE_SKIPPED", "RMLP_BATCHER_DEFAULT_MAX_REQUESTS",
              "RMLP_BATCHER_DEFAULT_MAX_QUEUED_TOKENS", "RMLP_BATCHER_DEFAULT_MAX_WAIT_US",
              "RMLP_ROUTE_DEFAULT_PREFIX_TOKENS", "RMLP_ROUTE_KEY_CHARS"]
    consts += list(_abi.STATUS_NAMES.values())
    for c in consts:
        lines.append('printf("%s %%lld\\n", (long long)(%s));' % (c, c))
    lines.append('printf("RMLP_NO_PARENT %llu\\n", (unsigned long long)RMLP_NO_PARENT);')
    lines.append('printf("RMLP_DEFAULT_THRESHOLD %.17g\\n", (double)RMLP_DEFAULT_THRESHOLD);')
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run([cc, "-std=c11", "-I", os.path.dirname(HEADER), src, "-o", exe], check=True)
        printed = dict(line.split() for line in subprocess.run([exe], check=True, capture_output=True,
                                                                text=True).stdout.splitlines())
    for name in STRUCTS:
        cls = getattr(_abi, name)
        assert int(printed[name]) == ctypes.sizeof(cls) == _abi.STRUCT_SIZES[name], name
        for field, _ in cls._fields_:
            assert int(printed["%s.%s" % (name, field)]) == getattr(cls, field).offset, (name, field)
    for c in consts + ["RMLP_NO_PARENT"]:
        assert int(printed[c]) == getattr(_abi, c), c
    assert float(printed["RMLP_DEFAULT_THRESHOLD"]) == _abi.RMLP_DEFAULT_THRESHOLD


def test_header_declares_every_prototype():
    # radix_mlp.h includes its parts, radix_mlp/<module>.h, which hold the declarations (types.h and
    # radix_mlp/types/*.h: none).
    parts = sorted(glob.glob(os.path.join(os.path.dirname(HEADER), "radix_mlp", "*.h")))
    assert len(parts) >= 10, parts
    header = ""
    for path in [HEADER] + parts:
        with open(path) as f:
            header += f.read()
    declared = set(re.findall(r"\b(rmlp_[a-z0-9_]+)\(", header))
    assert declared == set(_abi.PROTOTYPES)


def test_version():
    major, minor, patch = radix_mlp.version()
    assert major == _abi.RMLP_VERSION_MAJOR
    assert radix_mlp.version_string() == "%d.%d.%d" % (major, minor, patch)
    assert radix_mlp.__version__.startswith("%d." % major)


def test_status_strings_and_cuda_probe():
    assert radix_mlp.status_string(radix_mlp.RMLP_OK) == "ok"
    assert radix_mlp.status_string(radix_mlp.RMLP_ERR_INVALID_SEQLENS) == "invalid cu_seqlens"
    assert radix_mlp.status_string(-12345) == "unknown status"
    if radix_mlp.build_flags() & _abi.RMLP_BUILD_CUDA:
        try:
            assert radix_mlp.cuda_device_count() >= 1
        except radix_mlp.RadixMLPError as e:
            assert e.status == radix_mlp.RMLP_ERR_NO_DEVICE
    else:
        with pytest.raises(radix_mlp.RadixMLPError) as info:
            radix_mlp.cuda_device_count()
        assert info.value.status == radix_mlp.RMLP_ERR_UNSUPPORTED


def _import_in_subprocess(env_updates):
    env = {k: v for k, v in os.environ.items() if k not in ("RADIX_MLP_LIB", "RADIX_MLP_LIB_DIR")}
    env.update(env_updates)
    code = ("try:\n    import radix_mlp\nexcept ImportError as e:\n"
            "    print('ImportError:', e)\n    raise SystemExit(3)\nprint(radix_mlp.library_path)")
    return subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(HERE), env=env, capture_output=True,
                          text=True)


def test_loader_missing_dir_is_clear_import_error():
    result = _import_in_subprocess({"RADIX_MLP_LIB_DIR": "/nonexistent/radix"})
    assert result.returncode == 3, result.stderr
    assert "RADIX_MLP_LIB_DIR='/nonexistent/radix' holds neither libradix_mlp.so.0.3" in result.stdout


def test_loader_bad_full_path():
    result = _import_in_subprocess({"RADIX_MLP_LIB": "/nonexistent/libradix_mlp.so"})
    assert result.returncode == 3, result.stderr
    assert "RADIX_MLP_LIB='/nonexistent/libradix_mlp.so' is not a file" in result.stdout


def test_loader_full_path():
    path = radix_mlp.library_path
    result = _import_in_subprocess({"RADIX_MLP_LIB": os.path.abspath(path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == os.path.abspath(path)


class _FakeFunction:
    def __init__(self, value):
        self.value = value

    def __call__(self, *args):
        return self.value


class _FakeLib:
    def __init__(self, version):
        self.rmlp_version = _FakeFunction(version)

    def __getattr__(self, name):
        if not name.startswith("rmlp_"):
            raise AttributeError(name)
        fn = _FakeFunction(0)
        setattr(self, name, fn)
        return fn


def test_loader_refuses_other_major(monkeypatch):
    from radix_mlp import _loader

    monkeypatch.setattr(_loader, "_find", lambda: (_FakeLib(0x010203), "/fake/libradix_mlp.so.1"))
    with pytest.raises(ImportError, match=r"version 1\.2\.3 \(ABI 1\) but these bindings are written for ABI 0\.3"):
        _loader.load()
    # before 1.0 every minor version is its own ABI (0.2 changed the plan's struct, 0.3 the model's config)
    monkeypatch.setattr(_loader, "_find", lambda: (_FakeLib(0x000205), "/fake/libradix_mlp.so.0.2"))
    with pytest.raises(ImportError, match=r"version 0\.2\.5 \(ABI 0\.2\) but these bindings are written for ABI 0\.3"):
        _loader.load()
    monkeypatch.setattr(_loader, "_find", lambda: (_FakeLib(0x000305), "/fake/libradix_mlp.so.0.3"))
    assert _loader.load()[1] == "/fake/libradix_mlp.so.0.3"
