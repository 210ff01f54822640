#!/usr/bin/env python3
"""A small Mesos scheduler written against pymesos 0.3.15 as-is, run against Parley by
tests/tests/cluster/pymesos.rs (the Mesos API acceptance test).

    scheduler.py MASTER REPORT GO_FILE

MASTER is host:port of the coordinator. The scheduler launches shell tasks that finish
(one reads an environment variable), one that fails, an argv task (shell: false) and a
sleeper; kills the sleeper once it runs; declines every further offer with a filter;
reconciles explicitly (a finished task and an unknown one) and implicitly. A "stayer" task
keeps running. It writes REPORT (JSON) once all that is seen, then waits for GO_FILE to exist
(the Rust test checks Parley's REST views and drains the stayer's agent meanwhile: the inverse
offers that arrive are written to REPORT.inverse and accepted) and stops the driver, which
tears the framework down.
Exits 0 when everything was seen, 1 otherwise.
"""

import json
import os
import socket
import sys
import threading
import time

from pymesos import MesosSchedulerDriver, Scheduler

DEADLINE_S = 90
REFUSE_S = 600


def scalar(name, value):
    return {"name": name, "type": "SCALAR", "scalar": {"value": value}}


TASKS = {
    # task id: (command info, the terminal state expected)
    "hello-0": ({"value": "echo hello from pymesos", "shell": True}, "TASK_FINISHED"),
    "hello-1": ({"value": 'test "$GREETING" = hi', "shell": True,
                 "environment": {"variables": [{"name": "GREETING", "value": "hi"}]}},
                "TASK_FINISHED"),
    "argv-0": ({"value": "/bin/sh", "shell": False, "arguments": ["sh", "-c", "exit 0"]},
               "TASK_FINISHED"),
    "fails-0": ({"value": "exit 3", "shell": True}, "TASK_FAILED"),
    "sleeper": ({"value": "sleep 600", "shell": True}, "TASK_KILLED"),
}
NEED = {"cpus": 0.1, "mem": 16}
# Launched with the others; runs until the teardown (the drain's inverse offer is for its agent).
STAYER = ("stayer", {"value": "sleep 600", "shell": True})


class Test(Scheduler):
    def __init__(self):
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.framework_id = None
        self.to_launch = list(TASKS) + [STAYER[0]]
        self.states = {}
        self.kill_sent = False
        self.declined = 0
        self.reconcile_sent = False
        self.reconciled = {}
        self.implicit_reconcile_sent = False
        self.heartbeats = 0
        self.errors = []

    def registered(self, driver, framework_id, master_info):
        with self.lock:
            self.framework_id = framework_id["value"]

    def processHeartBeat(self, driver):
        with self.lock:
            self.heartbeats += 1

    def resourceOffers(self, driver, offers):
        for offer in offers:
            free = {r["name"]: r["scalar"]["value"] for r in offer["resources"]
                    if r.get("type") == "SCALAR"}
            tasks = []
            with self.lock:
                while self.to_launch and all(free.get(k, 0) >= v for k, v in NEED.items()):
                    task_id = self.to_launch.pop(0)
                    command = TASKS[task_id][0] if task_id in TASKS else STAYER[1]
                    tasks.append({
                        "task_id": {"value": task_id},
                        "agent_id": offer["agent_id"],
                        "name": task_id,
                        "command": command,
                        "resources": [scalar(k, v) for k, v in NEED.items()],
                    })
                    for k, v in NEED.items():
                        free[k] -= v
                if not tasks:
                    self.declined += 1
            if tasks:
                driver.launchTasks(offer["id"], tasks, {"refuse_seconds": 1})
            else:
                driver.declineOffer(offer["id"], {"refuse_seconds": REFUSE_S})

    def statusUpdate(self, driver, update):
        task_id = update["task_id"]["value"]
        state = update["state"]
        with self.lock:
            if update.get("reason") == "REASON_RECONCILIATION" and "uuid" not in update:
                self.reconciled.setdefault(task_id, []).append(state)
            else:
                self.states.setdefault(task_id, []).append(state)
            kill = (task_id == "sleeper" and state == "TASK_RUNNING" and not self.kill_sent)
            if kill:
                self.kill_sent = True
            finished = all(TASKS[t][1] in self.states.get(t, []) for t in TASKS)
            reconcile = finished and not self.reconcile_sent
            if reconcile:
                self.reconcile_sent = True
            done = ("hello-0" in self.reconciled and "no-such-task" in self.reconciled
                    and self.implicit_reconcile_sent)
        if kill:
            driver.killTask({"value": "sleeper"})
        if reconcile:
            driver.reconcileTasks([{"task_id": {"value": "hello-0"}},
                                   {"task_id": {"value": "no-such-task"}}])
            driver.reconcileTasks([])
            with self.lock:
                self.implicit_reconcile_sent = True
        if done:
            self.done.set()

    def inverseOffers(self, driver, offers):
        with self.lock:
            self.inverse = getattr(self, "inverse", []) + list(offers)
            inverse = list(self.inverse)
        with open(self.inverse_path + ".tmp", "w") as f:
            json.dump(inverse, f)
        os.rename(self.inverse_path + ".tmp", self.inverse_path)
        for offer in offers:
            driver.acceptInverseOffers(offer["id"])

    def error(self, driver, message):
        with self.lock:
            self.errors.append(message)


def main():
    master, report_path, go_file = sys.argv[1:4]
    sched = Test()
    sched.inverse_path = report_path + ".inverse"
    framework = {"user": "root", "name": "pymesos-acceptance", "hostname": socket.gethostname(),
                 "role": "*", "failover_timeout": 60}
    driver = MesosSchedulerDriver(sched, framework, master, use_addict=False)
    driver.start()
    seen = sched.done.wait(DEADLINE_S)
    with sched.lock:
        report = {
            "ok": seen,
            "framework_id": sched.framework_id,
            "states": sched.states,
            "reconciled": sched.reconciled,
            "declined": sched.declined,
            "heartbeats": sched.heartbeats,
            "errors": sched.errors,
            "version": driver.version,
        }
    with open(report_path + ".tmp", "w") as f:
        json.dump(report, f)
    os.rename(report_path + ".tmp", report_path)
    deadline = time.time() + DEADLINE_S
    while seen and not os.path.exists(go_file) and time.time() < deadline:
        time.sleep(0.05)
    driver.stop()
    driver.join()
    sys.exit(0 if seen else 1)


if __name__ == "__main__":
    main()
