"""The gate's two rules, the busy status, and the guard against the published package's import name."""

import os
import subprocess
import sys

import pytest

import radix_mlp
from radix_mlp import PlanParams, Planner, RadixMLPError, plan_params_from_env
from conftest import HERE

# Two sequences of 8 sharing 3 tokens: N = 16, N' = 13, padded to 8 that is 16 rows. At threshold
# 0.85 the distinct rule uses radix (13/16 = 0.8125) and TEI's rule does not (16/16).
IDS = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 9, 10, 11, 12, 13]
POS = list(range(8)) * 2
CU = [0, 8, 16]


def test_gate_rules():
    planner = Planner()
    distinct = planner.build(IDS, POS, CU, threshold=0.85, pad_multiple_of=8)
    tei = planner.build(IDS, POS, CU, threshold=0.85, pad_multiple_of=8, gate="tei")
    assert distinct.use_radix and distinct.n_compact == 13 and distinct.n_compact_padded == 16
    assert not tei.use_radix and tei.n_compact == 16 and tei.n_distinct == 13
    tiny = planner.build(IDS, POS, CU, params=PlanParams(threshold=1e-7, gate="tei"))
    assert not tiny.use_radix and tiny.n_distinct == 16  # TEI's rule: off at <= 1e-6, no trie
    with pytest.raises(ValueError, match="gate must be 'distinct' or 'tei'"):
        planner.build(IDS, POS, CU, gate="padded")


def test_gate_from_env(monkeypatch):
    for var in ("RADIX_MLP_THRESHOLD", "RADIX_MLP_PAD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("RADIX_MLP_GATE", raising=False)
    assert plan_params_from_env() == PlanParams(gate="tei")  # the variables are TEI's: its rule
    monkeypatch.setenv("RADIX_MLP_GATE", "distinct")
    assert plan_params_from_env() == PlanParams(gate="distinct")
    monkeypatch.setenv("RADIX_MLP_GATE", "tei")
    assert plan_params_from_env() == PlanParams(gate="tei")
    monkeypatch.setenv("RADIX_MLP_GATE", "Tei")
    with pytest.raises(RadixMLPError, match="RADIX_MLP_GATE='Tei' is neither 'distinct'") as info:
        plan_params_from_env()
    assert info.value.status == radix_mlp.RMLP_ERR_INVALID_ARGUMENT


def test_busy_status():
    assert radix_mlp.RMLP_ERR_BUSY == -12
    assert radix_mlp.status_string(radix_mlp.RMLP_ERR_BUSY) == "handle in use by another call"
    assert RadixMLPError(-12, "rmlp_plan_build: planner is in use").status_name == "RMLP_ERR_BUSY"


def _import_with(extra_path):
    """Imports the checkout's radix_mlp in a fresh interpreter, RuntimeWarnings as errors."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([extra_path, os.path.dirname(HERE)]))
    return subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", "import radix_mlp"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_published_package_is_detected(tmp_path):
    alone = _import_with(str(tmp_path))
    assert alone.returncode == 0, alone.stderr
    info = tmp_path / "radix_mlp-0.1.0.dist-info"  # what pip leaves for the published radix-mlp
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: radix-mlp\nVersion: 0.1.0\n")
    both = _import_with(str(tmp_path))
    assert both.returncode != 0
    assert "the published package radix-mlp 0.1.0 is installed too" in both.stderr
    assert "radix-mlp-ctypes" in both.stderr
