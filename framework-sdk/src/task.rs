//! [`Task`]: what a framework launches, checked once, then placed on offers as many times as
//! needed. `Task::shell("echo hi").resources("cpus=1,mem=128").build()?` checks the command and
//! the resources; [`Task::on`] turns it into the wire [`TaskSpec`] for one offer's agent.

use std::collections::BTreeMap;

use protocol::{CommandSpec, HealthCheck, Offer, Resources, TaskId, TaskSpec};

/// Why a [`TaskBuilder`] could not build its [`Task`]. Each message names the bad part.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TaskError {
    /// The command is empty or contains a NUL byte.
    #[error("invalid command: {0}")]
    Command(protocol::command::CommandError),
    /// The resources could not be parsed.
    #[error("invalid resources {given:?}: {reason}")]
    Resources {
        /// The text given.
        given: String,
        /// Why it was rejected.
        reason: protocol::ResourceError,
    },
    /// No resources were given, or all of them are zero: such a task fits everywhere and is
    /// accounted nowhere.
    #[error("the task asks for no resources; give some, e.g. cpus=0.1,mem=32")]
    NoResources,
    /// The simulated duration is not a finite number of seconds >= 0.
    #[error("duration_s is {0}; use a finite number of seconds >= 0")]
    Duration(f64),
    /// `gpus` is not a whole number: GPUs are handed out as whole devices.
    #[error("{0}")]
    FractionalGpus(protocol::capability::WholeGpusError),
    /// The health check is not valid (the message names the field).
    #[error("{0}")]
    HealthCheck(protocol::health::HealthCheckError),
    /// The priority is out of range (the message names `priority`).
    #[error("{0}")]
    Priority(protocol::preempt::PriorityError),
}

/// What [`TaskBuilder::resources`] accepts: [`Resources`], or text such as `"cpus=1,mem=128"`.
pub trait IntoResources {
    /// The resources, or why the text is not valid.
    fn into_resources(self) -> Result<Resources, TaskError>;
}

impl IntoResources for Resources {
    fn into_resources(self) -> Result<Resources, TaskError> {
        Ok(self)
    }
}

impl IntoResources for &Resources {
    fn into_resources(self) -> Result<Resources, TaskError> {
        Ok(self.clone())
    }
}

impl IntoResources for &str {
    fn into_resources(self) -> Result<Resources, TaskError> {
        self.parse().map_err(|reason| TaskError::Resources {
            given: self.to_owned(),
            reason,
        })
    }
}

impl IntoResources for String {
    fn into_resources(self) -> Result<Resources, TaskError> {
        self.as_str().into_resources()
    }
}

/// A task a framework launches: a command and what it needs, with an optional name,
/// environment and (for simulated agents) duration. Build one with [`Task::shell`] or
/// [`Task::argv`]; place it with [`Task::on`] or [`Decisions::pack`](crate::Decisions::pack).
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    command: CommandSpec,
    resources: Resources,
    name: String,
    env: BTreeMap<String, String>,
    duration_s: Option<f64>,
    health_check: Option<HealthCheck>,
    priority: Option<protocol::preempt::Priority>,
}

impl Task {
    /// A task that runs `line` through `sh -c`.
    pub fn shell(line: impl Into<String>) -> TaskBuilder {
        TaskBuilder::new(CommandSpec::Shell(line.into()))
    }

    /// A task that runs a program directly: the first element is the program, the rest its
    /// arguments.
    pub fn argv<I, A>(args: I) -> TaskBuilder
    where
        I: IntoIterator<Item = A>,
        A: Into<String>,
    {
        TaskBuilder::new(CommandSpec::Argv(
            args.into_iter().map(Into::into).collect(),
        ))
    }

    /// What the task runs.
    pub fn command(&self) -> &CommandSpec {
        &self.command
    }

    /// What the task needs.
    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// True when the task fits in what `offer` offers.
    pub fn fits(&self, offer: &Offer) -> bool {
        self.resources.fits_in(&offer.resources)
    }

