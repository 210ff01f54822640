#!/usr/bin/env bash
# Builds the Debian package `parley` with cargo-deb (pinned, installed once into ~/.cargo/bin)
# and checks it: its control data and file list (dpkg-deb), lintian (errors fail, warnings are
# printed), and the systemd units (systemd-analyze verify, against the unpacked package).
# Prints the path of the .deb as its last line. Run by .ci/run before scripts/package-smoke.sh;
# runs alone as well (as root where apt-get must install lintian or systemd).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0
if ! { command -v cargo-deb >/dev/null 2>&1 && cargo deb --version | grep -q "$CARGO_DEB_VERSION"; }; then
  echo "== installing cargo-deb $CARGO_DEB_VERSION"
  cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi
missing=()
command -v lintian >/dev/null 2>&1 || missing+=(lintian)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

echo "== release build of the packaged binaries"
cargo build --release --locked -p parley -p parley-agent -p parley-jobs -p parleyctl
echo "== cargo deb -p parley"
deb="$(cargo deb -p parley --no-build --strip | tail -n 1)"
[ -f "$deb" ] || { echo "cargo deb printed no package path (got: $deb)" >&2; exit 1; }
ls -l "$deb"

fail() { echo "package check failed: $*" >&2; exit 1; }

echo "== dpkg-deb --info"
info="$(dpkg-deb --info "$deb")"
echo "$info"
for field in "Package: parley" "Architecture: amd64" "Depends: .*libc6" \
  "Depends: .*iproute2" "Depends: .*adduser"; do
  grep -q "^ *$field" <<<"$info" || fail "no '$field' in the control data"
done
grep -q "^ *Architecture: $(dpkg --print-architecture)" <<<"$info" ||
  fail "not built for $(dpkg --print-architecture)"

echo "== dpkg-deb --contents"
contents="$(dpkg-deb --contents "$deb" | awk '{print $6}')"
echo "$contents"
for path in ./usr/bin/parley-coordinator ./usr/bin/parley-agent ./usr/bin/parley-launch \
  ./usr/bin/parley-jobs ./usr/bin/parleyctl \
  ./usr/share/man/man1/parley-coordinator.1.gz ./usr/share/man/man1/parley-agent.1.gz \
  ./usr/share/man/man1/parley-jobs.1.gz ./usr/share/man/man1/parleyctl.1.gz \
  ./etc/parley/coordinator.toml ./etc/parley/agent.toml ./etc/parley/jobs.toml \
  ./usr/lib/systemd/system/parley-coordinator.service \
  ./usr/lib/systemd/system/parley-agent.service ./usr/lib/systemd/system/parley-jobs.service \
  ./usr/share/doc/parley/copyright; do
  grep -qx -- "$path" <<<"$contents" || fail "$path is not in the package"
done
conffiles="$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)"
for conf in coordinator agent jobs; do
  grep -qx "/etc/parley/$conf.toml" <<<"$conffiles" || fail "/etc/parley/$conf.toml is not a conffile"
done

echo "== lintian (errors fail)"
# Overrides, each with its reason, are in packaging/lintian/parley (installed with the package).
lintian --fail-on error --info "$deb"

echo "== systemd-analyze verify"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
# The units name their binaries by their installed paths, which --root resolves in the unpacked
# package; the targets they refer to come from this machine's systemd. --man=no: `man` may be
# absent. An unknown key is only a warning to systemd-analyze: any output fails the check.
units=/usr/lib/systemd/system
mkdir -p "$root$units"
cp -an /usr/lib/systemd/system/. "$root$units/"
verify="$(systemd-analyze verify --man=no --root="$root" \
  "$units/parley-coordinator.service" "$units/parley-agent.service" \
  "$units/parley-jobs.service" 2>&1)" || fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify: $verify"
echo "package check passed: $(du -k "$deb" | cut -f1) KiB"
echo "$deb"
