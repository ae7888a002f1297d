#!/usr/bin/env python3
"""Checks the layers of the C sources (docs/design.md, "How the code is layered") from their includes.

Every #include "..." of a .c/.h/.cu/.cuh/.cpp file under the folders below is resolved as the
compiler does (the including file's folder, then the repository root, then ffi/include) and counted
as a dependency of the including file's folder on the included file's. ffi/include (the generated
public header) and ffi/src (the facade) are two folders here. The check fails when:
  - a folder includes from one at its own rank or above (a dependency running up the layers),
    beyond the exceptions listed in UP (at most one, each with its reason);
  - the folders' include graph has a circle;
  - a folder below the facade includes the umbrella header radix_mlp.h, or a part of it other than
    the types (radix_mlp/types.h, or one module's radix_mlp/types/<module>.h) from a file that
    defines no entry point (RMLP_EXPORT) the part declares;
  - a file defines an entry point (RMLP_EXPORT) without including a header that declares it.

    scripts/check_layers.py            # check; prints one line per folder and what it includes
    scripts/check_layers.py --quiet    # check; prints only failures and the summary line

Run by ctest (check_layers) in scripts/test.sh's first step.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC = "ffi/include"
# Rank of each folder, from the bottom. A folder may include from folders of a lower rank only.
RANKS = {
    PUBLIC: 0,            # the generated public header: types and declarations, no code
    "common": 1,          # allocation, guards, status, export macros, version, the backend table
    "trie": 2,            # the planner
    "batch": 2,           # the batcher, the routing key
    "model": 2,           # checkpoints, config.json, weights
    "cache": 2,           # the prefix cache's index
    "generate": 3,        # the generation session and the chain cut the backends' steps take
    "cpu": 4,             # the CPU backend
    "gpu": 4,             # the CUDA backend
    "ffi/src": 5,         # the facade: the exported entry points
    "bench": 6,           # the benchmarks and what radixmlp's commands share
    "examples": 6,        # programs against the public header
    "integration_tests": 6,
    "tools": 7,           # radixmlp and its commands
    "tests": 8,           # the C test suite
    "fuzz": 9,            # the fuzz targets (they reuse the tests' checkers)
}
BELOW_FACADE = {f for f, r in RANKS.items() if 0 < r < RANKS["ffi/src"]}
# The dependencies allowed to run up the layers, (from, to): why. At most one.
UP = {}
TYPES = re.compile(r"^%s/radix_mlp/(types|types/\w+)\.h$" % re.escape(PUBLIC))  # the public types, no entry points
SOURCE = re.compile(r"\.(c|h|cu|cuh|cpp)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
EXPORT = re.compile(r"^RMLP_EXPORT\b[^(]*?\b(rmlp_\w+)\s*\(", re.M)
DECLARED = re.compile(r"\b(rmlp_\w+)\s*\(")


def folder_of(path):
    """The folder (a key of RANKS) a repository path belongs to, or None."""
    for f in sorted(RANKS, key=len, reverse=True):
        if path == f or path.startswith(f + "/"):
            return f
    return None


def resolve(including, name):
    """The repository path an #include "name" of file `including` reads, or None (a system or
    third-party header)."""
    for base in (os.path.dirname(including), "", PUBLIC):
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(ROOT, path)):
            return path
    return None


def sources():
    for f in sorted(RANKS):
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, f)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("corpus", "target"))
            for name in sorted(filenames):
                if SOURCE.search(name):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def read(path):
    with open(os.path.join(ROOT, path), errors="replace") as f:
        return f.read()


def circles(edges):
    """The strongly connected components of more than one folder (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    quiet = "--quiet" in sys.argv[1:]
    failures = []
    edges = {}     # folder -> {folder: [example include]}
    declared = {}  # public header path -> the rmlp_* names it declares
    for path in sources():
        source = read(path)
        here = folder_of(path)
        includes = [(name, resolve(path, name)) for name in INCLUDE.findall(source)]
        for name, target in includes:
            there = folder_of(target) if target else None
            if there is None or there == here:
                continue
            edges.setdefault(here, {}).setdefault(there, []).append("%s -> %s" % (path, target))
            if here in BELOW_FACADE and there == PUBLIC and not TYPES.match(target):
                if target == PUBLIC + "/radix_mlp.h":
                    failures.append("%s includes the umbrella radix_mlp.h: below the facade, include "
                                    "radix_mlp/types.h (or the part that declares an entry point it defines)" % path)
                else:
                    names = declared.setdefault(target, set(DECLARED.findall(read(target))))
                    if not names & set(EXPORT.findall(source)):
                        failures.append("%s includes %s but defines none of its entry points: include "
                                        "radix_mlp/types.h (or radix_mlp/types/<module>.h) for the types" % (path, name))
        exported = set(EXPORT.findall(source))
        if exported:
            seen = set()
            for name, target in includes:
                if target and folder_of(target) == PUBLIC:
                    seen |= declared.setdefault(target, set(DECLARED.findall(read(target))))
                    if target == PUBLIC + "/radix_mlp.h":
                        for part in sorted(os.listdir(os.path.join(ROOT, PUBLIC, "radix_mlp"))):
                            p = PUBLIC + "/radix_mlp/" + part
                            if not part.endswith(".h") or TYPES.match(p):
                                continue  # the types/ folder, types.h: no declarations
                            seen |= declared.setdefault(p, set(DECLARED.findall(read(p))))
            missing = sorted(exported - seen)
            if missing:
                failures.append("%s defines %s without including the header that declares it (radix_mlp.h, or "
                                "below the facade its part radix_mlp/<module>.h)" % (path, ", ".join(missing)))
    up = []
    for here in sorted(edges):
        for there in sorted(edges[here]):
            if RANKS[there] >= RANKS[here]:
                up.append((here, there))
                if (here, there) not in UP:
                    failures.append("%s includes %s, which is not below it (%s; %d includes in all)" %
                                    (here, there, edges[here][there][0], len(edges[here][there])))
    if len(UP) > 1:
        failures.append("UP lists %d dependencies running up the layers: at most 1" % len(UP))
    for component in circles({h: set(t) for h, t in edges.items()}):
        failures.append("a circle between folders: %s" % " <-> ".join(component))
    if not quiet:
        for here in sorted(edges, key=lambda f: (RANKS[f], f)):
            print("%-18s (%d) includes %s" % (here, RANKS[here], ", ".join(
                "%s (%d)" % (t, len(edges[here][t])) for t in sorted(edges[here], key=lambda f: (RANKS[f], f)))))
    for failure in failures:
        print("check_layers: " + failure, file=sys.stderr)
    n_edges = sum(len(t) for t in edges.values())
    print("check_layers: %d folders, %d dependencies between them, %d running up the layers, %s" %
          (len(edges), n_edges, len(up), "%d failures" % len(failures) if failures else "no circle: ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
