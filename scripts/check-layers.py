#!/usr/bin/env python3
"""Fails when a crate's files, or its top-level modules, import each other in a circle.

Usage:
    scripts/check-layers.py CRATE_SRC_DIR...   (e.g. coordinator/src books/src)
    scripts/check-layers.py --workspace        (every member of Cargo.toml's workspace)
    scripts/check-layers.py --self-test        (the fixtures under scripts/testdata/layers)

Each crate root in the directory is checked (`lib.rs`, `main.rs`, `bin/*.rs`; a binary is its own
crate, and the library is an outside crate to it).

The rule. Every `.rs` file reachable from a root through `mod x;` declarations is a node. File A
depends on file B when A's code names an item that B defines:
- a path names it: `crate::a::b::Item`, `super::Item`, `self::child::Item`, `child::Item` (a
  module A declares) or `alias::Item` (a module A imported with `use`);
- a private `use` imports it (`use crate::a::Item;`); a glob import (`use super::*;`) counts for
  each name A then uses that the glob brings in.
Three things are not dependencies:
- declaring a child (`mod x;`);
- re-exporting (`pub use`, any `pub` visibility, at a file's top level): the item is found in
  the file that defines it, not in the one that re-exports it, so a `mod.rs` or crate root that
  declares its children and re-exports their items depends on none of them (unless its own code
  uses one of those items);
- a file naming an item of its ancestors (its parent's file, the parent's parent's, up to the
  crate root): a child is a part of its parent's module, as an inline module is, and Rust's way of
  splitting one type's `impl` over several files (`impl super::State` in a child) rests on it.
  A parent naming its child's items is a dependency, as is every reference between siblings or
  cousins.
So a circle is one among files none of which is another's ancestor: two siblings that name each
other, or a chain through other folders. Break it by moving the items both sides need down into
a file of their own that both import.

A name that is not a module, a re-export or a glob's is taken to be defined in the module's own
file (items of inline modules, enum variants after their enum, macro output).

The top-level modules (the files and folders directly under `src/`, the roots left out) get the
same graph folded onto them: module A depends on module B when a file under A depends on a file
under B. ARCHITECTURE.md (Layering) orders them; no circle is allowed there either.

Test code is left out: `#[cfg(test)]` items (test modules, inline or in their own file,
test-only functions and imports), comments, doc comments and string literals. Macros are not
expanded.

Each circle found is printed as a chain of files (or the modules, with the line that makes each
link); the script exits 1 when it found one.
"""

import os
import re
import sys

# ---------------------------------------------------------------------------------------------
# The file graph, and the top-level modules' graph made of it
# ---------------------------------------------------------------------------------------------


def blank(s):
    """`s` as spaces, its newlines kept (so that line numbers stay true)."""
    return "".join(c if c == "\n" else " " for c in s)


