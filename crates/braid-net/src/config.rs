//! The daemon's TOML configuration (docs/daemon.md), read and checked at start.
//!
//! The shape follows `wg-quick`: an `[interface]` section for this end (keys, TUN device,
//! listening port), then the other end(s). Every mistake is one [`ConfigError`] whose
//! message is a single line naming the file, the key and the fix; nothing is half-applied.
//!
//! Checking happens in two steps: [`GatewayConfig::parse`] / [`ServerConfig::parse`] check
//! what the text alone decides (unknown keys, ranges, address pools), and
//! [`GatewayConfig::check_system`] / [`ServerConfig::check_system`] check what the machine
//! decides (key files, interfaces, ports), so the first step is testable anywhere.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_core::class::ClassConfig;
use braid_core::{Config, HoleTimeoutMode, LossRecoveryKind, SchedulerKind};
use ipnet::Ipv4Net;
use serde::Deserialize;

pub mod lenders;
pub mod metering;
mod system;
#[cfg(test)]
mod tests;

pub use system::{interfaces, load_private_key, InterfaceInfo};

/// A configuration the daemon will not start with: one line naming the file, what is wrong
/// and how to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigError {
    /// The config file, as given.
    pub file: String,
    /// What is wrong and the fix, without the file name; one line.
    pub message: String,
}

/// Default UDP port of a braid server.
pub const DEFAULT_PORT: u16 = 51_820;
/// Largest number of uplinks (paths) a gateway may have.
pub const MAX_UPLINKS: usize = 16;
/// Bytes an inner packet travels inside on a path, worst case: IPv6 (40) and UDP (8), the
/// braid header with ack and path ack (33) and the data sequence number (4), and the
/// encryption envelope (32).
pub const TUNNEL_OVERHEAD: usize = 40 + 8 + 33 + 4 + 32;
/// Largest MTU a tunnel may be given.
pub const MAX_MTU: u16 = 9000;
/// Smallest (IPv4's minimum).
pub const MIN_MTU: u16 = 576;

/// `[engine]`: engine settings shared by both ends; the same keys as a scenario's
/// `[engine]` (docs/scenarios.md), every one optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    #[serde(default)]
    pub scheduler: SchedulerKind,
    #[serde(default)]
    pub loss_recovery: LossRecoveryKind,
    pub hole_timeout_ms: Option<f64>,
    #[serde(default)]
    pub hole_timeout_mode: HoleTimeoutMode,
    #[serde(rename = "class", default)]
    pub classes: Vec<ClassConfig>,
    /// How TCP in no class crosses: `split-tcp` (default) or `packet` (docs/daemon.md).
    pub tcp_transport: Option<braid_core::class::Transport>,
    pub loss_guard: Option<bool>,
    /// Active queue management of the send queue (default false).
    pub aqm: Option<bool>,
    /// Inner IPv4/TCP header compression of what this daemon sends (default true).
    pub header_compression: Option<bool>,
    /// Per-path congestion control: `rate` (default) or `loss-delay` (docs/scenarios.md).
    pub path_cc: Option<braid_core::PathCc>,
    /// `resequence` (default), `rpc` or `none` (docs/scenarios.md).
    pub reordering: Option<braid_core::Reordering>,
    pub report_interval_ms: Option<f64>,
    pub heartbeat_interval_ms: Option<f64>,
    pub path_timeout_ms: Option<f64>,
    pub capacity_interval_ms: Option<f64>,
    /// `[engine.metering]`: the traffic's target on metered uplinks (docs/daemon.md).
    pub metering: Option<braid_core::metered::MeteringSection>,
}

