//! A braid session whose paths join and leave while a TCP upload crosses it: borrowed
//! uplinks (BaPu §2, PRISM §3.3's community) and hot-plugged modems, in virtual time.
//!
//! A client behind the gateway uploads a file to a server behind braid's server with the
//! simulator's Linux TCP model; the server side hashes what it reads. Each path is a pair
//! of [`Link`]s. A [`Change`] at an instant adds a path to both engines (a relay joins),
//! removes it from both (a relay leaves and tells both ends), vanishes it (its links drop
//! everything; each end removes the path once its liveness checks call it down), or
//! revokes its lender at the server.
//!
//! Deterministic: each link draws from its own child of the seed, and nothing reads a
//! clock.

use std::hash::Hasher;
use std::time::Duration;

use braid_core::{Config, Event, Instant, LenderId, PathConfig, PathId, Role, Session};

use crate::host::packets::Packets;
use crate::host::tcp::{ConnId, Stack};
use crate::host::transport::Buffers;
use crate::link::{Link, LinkConfig};
use crate::{Rng, TraceCache};

const CLIENT: [u8; 4] = [10, 0, 0, 2];
const SERVER: [u8; 4] = [10, 0, 1, 2];
const PORT: u16 = 5001;
/// IP and UDP header bytes around each braid datagram.
const WIRE_OVERHEAD: usize = 28;

/// One path: who lends it and its two directions.
#[derive(Clone, Debug)]
pub struct LentPath {
    pub id: PathId,
    pub lender: Option<LenderId>,
    pub up: LinkConfig,
    pub down: LinkConfig,
}

impl LentPath {
    /// Both directions `mbps` at `delay_ms` one way.
    pub fn symmetric(id: PathId, lender: Option<LenderId>, mbps: f64, delay_ms: f64) -> Self {
        let l = LinkConfig {
            delay_ms,
            ..LinkConfig::with_rate_mbps(mbps)
        };
        LentPath {
            id,
            lender,
            up: l.clone(),
            down: l,
        }
    }
}

