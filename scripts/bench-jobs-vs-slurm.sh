#!/usr/bin/env bash
# Times N tasks of /bin/true (default 2,000) on one machine, two ways, and prints both and the
# ratio:
#
#   - Slurm: `sbatch --wait --array=1-N --wrap /bin/true` on a single-node Slurm (Debian's
#     slurm-wlm: slurmctld + slurmd + munge, a minimal slurm.conf in a temporary directory);
#   - Parley: `parleyctl run ARRAY --wait` on a single-node `coordinator --dev` cluster with one
#     real agent and the jobs service.
#
# Both get the machine's cores as their slots and give each task one cpu, so both run the
# same number of tasks at once (`SLOTS`, default `nproc`). Run as root (Slurm's daemons and
# apt-get need it), from a checkout with the release binaries built:
#
#   cargo build --release -p parley -p parleyctl
#   scripts/bench-jobs-vs-slurm.sh
#
# Environment: N (tasks), SLOTS, BIN (where `coordinator` and `parleyctl` are; default
# $CARGO_TARGET_DIR/release or target/release), KEEP=1 to keep the temporary directory,
# ONLY=slurm or ONLY=parley to time one side, SLURM_SCHED for slurm.conf's SchedulerParameters.
#
# Slurm's defaults delay batch scheduling by up to 3 s (`batch_sched_delay`), which makes an
# array of tiny tasks crawl; by default this script sets it to 0 (and leaves the rest as
# shipped), the usual first step of Slurm's high-throughput guide. The clock stops when squeue
# lists none of the array's tasks (polled every 0.1 s: `sbatch --wait` polls ever more
# slowly, up to many seconds, which would add to Slurm's time).
set -euo pipefail

N=${N:-2000}
SLOTS=${SLOTS:-$(nproc)}
SLURM_SCHED=${SLURM_SCHED:-batch_sched_delay=0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
WORK=$(mktemp -d /tmp/bench-jobs-vs-slurm.XXXXXX)
PIDS=()

say() { printf '[bench-jobs-vs-slurm] %s\n' "$*" >&2; }

cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [ "${KEEP:-0}" = 1 ]; then
        say "kept $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
    local limit=$1
    shift
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "timed out after ${limit}s waiting for: $*"
            return 1
        fi
        sleep 0.2
    done
}

