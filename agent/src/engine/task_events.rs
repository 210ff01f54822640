//! Task events: launches, starts, exits, kills, and the rebuild from a replayed journal.

use super::*;

impl Engine {
    /// A core rebuilt from a replayed journal. Each task not yet
    /// terminal is looked at with `probe` (the shell's view of its process): a live process is
    /// re-adopted ([`Command::Watch`]); one that ended is reported from its exit code (or `lost`
    /// without one) after its group is killed; a task that never started is `failed`.
    pub fn restore(
        config: EngineConfig,
        restored: Restored,
        mut probe: impl FnMut(Process, Option<&Path>) -> Probe,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Self {
        let Restored {
            agent_id,
            replay,
            journal_lines,
        } = restored;
        let mut core = Self::new(config, agent_id);
        core.journal_lines = journal_lines;
        core.contact.partition = replay
            .partition
            .iter()
            .filter_map(|(fw, s)| Some((*fw, std::time::Duration::try_from_secs_f64(*s).ok()?)))
            .collect();
        let nil = core.session.stamp();
        for t in replay.tasks {
            let latest = t.latest.unwrap_or_else(|| TaskStatus {
                task_id: t.spec.task_id.clone(),
                framework_id: t.framework_id,
                agent_id: nil,
                state: TaskState::Starting,
                message: None,
                exit_code: None,
                update_id: core.config.update_ids.next(),
                timestamp: now.wall,
                resources: Some(t.spec.resources.clone()),
                reason: None,
                usage: None,
                gpu_devices: None,
                healthy: None,
            });
            let stage = match t.process {
                Some(process) => Stage::Started(Some(process)),
                None => Stage::Accepted,
            };
            let key = (latest.framework_id, t.spec.task_id.clone());
            if let (false, Some(devices)) = (latest.state.is_terminal(), &latest.gpu_devices) {
                core.gpus.hold(&key, devices);
            }
            core.tasks.insert(t.spec, Some(t.sandbox), stage, latest);
            if t.fenced {
                if let Some(task) = core.tasks.get_mut(&key) {
                    task.fenced = true;
                    task.kill_requested = true;
                }
            }
        }
        core.updates.queue = replay.unacked;

        let open: Vec<(TaskKey, Option<Process>, Option<PathBuf>)> = core
            .tasks
            .in_order()
            .filter(|t| !t.latest.state.is_terminal())
            .map(|t| (t.key(), t.process(), t.sandbox.clone()))
            .collect();
        for (id, process, sandbox) in open {
            let Some(process) = process else {
                let message = "the agent restarted before the task's process started";
                core.record(
                    &id,
                    (TaskState::Failed, Some(message.into()), None),
                    now,
                    out,
                );
                continue;
            };
            match probe(process, sandbox.as_deref()) {
                Probe::Alive => {
                    out.push(Command::Watch(id.clone(), process));
                    // Fenced before the restart: it must not run.
                    if core.tasks.get(&id).is_some_and(|t| t.fenced) {
                        core.signal_kill(&id, Some(process), now, out);
                    }
                }
                Probe::Ended(code) => {
                    out.push(Command::Signal {
                        task: id.clone(),
                        process: Some(process),
                        signal: Signal::Kill,
                    });
                    let end = match code {
                        Some(code) => code_outcome(code),
                        None => (
                            TaskState::Lost,
                            Some("the process ended while the agent was down; its exit status is unknown".into()),
                            None,
                        ),
                    };
                    core.record(&id, end, now, out);
                }
            }
        }
        core
    }

    /// Refuses new launches from now on (shutdown).
    pub fn stop_accepting(&mut self) {
        self.accepting = Accepting::No;
    }

    /// Checks a launch without changing anything: shutting down, or a task id the framework
    /// already has here (another framework's task of the same id is no conflict).
    pub fn check_launch<'a>(
        &self,
        framework_id: FrameworkId,
        specs: impl IntoIterator<Item = &'a TaskSpec>,
    ) -> Result<(), LaunchError> {
        if self.accepting == Accepting::No {
            return Err(LaunchError::ShuttingDown);
        }
        let mut seen = HashSet::new();
        for s in specs {
            let key = (framework_id, s.task_id.clone());
            if self.tasks.contains(&key) || !seen.insert(&s.task_id) {
                return Err(LaunchError::Duplicate(s.task_id.clone()));
            }
        }
        Ok(())
    }

