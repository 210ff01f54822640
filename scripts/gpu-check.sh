#!/usr/bin/env bash
# gpu-check.sh: Parley on a real GPU machine, end to end, from prebuilt release binaries (no
# Rust toolchain and no network needed there).
#
# Starts a coordinator and one real agent (--gpus auto) on loopback, prints the agent's
# /api/v1/agents entry (gpus, and per device the model and memory), runs the gpu-jobs example
# with two 1-GPU tasks (on a one-GPU machine the second waits for the first), prints what each
# task saw and the agent's GPU figures for it (gpu-jobs' "usage" lines), and the task statuses,
# then stops everything. On failure it prints the end of the coordinator's and agent's logs.
#
# Build the binaries where Rust is:   cargo build --release -p parley -p parley-agent -p examples
# and carry target/release/{coordinator,agent,gpu-jobs} over. Settings (environment):
#   PARLEY_BIN        directory of the binaries (default: target/release next to this script)
#   COORDINATOR_BIN   AGENT_BIN   GPU_JOBS_BIN   each binary, overriding PARLEY_BIN
#   PARLEY_CHECK_PORT the coordinator's port (default 15050; the agent uses the next one)
#   GPU_CHECK_TASKS   how many 1-GPU tasks (default 2)
#   GPU_CHECK_WORK    where logs and the agent's work dir go (default: a fresh temp dir)
#   GPU_CHECK_COMMAND each task's command instead of gpu-jobs' default (which prints the task's
#                     CUDA_VISIBLE_DEVICES and `nvidia-smi -L`, and uses no GPU memory): e.g. a
#                     CUDA program, to see a nonzero gpu_memory_bytes
#   GPU_CHECK_TIMEOUT seconds gpu-jobs may take in all (default 300)
#
# Tested without a GPU by tests/tests/cluster/gpu_nvml.rs, over a stub libnvidia-ml.so.1 and a fake
# nvidia-smi (see tests/nvml-stub/nvml_stub.c).
# Exits 0 when every task finished; 2 when there is no GPU here ("no GPU found"); 1 otherwise.

set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${PARLEY_BIN:-$here/../target/release}"
coordinator="${COORDINATOR_BIN:-$bin/coordinator}"
agent="${AGENT_BIN:-$bin/agent}"
gpu_jobs="${GPU_JOBS_BIN:-$bin/gpu-jobs}"
port="${PARLEY_CHECK_PORT:-15050}"
agent_port=$((port + 1))
tasks="${GPU_CHECK_TASKS:-2}"
jobs_timeout="${GPU_CHECK_TIMEOUT:-300}"
url="http://127.0.0.1:$port"

say() { printf '== %s\n' "$*"; }
work=""
# The end of each log, on stderr (after a failure).
log_tails() {
    local log
    [ -n "$work" ] || return 0
    for log in "$work/coordinator.log" "$work/agent.log"; do
        if [ -s "$log" ]; then
            printf -- '-- last lines of %s:\n' "$log" >&2
            tail -n 20 "$log" >&2
        fi
    done
}
die() {
    printf 'gpu-check: %s\n' "$*" >&2
    log_tails
    exit 1
}

# --- Is there a GPU at all? (before starting anything) ---
gpu_found=no
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    gpu_found=yes
elif compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
    gpu_found=yes
fi
if [ "$gpu_found" != yes ]; then
    printf 'gpu-check: no GPU found (nvidia-smi -L lists none and there is no /dev/nvidiaN):\n' >&2
    printf '  run this on a machine with an NVIDIA GPU and its driver installed\n' >&2
    exit 2
fi

case "$jobs_timeout" in
    '' | *[!0-9]*) die "GPU_CHECK_TIMEOUT must be a whole number of seconds, got '$jobs_timeout'" ;;
esac
case "$port" in
    '' | *[!0-9]*) die "PARLEY_CHECK_PORT must be a port number, got '$port'" ;;
