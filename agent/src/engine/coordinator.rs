//! The coordinator's side: registration, heartbeats, the replies to requests, and sending the
//! unacknowledged updates (see [`updates`](super::updates) for the rules).

use super::*;

/// The least time between two call-backs the agent acts on: anyone may call, so a caller
/// must not be able to make it heartbeat as fast as it likes.
pub(crate) const CALL_BACK_SPACING: std::time::Duration = std::time::Duration::from_secs(1);

impl Engine {
    /// Starts the session: registers now.
    pub fn start(&mut self, now: Now, out: &mut Vec<Command>) {
        self.timer(Timer::Register, now, out);
    }

    /// A timer the engine set fired.
    pub fn timer(&mut self, timer: Timer, now: Now, out: &mut Vec<Command>) {
        match timer {
            Timer::Register => {
                if self.session.phase == Phase::Waiting {
                    self.session.phase = Phase::Registering;
                    self.contact.register_sent = Some(now.at);
                    out.push(Command::Send(Request::Register {
                        agent_id: self.session.agent_id,
                        tasks: self.statuses(),
                    }));
                }
            }
            Timer::Heartbeat(epoch) => {
                if let (Phase::Registered, Some(agent_id)) =
                    (self.session.phase, self.session.agent_id)
                {
                    if epoch == self.session.epoch {
                        self.contact.heartbeat_sent = Some(now.at);
                        out.push(Command::Send(Request::Heartbeat { agent_id, epoch }));
                    }
                }
            }
            Timer::RetryStatuses => self.updates.retry_at = None,
            // `flush` below sends what the linger gathered.
            Timer::StatusLinger => self.updates.linger_timer = false,
            Timer::Fence => self.fence_timer(now, out),
            Timer::KillGrace(task) => {
                if let Some(t) = self.tasks.get(&task) {
                    if !t.latest.state.is_terminal() && t.process().is_some() {
                        tracing::info!(task_id = %task.1, "grace period over; sending SIGKILL");
                        out.push(Command::Signal {
                            task: task.clone(),
                            process: t.process(),
                            signal: Signal::Kill,
                        });
                    }
                }
            }
        }
        self.flush(now, out);
    }

    /// The coordinator answered a request.
    pub fn reply(&mut self, reply: Reply, now: Now, out: &mut Vec<Command>) {
        match reply {
            Reply::Registered(Ok(registered)) => self.registered(registered, now, out),
            Reply::Registered(Err(_)) => {
                self.session.attempts = self.session.attempts.saturating_add(1);
                let backoff = self.config.timing.backoff();
                let delay = self.config.jitter.backoff(&backoff, self.session.attempts);
                self.session.phase = Phase::Waiting;
                out.push(Command::SetTimer {
                    at: now.at + delay,
                    timer: Timer::Register,
                });
            }
            Reply::Heartbeat { epoch, result } => {
                if epoch != self.session.epoch || self.session.phase != Phase::Registered {
                    return;
                }
                if result.is_ok() {
                    self.contact_at(self.contact.heartbeat_sent);
                }
                match result {
                    Err(Failure::NotFound(_)) => self.reregister(now, out),
                    // Keep the beat: when the coordinator is back it either knows the agent
                    // (200) or says 404 and the agent registers again.
                    _ => out.push(Command::SetTimer {
                        at: now.at + self.session.interval,
                        timer: Timer::Heartbeat(epoch),
                    }),
                }
            }
            Reply::Statuses(result) => self.statuses_answered(result, now, out),
        }
        self.flush(now, out);
    }

    pub(super) fn registered(
        &mut self,
        registered: AgentRegistered,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        let id = registered.agent_id;
        if self.session.agent_id != Some(id) && self.config.journaling == Journaling::On {
            out.push(Command::PersistAgentId(id));
        }
        let s = &mut self.session;
        s.agent_id = Some(id);
        s.phase = Phase::Registered;
        s.epoch = s.epoch.wrapping_add(1);
        s.attempts = 0;
        s.interval = heartbeat_interval(
            registered.heartbeat_interval_s,
            self.config.timing.min_heartbeat,
        );
        // The first beat at a random point of the interval, the next ones an interval apart.
        out.push(Command::SetTimer {
            at: now.at + self.config.jitter.first_beat(s.interval),
            timer: Timer::Heartbeat(s.epoch),
        });
        self.contact.agent_timeout = registered
            .agent_timeout_s
            .and_then(|t| std::time::Duration::try_from_secs_f64(t).ok())
            .filter(|t| !t.is_zero());
        self.contact_at(self.contact.register_sent.or(Some(now.at)));
        self.check_fence(now, out);
    }