/// A change of the session's paths.
#[derive(Clone, Debug)]
pub enum Change {
    /// The path joins both ends.
    Join(Box<LentPath>),
    /// The path leaves both ends cleanly.
    Leave(PathId),
    /// The path's links stop carrying anything; the ends find out by themselves.
    Vanish(PathId),
    /// The server revokes the lender: its paths leave the server's engine at once and
    /// what still arrives on them is refused; the gateway finds out by liveness.
    Revoke(LenderId),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct MembershipRun {
    pub paths: Vec<LentPath>,
    pub changes: Vec<(Duration, Change)>,
    /// Bytes uploaded.
    pub file_bytes: usize,
    pub duration: Duration,
    pub seed: u64,
    /// Both engines' configuration (its seed is replaced by `seed`).
    pub config: Config,
}

/// What happened.
#[derive(Clone, Debug, Default)]
pub struct MembershipOutcome {
    /// Hash of the file sent and of the bytes the server read.
    pub sent_hash: u64,
    pub received_hash: u64,
    pub received_bytes: usize,
    /// Whether what arrived is the file's first `received_bytes` bytes (for a run that
    /// ends before the file does).
    pub received_prefix_intact: bool,
    /// When the last byte was read.
    pub completed: Option<Duration>,
    /// Bytes read per 100 ms.
    pub goodput_series: Vec<usize>,
    pub gateway: braid_core::MembershipStats,
    pub server: braid_core::MembershipStats,
    /// Packets in flight on failed or departed paths that the gateway resent, and that it
    /// left to the inner TCP's own recovery (`session/failover.rs`).
    pub failover_resent: u64,
    pub failover_left: u64,
    /// The paths each end ended with.
    pub gateway_paths: Vec<PathId>,
    pub server_paths: Vec<PathId>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum MembershipRunError {
    #[error("path {0}: {1}")]
    Link(PathId, crate::link::LinkConfigError),
    #[error(transparent)]
    Config(#[from] braid_core::config::ConfigError),
}

struct SimPath {
    id: PathId,
    up: Link,
    down: Link,
    vanished: bool,
}

/// The file's byte at `offset`: a fixed pseudo-random pattern.
fn file_byte(offset: usize) -> u8 {
    let x = (offset as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 29) as u8 ^ (offset >> 11) as u8
}

fn hash(bytes: impl Iterator<Item = u8>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for b in bytes {
        h.write_u8(b);
    }
    h.finish()
}

/// Runs the upload.
pub fn run_membership(run: &MembershipRun) -> Result<MembershipOutcome, MembershipRunError> {
    let config = Config {
        seed: run.seed,
        ..run.config.clone()
    };
    let mut traces = TraceCache::default();
    let mut paths = Vec::new();
    let build = |p: &LentPath, traces: &mut TraceCache| -> Result<SimPath, MembershipRunError> {
        let link = |cfg: &LinkConfig, dir: &str, traces: &mut TraceCache| {
            Link::new(
                cfg,
                traces,
                Rng::child(run.seed, &format!("path-{}-{dir}", p.id)),
            )
            .map_err(|e| MembershipRunError::Link(p.id, e))
        };
        Ok(SimPath {
            id: p.id,
            up: link(&p.up, "up", traces)?,
            down: link(&p.down, "down", traces)?,
            vanished: false,
        })
    };
    let ids: Vec<PathConfig> = run
        .paths
        .iter()
        .map(|p| PathConfig::learned(p.id))
        .collect();
    let mut gw = Session::new(config.clone(), Role::Gateway, &ids, Instant::ZERO)?;
    let mut srv = Session::new(config.clone(), Role::Server, &ids, Instant::ZERO)?;
    for p in &run.paths {
        paths.push(build(p, &mut traces)?);
        if p.lender.is_some() {
            gw.set_lender(p.id, p.lender).ok();
            srv.set_lender(p.id, p.lender).ok();
        }
    }
    let mtu = config.max_packet_size;
    let mut client = Stack::new(CLIENT, mtu, Rng::child(run.seed, "client"));
    let mut server = Stack::new(SERVER, mtu, Rng::child(run.seed, "server"));
    let buffers = Buffers {
        rx: 1 << 20,
        tx: 1 << 20,
        nagle: true,
        initial_window: None,
        prism: false,
        sack: true,
    };
    let conn: ConnId = client
        .connect(SERVER, PORT, buffers)
        .expect("a fresh stack has free ports");
    let mut accepted: Option<ConnId> = None;
    let (mut c_out, mut s_out) = (Packets::default(), Packets::default());
    let mut buf = vec![0u8; gw.transmit_buffer_len().max(srv.transmit_buffer_len()) + 64];
    let mut deliver = Vec::new();
    let mut read = vec![0u8; 65536];
    let (mut written, mut received) = (0usize, 0usize);
    let mut rx_hash = std::collections::hash_map::DefaultHasher::new();
    let mut out = MembershipOutcome {
        sent_hash: hash((0..run.file_bytes).map(file_byte)),
        goodput_series: vec![0; (run.duration.as_millis() / 100) as usize + 1],
        ..MembershipOutcome::default()
    };
    let mut changes = run.changes.clone();
    changes.sort_by_key(|(t, _)| *t);
    let mut changes = changes.into_iter().peekable();
    let end = Instant::ZERO + run.duration;
    let mut now = Instant::ZERO;
    let mut scratch = vec![0u8; 65536];
    while now <= end {
        // Changes due.
        while let Some((_, change)) = changes.next_if(|(t, _)| Instant::ZERO + *t <= now) {
            match change {
                Change::Join(p) => {
                    let cfg = PathConfig::learned(p.id);
                    if gw.add_path(now, &cfg, p.lender).is_ok()
                        && srv.add_path(now, &cfg, p.lender).is_ok()
                    {
                        paths.retain(|q| q.id != p.id);
                        paths.push(build(&p, &mut traces)?);
                    }
                }
                Change::Leave(id) => {
                    gw.remove_path(now, id).ok();
                    srv.remove_path(now, id).ok();
                    paths.retain(|q| q.id != id);
                }
                Change::Vanish(id) => {
                    if let Some(p) = paths.iter_mut().find(|p| p.id == id) {
                        p.vanished = true;
                    }
                }
                Change::Revoke(lender) => {
                    srv.revoke_lender(now, lender);
                }
            }
        }
        // Links deliver.
        for p in &mut paths {
            while let Some(d) = p.up.poll_deliver(now) {
                if !p.vanished {
                    srv.handle_datagram(now, p.id, &d).ok();
                }
            }
            while let Some(d) = p.down.poll_deliver(now) {
                if !p.vanished {
                    gw.handle_datagram(now, p.id, &d).ok();
                }
            }
        }
        gw.handle_timeout(now);
        srv.handle_timeout(now);
        // Inner packets out of the engines into the hosts.
        while gw.poll_deliver(&mut deliver) {
            client.ingress(
                now,
                std::mem::take(&mut deliver),
                &mut c_out,
                &mut |_, _| None,
            );
        }
        while srv.poll_deliver(&mut deliver) {
            let mut accept = |_: u16, _: u16| Some(buffers);
            if let Some((id, _, _)) =
                server.ingress(now, std::mem::take(&mut deliver), &mut s_out, &mut accept)
            {
                accepted = Some(id);
            }
        }
        // Applications.
        if let Some(c) = client.conn(conn) {
            while written < run.file_bytes {
                let n = (run.file_bytes - written).min(scratch.len());
                for (i, b) in scratch[..n].iter_mut().enumerate() {
                    *b = file_byte(written + i);
                }
                let w = c.write(&scratch[..n]);
                written += w;
                if w < n {
                    break;
                }
            }
        }
        if let Some(c) = accepted.and_then(|id| server.conn(id)) {
            loop {
                let n = c.read(&mut read);
                if n == 0 {
                    break;
                }
                for &b in &read[..n] {
                    rx_hash.write_u8(b);
                }
                received += n;
                let bin = (now.saturating_duration_since(Instant::ZERO).as_millis() / 100) as usize;
                if let Some(g) = out.goodput_series.get_mut(bin) {
                    *g += n;
                }
                if received >= run.file_bytes && out.completed.is_none() {
                    out.completed = Some(now.saturating_duration_since(Instant::ZERO));
                }
            }
        }
        client.egress(now, &mut c_out);
        server.egress(now, &mut s_out);
        while let Some(p) = c_out.pop() {
            gw.send(now, &p).ok();
            c_out.recycle(p);
        }
        while let Some(p) = s_out.pop() {
            srv.send(now, &p).ok();
            s_out.recycle(p);
        }
        // Datagrams onto the links.
        for (session, up) in [(&mut gw, true), (&mut srv, false)] {
            while let Some(t) = session.poll_transmit(now, &mut buf) {
                if let Some(p) = paths.iter_mut().find(|p| p.id == t.path) {
                    let link = if up { &mut p.up } else { &mut p.down };
                    link.send_sized(now, buf[..t.len].to_vec(), t.len + WIRE_OVERHEAD);
                }
            }
        }
        // An end removes a vanished path once it calls it down.
        for session in [&mut gw, &mut srv] {
            while let Some(e) = session.poll_event() {
                if let Event::PathDown(id) = e {
                    if paths.iter().any(|p| p.id == id && p.vanished) {
                        session.remove_path(now, id).ok();
                    }
                }
            }
        }
        if out.completed.is_some() {
            break;
        }
        // The next instant anything is due.
        let mut next = end + Duration::from_micros(1);
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = next.min(t);
            }
        };
        consider(gw.poll_timeout());
        consider(srv.poll_timeout());
        consider(client.poll_at(now));
        consider(server.poll_at(now));
        for p in &paths {
            consider(p.up.poll_timeout());
            consider(p.down.poll_timeout());
        }
        consider(changes.peek().map(|(t, _)| Instant::ZERO + *t));
        // Never stand still: a timer at `now` fired above.
        now = next.max(now + Duration::from_micros(1));
    }
    out.received_bytes = received;
    out.received_hash = if received == run.file_bytes {
        rx_hash.finish()
    } else {
        0
    };
    out.received_prefix_intact = rx_hash.finish() == hash((0..received).map(file_byte));
    out.gateway = gw.membership_stats();
    out.server = srv.membership_stats();
    out.failover_resent = gw.stats().failover_resent;
    out.failover_left = gw.stats().failover_left;
    out.gateway_paths = gw.paths().iter().map(|p| p.id()).collect();
    out.server_paths = srv.paths().iter().map(|p| p.id()).collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Two relays of 4 Mbit/s and the gateway's own 2 Mbit/s link; relay 1 leaves at 2 s,
    /// relay 3 joins at 3 s.
    fn handover(leave: Change) -> MembershipRun {
        MembershipRun {
            paths: vec![
                LentPath::symmetric(0, None, 2.0, 20.0),
                LentPath::symmetric(1, Some(0x11), 4.0, 15.0),
                LentPath::symmetric(2, Some(0x22), 4.0, 25.0),
            ],
            changes: vec![
                (secs(2.0), leave),
                (
                    secs(3.0),
                    Change::Join(Box::new(LentPath::symmetric(3, Some(0x33), 4.0, 30.0))),
                ),
            ],
            file_bytes: 4_000_000,
            duration: secs(30.0),
            seed: 7,
            config: Config::default(),
        }
    }

