//! Network namespaces and the processes the lab starts in them, and their cleanup.
//!
//! Every namespace the lab creates is named `braidlab-<pid>-<lab>-<role>` (the pid of the
//! lab's process and a number unique within it), so a lab never touches the host's own namespaces or another lab's, and
//! leftovers of a lab that was killed can be found and removed (`braid lab clean`). Links
//! are created directly inside the namespaces (`ip -n NS link add ... peer ... netns
//! OTHER`), never in the host's namespace.
//!
//! Cleanup happens in three ways: the [`crate::Lab`] guard's `Drop` (normal end, error,
//! panic); the Ctrl-C handler installed by [`install_interrupt_handler`], which kills the
//! lab's processes and deletes its namespaces before exiting; and [`clean_leftovers`].
//! Processes are started through `setpriv --pdeathsig KILL`, so they also die when the lab
//! itself is killed outright.

use std::fs::File;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::LabError;

/// Prefix of every namespace a lab creates.
pub const PREFIX: &str = "braidlab-";

/// Namespaces and processes alive in this process's lab, for the Ctrl-C handler.
static LIVE: Mutex<Live> = Mutex::new(Live {
    namespaces: Vec::new(),
    pids: Vec::new(),
    dirs: Vec::new(),
});
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

struct Live {
    namespaces: Vec<String>,
    pids: Vec<u32>,
    /// Temporary folders (daemon configs and logs), named like the namespaces.
    dirs: Vec<std::path::PathBuf>,
}

/// Registers a temporary folder of the lab, removed at cleanup (it must be named with
/// [`PREFIX`] so `braid lab clean` finds it too).
pub(crate) fn register_dir(dir: &std::path::Path) {
    live().dirs.push(dir.to_owned());
}

/// Removes a temporary folder registered with [`register_dir`].
pub(crate) fn remove_dir(dir: &std::path::Path) {
    let _ = std::fs::remove_dir_all(dir);
    live().dirs.retain(|d| d != dir);
}

fn live() -> std::sync::MutexGuard<'static, Live> {
    // A panic while holding the lock leaves plain lists behind; they are still usable.
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

static NEXT_LAB: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A number unique within this process, so labs built at once get distinct names.
pub fn next_lab_id() -> u32 {
    NEXT_LAB.fetch_add(1, Ordering::Relaxed)
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Installs a Ctrl-C (SIGINT, SIGTERM) handler that kills the lab's processes, deletes its
/// namespaces and exits with status 130. Harmless when called twice.
pub fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let installed = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, Ordering::Relaxed);
            eprintln!("\nbraid lab: interrupted, removing the lab's namespaces");
            cleanup_all();
            std::process::exit(130);
        });
        if let Err(e) = installed {
            eprintln!("braid lab: cannot catch Ctrl-C ({e}); `braid lab clean` removes leftovers");
        }
    });
}

/// Kills every process and deletes every namespace this process's lab registered.
pub fn cleanup_all() {
    let (pids, namespaces, dirs) = {
        let mut l = live();
        (
            std::mem::take(&mut l.pids),
            std::mem::take(&mut l.namespaces),
            std::mem::take(&mut l.dirs),
        )
    };
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    for pid in pids {
        terminate(pid);
    }
    for ns in namespaces {
        delete_namespace(&ns);
    }
}

/// Sends SIGTERM, then SIGKILL after a short grace period, to a process the lab started.
fn terminate(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    let pid = Pid::from_raw(raw);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(10));
        if kill(pid, None).is_err() {
            return;
        }
    }
    let _ = kill(pid, Signal::SIGKILL);
}

/// Kills what still runs in `name` (only ever a lab namespace) and deletes it.
fn delete_namespace(name: &str) {
    if !name.starts_with(PREFIX) {
        return;
    }
    if let Ok(out) = Command::new("ip").args(["netns", "pids", name]).output() {
        for pid in String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            terminate(pid);
        }
    }
    let _ = Command::new("ip")
        .args(["netns", "del", name])
        .stderr(Stdio::null())
        .status();
}

/// Namespaces left by labs whose process no longer runs (or every lab namespace with
/// `all`), deleted after killing what still runs in them. Returns their names.
pub fn clean_leftovers(all: bool) -> Result<Vec<String>, LabError> {
    let out = run(Command::new("ip").args(["netns", "list"]))?;
    let mut removed = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let owner = rest
            .split('-')
            .next()
            .and_then(|p| p.parse::<i32>().ok())
            .map(Pid::from_raw);
        let owner_alive = owner.is_some_and(|p| kill(p, None).is_ok());
        if all || !owner_alive {
            delete_namespace(name);
            removed.push(name.to_owned());
        }
    }
    // The daemons' folders, named like the namespaces.
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            let owner = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
            if all || owner.is_none_or(|p| kill(Pid::from_raw(p), None).is_err()) {
                let _ = std::fs::remove_dir_all(e.path());
                removed.push(e.path().display().to_string());
            }
        }
    }
    Ok(removed)
}

