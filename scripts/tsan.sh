#!/usr/bin/env bash
# The thread tests under ThreadSanitizer: configures build-tsan/ (Debug, CUDA off,
# -DRMLP_SANITIZE=thread), builds, and runs the tests labelled tsan (test_concurrency: a planner
# per thread, and one planner shared by 8 threads, refused with RMLP_ERR_BUSY; test_model_threads:
# one model shared by threads, a context each, and the thread-local last error;
# test_context_threads: one context shared by threads, refused with RMLP_ERR_BUSY, and calls that
# nest on one thread; test_prefix_cache: threads with a cached context each on one model;
# test_decode_attention: the CPU decode attention on pools of threads, and the pool itself;
# test_batcher_traces: batchers on threads, one shared and refused with RMLP_ERR_BUSY). Any
# report fails the run (halt_on_error=1 makes the test exit nonzero).
#   scripts/tsan.sh [-jN]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${1:--j$(nproc)}

cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DRMLP_CUDA=OFF -DRMLP_SANITIZE=thread >/dev/null
cmake --build build-tsan "$jobs" --target test_concurrency test_model_threads test_context_threads test_prefix_cache \
  test_decode_attention test_batcher_traces

# OpenBLAS is not built with ThreadSanitizer, so what its own worker threads do is invisible to
# TSan: their accesses are not recorded, and the hand-over of work to them (OpenBLAS's own flags
# and spin-waits) is not seen as synchronisation, which can show up as false reports or hide real
# ones. With one OpenBLAS thread every BLAS call runs on the thread that made it, and TSan checks
# what this is for: our threads, our buffers. tests/tsan.supp holds the suppressions (none needed
# so far), each with its reason, never one for the library's own code.
export OPENBLAS_NUM_THREADS=1
# The tests must load build-tsan's instrumented library (their RUNPATH), not another build's that a
# LD_LIBRARY_PATH set for the other steps would put first: TSan cannot see the atomics of
# uninstrumented code and would report the guards' hand-overs as races.
unset LD_LIBRARY_PATH
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp"
ctest --test-dir build-tsan --output-on-failure --no-tests=error -L tsan
