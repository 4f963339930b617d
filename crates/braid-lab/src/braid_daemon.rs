//! braid itself in the lab: `braid server` in the server's namespace and `braid gateway`
//! in the gateway's, one uplink per emulated path (a UDP socket bound to the gateway's
//! address on that path, which the gateway's source rules send down that path), and the
//! client's traffic (from 10.0.0.2) routed into the gateway's TUN device. The gateway
//! masquerades the client behind its tunnel address (the server accepts only that source
//! from it), the server masquerades the tunnel's pool towards the internet host.
//!
//! The daemons run encrypted, as a user runs them, with a key pair per end made by `braid
//! genkey` and `braid pubkey`; keys, configs and logs are in a temporary folder per lab,
//! removed with it.

use std::fmt::Write as _;
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use braid_core::class::Transport;
use braid_core::{LossRecoveryKind, Reordering};

use crate::netns::{LabProcess, Netns};
use crate::topology::{gateway_path_addr, CLIENT, INTERNET, SERVER_ENDPOINT};
use crate::{Lab, LabError};

/// UDP port of the lab's braid server.
pub const PORT: u16 = 51_820;
/// The tunnel device on both ends.
const TUN: &str = "braid0";
/// The server's tunnel address and pool.
const POOL: &str = "10.77.0.1/24";
/// How long the tunnel may take to carry a first ping.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// The braid executable: `BRAID_BIN` if set, else the running program when it is `braid`.
pub fn executable() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BRAID_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    (exe.file_name()? == "braid").then_some(exe)
}