    fn check_intact(o: &MembershipOutcome, run: &MembershipRun) {
        assert_eq!(o.received_bytes, run.file_bytes, "the whole file arrived");
        assert_eq!(o.received_hash, o.sent_hash, "the file's hash is intact");
        assert_eq!(o.gateway_paths, vec![0, 2, 3]);
        assert_eq!(o.server_paths, vec![0, 2, 3]);
        assert_eq!(o.gateway.paths_added, 1, "one relay joined");
    }

    #[test]
    fn a_session_survives_a_relay_leaving_and_another_joining_mid_transfer() {
        let run = handover(Change::Leave(1));
        let o = run_membership(&run).unwrap();
        check_intact(&o, &run);
        // 4 MB at about 10 Mbit/s: done within ~5 s; it stalls nowhere near the path
        // timeout once the relay left.
        let done = o.completed.expect("the upload completed");
        assert!(done < secs(8.0), "completed at {done:?}");
        // Traffic kept flowing across the change: no 300 ms without delivery between the
        // first second and completion (the inner TCP recovers what the leaving relay
        // held within a round trip or two).
        let last = (done.as_millis() / 100) as usize;
        assert!(
            o.goodput_series[10..last]
                .windows(3)
                .all(|w| w.iter().sum::<usize>() > 0),
            "{:?}",
            &o.goodput_series[..=last]
        );
        assert!(
            o.failover_resent + o.failover_left > 0,
            "the relay left with data in flight"
        );
        // And the joining relay was used: the rate after it joined beats the rate of
        // the two paths left before it.
        let rate =
            |a: usize, b: usize| o.goodput_series[a..b].iter().sum::<usize>() * 8 / (b - a) * 10;
        assert!(
            rate(35, last.min(45)) > rate(22, 30),
            "{:?}",
            o.goodput_series
        );
    }

