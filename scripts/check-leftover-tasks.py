#!/usr/bin/env python3
"""Fails, listing them, when task processes that a Parley agent started are still running.

Usage: scripts/check-leftover-tasks.py [--since SECONDS] [--under DIR] [--wait SECONDS] [--kill]

Every process an agent starts for a task carries `PARLEY_TASK_ID` (and `PARLEY_SANDBOX`) in
its environment (agent/src/executor.rs builds the task's environment with them), and its
children inherit it. Run after the tests (`.ci/run` does): a process carrying it then was left
behind by a test, its harness or an agent, often with its sandbox already deleted.

  --since S   only processes started at least S seconds after boot (the first field of
              /proc/uptime, read before the tests), so that tasks running before the tests
              (an agent on this machine, or the Parley task CI itself runs in) are not counted
  --under DIR only processes whose PARLEY_SANDBOX lies under DIR: on a machine where others
              run tests too, run yours with TMPDIR=DIR (the test clusters' work dirs are
              temporary directories) and count only theirs
  --wait S    keep looking for up to S seconds (default 5) while some are left: a task killed
              just before the check may still be exiting
  --kill      SIGKILL the process groups of those found (after listing them), so a failed run
              leaves the machine clean; the check fails all the same

A process whose environment cannot be read (another user's, without root) is not seen. The
script's own process and its ancestors are never counted, nor, when the script itself runs in
a Parley task, the processes of that task (the same `PARLEY_SANDBOX`).
"""

import argparse
import os
import signal
import sys
import time

MARKER = b"PARLEY_TASK_ID="


def ancestors():
    """This process and its ancestors' pids."""
    pids = set()
    pid = os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        stat = read(f"/proc/{pid}/stat")
        if stat is None:
            break
        pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return pids


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def start_seconds(stat):
    """A process's start time in seconds after boot, from its /proc/PID/stat."""
    fields = stat[stat.rfind(b")") + 2 :].split()
    # Field 22 (starttime) is the 20th after the command's closing parenthesis.
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def leftovers(since, under, mine):
    """The task processes running now: (pid, pgid, environment, command line)."""
    own_sandbox = os.environb.get(b"PARLEY_SANDBOX")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        pid = int(entry)
        environ = read(f"/proc/{pid}/environ")
        stat = read(f"/proc/{pid}/stat")
        if not environ or stat is None or MARKER not in environ:
            continue
        env = dict(
            kv.split(b"=", 1) for kv in environ.split(b"\0") if b"=" in kv
        )
        if b"PARLEY_TASK_ID" not in env or start_seconds(stat) < since:
            continue
        sandbox = env.get(b"PARLEY_SANDBOX", b"")
        if own_sandbox is not None and sandbox == own_sandbox:
            continue
        if under is not None and not is_under(sandbox, under):
            continue
        pgid = int(stat[stat.rfind(b")") + 2 :].split()[2])
        cmdline = (read(f"/proc/{pid}/cmdline") or b"").replace(b"\0", b" ").strip()
        found.append((pid, pgid, env, cmdline.decode(errors="replace")))
    return found


def is_under(path, directory):
    """Whether `path` (bytes) lies under `directory` (bytes, absolute)."""
    return os.path.normpath(path).startswith(directory.rstrip(b"/") + b"/")


def describe(pid, env, cmdline):
    task = env.get(b"PARLEY_TASK_ID", b"").decode(errors="replace")
    sandbox = env.get(b"PARLEY_SANDBOX", b"").decode(errors="replace")
    gone = "" if sandbox and os.path.isdir(sandbox) else " (deleted)"
    return f"  pid {pid}: task {task}, sandbox {sandbox}{gone}: {cmdline or '?'}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--since", type=float, default=0.0)
    parser.add_argument("--under", type=os.fsencode)
    parser.add_argument("--wait", type=float, default=5.0)
    parser.add_argument("--kill", action="store_true")
    args = parser.parse_args()

    mine = ancestors()
    under = os.path.realpath(args.under) if args.under is not None else None
    deadline = time.monotonic() + args.wait
    while True:
        found = leftovers(args.since, under, mine)
        if not found or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if not found:
        print("no task process left behind")
        return 0
    print(f"{len(found)} task process(es) outlived the tests:", file=sys.stderr)
    for pid, _, env, cmdline in sorted(found):
        print(describe(pid, env, cmdline), file=sys.stderr)
    if args.kill:
        for pgid in sorted({pgid for _, pgid, _, _ in found}):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError as e:
                print(f"  cannot kill process group {pgid}: {e}", file=sys.stderr)
        print("killed their process groups", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
