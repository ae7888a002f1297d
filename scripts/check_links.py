#!/usr/bin/env python3
"""check_links.py [FILE.md ...]: every relative link of the documentation resolves.

For README.md, every .md under docs/ and bindings/python/README.md (or the files given), each
markdown link or image whose target is not a URL must name a file or folder that exists, relative to
the file holding it, and an anchor (`file.md#heading`, `#heading`) must be a heading of that file, as
GitHub turns headings into anchors. Links inside code blocks and code spans are not links. Exit 1
naming each broken link (file:line), 0 when all resolve (the CTest test docs_links).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def default_files():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "bindings", "python", "README.md")]
    for folder, _, names in os.walk(os.path.join(ROOT, "docs")):
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    return [f for f in files if os.path.exists(f)]


def prose_lines(path):
    """(line number, text) of the lines outside code blocks, with code spans blanked."""
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if not in_fence:
                yield number, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text.replace("`", ""))
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found, in_fence = {}, set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    in_fence = not in_fence
                m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    base = slug(m.group(1))
                    n = seen.get(base, 0)
                    seen[base] = n + 1
                    found.add(base if n == 0 else "%s-%d" % (base, n))
        cache[path] = found
    return cache[path]


def check(path):
    broken = []
    for number, line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = "%s:%d: %s" % (os.path.relpath(path, ROOT), number, target)
            if not os.path.exists(dest):
                broken.append(where + " (no such file)")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append(where + " (no heading with that anchor in %s)" % os.path.relpath(dest, ROOT))
    return broken


def main():
    files = [os.path.abspath(f) for f in sys.argv[1:]] or default_files()
    broken = [b for f in files for b in check(f)]
    for b in broken:
        print("broken link:", b)
    print("check_links: %d files, %d broken links" % (len(files), len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
