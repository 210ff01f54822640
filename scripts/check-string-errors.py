#!/usr/bin/env python3
"""Fails when a library's public function returns `Result<_, String>`.

Usage: scripts/check-string-errors.py CRATE_SRC_DIR...   (e.g. protocol/src coordinator/src)
       scripts/check-string-errors.py --workspace        (every member of the workspace)
       scripts/check-string-errors.py --self-test        (scripts/testdata/string-errors)

A public library function (`pub fn`, `pub async fn`, ... with plain `pub`, in a file of the
library crate: `lib.rs` and the modules it declares) reports its failures with a typed error
(`thiserror`) that names the failing field or value, so that callers can match on it: a
`String` in the error position of a `Result` in its return type, at any depth
(`Receiver<Result<T, String>>` too), fails the check, and so does a `FromStr` or `TryFrom`
impl's `type Err = String;` / `type Error = String;` (what `parse()` returns is public too). Binaries (`main.rs`, `bin/`, and the
modules they declare), `pub(crate)` and narrower functions, comments and `#[cfg(test)]` code are
left out. Each finding is printed as `file:line: signature`; the script exits 1 when there is one.
"""

import importlib.util
import os
import re
import sys

_spec = importlib.util.spec_from_file_location(
    "check_layers", os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-layers.py")
)
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)

ERR_TYPE = re.compile(r"\btype\s+Err(?:or)?\s*=\s*String\s*;")
PUB_FN = re.compile(r"\bpub\s+(?:(?:const|async|unsafe|extern\s*(?:\"[^\"]*\")?)\s+)*fn\s+\w+")


def string_error(signature):
    """Whether a `Result<..., String>` appears in `signature` (any nesting)."""
    for m in re.finditer(r"\bResult\s*<", signature):
        depth, i, last_comma = 1, m.end(), None
        while i < len(signature) and depth:
            c = signature[i]
            if c in "<([":
                depth += 1
            elif c in ">)]":
                depth -= 1
            elif c == "," and depth == 1:
                last_comma = i
            i += 1
        if last_comma is not None and signature[last_comma + 1:i - 1].strip() == "String":
            return True
    return False


def return_type(signature):
    """What follows the parameter list of `signature` (its return type and `where` clause)."""
    i = signature.index("(")
    depth = 0
    for j in range(i, len(signature)):
        if signature[j] == "(":
            depth += 1
        elif signature[j] == ")":
            depth -= 1
            if depth == 0:
                return signature[j + 1:]
    return ""


def findings(src):
    lib = os.path.join(src, "lib.rs")
    if not os.path.exists(lib):
        return []
    out = []
    for f in layers.Crate(lib).files.values():
        for m in PUB_FN.finditer(f.text):
            end = m.end()
            depth = 0
            while end < len(f.text):
                c = f.text[end]
                if c in "(<[":
                    depth += 1
                elif c in ")>]" and not (c == ">" and f.text[end - 1] == "-"):
                    depth -= 1
                elif depth == 0 and c in "{;":
                    break
                end += 1
            signature = " ".join(f.text[m.start():end].split())
            if string_error(return_type(signature)):
                out.append(f"{os.path.relpath(f.path)}:{layers.line_of(f.text, m.start())}: {signature}")
        for m in ERR_TYPE.finditer(f.text):
            line = layers.line_of(f.text, m.start())
            out.append(f"{os.path.relpath(f.path)}:{line}: {' '.join(m.group(0).split())}")
    return out


def self_test():
    """The fixture has exactly three findings: `plain`, `nested` and a `FromStr`'s error."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata", "string-errors", "src")
    found = findings(here)
    names = sorted(re.search(r"fn (\w+)|type (Err)", f).group(1) or "Err" for f in found)
    if names != ["Err", "nested", "plain"]:
        print("self-test FAILED: expected plain, nested and Err, found:\n" + "\n".join(found))
        return 1
    print("self-test passed: the three planted String errors found, nothing else")
    return 0


def main():
    srcs = sys.argv[1:]
    if srcs == ["--self-test"]:
        sys.exit(self_test())
    if srcs == ["--workspace"]:
        srcs = layers.workspace_srcs()
    found = []
    for src in srcs:
        found += findings(src.rstrip("/"))
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} String errors in public library API: give each a typed error")
        sys.exit(1)
    print(f"no public library function returns Result<_, String> ({len(srcs)} crates)")


if __name__ == "__main__":
    main()