esac
for b in "$coordinator" "$agent" "$gpu_jobs"; do
    [ -x "$b" ] || die "missing binary $b (cargo build --release -p parley -p parley-agent -p examples; or set PARLEY_BIN)"
done
command -v curl >/dev/null 2>&1 || die "curl is needed to read the coordinator's API"

work="${GPU_CHECK_WORK:-$(mktemp -d -t parley-gpu-check.XXXXXX)}"
mkdir -p "$work"
# The processes started here (empty-array expansions are spelled out for bash < 4.4).
pids=()
cleanup() {
    local pid
    for pid in ${pids[@]+"${pids[@]}"}; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in ${pids[@]+"${pids[@]}"}; do
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

# Polls "$@" (a command) every 0.2 s until it succeeds or $deadline seconds passed; stops at
# once when a process started here has exited (a port in use, a bad --gpus, no driver).
wait_until() {
    local what="$1" deadline="$2"
    shift 2
    local end=$((SECONDS + deadline)) pid
    until "$@" >/dev/null 2>&1; do
        for pid in ${pids[@]+"${pids[@]}"}; do
            kill -0 "$pid" 2>/dev/null || die "a process exited while waiting for $what (logs in $work)"
        done
        [ "$SECONDS" -lt "$end" ] || die "timed out after ${deadline}s waiting for $what (logs in $work)"
        sleep 0.2
    done
}

pretty() {
    if command -v python3 >/dev/null 2>&1; then python3 -m json.tool; else cat; fi
}

say "$(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
nvidia-smi -L 2>/dev/null || true

say "coordinator on $url (log $work/coordinator.log)"
# NO_COLOR: plain logs, for reading them in a file.
NO_COLOR=1 "$coordinator" --listen "127.0.0.1:$port" --in-memory --allocation-interval 0.2 \
    >"$work/coordinator.log" 2>&1 &
pids+=($!)
wait_until "the coordinator" 30 curl -sf "$url/health"

root_flags=()
if [ "$(id -u)" = 0 ]; then
    root_flags=(--allow-root-tasks)
fi
say "agent with --gpus auto (log $work/agent.log)"
NO_COLOR=1 "$agent" --coordinator "$url" --listen "127.0.0.1:$agent_port" --work-dir "$work/agent" \
    --gpus auto ${root_flags[@]+"${root_flags[@]}"} >"$work/agent.log" 2>&1 &
pids+=($!)
agent_active() { curl -sf "$url/api/v1/agents" | grep -q '"state":"active"'; }
# NVML's start-up can take seconds per GPU on a machine without persistence mode.
wait_until "the agent to register" 90 agent_active

say "the agent as the coordinator lists it (GET /api/v1/agents)"
agents="$(curl -sf "$url/api/v1/agents")"
printf '%s\n' "$agents" | pretty
printf '%s' "$agents" | grep -q '"gpus"' ||
    die "the agent advertises no gpus (its log says why: $work/agent.log)"

say "gpu-jobs: $tasks tasks of gpus=1 each (at most ${jobs_timeout}s)"
jobs_args=(--coordinator "$url" --tasks "$tasks" --hold-s 2 --no-unregister)
if [ -n "${GPU_CHECK_COMMAND:-}" ]; then
    jobs_args+=(--command "$GPU_CHECK_COMMAND")
fi
limit=()
if command -v timeout >/dev/null 2>&1; then
    limit=(timeout "$jobs_timeout")
fi
status=0
${limit[@]+"${limit[@]}"} "$gpu_jobs" "${jobs_args[@]}" || status=$?

say "the tasks as the coordinator lists them (GET /api/v1/tasks: state and devices)"
curl -sf "$url/api/v1/tasks" | pretty

if [ "$status" = 0 ]; then
    say "done: every task finished (logs in $work)"
else
    [ "$status" != 124 ] || say "gpu-jobs did not finish within ${jobs_timeout}s"
    say "gpu-jobs exited $status (logs in $work)"
    log_tails
    status=1
fi
exit "$status"
