//! A test bed of network namespaces joined by veth pairs, for the end-to-end test and the
//! `tunnel-throughput` benchmark (root only). Everything made here is removed when the
//! values are dropped.
//!
//! ```text
//!  gateway ns ── veth a (10.201.1.0/24) ──┐
//!             └─ veth b (10.201.2.0/24) ──┴─ server ns (10.201.0.1 on lo) ── veth c (10.202.0.0/24) ── internet ns
//! ```
//!
//! The server's public address 10.201.0.1 is reachable from the gateway over either veth,
//! as a server on the Internet is over either uplink; the internet namespace plays the
//! hosts the gateway's clients talk to.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The server's address as the gateway's uplinks reach it.
pub const SERVER_ADDR: &str = "10.201.0.1";
/// The internet host's address.
pub const INTERNET_HOST: &str = "10.202.0.2";

/// Runs a command; its stdout, or one line saying what failed.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why the bed cannot be built here, if it cannot: not root, no `ip`, no TUN, no netns.
pub fn unavailable(tools: &[&str]) -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (network namespaces, TUN devices)".to_owned());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is missing".to_owned());
    }
    for t in std::iter::once(&"ip").chain(tools) {
        let found = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(t).is_file()));
        if !found {
            return Some(format!("`{t}` is not installed"));
        }
    }
    let probe = format!("braid-probe-{}", std::process::id());
    if let Err(e) = run("ip", &["netns", "add", &probe]) {
        return Some(format!("network namespaces unavailable: {e}"));
    }
    let _ = run("ip", &["netns", "del", &probe]);
    None
}

/// A network namespace, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(name: &str) -> Result<Netns, String> {
        let _ = run("ip", &["netns", "del", name]);
        run("ip", &["netns", "add", name])?;
        let ns = Netns {
            name: name.to_owned(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        run("ip", &a)
    }

    /// A command inside the namespace.
    pub fn command(&self, cmd: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, cmd]);
        c
    }

    /// Runs a command inside the namespace to completion.
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Result<String, String> {
        let mut a = vec!["netns", "exec", self.name.as_str(), cmd];
        a.extend_from_slice(args);
        run("ip", &a)
    }

    /// Starts a command inside the namespace; it is killed when the [`Proc`] drops.
    pub fn spawn(&self, cmd: &str, args: &[&str], log: &Path) -> Result<Proc, String> {
        let f = std::fs::File::create(log).map_err(|e| e.to_string())?;
        let child = self
            .command(cmd)
            .args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone().map_err(|e| e.to_string())?)
            .stderr(f)
            .spawn()
            .map_err(|e| format!("cannot start {cmd}: {e}"))?;
        Ok(Proc { child })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// A process in a namespace: SIGTERM then wait on drop.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `wait`; true if it exited with success.
    pub fn stop(&mut self, wait: Duration) -> bool {
        // `ip netns exec` execs the command, so the pid is the daemon's.
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let step = Duration::from_millis(20);
        let mut waited = Duration::ZERO;
        while waited < wait {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.success();
            }
            std::thread::sleep(step);
            waited += step;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.running() {
            self.stop(Duration::from_secs(3));
        }
    }
}

/// The three namespaces and their links.
pub struct Bed {
    pub gateway: Netns,
    pub server: Netns,
    pub internet: Netns,
}

impl Bed {
    /// Builds the bed with namespaces named `PREFIX-gw`, `PREFIX-srv`, `PREFIX-net`.
    pub fn new(prefix: &str) -> Result<Bed, String> {
        let bed = Bed {
            gateway: Netns::new(&format!("{prefix}-gw"))?,
            server: Netns::new(&format!("{prefix}-srv"))?,
            internet: Netns::new(&format!("{prefix}-net"))?,
        };
        let (g, s, i) = (&bed.gateway, &bed.server, &bed.internet);
        for (gw_if, srv_if, net) in [("a0", "a1", 1), ("b0", "b1", 2)] {
            run(
                "ip",
                &[
                    "link", "add", gw_if, "netns", &g.name, "type", "veth", "peer", "name", srv_if,
                    "netns", &s.name,
                ],
            )?;
            g.ip(&["addr", "add", &format!("10.201.{net}.2/24"), "dev", gw_if])?;
            s.ip(&["addr", "add", &format!("10.201.{net}.1/24"), "dev", srv_if])?;
            g.ip(&["link", "set", gw_if, "up"])?;
            s.ip(&["link", "set", srv_if, "up"])?;
            g.ip(&[
                "route",
                "add",
                SERVER_ADDR,
                "via",
                &format!("10.201.{net}.1"),
                "dev",
                gw_if,
                "metric",
                &net.to_string(),
            ])?;
        }
        s.ip(&["addr", "add", &format!("{SERVER_ADDR}/32"), "dev", "lo"])?;
        run(
            "ip",
            &[
                "link", "add", "c1", "netns", &s.name, "type", "veth", "peer", "name", "c2",
                "netns", &i.name,
            ],
        )?;
        s.ip(&["addr", "add", "10.202.0.1/24", "dev", "c1"])?;
        i.ip(&["addr", "add", &format!("{INTERNET_HOST}/24"), "dev", "c2"])?;
        s.ip(&["link", "set", "c1", "up"])?;
        i.ip(&["link", "set", "c2", "up"])?;
        Ok(bed)
    }
}

/// Waits until `f` is true, polling every 50 ms, at most `limit`.
pub fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let step = Duration::from_millis(50);
    let mut waited = Duration::ZERO;
    while waited < limit {
        if f() {
            return true;
        }
        std::thread::sleep(step);
        waited += step;
    }
    f()
}
