#!/usr/bin/env python3
"""Every `radixmlp` command that writes reports a lost write (issue 31, point 7; standard library
only): its file or standard output on /dev/full (ENOSPC), or a file cut short by RLIMIT_FSIZE (a
disk filling mid-run, EFBIG), makes it exit 1 with "radixmlp: writing NAME failed: WHY", never 0
(`run --output /dev/full` exited 0) and never 1 without a word (`generate` did). Covered: run
(--output FILE and -), generate (--output and stdout), plan (table and --json), version, --help,
bench (--json on stdout, --dump-batches, --keep-model).

    cli_write_errors.py RADIXMLP FIXTURES_DIR
"""
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile

from cli_checks import Checks


def capped(limit):
    """A child whose files may not grow past `limit` bytes: a write past it fails with EFBIG."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def main(radixmlp, fixtures):
    check = Checks()
    model = os.path.join(fixtures, "qwen3_tiny")

    def fails(cmd, name, why, stdout=None, preexec=None):
        with open(stdout or os.devnull, "w") as out:
            done = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
                                  preexec_fn=preexec)
        want = f"radixmlp: writing {name} failed: {why}"
        check(done.returncode == 1 and want in done.stderr,
              f"{' '.join(cmd[1:])}{' > ' + stdout if stdout else ''}: rc={done.returncode}, "
              f"stderr {done.stderr.strip()[-300:]!r}, want rc=1 and {want!r}")

    full, enospc = "/dev/full", os.strerror(28)  # ENOSPC
    with tempfile.TemporaryDirectory() as tmp:
        prompts = os.path.join(tmp, "in.jsonl")
        with open(prompts, "w") as f:
            f.writelines(json.dumps({"input_ids": [1, 2, 3, k]}) + "\n" for k in range(4, 12))
        batches = os.path.join(tmp, "batches.jsonl")
        with open(batches, "w") as f:
            f.write(json.dumps({"case": "tiny", "input_ids": [5, 6, 7, 5, 6, 8], "cu_seqlens": [0, 3, 6]}) + "\n")
        run = [radixmlp, "run", "--model", model, "--input", prompts, "--pooling", "none"]
        generate = [radixmlp, "generate", "--model", model, "--input", prompts, "--max-new-tokens", "2"]
        bench = [radixmlp, "bench", "--model", model, "--batches", batches]

        fails(run + ["--output", full], full, enospc)
        fails(run + ["--output", "-"], "standard output", enospc, stdout=full)
        fails(generate + ["--output", full], full, enospc)
        fails(generate, "standard output", enospc, stdout=full)
        for args in (["plan"], ["plan", "--json", "--repeat", "1"], ["version"], ["run", "--help"], ["--help"]):
            fails([radixmlp, *args], "standard output", enospc, stdout=full)
        fails(bench + ["--json"], "standard output", enospc, stdout=full)
        fails(bench, "standard output", enospc, stdout=full)
        fails(bench + ["--dump-batches", full], full, enospc)

        # A disk that fills mid-run: files stop growing at 4 KiB (EFBIG).
        efbig, cap = os.strerror(27), capped(4096)
        out = os.path.join(tmp, "out.jsonl")
        fails(run + ["--output", out, "--max-batch-tokens", "8"], out, efbig, preexec=cap)
        fails(generate + ["--output", out, "--max-new-tokens", "200"], out, efbig, preexec=cap)
        fails(bench + ["--dump-batches", out], out, efbig, preexec=capped(1024))  # a line is ~2 KiB
        kept = os.path.join(tmp, "kept")
        with open(os.devnull, "w") as devnull:
            done = subprocess.run([radixmlp, "bench", "--layers", "1", "--keep-model", kept], stdout=devnull,
                                  stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=cap)
        want = f"radixmlp: writing the random model to {kept} failed: {efbig}"
        check(done.returncode == 1 and want in done.stderr,
              f"bench --keep-model: rc={done.returncode}, stderr {done.stderr.strip()!r}, want {want!r}")

        # The same commands with room to write exit 0 (the checks above are not always failing).
        for cmd in (run + ["--output", out], generate + ["--output", out], bench + ["--dump-batches", out]):
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            check(done.returncode == 0 and os.path.getsize(out) > 0,
                  f"{' '.join(cmd[1:])}: rc={done.returncode}, {done.stderr.strip()[-300:]!r}")
    return check.summary()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