def strip_source(text):
    """`text` with comments and string and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:i + 300])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + blank(text[i + 2:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('""' + blank(text[i + 2:j]) if j - i >= 2 else blank(text[i:j]))
            i = j
        elif c == "'":
            # a char literal ('a', '\n', '\u{..}'), or a lifetime ('a)
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:i + 12])
            if m:
                out.append(blank(m.group(0)))
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, i, open_, close):
    """The index after the `close` that matches the `open_` at `i` (the end of `text` if none)."""
    depth = 0
    while i < len(text):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def item_end(text, i):
    """The end of the item starting at `i`: after its first `;` at depth 0 or its `{...}` block."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "{":
            return matching(text, i, "{", "}")
        elif c == ";" and depth <= 0:
            return i + 1
        i += 1
    return i


CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
ATTR = re.compile(r"\s*#\[")


def strip_tests(text):
    """`text` (already stripped) with every `#[cfg(test)]` item blanked."""
    while True:
        m = CFG_TEST.search(text)
        if not m:
            return text
        i = m.end()
        # further attributes on the same item
        while (a := ATTR.match(text, i)):
            i = matching(text, a.end() - 1, "[", "]")
        end = item_end(text, i)
        text = text[:m.start()] + blank(text[m.start():end]) + text[end:]


def line_of(text, i):
    return text.count("\n", 0, i) + 1


def split_top(s):
    """`s` split at the commas that are not inside braces."""
    parts, depth, cur = [], 0, []
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def expand_use(tree, prefix=()):
    """A use tree's leaves: (segments, glob). `tree` has no whitespace (`parse_use_tree`)."""
    if tree.startswith("::"):
        tree = tree[2:]
    m = re.match(r"^((?:[\w$]+::)*)\{(.*)\}$", tree)
    if m:
        head = tuple(s for s in m.group(1).split("::") if s)
        out = []
        for part in split_top(m.group(2)):
            out += expand_use(part, prefix + head)
        return out
    segs = tuple(s for s in tree.split("::") if s)
    if segs and segs[-1] == "*":
        return [(prefix + segs[:-1], True)]
    return [(prefix + segs, False)]


def parse_use_tree(tree):
    """Like `expand_use`, keeping `as` aliases (the tree is given with its spaces)."""
    # `x as y` becomes `x@y`, so that removing the whitespace keeps the alias
    tree = re.sub(r"\s+as\s+(\w+)", r"@\1", tree.strip())
    leaves = []
    for segs, glob in expand_use(re.sub(r"\s+", "", tree)):
        alias = None
        if segs and "@" in segs[-1]:
            last, alias = segs[-1].split("@", 1)
            segs = segs[:-1] + (last,)
        if segs and segs[-1] == "self":
            segs = segs[:-1]
            if alias is None and segs:
                alias = segs[-1]
        leaves.append((segs, alias or (segs[-1] if segs else None), glob))
    return leaves


USE = re.compile(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);")
MOD_DECL = re.compile(r"\b(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
INLINE_MOD = re.compile(r"\b(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(\w+)\s*\{")
DEF = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|union)\s+(\w+)")
PATH = re.compile(r"(?<![\w:.$])(\$?[A-Za-z_]\w*)((?:\s*::\s*[A-Za-z_]\w*)+)")
WORD = re.compile(r"(?<![\w.$])(?<!::)([A-Za-z_]\w*)")
KEYWORDS = {"crate", "super", "self", "Self"}


class File:
    """One `.rs` file: its module path, its code (tests, comments and strings blanked), the
    children it declares, the names it defines, its `use` declarations and its re-exports."""

    def __init__(self, path, modpath, root):
        self.path = path
        self.modpath = modpath
        self.root = root
        raw = open(path, encoding="utf-8").read()
        self.text = strip_tests(strip_source(raw))
        self.lines = raw.splitlines()
        base = os.path.basename(path)
        if base in ("mod.rs", "lib.rs", "main.rs") or (modpath == () and base.endswith(".rs")):
            self.child_dir = os.path.dirname(path)
        else:
            self.child_dir = path[:-3]
        # inline modules: their spans, so that `super::` and `use` inside them resolve
        self.inline = []
        for m in INLINE_MOD.finditer(self.text):
            start = m.end() - 1
            self.inline.append((start, item_end(self.text, start)))
        self.children = {}
        for m in MOD_DECL.finditer(self.text):
            if self.depth(m.start()) == 0:
                self.children[m.group(1)] = m.start()
        self.defs = set()
        depth = 0
        last = 0
        for m in DEF.finditer(self.text):
            depth += self.text.count("{", last, m.start()) - self.text.count("}", last, m.start())
            last = m.start()
            if depth == 0:
                self.defs.add(m.group(1))
        for m in INLINE_MOD.finditer(self.text):
            self.defs.add(m.group(1))
        self.uses = []  # (public, segs, alias, glob, pos, depth)
        self.use_spans = [(m.start(), m.end()) for m in MOD_DECL.finditer(self.text)]
        top = []
        for m in USE.finditer(self.text):
            d = self.depth(m.start())
            at_top = d == 0 and self.brace_depth(m.start()) == 0
            for segs, alias, glob in parse_use_tree(m.group(2)):
                self.uses.append((bool(m.group(1)), segs, alias, glob, m.start(), d))
                if m.group(1) and at_top:
                    top.append(self.uses[-1])
            self.use_spans.append((m.start(), m.end()))
        # what this file's module re-exports (a `pub use` inside an inline module is that module's)
        self.reexports = {u[2]: u for u in top if not u[3] and u[2]}
        self.glob_reexports = [u for u in top if u[3]]

    def depth(self, pos):
        """How many inline modules enclose `pos`."""
        return sum(1 for s, e in self.inline if s < pos < e)

    def brace_depth(self, pos):
        return self.text.count("{", 0, pos) - self.text.count("}", 0, pos)

    def line(self, pos):
        n = line_of(self.text, pos)
        return n, self.lines[n - 1].strip() if n - 1 < len(self.lines) else ""

    def body(self):
        """The text outside `use` and `mod x;` declarations."""
        parts, last = [], 0
        for s, e in self.use_spans:
            parts.append(self.text[last:s])
            parts.append(" " * (e - s))
            last = e
        parts.append(self.text[last:])
        return "".join(parts)


class Crate:
    """The files reachable from one crate root, by module path, and how names resolve in them."""

    def __init__(self, root_file):
        self.root_file = root_file
        self.files = {}  # modpath -> File
        self._load(root_file, ())

    def _load(self, path, modpath):
        f = File(path, modpath, self)
        self.files[modpath] = f
        for name in f.children:
            for cand in (os.path.join(f.child_dir, name + ".rs"), os.path.join(f.child_dir, name, "mod.rs")):
                if os.path.exists(cand):
                    self._load(cand, modpath + (name,))
                    break

    # -- resolution -----------------------------------------------------------------------

    def resolve(self, f, segs, depth, aliases, seen=None):
        """What `segs`, written in file `f` at inline depth `depth`, names:
        ("file", File) for an item, ("mod", modpath) for a module, or None (outside the crate,
        or inside `f` itself)."""
        if not segs:
            return None
        first = segs[0]
        if first in ("crate", "$crate"):
            cur, i = (), 1
        elif first == "self":
            if depth:
                return None
            cur, i = f.modpath, 1
        elif first == "super":
            n = 0
            while n < len(segs) and segs[n] == "super":
                n += 1
            up = n - depth
            if up <= 0:
                return None
            if up > len(f.modpath):
                return None
            cur, i = f.modpath[: len(f.modpath) - up], n
        elif depth == 0 and first in f.children and f.modpath + (first,) in self.files:
            cur, i = f.modpath + (first,), 1
        elif first in aliases:
            cur, i = aliases[first], 1
        else:
            return None
        return self.walk(cur, segs[i:], seen or set())

    def walk(self, cur, segs, seen):
        i = 0
        while i < len(segs):
            s = segs[i]
            if s in KEYWORDS:
                if s == "super" and cur:
                    cur = cur[:-1]
                i += 1
                continue
            if cur + (s,) in self.files:
                cur = cur + (s,)
                i += 1
                continue
            target = self.item(cur, s, seen)
            if target is None:
                return ("file", self.files[cur])
            if target[0] == "mod":
                cur = target[1]
                i += 1
                continue
            return target
        return ("mod", cur)

    def item(self, modpath, name, seen):
        """Where the item `name` of module `modpath` is defined: ("file", File), ("mod", path)."""
        key = (modpath, name)
        if key in seen:
            return None
        seen = seen | {key}
        f = self.files[modpath]
        if name in f.reexports:
            _, segs, _, _, pos, depth = f.reexports[name]
            got = self.resolve(f, segs, depth, self.aliases(f), seen)
            return got
        if name in f.defs:
            return ("file", f)
        for _, segs, _, _, pos, depth in f.glob_reexports:
            src = self.resolve(f, segs, depth, self.aliases(f), seen)
            if src and src[0] == "mod":
                got = self.lookup(src[1], name, seen)
                if got:
                    return got
        return None

    def lookup(self, modpath, name, seen):
        """`name` in module `modpath` only when that module really has it (for globs)."""
        if modpath + (name,) in self.files:
            return ("mod", modpath + (name,))
        f = self.files[modpath]
        if name in f.reexports or name in f.defs:
            return self.item(modpath, name, seen)
        for _, segs, _, _, pos, depth in f.glob_reexports:
            src = self.resolve(f, segs, depth, self.aliases(f), seen)
            if src and src[0] == "mod" and (modpath, name) not in seen:
                got = self.lookup(src[1], name, seen | {(modpath, name)})
                if got:
                    return got
        return None

    def aliases(self, f):
        """Module names the file imported (`use crate::a::b;` makes `b::X` a path into b)."""
        cache = getattr(f, "_aliases", None)
        if cache is not None:
            return cache
        f._aliases = {}
        out = {}
        for public, segs, alias, glob, pos, depth in f.uses:
            if glob or not alias or depth:
                continue
            got = self.resolve(f, segs, depth, {}, None)
            if got and got[0] == "mod":
                out[alias] = got[1]
        f._aliases = out
        return out

    # -- edges ----------------------------------------------------------------------------

    def edges(self):
        """{File: {File: (line, text)}}: the first line of each file-to-file dependency."""
        out = {f: {} for f in self.files.values()}
        for f in self.files.values():
            aliases = self.aliases(f)
            body = f.body()

            def add(target, pos):
                if not target or target[0] != "file" or target[1] is f:
                    return
                # a child naming an item of its parent (or of the crate root) is part of it
                if f.modpath[: len(target[1].modpath)] == target[1].modpath:
                    return
                out[f].setdefault(target[1], f.line(pos))

            words = {}
            for m in WORD.finditer(body):
                words.setdefault(m.group(1), m.start())
            for public, segs, alias, glob, pos, depth in f.uses:
                if glob:
                    src = self.resolve(f, segs, depth, aliases)
                    if src and src[0] == "mod":
                        for w, wpos in words.items():
                            got = self.lookup(src[1], w, set())
                            add(got, pos)
                    continue
                got = self.resolve(f, segs, depth, aliases)
                if public:
                    if alias in words:
                        add(got, words[alias])
                else:
                    add(got, pos)
            for m in PATH.finditer(body):
                segs = (m.group(1),) + tuple(s.strip() for s in m.group(2).split("::") if s.strip())
                add(self.resolve(f, segs, f.depth(m.start()), aliases), m.start())
        return out


def crate_roots(src):
    roots = [os.path.join(src, r) for r in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, r))]
    bindir = os.path.join(src, "bin")
    if os.path.isdir(bindir):
        for entry in sorted(os.listdir(bindir)):
            p = os.path.join(bindir, entry)
            if entry.endswith(".rs"):
                roots.append(p)
            elif os.path.exists(os.path.join(p, "main.rs")):
                roots.append(os.path.join(p, "main.rs"))
    return roots


