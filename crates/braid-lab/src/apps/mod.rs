//! The applications the lab runs: iperf3 (bulk TCP, UDP CBR), ping, a CBR UDP stream with
//! per-datagram loss and delay (a live video's shape), and braid's own HTTP server and
//! client for the short-flow web workload.

pub mod cbr;
pub mod http;
pub mod iperf;
pub mod ping;
pub mod stamped;
pub mod web;
