//! braid's real I/O on Linux: the daemon around the sans-IO engine.
//!
//! - [`config`]: the gateway's and the server's TOML configuration, checked at start.
pub mod config;