def shortest_cycle(edges, start, members):
    """The shortest path start -> ... -> start inside `members` (breadth first)."""
    prev = {}
    queue = [start]
    seen = {start}
    while queue:
        nxt = []
        for v in queue:
            for w in sorted(edges[v], key=str):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        queue = nxt
    return None


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

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
                out.append(sorted(comp, key=str))

    for v in sorted(edges, key=str):
        if v not in index:
            visit(v)
    return out


def report(src, out):
    """Prints each circle in `src`, modules' then files'; returns how many it found."""
    found = 0
    nfiles = 0
    for root in crate_roots(src):
        crate = Crate(root)
        nfiles += len(crate.files)
        edges = crate.edges()
        found += report_modules(src, root, edges, out)
        found += report_files(src, edges, out)
    if not found:
        out(f"{src}: no import circle among its top-level modules, nor among its {nfiles} files")
    return found


def report_modules(src, root, edges, out):
    """The file graph folded onto the top-level modules (a crate root is none of them)."""
    modules = {}
    for f in edges:
        if f.modpath:
            modules.setdefault(f.modpath[0], {})
    for f, targets in edges.items():
        for g, (n, text) in targets.items():
            if f.modpath and g.modpath and f.modpath[0] != g.modpath[0]:
                modules[f.modpath[0]].setdefault(g.modpath[0], f"{os.path.relpath(f.path)}:{n}: {text}")
    found = cycles(modules)
    for comp in found:
        out(f"{src}: top-level modules of {os.path.basename(root)} in a circle: {', '.join(comp)}")
        for a in comp:
            for b, why in sorted(modules[a].items()):
                if b in comp:
                    out(f"  {a} -> {b}  ({why})")
    return len(found)


