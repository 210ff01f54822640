#!/usr/bin/env bash
# Fresh-machine smoke test of the Debian package: installs it with apt-get, edits a few lines of
# /etc/parley, starts the coordinator, the agent and the jobs service as their units say
# (systemctl where systemd is PID 1; otherwise each unit's ExecStart, as its User, with its
# StateDirectory made, parsed from the installed unit files), runs a job whose task checks that
# it is isolated (its own cgroup), checks that it finished, stops everything and purges the
# package. Needs root; works in a container without systemd.
#
#   scripts/package-smoke.sh [target/debian/parley_VERSION_ARCH.deb]
set -euo pipefail
cd "$(dirname "$0")/.."

deb="${1:-$(ls -t "${CARGO_TARGET_DIR:-target}"/debian/parley_*.deb 2>/dev/null | head -n 1)}"
[ -f "$deb" ] || { echo "no package: build it with scripts/package-check.sh" >&2; exit 1; }
deb="$(realpath "$deb")"
[ "$(id -u)" = 0 ] || { echo "package-smoke.sh must run as root" >&2; exit 1; }
if dpkg-query -W -f='${Status}' parley 2>/dev/null | grep -q "ok installed"; then
  echo "parley is installed already: this test installs and purges it; remove it first" >&2
  exit 1
fi

log="$(mktemp -d)"
pids=()
systemd=false
[ -d /run/systemd/system ] && systemd=true

# Stops what this test started: SIGTERM to each process group, SIGKILL after 5 s.
stop_all() {
  if $systemd; then
    systemctl stop parley-jobs parley-agent parley-coordinator 2>/dev/null || true
  fi
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  pids=()
}

cleanup() {
  local rc=$?
  stop_all
  if [ "$rc" != 0 ]; then
    for f in "$log"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -n 30 "$f"; }; done
    echo "package smoke test FAILED" >&2
  fi
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq parley >/dev/null 2>&1 || true
  rm -rf "$log"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
coordinator_port="$(free_port)"
agent_port="$(free_port)"
jobs_port="$(free_port)"
coordinator="http://127.0.0.1:$coordinator_port"

echo "== apt-get install $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb"
for path in /usr/bin/parley-coordinator /usr/bin/parley-agent /usr/bin/parley-launch \
  /usr/bin/parley-jobs /usr/bin/parleyctl /etc/parley/agent.toml; do
  [ -e "$path" ] || { echo "$path missing after install" >&2; exit 1; }
done
getent passwd parley >/dev/null && getent passwd parley-task >/dev/null

echo "== editing /etc/parley"
# Each edit uncomments a setting's line (so the settings file's lines are checked to be
# usable as they are) and gives it this test's value.
set_key() {
  local file="/etc/parley/$1.toml" key="$2" value="$3"
  grep -q "^#$key = " "$file" || { echo "no commented $key in $file" >&2; exit 1; }
  sed -i "s|^#$key = .*|$key = $value|" "$file"
}
set_key coordinator listen "\"127.0.0.1:$coordinator_port\""
set_key agent coordinator "\"$coordinator\""
set_key agent resources "\"cpus=1,mem=256,disk=1024\""
set_key agent listen "\"127.0.0.1:$agent_port\""
set_key jobs coordinator "\"$coordinator\""
set_key jobs listen "\"127.0.0.1:$jobs_port\""

# Starts a unit: with systemctl under systemd, else as its unit file says (ExecStart as User,
# Group, with its StateDirectory made and owned by that user), in a process group of its own.
start_unit() {
  local name="$1" unit="/usr/lib/systemd/system/$1.service"
  if $systemd; then
    systemctl start "$name"
    return
  fi
  local exec user group state
  exec="$(sed -n 's/^ExecStart=//p' "$unit")"
  user="$(sed -n 's/^User=//p' "$unit")"
  group="$(sed -n 's/^Group=//p' "$unit")"
  state="$(sed -n 's/^StateDirectory=//p' "$unit")"
  [ -n "$exec" ] || { echo "no ExecStart in $unit" >&2; exit 1; }
  user="${user:-root}"
  group="${group:-$user}"
  if [ -n "$state" ]; then
    mkdir -p "/var/lib/$state"
    chown "$user:$group" "/var/lib/$state"
  fi
  local as=()
  if [ "$user" != root ]; then
    as=(setpriv "--reuid=$user" "--regid=$group" --init-groups)
  fi
  # shellcheck disable=SC2086 # ExecStart is a command line of plain words
  setsid "${as[@]}" $exec >"$log/$name.log" 2>&1 &
  pids+=("$!")
  echo "started $name (pid $!): ${as[*]} $exec"
}

# Waits up to 60 s for a command to succeed.
wait_for() {
  local what="$1"
  shift
  for _ in $(seq 600); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for $what" >&2
  return 1
}

export PARLEY_COORDINATOR="$coordinator" PARLEY_JOBS_URL="http://127.0.0.1:$jobs_port"
echo "== starting the coordinator, the agent and the jobs service"
start_unit parley-coordinator
wait_for "the coordinator" parleyctl agents
start_unit parley-agent
agent_isolated() { parleyctl --json agents | grep -q '"isolation":"cgroups-v[12]"'; }
wait_for "an isolated agent" agent_isolated
parleyctl agents
start_unit parley-jobs
wait_for "the jobs service" parleyctl jobs

echo "== a job, its task isolated"
cat >"$log/smoke.toml" <<'SPEC'
name = "smoke"
# In a cgroup of its own (parley/AGENT/FRAMEWORK/TASK), as the task user.
command = "grep -q ':/parley/' /proc/self/cgroup && test \"$(id -un)\" = parley-task && echo isolated"
count = 1
timeout_s = 60
[resources]
cpus = 0.1
mem = 64
SPEC
# --wait exits 0 only when the job succeeded.
timeout 120 parleyctl run "$log/smoke.toml" --wait
parleyctl job status smoke
parleyctl job logs smoke | tee "$log/task.txt"
grep -qx "isolated" "$log/task.txt" || { echo "the task's output is not 'isolated'" >&2; exit 1; }
[ -n "$(ls -A /var/lib/parley/agent/sandboxes)" ] || { echo "no sandbox in /var/lib/parley/agent" >&2; exit 1; }
[ -s /var/lib/parley/coordinator/registry.redb ] || { echo "no registry in /var/lib/parley/coordinator" >&2; exit 1; }

echo "== stopping and purging"
stop_all
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq parley
for gone in /usr/bin/parley-agent /etc/parley /var/lib/parley; do
  [ ! -e "$gone" ] || { echo "$gone is left after the purge" >&2; exit 1; }
done
! getent passwd parley >/dev/null || { echo "the user parley is left after the purge" >&2; exit 1; }
# Tasks run in cgroups of their own: none may be left.
! find /sys/fs/cgroup -path '*/parley/*' -name 'job-smoke-*' 2>/dev/null | grep -q . ||
  { echo "a task cgroup is left" >&2; exit 1; }
echo "package smoke test passed"
