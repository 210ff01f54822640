#!/usr/bin/env bash
# One framework (or a few) with a big queue on a big simulated cluster, as a new user would try
# it: a coordinator, `agent --simulate AGENTS --resources cpus=24,mem=65536`, and NFW `hello`
# frameworks sharing TASKS long tasks (`--resources cpus=0.1,mem=32 --duration-s 86400`).
# Prints the running count once a second, then the fill rate (tasks/s from the first running
# task to the last), the offer counters, the share of offers rescinded, the stream
# overflows and the requests refused for their size, each against its target (>= 5,000
# tasks/s, <= 1 % rescinded, no overflow, no 413).
#
#   cargo build --release -p parley -p parley-agent -p examples --bin coordinator --bin agent --bin hello
#   scripts/bench-one-big-framework.sh            # 1 framework
#   NFW=10 scripts/bench-one-big-framework.sh     # 10 frameworks sharing the queue
#
# Environment: BIN (where the three binaries are; default $CARGO_TARGET_DIR/release or
# target/release), AGENTS (10000), TASKS (100000), NFW (1), LIMIT (seconds to wait for the
# fill, 300), KEEP=1 to keep the temporary directory with the logs.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
AGENTS=${AGENTS:-10000}
TASKS=${TASKS:-100000}
NFW=${NFW:-1}
LIMIT=${LIMIT:-300}
WORK=$(mktemp -d /tmp/bench-one-big-framework.XXXXXX)
PIDS=()

say() { printf '[bench-one-big-framework] %s\n' "$*" >&2; }

cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then say "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

for b in coordinator agent hello; do
    [ -x "$BIN/$b" ] || { say "no $BIN/$b: build it first (see the top of this script)"; exit 2; }
done

metric_sum() { # NAME-REGEX: the sum of the matching series in $WORK/metrics
    awk -v re="$1" '$0 ~ re {s += $2} END {printf "%d\n", s + 0}' "$WORK/metrics"
}
scrape() { curl -sf "$URL/metrics" > "$WORK/metrics" || : > "$WORK/metrics"; }

"$BIN/coordinator" --listen 127.0.0.1:0 --data-dir "$WORK/data" > "$WORK/coordinator.log" 2>&1 &
PIDS+=($!)
URL=
for _ in $(seq 1 200); do
    ADDR=$(grep 'coordinator listening' "$WORK/coordinator.log" | grep -o '127\.0\.0\.1:[0-9]*' | head -1 || true)
    URL=${ADDR:+http://$ADDR}
    [ -n "$URL" ] && curl -sf "$URL/health" > /dev/null && break
    URL=
    sleep 0.1
done
[ -n "$URL" ] || { say "the coordinator did not come up: $WORK/coordinator.log"; KEEP=1; exit 1; }

"$BIN/agent" --coordinator "$URL" --simulate "$AGENTS" --resources cpus=24,mem=65536 \
    --work-dir "$WORK/agent" --listen 127.0.0.1:0 > "$WORK/agent.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 1200); do
    scrape
    [ "$(metric_sum '^parley_agents\\{.*state="active"')" -ge "$AGENTS" ] && break
    sleep 0.25
done
say "$(metric_sum '^parley_agents\{.*state="active"') agents active"

PER=$((TASKS / NFW))
for f in $(seq 1 "$NFW"); do
    "$BIN/hello" --coordinator "$URL" --tasks "$PER" --resources cpus=0.1,mem=32 \
        --duration-s 86400 > "$WORK/hello$f.log" 2>&1 &
    PIDS+=($!)
done
START=$(date +%s.%N)
FIRST=
LAST=
for _ in $(seq 1 $((LIMIT * 4))); do
    sleep 0.25
    scrape
    running=$(metric_sum '^parley_tasks\{.*state="running"')
    now=$(date +%s.%N)
    [ -z "$FIRST" ] && [ "$running" -gt 0 ] && FIRST=$now
    printf 't=%6.2f s running=%d\n' "$(echo "$now - $START" | bc)" "$running"
    if [ "$running" -ge $((PER * NFW)) ]; then LAST=$now; break; fi
done
[ -n "$LAST" ] || { say "not every task ran within ${LIMIT} s"; KEEP=1; exit 1; }

created=$(metric_sum '^parley_offers_created_total')
accepted=$(metric_sum '^parley_offers_accepted_total')
declined=$(metric_sum '^parley_offers_declined_total')
rescinded=$(metric_sum '^parley_offers_rescinded_total')
overflowed=$(metric_sum '^parley_streams_overflowed_total')
too_large=$(metric_sum '^parley_http_requests_too_large_total')
logged_413=$(cat "$WORK"/hello*.log | grep -c -e 'body_too_large' -e 'too large' || true)
rate=$(echo "$((PER * NFW)) / ($LAST - $FIRST)" | bc)
pct=$(echo "scale=2; 100 * $rescinded / ($created + ($created == 0))" | bc)
verdict() { if [ "$1" = 1 ]; then echo met; else echo "NOT met"; fi; }
echo
echo "| $AGENTS simulated agents, $NFW framework(s), $((PER * NFW)) tasks | value | target |"
echo "|---|---|---|"
echo "| fill rate, first running task to last | $rate tasks/s | >= 5,000: $(verdict "$([ "$rate" -ge 5000 ] && echo 1)") |"
echo "| offers created / accepted / declined / rescinded | $created / $accepted / $declined / $rescinded | |"
echo "| offers rescinded | $pct % | <= 1 %: $(verdict "$(echo "$pct <= 1" | bc)") |"
echo "| stream overflows | $overflowed | 0: $(verdict "$([ "$overflowed" -eq 0 ] && echo 1)") |"
echo "| requests refused for their size (413), and framework log lines naming one | $too_large, $logged_413 | 0: $(verdict "$([ "$too_large" -eq 0 ] && [ "$logged_413" -eq 0 ] && echo 1)") |"
echo "| load average at the end | $(cut -d' ' -f1-3 /proc/loadavg) | |"
