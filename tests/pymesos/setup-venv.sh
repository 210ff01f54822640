#!/usr/bin/env bash
# Installs the unmodified pymesos 0.3.15 from PyPI into a virtualenv for the Mesos acceptance
# test (tests/tests/cluster/pymesos.rs), and prints the venv's python (export it as
# PARLEY_PYMESOS_PYTHON). Idempotent: an existing, working venv is kept.
#
# pymesos needs `http-parser` 0.9.0, whose C extension does not build on Python >= 3.11; the
# package's pure-Python parser (http_parser/pyparser.py) is what pymesos falls back to. So the
# sdist is downloaded and its `http_parser/` package copied into the venv without the
# extension sources (`parser.*`, `http_parser.[ch]`), as docs/src/internals/mesos-v1-api.md describes.
set -euo pipefail
venv="${1:-${PARLEY_VENV:-$HOME/.cache/parley/pymesos-venv}}"
py="$venv/bin/python"
if [ -x "$py" ] && "$py" -c 'import pymesos, http_parser.http' >/dev/null 2>&1; then
  echo "$py"
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2
  fi
fi
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
  echo "$venv exists and is not a virtualenv; remove it or set PARLEY_VENV elsewhere" >&2
  exit 1
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2
"$py" -m pip install -q --no-deps pymesos==0.3.15 six addict >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --no-deps --no-binary :all: http-parser==0.9.0 -d "$tmp" >&2
tar -xzf "$tmp"/http-parser-0.9.0.tar.gz -C "$tmp"
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$site/http_parser"
for f in "$tmp"/http-parser-0.9.0/http_parser/*.py; do cp "$f" "$site/http_parser/"; done
"$py" -c 'import pymesos, http_parser.http; from http_parser.http import HttpParser' >&2
echo "$py"