    /// Accepts tasks (all or none): each is `starting`, journaled, queued, and to be spawned.
    /// Their framework is not partition-aware (see [`Engine::launch_partitioned`]).
    pub fn launch(
        &mut self,
        framework_id: FrameworkId,
        launches: Vec<Launch>,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Result<(), LaunchError> {
        self.launch_partitioned(framework_id, launches, None, now, out)
    }

    /// [`Engine::launch`] for a framework with this partition timeout (`None`: not
    /// partition-aware), which decides how long its tasks run on while the coordinator
    /// cannot be reached (see [`super::fence`]).
    pub fn launch_partitioned(
        &mut self,
        framework_id: FrameworkId,
        launches: Vec<Launch>,
        partition_timeout: Option<std::time::Duration>,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Result<(), LaunchError> {
        self.check_launch(framework_id, launches.iter().map(|l| &l.spec))?;
        let mut records = Vec::new();
        if self.contact.partition.get(&framework_id).copied() != partition_timeout {
            match partition_timeout {
                Some(t) => self.contact.partition.insert(framework_id, t),
                None => self.contact.partition.remove(&framework_id),
            };
            if self.config.journaling == Journaling::On {
                records.push(Record::Partition {
                    framework_id,
                    partition_timeout_s: partition_timeout.map(|t| t.as_secs_f64()),
                });
            }
        }
        let agent_id = self.session.stamp();
        let mut accepted = Vec::with_capacity(launches.len());
        let mut refused = Vec::new();
        for Launch { spec, sandbox } in launches {
            let key = (framework_id, spec.task_id.clone());
            // GPUs: whole devices, chosen here; a task that cannot have them fails, unlaunched.
            // An agent that manages no GPUs leaves a whole `gpus` a plain counted name.
            let gpu_devices = match protocol::gpu::requested(&spec.resources)
                .map_err(|e| e.to_string())
                .and_then(|n| match n {
                    0 => Ok(None),
                    _ if !self.gpus.has_devices() => Ok(None),
                    n => self
                        .gpus
                        .assign(&key, n)
                        .map(Some)
                        .map_err(|e| e.to_string()),
                }) {
                Ok(devices) => devices,
                Err(message) => {
                    refused.push((key, message));
                    None
                }
            };
            let status = TaskStatus {
                task_id: spec.task_id.clone(),
                framework_id,
                agent_id,
                state: TaskState::Starting,
                message: None,
                exit_code: None,
                update_id: self.config.update_ids.next(),
                timestamp: now.wall,
                resources: Some(spec.resources.clone()),
                reason: None,
                usage: None,
                gpu_devices,
                healthy: None,
            };
            if self.config.journaling == Journaling::On {
                if let Some(sandbox) = &sandbox {
                    records.push(Record::Launch {
                        framework_id,
                        spec: spec.clone(),
                        sandbox: sandbox.clone(),
                    });
                }
                records.push(Record::Status {
                    status: status.clone(),
                });
            }
            accepted.push((spec, sandbox, status));
        }
        self.journal(records, Durability::Synced, out);
        for (spec, sandbox, status) in accepted {
            let key = (framework_id, spec.task_id.clone());
            self.updates.push(status.clone(), now.at);
            self.tasks.insert(spec, sandbox, Stage::Accepted, status);
            if !refused.iter().any(|(k, _)| k == &key) {
                out.push(Command::Spawn(key));
            }
        }
        for (key, message) in refused {
            let end = (TaskState::Failed, Some(message), None);
            self.record(&key, end, now, out);
        }
        self.prune();
        self.arm_fence(framework_id, now, out);
        Ok(())
    }

    /// Undoes an accepted launch whose journal write failed: forgets the tasks and their
    /// updates, as if the launch had been refused.
    pub fn forget_launch(&mut self, tasks: &[TaskKey]) {
        for key in tasks {
            self.tasks.remove(key);
            self.gpus.release(key);
        }
        let keys: HashSet<&TaskKey> = tasks.iter().collect();
        self.updates
            .queue
            .retain(|s| !keys.contains(&(s.framework_id, s.task_id.clone())));
    }

    /// The shell is about to start the task: what to run and where. `None` when there is
    /// nothing to start: unknown, ended, or killed before it started (then recorded `killed`).
    pub fn take_launch(
        &mut self,
        task_id: &TaskKey,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Option<(TaskSpec, Option<PathBuf>)> {
        let t = self.tasks.get(task_id)?;
        if t.latest.state.is_terminal() || t.stage != Stage::Accepted {
            return None;
        }
        if t.kill_requested {
            let end = (
                TaskState::Killed,
                Some("killed before it started".into()),
                None,
            );
            self.record(task_id, end, now, out);
            return None;
        }
        Some((t.spec.clone(), t.sandbox.clone()))
    }

    /// The task started (`running`), with its OS process when it has one. A kill that arrived
    /// while it was starting is carried out now.
    pub fn started(
        &mut self,
        task_id: &TaskKey,
        process: Option<Process>,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        let Some(t) = self.tasks.get_mut(task_id) else {
            return;
        };
        t.stage = Stage::Started(process);
        let kill = t.kill_requested;
        if let (Journaling::On, Some(p)) = (self.config.journaling, process) {
            let record = Record::Started {
                framework_id: Some(task_id.0),
                task_id: task_id.1.clone(),
                pid: p.pid,
                start_time: p.start_time,
                boot_id: p.boot_id,
            };
            self.journal(vec![record], Durability::Buffered, out);
        }
        self.record(task_id, (TaskState::Running, None, None), now, out);
        if kill {
            self.signal_kill(task_id, process, now, out);
        }
    }

    /// The task's process ended (or could not run).
    pub fn exited(&mut self, task_id: &TaskKey, exit: Exit, now: Now, out: &mut Vec<Command>) {
        let Some(t) = self.tasks.get(task_id) else {
            return;
        };
        let (reason, usage) = match &exit {
            Exit::Measured {
                memory_limit,
                report,
                ..
            } => (
                (memory_limit.is_some() && !t.kill_requested)
                    .then(|| protocol::task::REASON_MEMORY_LIMIT.to_string()),
                Some(report.clone()),
            ),
            _ => (None, None),
        };
        let end = outcome(exit, t.kill_requested);
        self.record_end(task_id, end, (reason, usage), now, out);
    }

    /// A kill request for the task [`Engine::find`] names: SIGTERM now and SIGKILL after the
    /// grace period for a running task; a task not started yet is killed before it starts; an
    /// ended one is left alone.
    pub fn kill(
        &mut self,
        framework_id: Option<FrameworkId>,
        task_id: &TaskId,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Result<(), UnknownTask> {
        let key = self.find(framework_id, task_id)?;
        let task_id = &key;
        let Some(t) = self.tasks.get_mut(task_id) else {
            return Err(UnknownTask::Unknown(key.1.clone()));
        };
        if t.latest.state.is_terminal() {
            return Ok(());
        }
        t.kill_requested = true;
        if let Stage::Started(process) = t.stage {
            self.signal_kill(task_id, process, now, out);
        }
        Ok(())
    }

    pub(super) fn signal_kill(
        &mut self,
        task_id: &TaskKey,
        process: Option<Process>,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        self.signal_kill_within(task_id, process, self.config.timing.kill_grace, now, out);
    }

    /// SIGTERM now, and SIGKILL after `grace` if it still runs.
    pub(super) fn signal_kill_within(
        &mut self,
        task_id: &TaskKey,
        process: Option<Process>,
        grace: std::time::Duration,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        out.push(Command::Signal {
            task: task_id.clone(),
            process,
            signal: Signal::Terminate,
        });
        if process.is_some() {
            out.push(Command::SetTimer {
                at: now.at + grace,
                timer: Timer::KillGrace(task_id.clone()),
            });
        }
    }
}
