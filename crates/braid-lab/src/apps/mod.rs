//! The applications the lab runs: iperf3 (bulk TCP, UDP CBR), ping, a UDP CBR flow with
//! per-packet loss and delay (a video stream), and braid's own HTTP
//! server and client for the short-flow web workload.

pub mod cbr;
pub mod http;
pub mod iperf;
pub mod ping;
pub mod web;