/// Why braid cannot run in the lab, or `None` when it can.
pub fn unavailable() -> Option<String> {
    let Some(exe) = executable() else {
        return Some(
            "no braid executable to start (run from `braid`, or set BRAID_BIN)".to_owned(),
        );
    };
    let has = |sub: &str| {
        Command::new(&exe)
            .args([sub, "--help"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !(has("gateway") && has("server")) {
        return Some(
            "this build of braid has no daemon (`braid gateway` and `braid server`)".to_owned(),
        );
    }
    let nft = Command::new("nft")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    (!nft).then(|| "nft is missing (apt-get install nftables)".to_owned())
}

/// braid's engine settings for a lab run; `None` leaves a key out of `[engine]`, so the
/// daemons run their default (`BraidSettings::default()`: braid as a user runs it).
#[derive(Clone, Debug, Default)]
pub struct BraidSettings {
    /// A braid-core scheduler name (`delay-based`, `min-conn-path`, ...).
    pub scheduler: Option<String>,
    /// The loss-recovery method, with its parameters.
    pub loss_recovery: Option<LossRecoveryKind>,
    /// The engine's `aqm` setting (the send queue's CoDel).
    pub aqm: Option<bool>,
    /// How TCP crosses (`tcp_transport`): split-TCP (the daemons' default) or the packet
    /// tunnel.
    pub tcp_transport: Option<Transport>,
    /// How reordering between paths is hidden (`resequence`, `rpc`, `none`).
    pub reordering: Option<Reordering>,
}

impl BraidSettings {
    /// The packet scheduler `s` without loss recovery, TCP in the packet tunnel (what `s`
    /// schedules).
    pub fn scheduler(s: &str) -> BraidSettings {
        BraidSettings {
            scheduler: Some(s.to_owned()),
            loss_recovery: Some(LossRecoveryKind::None),
            aqm: None,
            tcp_transport: Some(Transport::Packet),
            reordering: None,
        }
    }

    /// The defaults with TCP in the packet tunnel.
    pub fn packet_tunnel() -> BraidSettings {
        BraidSettings {
            tcp_transport: Some(Transport::Packet),
            ..BraidSettings::default()
        }
    }

    /// A label for reports: `defaults`, or what differs from them (`scheduler + loss
    /// recovery`, the scheduler alone without loss recovery).
    pub fn label(&self) -> String {
        let mut parts = vec![self.scheduler.clone().unwrap_or_else(|| "defaults".into())];
        match self.loss_recovery {
            Some(LossRecoveryKind::None) if self.scheduler.is_some() => {}
            Some(l) => parts.push(l.to_string()),
            None => {}
        }
        if let Some(a) = self.aqm {
            parts.push(format!("aqm {}", if a { "on" } else { "off" }));
        }
        match self.tcp_transport {
            Some(Transport::SplitTcp) => parts.push("split-TCP".into()),
            // A packet scheduler's name already says it.
            Some(Transport::Packet) if self.scheduler.is_none() => {
                parts.push("packet tunnel".into())
            }
            _ => {}
        }
        if let Some(r) = self.reordering {
            parts.push(format!("reordering {}", reordering_name(r)));
        }
        parts.join(" + ")
    }

    /// The `[engine]` section both daemons run with (docs/daemon.md), `socket` the control
    /// socket's folder.
    pub fn engine_section(&self, socket: &Path) -> String {
        let mut engine = String::from("[engine]\n");
        if let Some(s) = &self.scheduler {
            let _ = writeln!(engine, "scheduler = \"{s}\"");
        }
        if let Some(l) = self.loss_recovery {
            let recovery =
                toml::Value::try_from(l).map_or_else(|_| "\"none\"".to_owned(), |v| v.to_string());
            let _ = writeln!(engine, "loss_recovery = {recovery}");
        }
        if let Some(a) = self.aqm {
            let _ = writeln!(engine, "aqm = {a}");
        }
        if let Some(r) = self.reordering {
            let _ = writeln!(engine, "reordering = \"{}\"", reordering_name(r));
        }
        if let Some(t) = self.tcp_transport {
            let name = toml::Value::try_from(t)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let _ = writeln!(engine, "tcp_transport = \"{name}\"");
        }
        format!("{engine}\n[control]\nsocket = \"{}\"\n", socket.display())
    }
}

/// `r` as the config spells it.
fn reordering_name(r: Reordering) -> String {
    toml::Value::try_from(r)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{r:?}").to_lowercase())
}

/// More keys for the gateway's config: lines added to `[interface]` (`{dir}` stands for
/// the lab's folder) and to each `[[uplink]]` by position.
#[derive(Clone, Debug, Default)]
pub struct GatewayKeys {
    pub interface: String,
    pub uplinks: Vec<String>,
}

/// braid's two daemons running over the lab's paths; stopped on drop.
#[derive(Debug)]
pub struct BraidTunnel {
    // Drop order: the gateway first, then the server, then the folder.
    gateway: LabProcess,
    server: LabProcess,
    dir: TempDir,
}

#[derive(Debug)]
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        crate::netns::remove_dir(&self.0);
    }
}

impl BraidTunnel {
    /// Starts the daemons with `scheduler` (no loss recovery) and waits until the tunnel
    /// carries traffic.
    pub fn start(lab: &Lab, scheduler: &str) -> Result<BraidTunnel, LabError> {
        Self::start_with(lab, &BraidSettings::scheduler(scheduler))
    }

    /// Starts the daemons with `settings` and waits until the tunnel carries traffic.
    pub fn start_with(lab: &Lab, settings: &BraidSettings) -> Result<BraidTunnel, LabError> {
        Self::start_configured(lab, settings, &GatewayKeys::default())
    }

    /// As [`Self::start_with`], with more keys in the gateway's config.
    pub fn start_configured(
        lab: &Lab,
        settings: &BraidSettings,
        keys: &GatewayKeys,
    ) -> Result<BraidTunnel, LabError> {
        if let Some(why) = unavailable() {
            return Err(LabError::BraidUnavailable(why));
        }
        let exe = executable().ok_or_else(|| LabError::BraidUnavailable("no executable".into()))?;
        let dir = TempDir(std::env::temp_dir().join(lab.gateway.name()));
        crate::netns::register_dir(&dir.0);
        std::fs::create_dir_all(&dir.0)
            .map_err(|e| LabError::io(format!("creating {}", dir.0.display()), e))?;
        let engine = settings.engine_section(&dir.0);
        // Encrypted, as a user runs it: a key pair per end from `braid genkey`/`pubkey`.
        let (server_key, server_pub) = key_pair(&exe, &dir.0, "server")?;
        let (gateway_key, gateway_pub) = key_pair(&exe, &dir.0, "gateway")?;
        let server_cfg = format!(
            "[interface]\nprivate_key_file = \"{}\"\nlisten = \"0.0.0.0:{PORT}\"\ntun = \"{TUN}\"\n\
             address = \"{POOL}\"\nmasquerade = \"wan0\"\n\n[[gateway]]\nname = \"lab\"\n\
             public_key = \"{gateway_pub}\"\n\n{engine}",
            server_key.display()
        );
        let mut gateway_cfg = format!(
            "[interface]\nprivate_key_file = \"{}\"\ntun = \"{TUN}\"\nroutes = [\"{}/24\"]\n{}\n\
             [server]\nendpoint = \"{SERVER_ENDPOINT}:{PORT}\"\npublic_key = \"{server_pub}\"\n\n",
            gateway_key.display(),
            Ipv4Addr::from(u32::from(INTERNET) & 0xffff_ff00),
            keys.interface
                .replace("{dir}", &dir.0.display().to_string()),
        );
        // No capacity hints: the daemons learn them, as a user's do.
        for (k, p) in lab.paths().iter().enumerate() {
            let _ = write!(
                gateway_cfg,
                "[[uplink]]\nname = \"{}\"\nsource = \"{}\"\n{}\n",
                p.name,
                gateway_path_addr(k),
                keys.uplinks.get(k).map_or("", String::as_str)
            );
        }
        gateway_cfg += &engine;
        let server_path = write(&dir.0, "server.toml", &server_cfg)?;
        let gateway_path = write(&dir.0, "gateway.toml", &gateway_cfg)?;
        // The client is masqueraded behind the gateway's tunnel address.
        lab.gateway.exec_stdin(
            "nft",
            &["-f", "-"],
            &format!(
                "table ip braidlab {{\n chain postrouting {{\n  type nat hook postrouting priority srcnat; policy accept;\n  oifname \"{TUN}\" masquerade\n }}\n}}\n"
            ),
        )?;
        let server = spawn(&lab.server, &exe, "server", &server_path, &dir.0)?;
        std::thread::sleep(Duration::from_millis(300));
        let gateway = spawn(&lab.gateway, &exe, "gateway", &gateway_path, &dir.0)?;
        let tunnel = BraidTunnel {
            gateway,
            server,
            dir,
        };
        tunnel.wait_ready(lab)?;
        Ok(tunnel)
    }

    /// Pings the internet host from the client's braid address until it answers.
    fn wait_ready(&self, lab: &Lab) -> Result<(), LabError> {
        let clock = lab.clock();
        let until = clock.now() + READY_WITHIN;
        while clock.now() < until {
            if crate::netns::interrupted() {
                return Err(LabError::Interrupted);
            }
            let ok = lab
                .client
                .command("ping")
                .args([
                    "-n",
                    "-q",
                    "-c",
                    "1",
                    "-W",
                    "1",
                    "-I",
                    &CLIENT.to_string(),
                    &INTERNET.to_string(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = |name: &str| {
            std::fs::read_to_string(self.dir.0.join(name))
                .unwrap_or_default()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ")
        };
        Err(LabError::App(format!(
            "braid's tunnel carried no ping within {} s (gateway log: {}; server log: {})",
            READY_WITHIN.as_secs(),
            log("gateway.log"),
            log("server.log")
        )))
    }

    /// The folder holding the daemons' configs and logs.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// `braid status --json` of one daemon (`"gateway"` or `"server"`): its sessions with
    /// every engine counter.
    pub fn status(&self, role: &str) -> Result<serde_json::Value, LabError> {
        let exe = executable().ok_or_else(|| LabError::BraidUnavailable("no executable".into()))?;
        let config = self.dir.0.join(format!("{role}.toml"));
        let what = format!("braid status --config {}", config.display());
        let out = Command::new(&exe)
            .arg("status")
            .arg("--config")
            .arg(&config)
            .arg("--json")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| LabError::io(what.clone(), e))?;
        if !out.status.success() {
            return Err(LabError::Command {
                command: what,
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        serde_json::from_slice(&out.stdout).map_err(|e| LabError::Command {
            command: what,
            detail: format!("no JSON status ({e})"),
        })
    }

    /// Kills the gateway with SIGKILL (a crash: nothing runs at exit).
    pub fn kill_gateway(&mut self) {
        self.gateway.kill();
    }

    /// Starts the gateway again from its config (`gateway.toml` in [`Self::dir`], which
    /// may have been rewritten) and waits until the tunnel carries traffic.
    pub fn restart_gateway(&mut self, lab: &Lab) -> Result<(), LabError> {
        let exe = executable().ok_or_else(|| LabError::BraidUnavailable("no executable".into()))?;
        self.gateway.kill();
        let config = self.dir.0.join("gateway.toml");
        self.gateway = spawn(&lab.gateway, &exe, "gateway", &config, &self.dir.0)?;
        self.wait_ready(lab)
    }

    /// The daemons' process ids (gateway, server).
    pub fn pids(&self) -> (Option<u32>, Option<u32>) {
        (self.gateway.id(), self.server.id())
    }
}

/// A private key file `<role>.key` in `dir` from `braid genkey`, and its public key.
fn key_pair(exe: &Path, dir: &Path, role: &str) -> Result<(PathBuf, String), LabError> {
    let run = |args: &[&str], input: Option<&str>| -> Result<String, LabError> {
        use std::io::Write;
        let what = format!("braid {}", args.join(" "));
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LabError::io(what.clone(), e))?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| LabError::io(what.clone(), e))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| LabError::io(what.clone(), e))?;
        if !out.status.success() {
            return Err(LabError::Command {
                command: what,
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let private = run(&["genkey"], None)?;
    let public = run(&["pubkey"], Some(&private))?;
    let path = write(dir, &format!("{role}.key"), &format!("{private}\n"))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| LabError::io(format!("chmod 600 {}", path.display()), e))?;
    }
    Ok((path, public))
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf, LabError> {
    let p = dir.join(name);
    std::fs::write(&p, text).map_err(|e| LabError::io(format!("writing {}", p.display()), e))?;
    Ok(p)
}

fn spawn(
    ns: &Netns,
    exe: &Path,
    role: &str,
    config: &Path,
    dir: &Path,
) -> Result<LabProcess, LabError> {
    let log_path = dir.join(format!("{role}.log"));
    let log = File::create(&log_path)
        .map_err(|e| LabError::io(format!("creating {}", log_path.display()), e))?;
    let mut cmd = ns.command(&exe.to_string_lossy());
    cmd.arg(role)
        .arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(log);
    ns.spawn(&mut cmd)
}

#[cfg(test)]
mod tests {
    use braid_core::{RetransmitParams, SchedulerKind};

    use super::*;

    /// The `[engine]` section reads back as the daemons read it, names and tables alike.
    #[test]
    fn engine_section_reads_back() {
        #[derive(serde::Deserialize)]
        struct File {
            engine: Engine,
        }
        #[derive(serde::Deserialize)]
        struct Engine {
            #[serde(default)]
            scheduler: SchedulerKind,
            #[serde(default)]
            loss_recovery: LossRecoveryKind,
            aqm: Option<bool>,
            reordering: Option<Reordering>,
            tcp_transport: Option<Transport>,
        }
        let retransmit = LossRecoveryKind::Retransmit(RetransmitParams {
            nack_delay_ms: 60.0,
            max_nacks: 3,
            ..RetransmitParams::default()
        });
        for kind in [
            LossRecoveryKind::None,
            LossRecoveryKind::from_name("evolution").unwrap(),
            retransmit,
        ] {
            let s = BraidSettings {
                scheduler: Some("delay-based".into()),
                loss_recovery: Some(kind),
                aqm: Some(true),
                tcp_transport: Some(Transport::Packet),
                reordering: Some(Reordering::Rpc),
            };
            let text = s.engine_section(Path::new("/tmp/x"));
            let f: File = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(f.engine.scheduler, SchedulerKind::DelayBased);
            assert_eq!(f.engine.loss_recovery, kind, "{text}");
            assert_eq!(f.engine.aqm, Some(true), "{text}");
            assert_eq!(f.engine.reordering, Some(Reordering::Rpc), "{text}");
            assert_eq!(f.engine.tcp_transport, Some(Transport::Packet), "{text}");
        }
        let split = BraidSettings {
            tcp_transport: Some(Transport::SplitTcp),
            ..BraidSettings::default()
        };
        let text = split.engine_section(Path::new("/tmp/x"));
        let f: File = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(f.engine.tcp_transport, Some(Transport::SplitTcp), "{text}");
        assert_eq!(split.label(), "defaults + split-TCP");
        assert_eq!(
            BraidSettings::packet_tunnel().label(),
            "defaults + packet tunnel"
        );
        let s = BraidSettings {
            scheduler: Some("delay-based".into()),
            loss_recovery: Some(retransmit),
            aqm: None,
            tcp_transport: None,
            reordering: None,
        };
        assert_eq!(s.label(), "delay-based + retransmit");
        let rpc = BraidSettings {
            reordering: Some(Reordering::Rpc),
            ..BraidSettings::default()
        };
        assert_eq!(rpc.label(), "defaults + reordering rpc");
        assert_eq!(BraidSettings::scheduler("lazy").label(), "lazy");
        // The defaults leave the table empty, which parses to the daemon's defaults.
        let d = BraidSettings::default();
        assert_eq!(d.label(), "defaults");
        let text = d.engine_section(Path::new("/tmp/x"));
        assert!(text.starts_with("[engine]\n\n[control]"), "{text}");
        let f: File = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(f.engine.scheduler, SchedulerKind::default());
        assert_eq!(f.engine.loss_recovery, LossRecoveryKind::default());
        assert_eq!(f.engine.aqm, None);
        assert_eq!(f.engine.reordering, None);
        assert_eq!(f.engine.tcp_transport, None);
    }
}
