//! What can go wrong in the lab, each error naming what failed and how to fix it.

use std::io;

/// A lab failure.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The lab cannot run here at all (not root, no network namespaces, a tool missing).
    #[error("the lab cannot run here: {0}")]
    Unsupported(String),
    /// A command the lab runs failed.
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// The lab description cannot be used.
    #[error("{0}")]
    Config(String),
    /// An application in the lab did not produce what was expected.
    #[error("{0}")]
    App(String),
    /// braid's daemons cannot run in the lab (why).
    #[error("braid cannot run in the lab: {0}")]
    BraidUnavailable(String),
    /// The run was interrupted (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
}

impl LabError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> LabError {
        LabError::Io {
            what: what.into(),
            source,
        }
    }
}

impl From<nix::Error> for LabError {
    fn from(e: nix::Error) -> LabError {
        LabError::io("system call", io::Error::from(e))
    }
}
