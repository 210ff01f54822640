#!/usr/bin/env python3
"""Fails when a crate's top-level modules import each other in a cycle.

Usage: scripts/check-layers.py CRATE_SRC_DIR...   (e.g. coordinator/src books/src)

A crate's top-level modules are the files and folders directly under its `src/` (the crate
root, `lib.rs` / `main.rs`, is their facade and is left out). Module A depends on module B when
A's code (any file under it, outside `#[cfg(test)]` modules and comments) names `crate::B`,
or, in a top-level file, `super::B`. The layering in ARCHITECTURE.md holds when this graph has
no cycle; each cycle found is printed with the lines that make it.
"""

import os
import re
import sys

TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*(;|\{)")


def code_lines(text):
    """The lines of `text` outside comments and inline `#[cfg(test)] mod x { ... }` blocks."""
    out = []
    skip_depth = None
    pending_test = False
    for line in text.splitlines():
        stripped = line.strip()
        if skip_depth is not None:
            skip_depth += line.count("{") - line.count("}")
            if skip_depth <= 0:
                skip_depth = None
            continue
        if stripped.startswith("//"):
            continue
        if stripped == "#[cfg(test)]":
            pending_test = True
            continue
        if pending_test:
            pending_test = False
            if re.match(r"(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{", stripped):
                skip_depth = line.count("{") - line.count("}")
                if skip_depth <= 0:
                    skip_depth = None
                continue
            if re.match(r"(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*;", stripped):
                continue
        out.append(line.split("//")[0])
    return out


def test_files(src):
    """Files that are test modules (declared `#[cfg(test)] mod x;`)."""
    names = set()
    for dirpath, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)\s*;", text):
                    names.add(os.path.join(dirpath, m.group(1)))
    return names


def graph(src):
    tests = test_files(src)
    nodes = {}
    for entry in sorted(os.listdir(src)):
        path = os.path.join(src, entry)
        name = entry[:-3] if entry.endswith(".rs") else entry
        if name in ("lib", "main") or (entry.endswith(".rs") is False and not os.path.isdir(path)):
            continue
        if os.path.join(src, name) in tests:
            continue
        nodes.setdefault(name, []).append(path)
    edges = {n: {} for n in nodes}
    for name, paths in nodes.items():
        for path in paths:
            files = [path] if path.endswith(".rs") else [
                os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".rs")
            ]
            for f in files:
                if f[:-3] in tests:
                    continue
                top_level = os.path.dirname(f) == src
                for i, line in enumerate(code_lines(open(f, encoding="utf-8").read()), 1):
                    refs = re.findall(r"\bcrate::(\w+)", line)
                    if top_level:
                        refs += re.findall(r"\bsuper::(\w+)", line)
                    # `use super::{a, b}` / `use crate::{a, b}` groups
                    for grp in re.findall(r"\b(?:crate|super)::\{([^}]*)\}", line):
                        refs += re.findall(r"(?:^|,)\s*(\w+)", grp)
                    for r in refs:
                        if r in nodes and r != name:
                            edges[name].setdefault(r, f"{os.path.relpath(f)}: {line.strip()}")
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    failed = False
    for src in sys.argv[1:] or ["coordinator/src"]:
        edges = graph(src.rstrip("/"))
        found = cycles(edges)
        if not found:
            print(f"{src}: no import cycle among {len(edges)} modules")
        for comp in found:
            failed = True
            print(f"{src}: cycle among {', '.join(comp)}:")
            for a in comp:
                for b, why in sorted(edges[a].items()):
                    if b in comp:
                        print(f"  {a} -> {b}  ({why})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