    /// The wire task to launch on `offer`'s agent under `task_id`. (Whether it fits is the
    /// caller's business; the coordinator refuses a launch that does not.)
    pub fn on(&self, offer: &Offer, task_id: TaskId) -> TaskSpec {
        TaskSpec {
            task_id,
            name: self.name.clone(),
            agent_id: offer.agent_id,
            resources: self.resources.clone(),
            command: self.command.clone(),
            env: self.env.clone(),
            duration_s: self.duration_s,
            isolation: None,
            health_check: self.health_check.clone(),
            priority: self.priority,
        }
    }

    /// The task's health check, if it has one.
    pub fn health_check(&self) -> Option<&HealthCheck> {
        self.health_check.as_ref()
    }
}

/// Collects a [`Task`]'s parts; [`TaskBuilder::build`] checks them all at once, so the setters
/// chain without a `?` each.
#[derive(Debug, Clone)]
pub struct TaskBuilder {
    command: CommandSpec,
    resources: Result<Resources, TaskError>,
    name: String,
    env: BTreeMap<String, String>,
    duration_s: Option<f64>,
    health_check: Option<HealthCheck>,
    priority: Result<Option<protocol::preempt::Priority>, protocol::preempt::PriorityError>,
}

impl TaskBuilder {
    fn new(command: CommandSpec) -> Self {
        Self {
            command,
            resources: Err(TaskError::NoResources),
            name: String::new(),
            env: BTreeMap::new(),
            duration_s: None,
            health_check: None,
            priority: Ok(None),
        }
    }

