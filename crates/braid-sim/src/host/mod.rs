//! End hosts: a client host behind the braid gateway and an internet host behind the braid
//! server, exchanging raw IPv4 packets, and the workloads they run.

mod de;
pub mod surge;
mod udp;
mod workload;

pub use udp::CbrStats;
pub use workload::{
    BulkConfig, Direction, FetchLoopConfig, Kind, UdpCbrConfig, WebConfig, WorkloadConfig,
    WorkloadError,
};
