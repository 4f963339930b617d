//! `braid relay`: a node that lends its uplink to a braid session (BaPu §2's neighbouring
//! AP, PRISM §3.3's community member).
//!
//! The gateway sends a path's datagrams to the relay's `listen` address; the relay wraps
//! each in a lender envelope (braid-secure `lender`: its own key, which the session's
//! owner authorized in the server's config) and sends it to the server from its uplink
//! port; what the server sends back to that port goes to the gateway. The relay registers
//! at start and every [`REGISTER_INTERVAL`] (which keeps its NAT mapping open, BaPu's
//! registration), lends at most `rate_mbit` and `monthly_gb` (what is over is dropped and
//! counted), and leaves cleanly on SIGINT or SIGTERM: a leave envelope to the server and
//! to the gateway, then its `tc` classes removed. A relay that vanishes is failed by the
//! session like any dead path. Home traffic keeps priority through HTB classes on the
//! uplink ([`htb`]), removed at exit and, after a crash, at the next start.

pub mod budget;
pub mod htb;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_core::Instant;

use braid_secure::lender::{Kind, Lender, LENDER_HEADER_LEN, LENDER_OVERHEAD};
use serde::Deserialize;

use crate::config::ConfigError;
use crate::DaemonError;

/// How often the relay registers again.
pub const REGISTER_INTERVAL: Duration = Duration::from_secs(10);
/// How long a leaving relay lets its shared class drain before it says so again and
/// removes the classes (a full 1000-packet queue at 10 Mbit/s is over a second; the
/// usual queue is a few tens of milliseconds).
const LEAVE_DRAIN: Duration = Duration::from_millis(300);
/// Largest datagram forwarded.
const MAX_DATAGRAM: usize = 65_535;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRelay {
    private_key_file: PathBuf,
    server_public_key: String,
    server: SocketAddr,
    listen: SocketAddr,
    uplink_port: u16,
    #[serde(default = "default_state_dir")]
    state_dir: PathBuf,
    lend: RawLend,
    shaping: Option<RawShaping>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLend {
    rate_mbit: f64,
    monthly_gb: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShaping {
    device: String,
    uplink_mbit: f64,
    guarantee_kbit: Option<f64>,
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/var/lib/braid/relay")
}

/// The shared class's guarantee unless configured, kbit/s, for an uplink of `uplink_mbit`:
/// [`GUARANTEE_SHARE`] of it, at least [`GUARANTEE_MIN_KBIT`] and at most BaPu §5's
/// 500 kbit/s.
fn default_guarantee(uplink_mbit: f64) -> f64 {
    (uplink_mbit * 1e3 * GUARANTEE_SHARE).clamp(GUARANTEE_MIN_KBIT, 500.0)
}

/// Share of the uplink guaranteed to lent traffic by default. Home traffic beside
/// saturating lent traffic keeps at most 1 - this of the uplink (issue 22 asks 0.95 of
/// its rate alone): BaPu's fixed 500 kbit/s is 25% of its 2 Mbit/s testbed uplinks and
/// 5% of a 10 Mbit/s one (with a 1 Mbit/s guarantee the relay lab test measured 0.895 to
/// 0.909 of home alone, against a 0.9 ceiling), so 3% leaves TCP two points of its own.
const GUARANTEE_SHARE: f64 = 0.03;
/// The least default guarantee: a lent path's heartbeats, reports and a trickle of data.
const GUARANTEE_MIN_KBIT: f64 = 64.0;

/// A relay's configuration (docs/daemon.md, "relay").
#[derive(Clone, Debug)]
pub struct RelayConfig {
    pub private_key_file: PathBuf,
    pub server_public_key: braid_secure::PublicKey,
    pub server: SocketAddr,
    pub listen: SocketAddr,
    pub uplink_port: u16,
    pub state_dir: PathBuf,
    pub lend_bps: u64,
    pub monthly_bytes: u64,
    pub shaping: Option<htb::Shaping>,
}

impl RelayConfig {
    pub fn load(path: &Path) -> Result<RelayConfig, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            message: format!("cannot read: {e}"),
        })?;
        RelayConfig::parse(&file, &text)
    }

    pub fn parse(file: &str, text: &str) -> Result<RelayConfig, ConfigError> {
        let err = |message: String| ConfigError {
            file: file.to_owned(),
            message,
        };
        let raw: RawRelay = toml::from_str(text).map_err(|e| err(e.message().to_owned()))?;
        let server_public_key = crate::config::parse_public_key(&raw.server_public_key)
            .map_err(|e| err(format!("server_public_key: {e}")))?;
        let positive = |v: f64, name: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(err(format!("{name} must be a positive number")))
            }
        };
        let lend_bps = (positive(raw.lend.rate_mbit, "lend.rate_mbit")? * 1e6) as u64;
        let monthly_bytes = (positive(raw.lend.monthly_gb, "lend.monthly_gb")? * 1e9) as u64;
        if raw.uplink_port == 0 {
            return Err(err(
                "uplink_port must be a fixed port (its traffic is the shared tc class)".into(),
            ));
        }
        let shaping = match raw.shaping {
            Some(s) => {
                let sh = htb::Shaping {
                    device: s.device,
                    uplink_bps: (positive(s.uplink_mbit, "shaping.uplink_mbit")? * 1e6) as u64,
                    guarantee_bps: (positive(
                        s.guarantee_kbit
                            .unwrap_or_else(|| default_guarantee(s.uplink_mbit)),
                        "shaping.guarantee_kbit",
                    )? * 1e3) as u64,
                    lend_bps,
                    shared_port: raw.uplink_port,
                };
                sh.validate().map_err(|e| err(e.to_string()))?;
                Some(sh)
            }
            None => None,
        };
        Ok(RelayConfig {
            private_key_file: raw.private_key_file,
            server_public_key,
            server: raw.server,
            listen: raw.listen,
            uplink_port: raw.uplink_port,
            state_dir: raw.state_dir,
            lend_bps,
            monthly_bytes,
            shaping,
        })
    }
}