    #[test]
    fn a_session_survives_a_relay_vanishing_and_another_joining() {
        let run = handover(Change::Vanish(1));
        let o = run_membership(&run).unwrap();
        check_intact(&o, &run);
        assert!(
            o.failover_resent + o.failover_left > 0,
            "what the vanished relay held was resent or left to TCP: {o:?}"
        );
        assert!(
            o.completed.is_some_and(|t| t < secs(10.0)),
            "{:?}",
            o.completed
        );
    }

    #[test]
    fn a_revoked_lenders_datagrams_are_refused_and_counted() {
        let mut run = handover(Change::Revoke(0x11));
        run.changes.retain(|(_, c)| !matches!(c, Change::Join(_)));
        // The gateway keeps sending on the revoked relay's path until its liveness calls
        // it down; those datagrams are refused by the server and counted.
        let o = run_membership(&run).unwrap();
        assert!(o.server.revoked_refused > 0, "{:?}", o.server);
        assert_eq!(o.server_paths, vec![0, 2]);
        assert_eq!(o.received_hash, o.sent_hash, "the file's hash is intact");
    }

    #[test]
    fn membership_runs_are_deterministic() {
        let run = handover(Change::Leave(1));
        let a = run_membership(&run).unwrap();
        let b = run_membership(&run).unwrap();
        assert_eq!(a.goodput_series, b.goodput_series);
        assert_eq!(a.completed, b.completed);
    }
}
