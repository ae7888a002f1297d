#!/usr/bin/env python3
"""check_arch_table.py: the copies of the architecture list agree with the C table (model/arch.h),
which `test_arch_table --list` prints as "<id> <model_type>" lines (the first row of an id names
it). Checked against it, each by the name RMLP_ARCH_<MODEL_TYPE in capitals>:
  - the header's types, ffi/include/radix_mlp/types/*.h: their `#define RMLP_ARCH_*` values;
  - the Rust -sys crate: every `pub const RMLP_ARCH_*: rmlp_arch` under its src/;
  - the Rust crate: the `Architecture` enum (variant = the model_type in CamelCase, "Unknown"
    aside) and both conversions (`sys::RMLP_ARCH_X => Architecture::X`, and back) under its src/;
  - the Python package: `RMLP_ARCH_*` and `ARCH_NAMES` of radix_mlp/_abi.py.

    python3 tests/check_arch_table.py BUILD/tests/test_arch_table [REPO_ROOT]
"""
import ast
import glob
import os
import re
import subprocess
import sys

failures = []  # what disagrees, printed as found


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def c_table(exe):
    """{id: model_type} of the first row of each id, from the C table."""
    out = subprocess.run([exe, "--list"], stdout=subprocess.PIPE, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        code, model_type = line.split()
        table.setdefault(int(code), model_type)
    return table


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def constants(text, pattern):
    return {name: int(value) for name, value in re.findall(pattern, text)}


def rust_sources(root, crate):
    return "\n".join(read(p) for p in sorted(glob.glob(os.path.join(root, "bindings/rust", crate, "src/**/*.rs"),
                                                       recursive=True)))


def check_constants(where, got, want):
    check(got == want, "%s: RMLP_ARCH_* constants %s, the C table calls for %s" % (where, sorted(got.items()),
                                                                                 sorted(want.items())))


def check_rust_enum(root, want):
    src = rust_sources(root, "radix-mlp")
    enum = re.search(r"pub enum Architecture \{(.*?)\n\}", src, re.S)
    check(enum is not None, "radix-mlp: no `pub enum Architecture`")
    if enum is None:
        return
    body = re.sub(r"///[^\n]*", "", enum.group(1))
    variants = set(re.findall(r"^\s*([A-Z]\w*)\s*[,(]", body, re.M)) - {"Unknown"}
    expected = {"".join(w.capitalize() for w in name[len("RMLP_ARCH_"):].split("_")): name for name in want}
    check(variants == set(expected), "radix-mlp: Architecture has %s, the C table calls for %s" % (
        sorted(variants), sorted(expected)))
    from_sys = dict((c, v) for c, v in re.findall(r"sys::(RMLP_ARCH_\w+)\s*=>\s*Architecture::(\w+)", src))
    to_sys = dict((v, c) for v, c in re.findall(r"Architecture::(\w+)\s*=>\s*sys::(RMLP_ARCH_\w+)", src))
    for variant, name in expected.items():
        check(from_sys.get(name) == variant, "radix-mlp: sys::%s converts to Architecture::%s, not %s" % (
            name, from_sys.get(name), variant))
        check(to_sys.get(variant) == name, "radix-mlp: Architecture::%s converts to sys::%s, not %s" % (
            variant, to_sys.get(variant), name))


def check_python(root, want, table):
    tree = ast.parse(read(os.path.join(root, "bindings/python/radix_mlp/_abi.py")))
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = node.value
    got = {k: ast.literal_eval(v) for k, v in values.items() if k.startswith("RMLP_ARCH_")}
    check_constants("bindings/python/radix_mlp/_abi.py", got, want)
    names = values.get("ARCH_NAMES")
    check(isinstance(names, ast.Dict), "_abi.py: no ARCH_NAMES dict")
    if isinstance(names, ast.Dict):
        arch_names = {got.get(k.id) if isinstance(k, ast.Name) else ast.literal_eval(k): ast.literal_eval(v)
                      for k, v in zip(names.keys, names.values)}
        check(arch_names == table, "_abi.py: ARCH_NAMES %s, the C table is %s" % (arch_names, table))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    root = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    table = c_table(sys.argv[1])
    check(len(table) >= 1, "the C table printed no rows")
    want = {"RMLP_ARCH_" + model_type.upper(): code for code, model_type in table.items()}
    headers = "".join(read(h) for h in sorted(glob.glob(os.path.join(root, "ffi/include/radix_mlp/types/*.h"))))
    check_constants("ffi/include/radix_mlp/types/*.h", constants(headers, r"#define (RMLP_ARCH_\w+) (\d+)"), want)
    check_constants("radix-mlp-sys", constants(rust_sources(root, "radix-mlp-sys"),
                                               r"pub const (RMLP_ARCH_\w+): rmlp_arch = (\d+);"), want)
    check_rust_enum(root, want)
    check_python(root, want, table)
    print("%d architectures (%s): %s" % (len(table), ", ".join(table.values()),
                                         "%d failures" % len(failures) if failures else "the bindings agree"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
