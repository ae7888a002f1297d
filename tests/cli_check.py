"""cli_check.py: what the CLI tests (cli_*.py) share: a check that prints what failed and counts it,
a run of one `radixmlp` command with its output captured, and the closing summary line."""
import subprocess

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL: " + what)
    return ok


def radixmlp(exe, command, *args):
    return subprocess.run([exe, command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def summary(name):
    """Prints the test's last line and returns its exit status."""
    print("%s: %s" % (name, "ok" if failures == 0 else "%d failed" % failures))
    return 1 if failures else 0
