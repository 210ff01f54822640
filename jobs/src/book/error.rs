//! [`BookError`]: why the book refused an input (it then changed nothing).

/// Why the book refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BookError {
    /// Only a service can be scaled.
    #[error("job {0:?} is not a service; only services have replicas to scale")]
    NotService(String),
    /// A job of that name exists.
    #[error("a job named {0:?} exists; delete it first or choose another name")]
    Exists(String),
    /// A user may change only its own jobs.
    #[error("job {name:?} belongs to {owner:?}; a user may change only its own jobs")]
    NotOwner {
        /// The job.
        name: String,
        /// Its owner.
        owner: String,
    },
    /// No job of that name.
    #[error("no job named {0:?}")]
    NotFound(String),
    /// `depends_on` names a job the service does not know.
    #[error("{field}: no job named {name:?} (a job may only depend on jobs already submitted)")]
    UnknownDependency {
        /// The field, `depends_on[i]`.
        field: String,
        /// The name.
        name: String,
    },
    /// An update tries to change what cannot change.
    #[error("{field}: {why}")]
    Unchangeable {
        /// The field.
        field: String,
        /// Why it cannot change.
        why: String,
    },
    /// `depends_on` would close a cycle.
    #[error("{field}: depending on {name:?} makes a cycle")]
    Cycle {
        /// The field, `depends_on[i]`.
        field: String,
        /// The name.
        name: String,
    },
}
