#!/usr/bin/env python3
"""fetch_flashinfer.py: FlashInfer's attention headers for gpu/flashinfer.cu, from the pinned
flashinfer-python wheel on PyPI (Apache-2.0), into a folder of their own (third_party/flashinfer/,
ignored by git; the GPU machine, which reaches no registry, gets it carried: gpu/CHECKLIST.md).

Only what the kernels include is kept (~5 MB of the 62 MB wheel): the closure of FlashInfer's
batch prefill and decode headers (flashinfer/data/include) and of the libcu++ headers they and the
CUDA toolkit's headers include (flashinfer/data/cccl/libcudacxx/include: FlashInfer needs a newer CCCL
than CUDA 13.0 ships, e.g. cuda::fast_mod_div, and puts its own first, as FlashInfer's JIT does).
The closure follows every #include line whatever the #if around it, so it holds what any
architecture or compiler needs. FlashInfer's Hopper prefill (gpu/flashinfer_sm90.cu) is CUTLASS
code: its closure runs across FlashInfer's and CUTLASS's headers (flashinfer/data/cutlass/include
and tools/util/include, ~22 MB of the 29 MB), which land in DEST/cutlass. Layout of the result:
    DEST/VERSION                        "flashinfer-python VERSION sha256:SHA" (what setup.sh checks)
    DEST/LICENSE                        FlashInfer's license, from the wheel
    DEST/include/flashinfer/...         the FlashInfer headers
    DEST/cccl/{cuda,nv}/...             the libcu++ headers
    DEST/cutlass/{cute,cutlass}/...     the CUTLASS headers of the Hopper prefill
Usage: fetch_flashinfer.py VERSION SHA256 DEST [CUDA_INCLUDE_DIR]
Exits 0 when DEST already holds that version; 1 (saying why) when the wheel cannot be had.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOTS = ["flashinfer/attention/prefill.cuh", "flashinfer/attention/scheduler.cuh",
         "flashinfer/attention/default_prefill_params.cuh", "flashinfer/attention/variants.cuh",
         # gpu/flashinfer_decode.cu: batch decode and its state merge (cascade.cuh comes with decode.cuh)
         "flashinfer/attention/decode.cuh", "flashinfer/attention/default_decode_params.cuh"]
# gpu/flashinfer_sm90.cu: the Hopper (FA3-style) batch prefill and its planner
SM90_ROOTS = ["flashinfer/attention/hopper/prefill_sm90.cuh", "flashinfer/attention/hopper/default_params.cuh",
              "flashinfer/attention/hopper/variants.cuh"]
FI_PREFIX = "flashinfer/data/include/"
CUTLASS_PREFIXES = ["flashinfer/data/cutlass/include/", "flashinfer/data/cutlass/tools/util/include/"]
CCCL_PREFIX = "flashinfer/data/cccl/libcudacxx/include/"
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
# CUTLASS names libcu++ headers through a macro: #include CUDA_STD_HEADER(utility) is <cuda/std/utility>
STD_HEADER = re.compile(r'^\s*#\s*include\s+CUDA_STD_HEADER\(\s*([\w/]+)\s*\)', re.M)


def includes(text):
    return INCLUDE.findall(text) + ["cuda/std/" + h for h in STD_HEADER.findall(text)]


def closure(names, roots, prefix, read):
    """Every file under `prefix` reachable from `roots` (paths relative to prefix) by #include,
    resolved relative to the including file, then to prefix."""
    seen, todo = set(), [r for r in roots if prefix + r in names]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        here = os.path.dirname(path)
        for inc in includes(read(prefix + path)):
            for cand in (os.path.normpath(os.path.join(here, inc)), os.path.normpath(inc)):
                if prefix + cand in names:
                    todo.append(cand)
                    break
    return seen


def closure_across(names, roots, prefixes, read):
    """closure() over several include folders at once: (prefix, path) of every file reachable from
    `roots` (under prefixes[0]), an #include resolved relative to the including file, then to each
    prefix in turn."""
    seen, todo = set(), [(prefixes[0], r) for r in roots if prefixes[0] + r in names]
    while todo:
        prefix, path = todo.pop()
        if (prefix, path) in seen:
            continue
        seen.add((prefix, path))
        here = os.path.dirname(path)
        for inc in includes(read(prefix + path)):
            cands = [(prefix, os.path.normpath(os.path.join(here, inc)))] + [(p, os.path.normpath(inc)) for p in prefixes]
            found = next((c for c in cands if c[0] + c[1] in names), None)
            if found is not None:
                todo.append(found)
    return seen


def toolkit_seeds(cuda_include):
    """The libcu++ headers (cuda/..., nv/...) the toolkit's own headers include: cuda_fp16.h and
    the like take them from the first include path that has them, which is ours."""
    seeds = set()
    if not cuda_include or not os.path.isdir(cuda_include):
        return seeds
    for top, dirs, files in os.walk(cuda_include):
        dirs[:] = [d for d in dirs if d not in ("cccl", "cuda", "nv", "thrust", "cub")]
        for f in files:
            if f.endswith((".h", ".hpp", ".cuh")):
                with open(os.path.join(top, f), errors="replace") as fh:
                    seeds.update(i for i in includes(fh.read()) if i.startswith(("cuda/", "nv/")))
    return seeds


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    version, sha256, dest = sys.argv[1:4]
    cuda_include = sys.argv[4] if len(sys.argv) == 5 else None
    stamp = "flashinfer-python %s sha256:%s\n" % (version, sha256)
    try:
        with open(os.path.join(dest, "VERSION")) as f:
            # that version, and every root: a folder fetched before a root was added is fetched again
            if f.read() == stamp and all(os.path.isfile(os.path.join(dest, "include", r)) for r in ROOTS + SM90_ROOTS):
                return 0
    except OSError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--dest", tmp, "flashinfer-python==" + version]
        if subprocess.run(cmd).returncode != 0:
            print("fetch_flashinfer: pip download flashinfer-python==%s failed" % version, file=sys.stderr)
            return 1
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if len(wheels) != 1:
            print("fetch_flashinfer: expected one wheel, got %s" % wheels, file=sys.stderr)
            return 1
        wheel = os.path.join(tmp, wheels[0])
        with open(wheel, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != sha256:
            print("fetch_flashinfer: %s has sha256 %s, want %s" % (wheels[0], got, sha256), file=sys.stderr)
            return 1
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
            read = lambda n: z.read(n).decode("utf-8", "replace")
            fi = closure(names, ROOTS, FI_PREFIX, read)
            hopper = closure_across(names, SM90_ROOTS, [FI_PREFIX] + CUTLASS_PREFIXES, read)
            fi |= {p for prefix, p in hopper if prefix == FI_PREFIX}
            cutlass = {(prefix, p) for prefix, p in hopper if prefix != FI_PREFIX}
            seeds = {i for p in fi for i in includes(read(FI_PREFIX + p)) if i.startswith(("cuda/", "nv/"))}
            seeds |= {i for prefix, p in cutlass for i in includes(read(prefix + p)) if i.startswith(("cuda/", "nv/"))}
            seeds |= toolkit_seeds(cuda_include)
            cccl = closure(names, sorted(seeds), CCCL_PREFIX, read)
            licenses = [n for n in names if re.search(r"\.dist-info/licenses/LICENSE$", n)]
            if not fi or not cccl or not cutlass or len(licenses) != 1:
                print("fetch_flashinfer: the wheel does not hold the expected headers", file=sys.stderr)
                return 1
            parent = os.path.dirname(os.path.abspath(dest))
            os.makedirs(parent, exist_ok=True)
            stage = tempfile.mkdtemp(prefix=".flashinfer-", dir=parent)
            os.chmod(stage, 0o755)
            placed = [(FI_PREFIX, p, "include") for p in fi] + [(CCCL_PREFIX, p, "cccl") for p in cccl]
            placed += [(prefix, p, "cutlass") for prefix, p in cutlass]
            for prefix, p, sub in placed:
                out = os.path.join(stage, sub, p)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(z.read(prefix + p))
            with open(os.path.join(stage, "LICENSE"), "wb") as f:
                f.write(z.read(licenses[0]))
        with open(os.path.join(stage, "VERSION"), "w") as f:
            f.write(stamp)
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(stage, dest)
    print("fetch_flashinfer: flashinfer-python %s headers in %s (%d FlashInfer, %d libcu++, %d CUTLASS files)"
          % (version, dest, len(fi), len(cccl), len(cutlass)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