/// Runs `cmd` to completion; a non-zero exit is an error carrying its stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<Output, LabError> {
    let text = describe(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::Command {
            command: text.clone(),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(LabError::Command {
            command: text,
            detail: format!(
                "{} ({})",
                String::from_utf8_lossy(&out.stderr).trim(),
                out.status
            ),
        });
    }
    Ok(out)
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Moves the calling thread into the namespace called `name`.
pub(crate) fn enter_by_name(name: &str) -> Result<(), LabError> {
    let path = format!("/run/netns/{name}");
    let f = File::open(&path).map_err(|e| LabError::io(format!("opening {path}"), e))?;
    setns(f, CloneFlags::CLONE_NEWNET)
        .map_err(|e| LabError::io(format!("entering namespace {name}"), e.into()))
}

/// One network namespace of the lab, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `braidlab-<pid>-<role>` (`role` includes the lab's number).
    pub fn create(role: &str) -> Result<Netns, LabError> {
        let name = format!("{PREFIX}{}-{role}", std::process::id());
        // Registered first, so an interrupt during creation still removes it.
        live().namespaces.push(name.clone());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NS ARGS`.
    pub fn ip(&self, args: &[&str]) -> Result<(), LabError> {
        run(Command::new("ip").arg("-n").arg(&self.name).args(args)).map(drop)
    }

    /// `ip netns exec NS PROGRAM ARGS`, run to completion.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<Output, LabError> {
        run(self.command(program).args(args))
    }

    /// `ip netns exec NS PROGRAM ARGS` with `input` on its standard input, run to
    /// completion.
    pub fn exec_stdin(
        &self,
        program: &str,
        args: &[&str],
        input: &str,
    ) -> Result<Output, LabError> {
        use std::io::Write;
        let mut cmd = self.command(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let text = describe(&cmd);
        let fail = |detail: String| LabError::Command {
            command: text.clone(),
            detail,
        };
        let mut child = cmd.spawn().map_err(|e| fail(e.to_string()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .map_err(|e| fail(e.to_string()))?;
        }
        let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
        }
        Ok(out)
    }

    /// A command that runs `program` inside the namespace and dies with the lab
    /// (`setpriv --pdeathsig KILL`). Start it with [`Netns::spawn`].
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.name,
            "setpriv",
            "--pdeathsig",
            "KILL",
            "--",
        ])
        .arg(program);
        c
    }

    /// Starts `cmd` (from [`Netns::command`]) as a lab process, killed at cleanup.
    pub fn spawn(&self, cmd: &mut Command) -> Result<LabProcess, LabError> {
        let text = describe(cmd);
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| LabError::Command {
                command: text.clone(),
                detail: e.to_string(),
            })?;
        live().pids.push(child.id());
        Ok(LabProcess {
            child: Some(child),
            command: text,
        })
    }

    /// Writes a sysctl under /proc/sys/net of this namespace (`key` like
    /// `ipv4/ip_forward`).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), LabError> {
        let path = format!("/proc/sys/net/{key}");
        self.enter_scoped(|| {
            std::fs::write(&path, value).map_err(|e| LabError::io(format!("writing {path}"), e))
        })
    }

    /// Moves the calling thread into this namespace (sockets it opens then live there).
    pub fn enter(&self) -> Result<(), LabError> {
        enter_by_name(&self.name)
    }

    /// Runs `f` on a short-lived thread inside this namespace.
    pub fn enter_scoped<T: Send>(
        &self,
        f: impl FnOnce() -> Result<T, LabError> + Send,
    ) -> Result<T, LabError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                self.enter()?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(LabError::App("a lab thread panicked".into())))
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        delete_namespace(&self.name);
        live().namespaces.retain(|n| n != &self.name);
    }
}

/// A process the lab started; killed on drop unless it already ended.
#[derive(Debug)]
pub struct LabProcess {
    child: Option<Child>,
    command: String,
}

impl LabProcess {
    /// Waits up to `timeout` for the process to end, then collects its output (stdout must
    /// have been piped). A process still running at the deadline is killed and that is an
    /// error.
    pub fn wait_output(mut self, timeout: Duration) -> Result<Output, LabError> {
        let Some(mut child) = self.child.take() else {
            return Err(LabError::App(format!(
                "`{}` was already collected",
                self.command
            )));
        };
        let pid = child.id();
        let mut waited = Duration::ZERO;
        let step = Duration::from_millis(20);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if waited < timeout && !interrupted() => {
                    std::thread::sleep(step);
                    waited += step;
                }
                _ => {
                    terminate(pid);
                    let _ = child.wait();
                    live().pids.retain(|&p| p != pid);
                    return Err(LabError::App(format!(
                        "`{}` did not finish within {:.0} s",
                        self.command,
                        timeout.as_secs_f64()
                    )));
                }
            }
        }
        live().pids.retain(|&p| p != pid);
        child
            .wait_with_output()
            .map_err(|e| LabError::io(format!("collecting `{}`", self.command), e))
    }

    /// Kills the process with SIGKILL, as a crash would end it, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            if let Ok(raw) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
            }
            let _ = child.wait();
            live().pids.retain(|&p| p != pid);
        }
    }

    /// The process id.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            terminate(pid);
            let _ = child.wait();
            live().pids.retain(|&p| p != pid);
        }
    }
}