/// `[control]`: how the daemon is watched.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSection {
    /// Unix socket `braid status` talks to.
    #[serde(default = "default_socket_dir")]
    pub socket: PathBuf,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`); none when absent.
    /// Served by the same HTTP server as `web`, under the same access rule.
    pub metrics: Option<SocketAddr>,
    /// Address of the web dashboard (`/`, `/metrics`, `/api/status`, `/api/events`,
    /// docs/daemon.md); none when absent.
    pub web: Option<SocketAddr>,
    /// Bearer token (or basic-auth password) the dashboard and `/metrics` require;
    /// mandatory when either listens on a non-loopback address.
    pub web_token: Option<String>,
}

/// Shortest `web_token` accepted: 128 bits of hex.
pub const MIN_WEB_TOKEN_LEN: usize = 32;

fn default_socket_dir() -> PathBuf {
    PathBuf::from("/run/braid")
}

impl Default for ControlSection {
    fn default() -> Self {
        ControlSection {
            socket: default_socket_dir(),
            metrics: None,
            web: None,
            web_token: None,
        }
    }
}

/// How one uplink's socket is tied to its link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// Bound to a network interface (`SO_BINDTODEVICE`): follows the interface through
    /// address changes (a modem reconnecting).
    Interface(String),
    /// Bound to a local source address.
    Address(IpAddr),
}

/// One `[[uplink]]` of a gateway: one path.
#[derive(Clone, Debug)]
pub struct Uplink {
    pub name: String,
    pub binding: Binding,
    /// Optional hint: expected upstream capacity until the server has measured it, bit/s.
    /// `None` (the default): learned, with the engine's stand-in until then.
    pub capacity_bps: Option<u64>,
    /// Optional hint: expected downstream capacity until measured, bit/s, what the gateway
    /// reports to the server before it has measured one. `None`: the upstream hint stands
    /// in, or, without one, it is learned.
    pub down_capacity_bps: Option<u64>,
    /// Its bytes cost money: status shows them, and the engine is told.
    pub metered: bool,
    /// Its price and data cap, when metered.
    pub metering: Option<metering::Metered>,
    /// Reached through a relay at this address (its `listen`), which forwards to the
    /// server over its own uplink; `None`: straight to the server.
    pub relay: Option<SocketAddr>,
}

impl Uplink {
    /// Where the uplink's datagrams go: its relay, or the server.
    pub fn endpoint(&self, server: SocketAddr) -> SocketAddr {
        self.relay.unwrap_or(server)
    }
}

/// A gateway's whole configuration.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    pub file: String,
    pub private_key_file: PathBuf,
    pub tun: String,
    /// Inner MTU; `None`: the smallest uplink MTU less [`TUNNEL_OVERHEAD`].
    pub mtu: Option<u16>,
    /// Prefixes routed into the tunnel.
    pub routes: Vec<ipnet::IpNet>,
    pub server_endpoint: SocketAddr,
    pub server_public_key: String,
    pub uplinks: Vec<Uplink>,
    pub engine: EngineSection,
    pub control: ControlSection,
    /// Send without encryption (benchmarks of the plain data path only).
    pub plaintext: bool,
    /// Where the metered uplinks' bytes this cap period are kept across restarts
    /// (`crate::meter_ledger`); used only with a metered uplink.
    pub meter_state: PathBuf,
}

/// One `[[gateway]]` a server admits.
#[derive(Clone, Debug)]
pub struct Peer {
    pub name: String,
    pub public_key: String,
    /// A fixed inner address; otherwise one from the pool.
    pub address: Option<Ipv4Addr>,
}

/// A server's whole configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub file: String,
    pub private_key_file: PathBuf,
    pub listen: SocketAddr,
    pub tun: String,
    pub mtu: u16,
    /// The server's own inner address and the prefix of the pool gateways get addresses
    /// from.
    pub address: Ipv4Net,
    /// Interface the gateways' traffic is masqueraded out of (nftables); none: routed only.
    pub masquerade: Option<String>,
    pub max_gateways: usize,
    pub peers: Vec<Peer>,
    /// The relays the gateways authorized (`[[relay]]`).
    pub relays: Vec<lenders::AuthorizedRelay>,
    pub engine: EngineSection,
    pub control: ControlSection,
    pub plaintext: bool,
}

// The file's raw shapes: every section denies unknown keys.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewayFile {
    interface: GatewayInterface,
    server: ServerPeer,
    #[serde(rename = "uplink", default)]
    uplinks: Vec<UplinkSection>,
    #[serde(default)]
    engine: EngineSection,
    #[serde(default)]
    control: ControlSection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewayInterface {
    private_key_file: PathBuf,
    #[serde(default = "default_tun")]
    tun: String,
    mtu: Option<u16>,
    #[serde(default)]
    routes: Vec<String>,
    #[serde(default)]
    plaintext: bool,
    meter_state: Option<PathBuf>,
}

fn default_tun() -> String {
    "braid0".to_owned()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerPeer {
    endpoint: String,
    public_key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UplinkSection {
    name: Option<String>,
    interface: Option<String>,
    source: Option<IpAddr>,
    capacity_mbps: Option<f64>,
    down_capacity_mbps: Option<f64>,
    #[serde(default)]
    metered: bool,
    cost_per_gb: Option<f64>,
    monthly_cap_gb: Option<f64>,
    cap_reset_day: Option<u8>,
    relay: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    interface: ServerInterface,
    #[serde(rename = "gateway", default)]
    gateways: Vec<PeerSection>,
    #[serde(rename = "relay", default)]
    relays: Vec<lenders::RelaySection>,
    #[serde(default)]
    engine: EngineSection,
    #[serde(default)]
    control: ControlSection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerInterface {
    private_key_file: PathBuf,
    #[serde(default = "default_listen")]
    listen: String,
    #[serde(default = "default_tun")]
    tun: String,
    #[serde(default = "default_server_mtu")]
    mtu: u16,
    address: String,
    masquerade: Option<String>,
    #[serde(default = "default_max_gateways")]
    max_gateways: usize,
    #[serde(default)]
    plaintext: bool,
}

fn default_listen() -> String {
    format!("0.0.0.0:{DEFAULT_PORT}")
}

fn default_server_mtu() -> u16 {
    1500 - TUNNEL_OVERHEAD as u16
}

fn default_max_gateways() -> usize {
    1024
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerSection {
    name: String,
    public_key: String,
    address: Option<Ipv4Addr>,
}

/// Reads `path` and turns a TOML or shape error into one line with the line number.
fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<(String, T), ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: file.clone(),
        message: format!("cannot read the config: {e}"),
    })?;
    let parsed = parse_text(&file, &text)?;
    Ok((file, parsed))
}

fn parse_text<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        // toml's message may run over lines (a list of expected keys); keep it one line.
        let msg = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        ConfigError {
            file: match line {
                Some(l) => format!("{file}:{l}"),
                None => file.to_owned(),
            },
            message: friendly(&msg),
        }
    })
}

/// serde's wording, made to say what to do.
fn friendly(msg: &str) -> String {
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        return format!("unknown key {rest} (remove it or fix its spelling)");
    }
    if let Some(rest) = msg.strip_prefix("missing field ") {
        return format!("missing key {rest} (add it; see docs/daemon.md)");
    }
    msg.to_owned()
}

impl GatewayConfig {
    /// Reads and checks a gateway config file (text only; see [`Self::check_system`]).
    pub fn load(path: &Path) -> Result<GatewayConfig, ConfigError> {
        let (file, raw) = read::<GatewayFile>(path)?;
        Self::from_raw(file, raw)
    }

    /// Checks a gateway config given as text (`file` names it in errors).
    pub fn parse(file: &str, text: &str) -> Result<GatewayConfig, ConfigError> {
        Self::from_raw(file.to_owned(), parse_text(file, text)?)
    }

    fn from_raw(file: String, raw: GatewayFile) -> Result<GatewayConfig, ConfigError> {
        let err = |message: String| ConfigError {
            file: file.clone(),
            message,
        };
        check_tun_name(&raw.interface.tun).map_err(&err)?;
        if let Some(m) = raw.interface.mtu {
            check_mtu(m).map_err(&err)?;
        }
        let server_endpoint = parse_endpoint(&raw.server.endpoint).map_err(&err)?;
        if raw.uplinks.is_empty() {
            return Err(err(
                "no [[uplink]]: a gateway needs at least one (add [[uplink]] with interface = \"eth0\")"
                    .to_owned(),
            ));
        }
        if raw.uplinks.len() > MAX_UPLINKS {
            return Err(err(format!(
                "{} uplinks: at most {MAX_UPLINKS} are supported",
                raw.uplinks.len()
            )));
        }
        let mut uplinks = Vec::with_capacity(raw.uplinks.len());
        for (i, u) in raw.uplinks.into_iter().enumerate() {
            let binding = match (u.interface, u.source) {
                (Some(ifname), None) => {
                    check_if_name(&ifname)
                        .map_err(|m| err(format!("uplink {}: interface {m}", i + 1)))?;
                    Binding::Interface(ifname)
                }
                (None, Some(a)) => Binding::Address(a),
                (Some(_), Some(_)) => {
                    return Err(err(format!(
                        "uplink {}: set either interface or source, not both",
                        i + 1
                    )))
                }
                (None, None) => {
                    return Err(err(format!(
                        "uplink {}: set interface = \"NAME\" (bind to a device) or source = \"ADDRESS\" (bind to a local address)",
                        i + 1
                    )))
                }
            };
            let name = u.name.unwrap_or_else(|| match &binding {
                Binding::Interface(n) => n.clone(),
                Binding::Address(a) => a.to_string(),
            });
            if uplinks.iter().any(|o: &Uplink| o.name == name) {
                return Err(err(format!(
                    "two uplinks are named '{name}': give each a distinct name"
                )));
            }
            if uplinks.iter().any(|o: &Uplink| o.binding == binding) {
                return Err(err(format!(
                    "uplink '{name}' binds to the same interface or address as another: each uplink needs its own"
                )));
            }
            for (key, v) in [
                ("capacity_mbps", u.capacity_mbps),
                ("down_capacity_mbps", u.down_capacity_mbps),
            ] {
                if let Some(v) = v {
                    if !(v.is_finite() && v > 0.0 && v <= 1e6) {
                        return Err(err(format!(
                            "uplink '{name}': {key} = {v}: expected a number of Mbit/s above 0 \
                             (or leave it out: braid learns the capacity)"
                        )));
                    }
                }
            }
            let metering = metering::check(
                &name,
                u.metered,
                u.cost_per_gb,
                u.monthly_cap_gb,
                u.cap_reset_day,
            )
            .map_err(&err)?;
            let relay = match &u.relay {
                Some(r) => Some(parse_endpoint(r).map_err(|m| {
                    err(format!(
                        "uplink '{name}': {}",
                        m.replace("server.endpoint", "relay")
                    ))
                })?),
                None => None,
            };
            uplinks.push(Uplink {
                relay,
                metering,
                name,
                binding,
                capacity_bps: u.capacity_mbps.map(|c| (c * 1e6) as u64),
                down_capacity_bps: u.down_capacity_mbps.map(|d| (d * 1e6) as u64),
                metered: u.metered,
            });
        }
        let routes = raw
            .interface
            .routes
            .iter()
            .map(|r| {
                r.parse::<ipnet::IpNet>().map_err(|_| {
                    err(format!(
                        "routes: '{r}' is not a prefix (write it as 198.51.100.0/24)"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !raw.interface.plaintext {
            parse_public_key(&raw.server.public_key)
                .map_err(|e| err(format!("server.public_key: {e}")))?;
        }
        check_engine(&raw.engine).map_err(&err)?;
        check_control(&raw.control).map_err(&err)?;
        let meter_state = (raw.interface.meter_state).unwrap_or_else(|| {
            PathBuf::from(format!("/var/lib/braid/{}.meter.json", raw.interface.tun))
        });
        Ok(GatewayConfig {
            private_key_file: raw.interface.private_key_file,
            tun: raw.interface.tun,
            mtu: raw.interface.mtu,
            routes,
            server_endpoint,
            server_public_key: raw.server.public_key,
            uplinks,
            engine: raw.engine,
            control: raw.control,
            plaintext: raw.interface.plaintext,
            meter_state,
            file,
        })
    }

    /// The control socket's path.
    pub fn socket_path(&self) -> PathBuf {
        socket_path(&self.control.socket, "gateway", &self.tun)
    }
}

impl ServerConfig {
    /// Reads and checks a server config file (text only; see [`Self::check_system`]).
    pub fn load(path: &Path) -> Result<ServerConfig, ConfigError> {
        let (file, raw) = read::<ServerFile>(path)?;
        Self::from_raw(file, raw)
    }

    /// Checks a server config given as text (`file` names it in errors).
    pub fn parse(file: &str, text: &str) -> Result<ServerConfig, ConfigError> {
        Self::from_raw(file.to_owned(), parse_text(file, text)?)
    }

    fn from_raw(file: String, raw: ServerFile) -> Result<ServerConfig, ConfigError> {
        let err = |message: String| ConfigError {
            file: file.clone(),
            message,
        };
        let i = raw.interface;
        check_tun_name(&i.tun).map_err(&err)?;
        check_mtu(i.mtu).map_err(&err)?;
        let listen = parse_endpoint(&i.listen)
            .map_err(|m| err(m.replace("server.endpoint", "interface.listen")))?;
        let address: Ipv4Net = i.address.parse().map_err(|_| {
            err(format!(
                "interface.address = '{}': expected the server's tunnel address with the pool's prefix length, like \"10.77.0.1/24\"",
                i.address
            ))
        })?;
        if address.prefix_len() > 30 {
            return Err(err(format!(
                "interface.address = '{address}': a /{} pool has no room for gateways; use /30 or shorter (/24 gives 253)",
                address.prefix_len()
            )));
        }
        if address.addr() == address.network() || address.addr() == address.broadcast() {
            return Err(err(format!(
                "interface.address = '{address}' is the pool's network or broadcast address: pick a host address such as {}",
                address.hosts().next().unwrap_or(address.addr())
            )));
        }
        if let Some(m) = &i.masquerade {
            check_if_name(m).map_err(|m| err(format!("interface.masquerade: interface {m}")))?;
        }
        if i.max_gateways == 0 || i.max_gateways > 65_536 {
            return Err(err(format!(
                "interface.max_gateways = {}: expected 1 to 65536",
                i.max_gateways
            )));
        }
        let mut peers: Vec<Peer> = Vec::with_capacity(raw.gateways.len());
        for g in raw.gateways {
            if peers.iter().any(|p| p.name == g.name) {
                return Err(err(format!(
                    "two [[gateway]] are named '{}': give each a distinct name",
                    g.name
                )));
            }
            if peers.iter().any(|p| p.public_key == g.public_key) {
                return Err(err(format!(
                    "gateway '{}' has the same public_key as another: each gateway needs its own key (braid genkey)",
                    g.name
                )));
            }
            if let Some(a) = g.address {
                if !address.contains(&a)
                    || a == address.addr()
                    || a == address.network()
                    || a == address.broadcast()
                {
                    return Err(err(format!(
                        "gateway '{}': address {a} is not a free host address of the pool {} (the server has {})",
                        g.name,
                        address.trunc(),
                        address.addr()
                    )));
                }
                if peers.iter().any(|p| p.address == Some(a)) {
                    return Err(err(format!(
                        "gateway '{}': address {a} is given to two gateways",
                        g.name
                    )));
                }
            }
            if !i.plaintext {
                parse_public_key(&g.public_key)
                    .map_err(|e| err(format!("gateway '{}': public_key: {e}", g.name)))?;
            }
            peers.push(Peer {
                name: g.name,
                public_key: g.public_key,
                address: g.address,
            });
        }
        let relays = lenders::check(raw.relays, &peers).map_err(&err)?;
        check_engine(&raw.engine).map_err(&err)?;
        check_control(&raw.control).map_err(&err)?;
        Ok(ServerConfig {
            relays,
            private_key_file: i.private_key_file,
            listen,
            tun: i.tun,
            mtu: i.mtu,
            address,
            masquerade: i.masquerade,
            max_gateways: i.max_gateways,
            peers,
            engine: raw.engine,
            control: raw.control,
            plaintext: i.plaintext,
            file,
        })
    }

    /// The control socket's path.
    pub fn socket_path(&self) -> PathBuf {
        socket_path(&self.control.socket, "server", &self.tun)
    }
}

/// `DIR/ROLE-TUN.sock` when `dir` is a folder (the default `/run/braid`), else `dir` itself.
fn socket_path(dir: &Path, role: &str, tun: &str) -> PathBuf {
    if dir.extension().is_some_and(|e| e == "sock") {
        dir.to_owned()
    } else {
        dir.join(format!("{role}-{tun}.sock"))
    }
}

/// A base64 public key, as `braid pubkey` prints it.
pub fn parse_public_key(s: &str) -> Result<braid_secure::PublicKey, braid_secure::KeyError> {
    s.trim().parse()
}

fn parse_endpoint(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        if a.port() == 0 {
            return Err(format!("server.endpoint = '{s}': port 0 is not a port"));
        }
        return Ok(a);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    Err(format!(
        "server.endpoint = '{s}': expected an address and port, like \"203.0.113.7:{DEFAULT_PORT}\" or \"[2001:db8::7]:{DEFAULT_PORT}\""
    ))
}

fn check_tun_name(name: &str) -> Result<(), String> {
    check_if_name(name).map_err(|m| format!("interface.tun: device {m}"))
}

/// Linux interface names: 1 to 15 bytes, no '/', no whitespace.
fn check_if_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', '\t', ':']) {
        Err(format!(
            "name '{name}' is not a valid Linux interface name (1 to 15 characters, no '/', ':' or spaces)"
        ))
    } else {
        Ok(())
    }
}

fn check_mtu(mtu: u16) -> Result<(), String> {
    if (MIN_MTU..=MAX_MTU).contains(&mtu) {
        Ok(())
    } else {
        Err(format!(
            "interface.mtu = {mtu}: expected {MIN_MTU} to {MAX_MTU} (leave it out to derive it from the uplinks)"
        ))
    }
}

/// A web or metrics address off loopback needs a token: the dashboard shows every
/// uplink's addresses and traffic.
fn check_control(c: &ControlSection) -> Result<(), String> {
    if let Some(t) = &c.web_token {
        if t.len() < MIN_WEB_TOKEN_LEN || !t.chars().all(|c| c.is_ascii_graphic()) {
            return Err(format!(
                "[control] web_token: expected at least {MIN_WEB_TOKEN_LEN} printable characters \
                 without spaces (make one with `openssl rand -hex 16`)"
            ));
        }
    }
    for (key, addr) in [("web", c.web), ("metrics", c.metrics)] {
        if let Some(a) = addr {
            if !a.ip().is_loopback() && c.web_token.is_none() {
                return Err(format!(
                    "[control] {key} = \"{a}\" is not a loopback address: set [control] web_token \
                     (e.g. the output of `openssl rand -hex 16`), or listen on 127.0.0.1"
                ));
            }
        }
    }
    Ok(())
}

fn check_engine(e: &EngineSection) -> Result<(), String> {
    let ms = [
        ("hole_timeout_ms", e.hole_timeout_ms, true),
        ("report_interval_ms", e.report_interval_ms, false),
        ("heartbeat_interval_ms", e.heartbeat_interval_ms, false),
        ("path_timeout_ms", e.path_timeout_ms, false),
        ("capacity_interval_ms", e.capacity_interval_ms, false),
    ];
    for (key, v, zero_ok) in ms {
        if let Some(v) = v {
            if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) || v > 3_600_000.0 {
                return Err(format!(
                    "engine.{key} = {v}: expected a positive number of milliseconds"
                ));
            }
        }
    }
    let targets = (e
        .metering
        .iter()
        .map(|m| ("engine.metering", m.target_mbps)))
    .chain(e.classes.iter().map(|c| ("engine.class", c.target_mbps)));
    for (table, t) in targets {
        if let Some(t) = t {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!(
                    "{table}.target_mbps = {t}: expected a rate above 0 Mbit/s"
                ));
            }
        }
    }
    if let Some(v) = e.metering.as_ref().and_then(|m| m.interval_ms) {
        if !(v.is_finite() && v > 0.0) {
            return Err(format!(
                "engine.metering.interval_ms = {v}: expected a positive number of milliseconds"
            ));
        }
    }
    engine_config(e, 1400, 0)
        .validate()
        .map_err(|e| format!("engine: {e}"))
}

/// The engine configuration for a session with inner packets up to `mtu` bytes.
pub fn engine_config(e: &EngineSection, mtu: u16, session_id: u32) -> Config {
    let mut c = Config {
        session_id,
        scheduler: e.scheduler,
        loss_recovery: e.loss_recovery,
        hole_timeout_mode: e.hole_timeout_mode,
        classes: e.classes.clone(),
        max_packet_size: usize::from(mtu),
        ..Config::default()
    };
    let ms = |v: f64| Duration::from_secs_f64(v / 1e3);
    if let Some(g) = e.loss_guard {
        c.loss_guard = g;
    }
    if let Some(a) = e.aqm {
        c.aqm = a;
    }
    if let Some(h) = e.header_compression {
        c.header_compression = h;
    }
    if let Some(p) = e.path_cc {
        c.path_cc = p;
    }
    if let Some(r) = e.reordering {
        c.reordering = r;
    }
    if let Some(v) = e.hole_timeout_ms {
        c.hole_timeout = ms(v);
    }
    if let Some(v) = e.report_interval_ms {
        c.report_interval = ms(v);
    }
    if let Some(v) = e.heartbeat_interval_ms {
        c.heartbeat_interval = ms(v);
    }
    if let Some(v) = e.path_timeout_ms {
        c.path_timeout = ms(v);
    }
    if let Some(v) = e.capacity_interval_ms {
        c.capacity_interval = ms(v);
    }
    c.metering = braid_core::metered::MeteringSection::config(e.metering.as_ref(), &e.classes, &[]);
    c.tcp_transport = tcp_transport(e);
    c
}

/// How TCP in no class crosses under `e`: its `tcp_transport`, else the engine's default
/// ([`braid_core::class::default_tcp_transport`]).
pub fn tcp_transport(e: &EngineSection) -> braid_core::class::Transport {
    e.tcp_transport
        .unwrap_or_else(braid_core::class::default_tcp_transport)
}
