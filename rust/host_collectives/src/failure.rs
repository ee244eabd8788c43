//! Why an operation failed: a kind (what the caller can do about it) and a description naming the
//! ranks, processes and calls involved. The kinds are the failures NCCL distinguishes, so a caller
//! with NCCL-shaped codes maps them one to one.
use std::fmt;

/// What kind of failure, from the caller's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A bad argument: a rank out of range, a corrupt or stale unique id, a size that does not fit.
    InvalidArgument,
    /// A call the communicator's state does not allow: ranks disagreeing about a collective, a rank
    /// joining twice, an operation on a communicator this rank destroyed or aborted.
    InvalidUsage,
    /// The machine refused: a socket could not be opened, a rank never joined within the timeout.
    SystemError,
    /// A peer failed: it aborted, destroyed its communicator while this rank waited on it, or its
    /// process died.
    RemoteError,
    /// A broken invariant of this crate.
    InternalError,
}

/// A failed operation: its kind and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }
    pub fn invalid_argument(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::InvalidArgument, message)
    }
    pub fn invalid_usage(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::InvalidUsage, message)
    }
    pub fn system(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::SystemError, message)
    }
    pub fn remote(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::RemoteError, message)
    }
    pub fn internal(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::InternalError, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Failure {}

/// The result of every operation of this crate.
pub type Result<T> = std::result::Result<T, Failure>;