/// Counters of a relay.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RelayStats {
    pub to_server: u64,
    pub to_gateway: u64,
    pub rate_drops: u64,
    pub monthly_drops: u64,
    pub registrations: u64,
}

/// Runs the relay until SIGINT or SIGTERM.
pub fn run(config: &RelayConfig) -> Result<RelayStats, DaemonError> {
    let setup = |e: String| DaemonError::Setup(e);
    // Before anything is installed: a stop signal from now on leaves cleanly.
    let mut shutdown = crate::Shutdown::new()?;
    let key = crate::config::load_private_key("relay", &config.private_key_file)?;
    let mut lender =
        Lender::new(&key, &config.server_public_key).map_err(|e| setup(e.to_string()))?;
    tracing::info!(lender = %format!("{:#010x}", lender.id()), "relay key loaded");
    // Leftovers of a crashed run go first, shaping or not.
    let device = config.shaping.as_ref().map(|s| s.device.as_str());
    let cleaned =
        htb::clean_leftovers(&config.state_dir, device).map_err(|e| setup(e.to_string()))?;
    if !cleaned.is_empty() {
        tracing::warn!(devices = ?cleaned, "removed tc classes a previous run left behind");
    }
    let _classes = match &config.shaping {
        Some(s) => {
            Some(htb::Installed::install(s, &config.state_dir).map_err(|e| setup(e.to_string()))?)
        }
        None => None,
    };
    let local = UdpSocket::bind(config.listen)?;
    let uplink = UdpSocket::bind(SocketAddr::new(
        if config.server.is_ipv4() {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        },
        config.uplink_port,
    ))?;
    local.set_nonblocking(true)?;
    uplink.set_nonblocking(true)?;
    let mut poll = mio::Poll::new()?;
    let (t_local, t_uplink, t_signal) = (mio::Token(0), mio::Token(1), mio::Token(2));
    let fd = |s: &UdpSocket| std::os::fd::AsRawFd::as_raw_fd(s);
    let (fl, fu) = (fd(&local), fd(&uplink));
    poll.registry().register(
        &mut mio::unix::SourceFd(&fl),
        t_local,
        mio::Interest::READABLE,
    )?;
    poll.registry().register(
        &mut mio::unix::SourceFd(&fu),
        t_uplink,
        mio::Interest::READABLE,
    )?;
    shutdown.register(poll.registry(), t_signal)?;
    // The one clock; wall time read once, for the month.
    let clock = crate::clock::Clock::start();
    let start = clock.now();
    let unix0 = crate::clock::Clock::unix_time();
    let unix = |now: Instant| unix0 + now.saturating_duration_since(start);
    let mut rate = budget::RateCap::new(config.lend_bps, Duration::ZERO);
    let mut monthly =
        budget::MonthlyCap::load(config.monthly_bytes, &config.state_dir.join("usage"), unix0);
    let mut stats = RelayStats::default();
    let mut gateway: Option<SocketAddr> = None;
    let mut buf = vec![0u8; MAX_DATAGRAM + LENDER_OVERHEAD];
    let mut events = mio::Events::with_capacity(64);
    let mut next_register = start;
    let mut next_save = start + Duration::from_secs(5);
    let send_control = |lender: &mut Lender, kind: Kind, to: &[SocketAddr]| {
        let mut b = [0u8; LENDER_OVERHEAD];
        if let Ok(n) = lender.wrap(kind, &mut b, 0) {
            for a in to {
                let _ = uplink_send(&uplink, &local, a, config.server, &b[..n]);
            }
        }
    };
    tracing::info!(listen = %config.listen, server = %config.server, "relay lending");
    loop {
        let now = clock.now();
        if now >= next_register {
            send_control(&mut lender, Kind::Register, &[config.server]);
            stats.registrations += 1;
            next_register = now + REGISTER_INTERVAL;
        }
        if now >= next_save {
            if let Err(e) = monthly.save() {
                tracing::warn!("saving the month's usage: {e}");
            }
            next_save = now + Duration::from_secs(5);
        }
        let wait = next_register.min(next_save).saturating_duration_since(now);
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e.into());
            }
        }
        if shutdown.requested() {
            break;
        }
        if shutdown.take_reload() {
            tracing::info!("SIGHUP: the relay re-reads nothing at runtime; restart it to apply a changed config");
        }
        // Gateway to server, wrapped.
        loop {
            match local.recv_from(&mut buf[LENDER_HEADER_LEN..LENDER_HEADER_LEN + MAX_DATAGRAM]) {
                Ok((n, from)) => {
                    gateway = Some(from);
                    let now = clock.now();
                    let t = now.saturating_duration_since(start);
                    if !rate.take(t, n + LENDER_OVERHEAD + 28) {
                        stats.rate_drops += 1;
                        continue;
                    }
                    if !monthly.take(unix(now), n + LENDER_OVERHEAD + 28) {
                        stats.monthly_drops += 1;
                        continue;
                    }
                    if let Ok(len) = lender.wrap(Kind::Data, &mut buf, n) {
                        if uplink.send_to(&buf[..len], config.server).is_ok() {
                            stats.to_server += 1;
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!("receive from the gateway side: {e}");
                    break;
                }
            }
        }
        // Server to gateway, as it came.
        loop {
            match uplink.recv_from(&mut buf) {
                Ok((n, from)) if from == config.server => {
                    if let Some(g) = gateway {
                        if local.send_to(&buf[..n], g).is_ok() {
                            stats.to_gateway += 1;
                        }
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!("receive from the uplink: {e}");
                    break;
                }
            }
        }
    }
    // Leaving cleanly: the server and the gateway hear of it. The leave may wait behind
    // lent datagrams in the shared class, and removing the classes drops what they hold:
    // it goes again once the queue has drained (the server ignores a second leave).
    let mut to = vec![config.server];
    to.extend(gateway);
    send_control(&mut lender, Kind::Leave, &to);
    std::thread::sleep(LEAVE_DRAIN);
    send_control(&mut lender, Kind::Leave, &[config.server]);
    if let Err(e) = monthly.save() {
        tracing::warn!("saving the month's usage: {e}");
    }
    tracing::info!(?stats, "relay left");
    Ok(stats)
}

/// Sends a control envelope to `to`: the server from the uplink socket, the gateway from
/// the local one.
fn uplink_send(
    uplink: &UdpSocket,
    local: &UdpSocket,
    to: &SocketAddr,
    server: SocketAddr,
    bytes: &[u8],
) -> std::io::Result<usize> {
    if *to == server {
        uplink.send_to(bytes, to)
    } else {
        local.send_to(bytes, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";

    fn text(extra: &str) -> String {
        format!(
            r#"
private_key_file = "/etc/braid/relay.key"
server_public_key = "{KEY}"
server = "198.51.100.1:51820"
listen = "192.168.1.1:7000"
uplink_port = 7001
[lend]
rate_mbit = 5
monthly_gb = 100
{extra}
"#
        )
    }

    #[test]
    fn a_relay_config_parses_with_shaping() {
        let c = RelayConfig::parse(
            "relay.toml",
            &text("[shaping]\ndevice = \"eth0\"\nuplink_mbit = 20\n"),
        )
        .unwrap();
        assert_eq!(c.lend_bps, 5_000_000);
        assert_eq!(c.monthly_bytes, 100_000_000_000);
        let s = c.shaping.unwrap();
        assert_eq!((s.guarantee_bps, s.shared_port), (500_000, 7001));
        // The default guarantee is a small share of smaller uplinks.
        let guarantee = |uplink: &str| {
            let c = RelayConfig::parse(
                "relay.toml",
                &text(&format!(
                    "[shaping]\ndevice = \"eth0\"\nuplink_mbit = {uplink}\n"
                )),
            )
            .unwrap();
            c.shaping.unwrap().guarantee_bps
        };
        assert_eq!(guarantee("10"), 300_000);
        assert_eq!(guarantee("1"), 64_000);
    }

    #[test]
    fn bad_relay_configs_say_what_is_wrong() {
        let e = RelayConfig::parse(
            "relay.toml",
            &text("").replace("rate_mbit = 5", "rate_mbit = 0"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("lend.rate_mbit"), "{e}");
        let e = RelayConfig::parse(
            "relay.toml",
            &text("[shaping]\ndevice = \"eth0\"\nuplink_mbit = 0.5\nguarantee_kbit = 400\n"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("guarantee_kbit"), "{e}");
    }
}
