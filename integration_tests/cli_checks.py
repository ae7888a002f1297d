"""What the `radixmlp` CLI tests share (standard library only): a counter of checks that prints each
failure and the summary line, a refused command's check, and whether this machine has a CUDA
device (nvidia-smi lists one)."""
import shutil
import subprocess


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}")

    def refused(self, cmd, text, rc=None, timeout=60):
        """Runs cmd, which must fail (with exit status rc when given) and say text on stderr."""
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:  # taken, and running: not refused
            self(False, f"{' '.join(cmd[1:])}: still running after {timeout} s, want it refused")
            return
        failed = done.returncode != 0 if rc is None else done.returncode == rc
        self(failed and text in done.stderr, f"{' '.join(cmd[1:])}: rc={done.returncode}, stderr {done.stderr.strip()!r}")

    def summary(self):
        """Prints the summary line; the exit status: 1 when a check failed."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def device_present():
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "GPU " in done.stdout