    pub(super) fn statuses_answered(
        &mut self,
        result: Result<(), Failure>,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        match result {
            Ok(()) => {
                self.updates.attempts = 0;
                self.updates.not_found = None;
                let acked = self.updates.finish();
                self.acknowledged(acked, out);
            }
            Err(Failure::NotFound(body)) => {
                if self.updates.count_not_found() {
                    // The same update keeps getting 404 right after registering again: the
                    // coordinator rejects the update itself.
                    self.refused(404, &body, out);
                } else {
                    self.updates.in_flight = 0;
                    self.reregister(now, out);
                }
            }
            Err(Failure::Status { code, body }) if (400..500).contains(&code) => {
                self.refused(code, &body, out);
            }
            Err(_) => {
                let u = &mut self.updates;
                u.attempts = u.attempts.saturating_add(1);
                let backoff = self.config.timing.backoff();
                let delay = self.config.jitter.backoff(&backoff, u.attempts);
                u.in_flight = 0;
                u.retry_at = Some(now.at + delay);
                out.push(Command::SetTimer {
                    at: now.at + delay,
                    timer: Timer::RetryStatuses,
                });
            }
        }
    }

    /// The coordinator refused the request in flight: a batch is split to find the refused
    /// update; a single update is dropped, since it would block every later one.
    pub(super) fn refused(&mut self, code: u16, body: &str, out: &mut Vec<Command>) {
        let n = self.updates.in_flight;
        if n > 1 {
            self.updates.one_at_a_time = n;
            self.updates.in_flight = 0;
            return;
        }
        self.updates.not_found = None;
        let dropped = self.updates.finish();
        for s in &dropped {
            tracing::warn!(task_id = %s.task_id, code, "coordinator refused an update; dropping it: {body}");
        }
        self.acknowledged(dropped, out);
    }

    /// The coordinator forgot the agent: register again now (once, however many answers said so).
    pub(super) fn reregister(&mut self, now: Now, out: &mut Vec<Command>) {
        if self.session.phase == Phase::Registered {
            tracing::info!("coordinator does not know this agent; registering again");
            self.session.phase = Phase::Waiting;
            out.push(Command::SetTimer {
                at: now.at,
                timer: Timer::Register,
            });
        }
    }

    /// A coordinator called the agent back (`POST /api/v1/reconnect`: a new leader, or one
    /// restarted on its registry, asks every agent it loaded to come back now rather than at
    /// its next heartbeat, up to an interval away). The call carries nothing the agent trusts:
    /// it only contacts the leader sooner, finding it as it always does (a heartbeat now, or a
    /// registration now when one waits on a backoff). A heartbeat starts a new beat, so the
    /// earlier one's timer and answer are dropped and the agent keeps one heartbeat going.
    /// Acted on at most once per `CALL_BACK_SPACING` (a second); true when acted on.
    pub fn call_back(&mut self, now: Now, out: &mut Vec<Command>) -> bool {
        let recent = self
            .contact
            .called_back
            .is_some_and(|at| now.at.saturating_duration_since(at) < CALL_BACK_SPACING);
        if recent {
            return false;
        }
        let acted = match self.session.phase {
            Phase::Registered => {
                let s = &mut self.session;
                s.epoch = s.epoch.wrapping_add(1);
                out.push(Command::SetTimer {
                    at: now.at,
                    timer: Timer::Heartbeat(s.epoch),
                });
                true
            }
            Phase::Waiting => {
                out.push(Command::SetTimer {
                    at: now.at,
                    timer: Timer::Register,
                });
                true
            }
            // A registration in flight reaches the leader anyway.
            Phase::Registering => false,
        };
        if acted {
            self.contact.called_back = Some(now.at);
        }
        acted
    }

    /// Another coordinator answered than the one the agent registered with (a new leader):
    /// register again with the running tasks; unacknowledged updates go to it afterwards.
    pub fn coordinator_changed(&mut self, now: Now, out: &mut Vec<Command>) {
        if self.session.phase == Phase::Registered {
            tracing::info!(
                "another coordinator leads now; registering again with the running tasks"
            );
        }
        self.reregister(now, out);
        self.flush(now, out);
    }

    /// Sends the oldest unacknowledged updates, unless a request is in flight, a backoff runs,
    /// the agent is not registered, or the first of them still lingers for company (see
    /// [`super::updates`]).
    pub fn flush(&mut self, now: Now, out: &mut Vec<Command>) {
        let (Phase::Registered, Some(agent_id)) = (self.session.phase, self.session.agent_id)
        else {
            return;
        };
        let max_batch = self.config.max_batch.max(1);
        let Some(n) = self.updates.next_batch(now.at, max_batch) else {
            return;
        };
        if let Some(from) = self.updates.linger_from {
            let due = from + self.config.timing.status_linger;
            if now.at < due && n < max_batch {
                if !self.updates.linger_timer {
                    self.updates.linger_timer = true;
                    out.push(Command::SetTimer {
                        at: due,
                        timer: Timer::StatusLinger,
                    });
                }
                return;
            }
        }
        let statuses = self
            .updates
            .queue
            .iter()
            .take(n)
            .map(|s| {
                let mut s = s.clone();
                s.agent_id = agent_id;
                s
            })
            .collect();
        self.updates.start(n);
        out.push(Command::Send(Request::Statuses { agent_id, statuses }));
    }
}
