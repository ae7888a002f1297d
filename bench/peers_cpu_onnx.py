#!/usr/bin/env python3
"""peers_cpu_onnx.py: the ONNX Runtime peer of bench/peers_cpu.py.

Exports the checkpoint with torch.onnx (transformers' AutoModel in fp32: input_ids, attention_mask
and position_ids of a right-padded (B, L) batch in, last_hidden_state out; B and L dynamic) into
WORKDIR/onnx/, once per checkpoint (a stamp beside it, written when the export is done; raise
EXPORT_FORMAT when the export changes), in a process of its own so the ORT worker does not hold
torch; then runs the padded batches with ONNX Runtime's CPU provider, intra-op threads fixed, and
pools the last token and the mean of each sequence.

    python3 bench/peers_cpu_onnx.py --export MODEL_DIR OUT.onnx     # what the worker runs first
"""
import json
import os
import subprocess
import sys
import time

EXPORT_FORMAT = 1

def export(model_dir, path):
    import torch
    import transformers
    from transformers import AutoModel

    kw = {"dtype": torch.float32} if int(transformers.__version__.split(".")[0]) >= 5 else {"torch_dtype": torch.float32}
    model = AutoModel.from_pretrained(model_dir, attn_implementation="sdpa", **kw).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, position_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                              use_cache=False).last_hidden_state

    ids = torch.randint(0, model.config.vocab_size, (3, 17))
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    pos = torch.arange(17).expand(3, 17).contiguous()
    names = ["input_ids", "attention_mask", "position_ids"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    batch, seq = torch.export.Dim("batch", min=1, max=4096), torch.export.Dim("seq", min=2, max=8192)
    with torch.inference_mode(False), torch.no_grad():
        try:  # the torch.export-based exporter, the one transformers 5 supports
            program = torch.onnx.export(LastHidden(model), (ids, mask, pos), dynamo=True, input_names=names,
                                        output_names=["last_hidden_state"],
                                        dynamic_shapes={n: {0: batch, 1: seq} for n in names}, optimize=True)
            program.save(path, external_data=True)
            how = "dynamo"
        except Exception as e:  # noqa: BLE001: fall back to the TorchScript exporter
            print("peers_cpu_onnx: the dynamo exporter failed (%s: %s); TorchScript exporter instead"
                  % (type(e).__name__, str(e)[:300]), file=sys.stderr, flush=True)
            torch.onnx.export(LastHidden(model), (ids, mask, pos), path, dynamo=False, input_names=names,
                              output_names=["last_hidden_state"], opset_version=18,
                              dynamic_axes={n: {0: "batch", 1: "seq"} for n in names + ["last_hidden_state"]})
            how = "torchscript"
    print("peers_cpu_onnx: exported %s to %s (%s exporter, torch %s, transformers %s)"
          % (model_dir, path, how, torch.__version__, transformers.__version__), file=sys.stderr, flush=True)


def stamp_of(model_dir):
    st = os.stat(os.path.join(model_dir, "model.safetensors"))
    return {"model": os.path.abspath(model_dir), "size": st.st_size, "mtime": int(st.st_mtime),
            "format": EXPORT_FORMAT}


def ensure_export(model_dir, workdir):
    folder = os.path.join(workdir, "onnx")
    path = os.path.join(folder, "model.onnx")
    stamp_path = os.path.join(folder, "stamp.json")
    stamp = stamp_of(model_dir)
    try:
        with open(stamp_path) as f:
            if json.load(f) == stamp and os.path.isfile(path):
                return path, "reused"
    except (OSError, ValueError):
        pass
    if os.path.isdir(folder):
        for f in os.listdir(folder):
            os.remove(os.path.join(folder, f))
    t0 = time.monotonic()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--export", model_dir, path], check=True,
                   stdout=sys.stderr)
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return path, "exported in %.0f s" % (time.monotonic() - t0)


def worker_ort(args, cases):
    """For bench/peers_cpu.py: (info, run) where run(case) -> ({label: ms}, {label: (last, mean)}, notes)."""
    import numpy as np
    import onnxruntime as ort

    path, how = ensure_export(args.model, args.workdir)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    label = "onnxruntime (padded)"

    def run(case):
        t0 = time.perf_counter()
        cu = case["cu_seqlens"]
        lens = np.diff(np.asarray(cu))
        B, L = len(lens), int(lens.max())
        flat = np.asarray(case["input_ids"], dtype=np.int64)
        ids = np.zeros((B, L), dtype=np.int64)
        mask = np.zeros((B, L), dtype=np.int64)
        for b in range(B):
            ids[b, :lens[b]] = flat[cu[b]:cu[b + 1]]
            mask[b, :lens[b]] = 1
        pos = np.broadcast_to(np.arange(L, dtype=np.int64), (B, L)).copy()
        (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "position_ids": pos})
        last = hidden[np.arange(B), lens - 1].astype(np.float64)
        mean = (hidden * mask[:, :, None]).sum(1, dtype=np.float64) / lens[:, None]
        ms = (time.perf_counter() - t0) * 1e3
        return {label: ms}, {label: (last, mean)}, {label: "B*L=%d" % (B * L)}

    return "onnxruntime %s, %d intra-op threads, %s (%s)" % (ort.__version__, args.threads,
                                                              os.path.relpath(path), how), run


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--export":
        export(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