    /// The task's priority for preemption toward fair share: higher is more
    /// important, the lowest is taken back first (default 0; from -1000 to 1000, checked by
    /// [`TaskBuilder::build`]).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = protocol::preempt::Priority::new(i64::from(priority)).map(Some);
        self
    }

    /// A health check the task's agent runs while it runs (e.g.
    /// `HealthCheck::command(CommandSpec::Shell("test -f ready".into()))`, or
    /// `HealthCheck::http(8080, "/healthz")` with its timing fields set); the scheduler then
    /// sees `healthy` on [`TaskStatus`](protocol::TaskStatus) updates when the health changes.
    pub fn health_check(mut self, check: HealthCheck) -> Self {
        self.health_check = Some(check);
        self
    }

    /// What the task needs: [`Resources`], or text such as `"cpus=1,mem=128"`. Required.
    pub fn resources(mut self, resources: impl IntoResources) -> Self {
        self.resources = resources.into_resources();
        self
    }

    /// A human-readable name, shown by the coordinator (default: none).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets an environment variable of the task.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// For simulated agents: the task finishes after this many seconds (real agents run the
    /// command). `None` leaves it unset.
    pub fn duration_s(mut self, seconds: impl Into<Option<f64>>) -> Self {
        self.duration_s = seconds.into();
        self
    }

    /// The task, or the first reason it is not valid.
    pub fn build(self) -> Result<Task, TaskError> {
        self.command.validate().map_err(TaskError::Command)?;
        let resources = self.resources?;
        if resources.iter().all(|(_, millis)| millis == 0) {
            return Err(TaskError::NoResources);
        }
        protocol::capability::check_whole_gpus("resources", &resources)
            .map_err(TaskError::FractionalGpus)?;
        if let Some(d) = self.duration_s {
            if !(d.is_finite() && d >= 0.0) {
                return Err(TaskError::Duration(d));
            }
        }
        if let Some(check) = &self.health_check {
            check.validate(None).map_err(TaskError::HealthCheck)?;
        }
        let priority = self.priority.map_err(TaskError::Priority)?;
        Ok(Task {
            priority,
            command: self.command,
            resources,
            name: self.name,
            env: self.env,
            duration_s: self.duration_s,
            health_check: self.health_check,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use protocol::{AgentId, FrameworkId, OfferId};

    use super::*;

    fn offer(free: &str) -> Offer {
        Offer {
            offer_id: OfferId::new(),
            framework_id: FrameworkId::new(),
            agent_id: AgentId::new(),
            hostname: "h".into(),
            resources: free.parse().unwrap(),
            agent_total: free.parse().unwrap(),
            attributes: Default::default(),
            created_at: Default::default(),
            expires_at: Default::default(),
            reservation: None,
        }
    }

    #[test]
    fn a_task_placed_on_an_offer_is_the_wire_spec_for_its_agent() {
        let task = Task::shell("echo hi")
            .resources("cpus=1,mem=128")
            .name("hello")
            .env("GREETING", "hi")
            .duration_s(2.5)
            .build()
            .unwrap();
        let big = offer("cpus=2,mem=1024");
        assert!(task.fits(&big));
        assert!(!task.fits(&offer("cpus=0.5,mem=1024")));
        let spec = task.on(&big, TaskId::new("t1").unwrap());
        assert_eq!(
            spec,
            TaskSpec {
                task_id: TaskId::new("t1").unwrap(),
                name: "hello".into(),
                agent_id: big.agent_id,
                resources: "cpus=1,mem=128".parse().unwrap(),
                command: CommandSpec::Shell("echo hi".into()),
                env: BTreeMap::from([("GREETING".into(), "hi".into())]),
                duration_s: Some(2.5),
                isolation: None,
                health_check: None,
                priority: None,
            }
        );
    }

    #[test]
    fn a_priority_is_checked_at_build_and_sent_on_the_spec() {
        let task = Task::shell("x")
            .resources("cpus=1")
            .priority(-7)
            .build()
            .unwrap();
        let spec = task.on(&offer("cpus=1"), TaskId::new("p").unwrap());
        assert_eq!(
            spec.priority.map(protocol::preempt::Priority::get),
            Some(-7)
        );
        let e = Task::shell("x")
            .resources("cpus=1")
            .priority(5000)
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, TaskError::Priority(m) if m.to_string().contains("priority")),
            "{e}"
        );
    }

    #[test]
    fn resources_are_taken_as_text_or_as_resources() {
        let given: Resources = "cpus=1,mem=128".parse().unwrap();
        let from_text = Task::argv(["sleep", "1"]).resources("cpus=1, mem=128");
        let from_value = Task::argv(["sleep", "1"]).resources(&given);
        assert_eq!(
            from_text.build().unwrap(),
            from_value.duration_s(None).build().unwrap()
        );
    }

    #[test]
    fn bad_input_is_an_error_that_names_it() {
        let err = |b: TaskBuilder| b.build().err().unwrap();
        assert!(matches!(
            err(Task::shell("  ").resources("cpus=1")),
            TaskError::Command(_)
        ));
        assert!(matches!(
            err(Task::argv(Vec::<String>::new()).resources("cpus=1")),
            TaskError::Command(_)
        ));
        let bad = err(Task::shell("true").resources("cpus=lots"));
        assert!(bad.to_string().contains("cpus=lots"), "{bad}");
        assert_eq!(err(Task::shell("true")), TaskError::NoResources);
        assert_eq!(
            err(Task::shell("true").resources("cpus=0")),
            TaskError::NoResources
        );
        assert_eq!(
            err(Task::shell("true").resources("cpus=1").duration_s(f64::NAN)).to_string(),
            "duration_s is NaN; use a finite number of seconds >= 0"
        );
    }

    #[test]
    fn a_fraction_of_a_gpu_is_refused_before_sending() {
        let err = Task::shell("nvidia-smi -L")
            .resources("cpus=1,gpus=0.5")
            .build()
            .unwrap_err();
        assert!(matches!(err, TaskError::FractionalGpus(_)));
        assert!(err.to_string().contains("resources.gpus"), "{err}");
        assert!(Task::shell("nvidia-smi -L")
            .resources("cpus=1,gpus=1")
            .build()
            .is_ok());
    }
}
