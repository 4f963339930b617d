//! The control socket `braid status` talks to: a Unix socket where each connection gets
//! the daemon's latest status snapshot as one JSON line. Served by its own thread, which
//! only reads the shared snapshot, so the event loop never waits on a client.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::status::{Shared, Status};

/// The listening socket; removed when dropped.
pub struct ControlSocket {
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `path` (refusing when a daemon already answers there) and serves it from a
    /// thread.
    pub fn serve(path: &Path, shared: Shared) -> Result<ControlSocket, String> {
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "control socket {} is in use: a braid daemon with this TUN device is already running",
                path.display()
            ));
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)
            .map_err(|e| format!("cannot bind control socket {}: {e}", path.display()))?;
        std::thread::Builder::new()
            .name("braid-control".to_owned())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let _ = answer(conn, &shared);
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(ControlSocket {
            path: path.to_owned(),
        })
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn answer(conn: UnixStream, shared: &Shared) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut line = String::new();
    BufReader::new(&conn).take_line(&mut line)?;
    let snapshot = shared.lock().map(|s| s.clone()).unwrap_or_default();
    let mut out = serde_json::to_string(&snapshot).map_err(std::io::Error::other)?;
    out.push('\n');
    (&conn).write_all(out.as_bytes())
}

trait TakeLine {
    fn take_line(&mut self, s: &mut String) -> std::io::Result<usize>;
}

impl<R: std::io::Read> TakeLine for BufReader<R> {
    /// One request line, at most 256 bytes.
    fn take_line(&mut self, s: &mut String) -> std::io::Result<usize> {
        let mut limited = std::io::Read::take(self, 256);
        BufReader::new(&mut limited).read_line(s)
    }
}

/// Asks the daemon at `path` for its status.
pub fn query(path: &Path) -> Result<Status, String> {
    let conn = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach a braid daemon at {}: {e} (is it running? pass --socket PATH if its config sets [control] socket)",
            path.display()
        )
    })?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    (&conn).write_all(b"status\n").map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| format!("unexpected answer from the daemon: {e}"))
}
