//! braid's lab: a real testbed on one Linux machine.
//!
//! Network namespaces hold a client host, the gateway, one namespace per emulated path,
//! the server and an internet host; a userspace link emulator applies the simulator's link
//! models in real time on each path (this kernel has no netem); real kernels run real TCP
//! (Cubic) between real applications (iperf3, an HTTP server and client), through braid or
//! through the peers users would pick instead: Linux MPTCP over the very same emulated
//! paths, and each path alone. docs/lab.md describes the topology, the emulator and its
//! measured accuracy.
//!
//! - [`netns`]: namespaces, the processes started in them, cleanup (guard, Ctrl-C,
//!   `braid lab clean`).
//! - [`topology`]: the [`Lab`]: namespaces wired together, emulators running.
//! - [`emulator`]: the link emulator (AF_PACKET bridge driving `braid_sim::link::Link`).
//! - [`clock`]: the one place the lab reads time.

pub mod accuracy;
pub mod apps;
pub mod braid_daemon;
pub mod clock;
pub mod emulator;
mod error;
pub mod experiment;
pub mod mptcp;
pub mod netns;
pub mod scenario_run;
pub mod support;
pub mod system;
pub mod topology;

pub use error::LabError;
pub use system::System;
pub use topology::{Lab, PathSpec};