def report_files(src, edges, out):
    found = 0
    for comp in cycles(edges):
        found += 1
        members = set(comp)
        out(f"{src}: files in a circle ({len(comp)}): {', '.join(os.path.relpath(f.path) for f in comp)}")
        shown = set()
        for f in comp:
            chain = shortest_cycle(edges, f, members)
            key = frozenset(chain)
            if not chain or key in shown:
                continue
            shown.add(key)
            out("  " + " -> ".join(os.path.relpath(g.path) for g in chain))
            for a, b in zip(chain, chain[1:]):
                n, text = edges[a][b]
                out(f"      {os.path.relpath(a.path)}:{n}: {text}")
    return found


def check(src, out=print):
    return report(src.rstrip("/"), out)


def self_test():
    """The fixtures: `good/src` has no circle; `bad/src` has the planted ones."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata", "layers")
    lines = []
    good = check(os.path.join(here, "good", "src"), lines.append)
    bad_lines = []
    bad = check(os.path.join(here, "bad", "src"), bad_lines.append)
    text = "\n".join(bad_lines)
    failures = []
    if good:
        failures.append("good/src: found a circle where there is none:\n" + "\n".join(lines))
    expected = [
        # a.rs -> b.rs -> a.rs through a path and a private `use`
        ("a.rs", "b.rs"),
        # two children through their parent's re-export and a `super::` path
        ("net/conn.rs", "net/wire.rs"),
        # three files through a glob import and a re-exporting facade
        ("ring/one.rs", "ring/two.rs", "ring/three.rs"),
    ]
    for files in expected:
        if not any(all(f in line for f in files) and "files in a circle" in line for line in bad_lines):
            failures.append(f"bad/src: the circle among {', '.join(files)} was not found")
    if "modules of lib.rs in a circle: a, b\n" not in text + "\n":
        failures.append("bad/src: the circle between the top-level modules a and b was not found")
    if any("facade" in line for line in bad_lines if "in a circle" in line):
        failures.append("bad/src: the re-exporting facade was reported in a circle")
    if failures:
        print("self-test FAILED:\n" + "\n".join(failures) + "\n--- bad/src output:\n" + text)
        return 1
    print(f"self-test passed: good/src clean, {bad} circles found in bad/src")
    return 0


def workspace_srcs():
    """`MEMBER/src` of every member of the workspace's Cargo.toml (run from the repository root)."""
    text = open("Cargo.toml", encoding="utf-8").read()
    m = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    if not m:
        sys.exit("Cargo.toml: no [workspace] members list")
    return [f"{name}/src" for name in re.findall(r'"([^"]+)"', m.group(1))]


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        sys.exit(self_test())
    if args == ["--workspace"]:
        args = workspace_srcs()
    failed = 0
    for src in args or ["coordinator/src"]:
        failed += check(src)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
