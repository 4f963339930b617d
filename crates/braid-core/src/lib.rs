//! braid's protocol engine: the whole bonding protocol as a sans-IO state machine.
//!
//! The engine never reads a clock, never touches a socket and never spawns a thread.
//! Every entry point takes `now`; output is pulled. One [`Session`] is one tunnel between a
//! gateway and a server over any number of paths. See [`Session`] for the driving contract.
//!
//! Layout (one idea per module):
//! - [`time`]: the engine's notion of time ([`Instant`], microseconds from an arbitrary epoch).
//! - [`path`]: per-path state and the PluriBus §4.2-4.3 estimators (queue length as drain
//!   time, capacity from packet trains, propagation delay + skew, loss EWMA, RTT, liveness).
//! - [`sched`]: the [`sched::Scheduler`] trait and the path schedulers behind it.
//! - [`fec`]: the [`fec::LossRecovery`] trait and the loss-masking methods behind it.
//! - [`reorder`]: the resequencing buffer with hole timeout (PluriBus §5).
//! - [`rpc`]: PRISM's Reverse Path Controller, ACK control for striped TCP (PRISM §5-6).
//! - [`flow`]: inner flows: 5-tuples, the bounded flow table, inner TCP retransmissions.
//! - [`class`]: traffic classes, each with its own scheduler.
//! - [`compress`]: inner IPv4/TCP header compression between the two ends.
//! - [`checksum`]: the Internet checksum (RFC 1071) of inner headers.
//! - [`cubic`]: Cubic with HyStart (RFC 9438), for the simulator's TCP; HyStart also for
//!   the stream's paths.
//! - [`htppr`]: partial packet recovery over a hare and a tortoise (HTPPR).
//! - [`metered`]: oSCTP's utility-and-cost model, rate prediction and metered budgets.
//! - [`bapu`]: BaPu's uplink bunching: reception reports, the gateway's forwarder
//!   scheduler, Proactive-ACK and SimpleBuffer (BaPu §2-3), driven by the simulator.
//! - [`stream`]: the multipath reliable byte stream (oSCTP §III-IV), not yet in the session.
//! - [`session`]: the engine that ties them together.

pub mod bapu;
pub mod checksum;
pub mod class;
pub mod compress;
pub mod config;
pub mod cubic;
pub mod event;
pub mod fec;
pub mod file_transfer;
pub mod flow;
pub mod htppr;
pub mod metered;
pub mod path;
pub mod reorder;
pub mod rpc;
pub mod sched;
pub mod session;
pub mod stats;
pub mod stream;
pub mod time;

pub use config::{
    Config, ConfigError, EvolutionParams, HoleTimeoutMode, LossRecoveryKind, LtParams,
    MemberChoice, NackTrigger, PathCc, PathConfig, PresenceEstimate, ReedSolomonParams, Reordering,
    RetransmitParams, Role, SchedulerKind, XorDecoder, XorParams,
};
pub use event::Event;
pub use session::{
    HandleError, LenderId, MembershipError, MembershipStats, Prediction, SendError, Session,
    Transmit, MAX_REVOKED,
};
pub use stats::{LossRecoveryStats, MeteredStats, PathStats, SessionStats};
pub use time::Instant;

/// Identifies one path of a session: the same number at both ends (carried in every
/// datagram). A gateway with three uplinks uses paths 0, 1 and 2.
pub type PathId = u8;
