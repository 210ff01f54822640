#!/usr/bin/env python3
"""Checks the book in docs/ and the Markdown files at the repository's root for broken links.

Fails (exit 1, one line per problem) when:
- a page under docs/src is not listed in docs/src/SUMMARY.md (mdBook would not render it);
- SUMMARY.md lists a page that does not exist;
- a relative link or image in docs/src/**/*.md, README.md, ARCHITECTURE.md or CHANGELOG.md names
  a file that does not exist, or an anchor (`page.md#section`, `#section`) that no heading of the
  target page makes;
- a link leaves the repository;
- README.md is longer than 250 lines, or its first code block is not the two commands a new user
  runs first (the `--dev` cluster and the tests).

Links inside code blocks and inline code are ignored; absolute URLs (http:, https:, mailto:) are
not fetched. Run from anywhere: `python3 scripts/check-doc-links.py`.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "docs", "src")
ROOT_PAGES = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INCLUDE = re.compile(r"\{\{#include\s+([^}:\s]+)[^}]*\}\}")


def strip_code(text):
    """The text without fenced code blocks and inline code, line count kept."""
    out, fence = [], None
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
            out.append("")
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            out.append("")
            continue
        out.append(re.sub(r"`[^`]*`", "``", line))
    return "\n".join(out)


def expand_includes(path, text):
    """mdBook's {{#include FILE}} (line ranges ignored: anchors are checked on the whole file)."""

    def include(match):
        target = os.path.normpath(os.path.join(os.path.dirname(path), match.group(1)))
        try:
            with open(target, encoding="utf-8") as f:
                return f.read()
        except OSError:
            return match.group(0)

    return INCLUDE.sub(include, text)


def anchor(title):
    """The id mdBook gives a heading: lower case, letters, digits, '-' and '_' kept, spaces to '-'."""
    title = re.sub(r"<[^>]*>", "", title)
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    out = []
    for ch in title.lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def raw_headings(path):
    """Ids from the headings with their inline code kept (backticks dropped), as mdBook makes them."""
    with open(path, encoding="utf-8") as f:
        text = expand_includes(path, f.read())
    ids, seen, fence = set(), {}, None
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        m = HEADING.match(line)
        if m:
            base = anchor(m.group(2).replace("`", ""))
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else f"{base}-{n}")
    return ids


def check_file(path, problems):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(path, ROOT)
    for lineno, line in enumerate(strip_code(text).split("\n"), 1):
        for m in LINK.finditer(line):
            target = m.group(1).strip("<>")
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, frag = target.partition("#")
            if file_part:
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            else:
                dest = path
            if not (dest == ROOT or dest.startswith(ROOT + os.sep)):
                problems.append(f"{rel}:{lineno}: {target}: leaves the repository")
                continue
            if not os.path.exists(dest):
                problems.append(f"{rel}:{lineno}: {target}: no such file")
                continue
            if frag and dest.endswith(".md") and frag not in raw_headings(dest):
                problems.append(f"{rel}:{lineno}: {target}: no heading makes #{frag}")


def summary_pages(problems):
    summary = os.path.join(SRC, "SUMMARY.md")
    pages = set()
    with open(summary, encoding="utf-8") as f:
        for lineno, line in enumerate(strip_code(f.read()).split("\n"), 1):
            for m in LINK.finditer(line):
                target = m.group(1)
                if not target:
                    continue
                dest = os.path.normpath(os.path.join(SRC, target))
                if not os.path.exists(dest):
                    problems.append(f"docs/src/SUMMARY.md:{lineno}: {target}: no such page")
                pages.add(dest)
    return pages


README_MAX_LINES = 250
README_COMMANDS = ["cargo run --release -p parley -- --dev", "cargo test --workspace"]


def check_readme(problems):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    lines = text.count("\n")
    if lines > README_MAX_LINES:
        problems.append(f"README.md: {lines} lines, more than {README_MAX_LINES}")
    block = re.search(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    commands = [
        l.strip() for l in (block.group(1) if block else "").split("\n")
        if l.strip() and not l.strip().startswith("#")
    ]
    if commands != README_COMMANDS:
        problems.append(f"README.md: the first code block should be exactly {README_COMMANDS}")


def main():
    problems = []
    check_readme(problems)
    listed = summary_pages(problems)
    pages = []
    for dirpath, _, files in os.walk(SRC):
        for name in sorted(files):
            if name.endswith(".md"):
                pages.append(os.path.join(dirpath, name))
    for page in sorted(pages):
        if os.path.basename(page) != "SUMMARY.md" and page not in listed:
            problems.append(
                f"{os.path.relpath(page, ROOT)}: not listed in docs/src/SUMMARY.md"
            )
        check_file(page, problems)
    for name in ROOT_PAGES:
        path = os.path.join(ROOT, name)
        if os.path.exists(path):
            check_file(path, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in the docs", file=sys.stderr)
        return 1
    print(f"docs: {len(pages)} pages, every link resolves and every page is in SUMMARY.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