now() { date +%s.%N; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

ONLY=${ONLY:-both}
slurm_s=
parley_s=

for bin in coordinator parleyctl; do
    if [ "$ONLY" != slurm ] && [ ! -x "$BIN/$bin" ]; then
        say "$BIN/$bin is missing: cargo build --release -p parley -p parleyctl (or set BIN)"
        exit 1
    fi
done

# ---- Slurm ----------------------------------------------------------------------------------

time_slurm() {
if ! command -v sbatch >/dev/null || ! command -v slurmctld >/dev/null \
    || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge
fi

# munge: Slurm's authentication. A running munged is reused; otherwise one is started on a
# socket of our own, with the package's key (or a fresh one).
MUNGE_SOCKET=/run/munge/munge.socket.2
if ! munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; then
    MUNGE_SOCKET=$WORK/munge.socket
    KEY=/etc/munge/munge.key
    if [ ! -s "$KEY" ]; then
        KEY=$WORK/munge.key
        dd if=/dev/urandom of="$KEY" bs=1024 count=1 status=none
        chmod 400 "$KEY"
    fi
    munged --force --foreground --socket="$MUNGE_SOCKET" --key-file="$KEY" \
        --pid-file="$WORK/munged.pid" --log-file="$WORK/munged.log" \
        --seed-file="$WORK/munged.seed" >/dev/null 2>&1 &
    PIDS+=($!)
    wait_for 10 sh -c "munge -n -S '$MUNGE_SOCKET' | unmunge -S '$MUNGE_SOCKET'"
fi

HOST=$(hostname -s)
MEM_MB=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
SLURM_DIR=$WORK/slurm
mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool"
export SLURM_CONF=$SLURM_DIR/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=bench
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CryptoType=crypto/munge
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=$SLURM_SCHED
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MaxArraySize=$((N + 1))
MaxJobCount=$((N + 10000))
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$SLOTS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=bench Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

say "starting slurmctld and slurmd ($SLOTS cpus)"
slurmctld -D -i -f "$SLURM_CONF" >"$SLURM_DIR/slurmctld.out" 2>&1 &
PIDS+=($!)
wait_for 30 scontrol ping
slurmd -D -N "$HOST" -f "$SLURM_CONF" >"$SLURM_DIR/slurmd.out" 2>&1 &
PIDS+=($!)
if ! wait_for 60 sh -c "sinfo -h -N -o %T | grep -qx idle"; then
    say "Slurm's node did not come up; see $SLURM_DIR/*.log (KEEP=1 keeps them)"
    sinfo -N -l >&2 || true
    tail -n 20 "$SLURM_DIR/slurmctld.log" "$SLURM_DIR/slurmd.log" >&2 || true
    exit 1
fi

say "Slurm: sbatch --array=1-$N --wrap /bin/true (SchedulerParameters=$SLURM_SCHED)"
start=$(now)
job=$(sbatch --parsable --array="1-$N" --cpus-per-task=1 --output=/dev/null --wrap /bin/true)
while [ -n "$(squeue -h -r -j "$job" -o %i 2>/dev/null | head -n 1)" ]; do
    sleep 0.1
done
slurm_s=$(echo "$(now) - $start" | bc -l)
failed=$(grep -c "_job_complete: JobId=${job}_.* WEXITSTATUS [1-9]" "$SLURM_DIR/slurmctld.log" || true)
if [ "$failed" != 0 ]; then
    say "Slurm: $failed tasks exited non-zero"
    exit 1
fi
say "Slurm: $slurm_s s"
}

# ---- Parley ---------------------------------------------------------------------------------

time_parley() {
PORT=$(free_port)
JOBS_PORT=$(free_port)
say "starting coordinator --dev (one agent) and the jobs service"
"$BIN/coordinator" --dev --dev-agents 1 --listen "127.0.0.1:$PORT" \
    --dev-jobs-port "$JOBS_PORT" --data-dir "$WORK/parley" >"$WORK/parley.log" 2>&1 &
PIDS+=($!)
export PARLEY_JOBS_URL=http://127.0.0.1:$JOBS_PORT
wait_for 60 "$BIN/parleyctl" jobs
# The one agent is registered and offered before the clock starts.
wait_for 60 sh -c "curl -fsS http://127.0.0.1:$PORT/api/v1/agents | grep -q '\"active\"'"

cat >"$WORK/array.toml" <<EOF
name = "true-array"
argv = ["/bin/true"]
count = $N

[resources]
cpus = 1
mem = 16
EOF

say "Parley: parleyctl run ($N x /bin/true) --wait"
start=$(now)
"$BIN/parleyctl" run "$WORK/array.toml" --wait >"$WORK/parleyctl.out"
parley_s=$(echo "$(now) - $start" | bc -l)
say "Parley: $parley_s s"
}

[ "$ONLY" = parley ] || time_slurm
[ "$ONLY" = slurm ] || time_parley

cpus_model=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
printf '\n%s tasks of /bin/true, %s slots, one node (%s x %s, %s)\n\n' \
    "$N" "$SLOTS" "$(nproc)" "$cpus_model" "$(date -u +%Y-%m-%d)"
printf '| scheduler | command | seconds | tasks/s |\n|---|---|---|---|\n'
if [ -n "$slurm_s" ]; then
    printf '| Slurm %s (`%s`) | `sbatch --array=1-%s --wrap /bin/true` | %.2f | %.1f |\n' \
        "$(sbatch --version | awk '{ print $2 }')" "$SLURM_SCHED" "$N" "$slurm_s" \
        "$(echo "$N / $slurm_s" | bc -l)"
fi
if [ -n "$parley_s" ]; then
    printf '| Parley | `parleyctl run array.toml --wait` | %.2f | %.1f |\n' \
        "$parley_s" "$(echo "$N / $parley_s" | bc -l)"
fi
if [ -n "$slurm_s" ] && [ -n "$parley_s" ]; then
    printf '\nParley took %.3g times less time than Slurm (%.2f s against %.2f s).\n' \
        "$(echo "$slurm_s / $parley_s" | bc -l)" "$parley_s" "$slurm_s"
fi
