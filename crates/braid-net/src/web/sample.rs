//! What the dashboard charts: per-uplink samples and session events, derived from
//! successive status snapshots so the event loops need not know the dashboard exists.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::status::Status;

/// Samples and events kept for a page that opens late: 240 samples are two minutes at the
/// snapshot's 500 ms.
pub const HISTORY: usize = 240;
/// Events kept.
pub const EVENT_HISTORY: usize = 100;

/// One uplink at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PathSample {
    pub id: u8,
    pub name: String,
    pub state: String,
    pub tx_bps: f64,
    pub rx_bps: f64,
    pub rtt_ms: Option<f64>,
    pub tx_loss: f64,
    pub rx_loss: f64,
    /// The sender's queue estimate (drain time of the path's bottleneck queue).
    pub queue_ms: Option<f64>,
    /// Share of the datagrams sent since the previous sample that were repair (coded
    /// packets, retransmissions); none when nothing was sent.
    pub coded_share: Option<f64>,
    pub capacity_bps: u64,
    pub metered: bool,
    pub metered_bytes: u64,
    /// A gateway's metered uplink: bytes this cap period (across restarts), the cap, this
    /// interval's budget, and whether the engine holds the uplink.
    pub period_bytes: Option<u64>,
    pub cap_bytes: Option<u64>,
    pub budget_bytes: Option<u64>,
    pub held: bool,
}

/// One session (the gateway's, or one per gateway at a server) at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionSample {
    pub peer: String,
    pub established: bool,
    pub paths: Vec<PathSample>,
}

/// The daemon at one instant; `t` is its uptime in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    pub t: f64,
    pub role: String,
    pub sessions: Vec<SessionSample>,
}

/// Something that happened between two samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub t: f64,
    /// The session's peer; empty for the daemon as a whole.
    pub peer: String,
    pub path: Option<String>,
    /// `path-failed`, `path-revived`, `path-state`, `session-up`, `session-down`,
    /// `handshake`.
    pub kind: &'static str,
    pub detail: String,
}

/// The engine's per-path counters the status snapshot carries as JSON (braid-core's
/// `PathStats`), the few the dashboard needs.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct EnginePath {
    id: u8,
    #[serde(default)]
    queue_ms: f64,
    #[serde(default)]
    tx_data_packets: u64,
    #[serde(default)]
    tx_repair_packets: u64,
}

#[derive(Debug, Default, Deserialize)]
struct EngineStats {
    #[serde(default)]
    paths: Vec<EnginePath>,
}

#[derive(Clone, Debug, Default)]
struct PathMemo {
    state: String,
    stalls: u64,
    revivals: u64,
    data: u64,
    repair: u64,
}

#[derive(Clone, Debug, Default)]
struct SessionMemo {
    session_id: u32,
    established: bool,
    paths: HashMap<u8, PathMemo>,
}

/// Turns snapshots into samples and events, and keeps the recent ones.
#[derive(Debug, Default)]
pub struct Sampler {
    last_t: Option<f64>,
    handshakes: Option<u64>,
    sessions: HashMap<String, SessionMemo>,
    pub samples: VecDeque<Sample>,
    pub events: VecDeque<Event>,
}

impl Sampler {
    /// Takes the snapshot `s`; returns its sample and the events since the previous one,
    /// or `None` when the event loop has not refreshed it since.
    pub fn update(&mut self, s: &Status) -> Option<(Sample, Vec<Event>)> {
        if self.last_t == Some(s.uptime_s) {
            return None;
        }
        self.last_t = Some(s.uptime_s);
        let t = s.uptime_s;
        let mut events = Vec::new();
        let handshakes = s
            .security
            .as_ref()
            .and_then(|v| v.get("handshakes"))
            .and_then(serde_json::Value::as_u64);
        if let (Some(before), Some(now)) = (self.handshakes, handshakes) {
            if now > before {
                events.push(Event {
                    t,
                    peer: String::new(),
                    path: None,
                    kind: "handshake",
                    detail: format!("{} handshake(s) completed ({now} in all)", now - before),
                });
            }
        }
        self.handshakes = handshakes;
        let mut sessions = Vec::with_capacity(s.sessions.len());
        let mut seen = HashMap::with_capacity(s.sessions.len());
        for ss in &s.sessions {
            let engine: EngineStats = ss
                .engine
                .as_ref()
                .and_then(|v| EngineStats::deserialize(v).ok())
                .unwrap_or_default();
            let old = self.sessions.remove(&ss.peer);
            let mut memo = SessionMemo {
                session_id: ss.session_id,
                established: ss.established,
                paths: HashMap::with_capacity(ss.paths.len()),
            };
            match &old {
                Some(o) if o.established && !ss.established => events.push(Event {
                    t,
                    peer: ss.peer.clone(),
                    path: None,
                    kind: "session-down",
                    detail: "session not established".into(),
                }),
                Some(o) if ss.established && (!o.established || o.session_id != ss.session_id) => {
                    events.push(Event {
                        t,
                        peer: ss.peer.clone(),
                        path: None,
                        kind: "session-up",
                        detail: format!("session {:08x} established", ss.session_id),
                    })
                }
                None if ss.established => events.push(Event {
                    t,
                    peer: ss.peer.clone(),
                    path: None,
                    kind: "session-up",
                    detail: format!("session {:08x} established", ss.session_id),
                }),
                _ => {}
            }
            // A new session starts its counters from zero.
            let same = old
                .as_ref()
                .filter(|o| o.session_id == ss.session_id)
                .map(|o| &o.paths);
            let mut paths = Vec::with_capacity(ss.paths.len());
            for p in &ss.paths {
                let e = engine.paths.iter().find(|e| e.id == p.id);
                let prev = same.and_then(|m| m.get(&p.id));
                let (data, repair) = e.map_or((0, 0), |e| (e.tx_data_packets, e.tx_repair_packets));
                let coded_share = prev.and_then(|q| {
                    let d = data.saturating_sub(q.data);
                    let r = repair.saturating_sub(q.repair);
                    (d + r > 0).then(|| r as f64 / (d + r) as f64)
                });
                if let Some(q) = prev {
                    for (kind, n) in [
                        ("path-failed", p.tx_stalls.saturating_sub(q.stalls)),
                        ("path-revived", p.tx_revivals.saturating_sub(q.revivals)),
                    ] {
                        if n > 0 {
                            events.push(Event {
                                t,
                                peer: ss.peer.clone(),
                                path: Some(p.name.clone()),
                                kind,
                                detail: format!("{n} time(s)"),
                            });
                        }
                    }
                    if q.state != p.state {
                        events.push(Event {
                            t,
                            peer: ss.peer.clone(),
                            path: Some(p.name.clone()),
                            kind: "path-state",
                            detail: format!("{} -> {}", q.state, p.state),
                        });
                    }
                }
                memo.paths.insert(
                    p.id,
                    PathMemo {
                        state: p.state.clone(),
                        stalls: p.tx_stalls,
                        revivals: p.tx_revivals,
                        data,
                        repair,
                    },
                );
                paths.push(PathSample {
                    id: p.id,
                    name: p.name.clone(),
                    state: p.state.clone(),
                    tx_bps: p.tx_bps,
                    rx_bps: p.rx_bps,
                    rtt_ms: p.rtt_ms,
                    tx_loss: p.tx_loss,
                    rx_loss: p.rx_loss,
                    queue_ms: e.map(|e| e.queue_ms),
                    coded_share,
                    capacity_bps: p.capacity_bps,
                    metered: p.metered,
                    metered_bytes: p.metered_bytes,
                    period_bytes: p.meter.as_ref().map(|m| m.period_bytes),
                    cap_bytes: p.meter.as_ref().and_then(|m| m.cap_bytes),
                    budget_bytes: p.meter.as_ref().map(|m| m.budget_bytes),
                    held: p.meter.as_ref().is_some_and(|m| m.held),
                });
            }
            seen.insert(ss.peer.clone(), memo);
            sessions.push(SessionSample {
                peer: ss.peer.clone(),
                established: ss.established,
                paths,
            });
        }
        for (peer, o) in self.sessions.drain() {
            if o.established {
                events.push(Event {
                    t,
                    peer,
                    path: None,
                    kind: "session-down",
                    detail: "session ended".into(),
                });
            }
        }
        self.sessions = seen;
        let sample = Sample {
            t,
            role: s.role.clone(),
            sessions,
        };
        push_bounded(&mut self.samples, sample.clone(), HISTORY);
        for e in &events {
            push_bounded(&mut self.events, e.clone(), EVENT_HISTORY);
        }
        Some((sample, events))
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    if q.len() == cap {
        q.pop_front();
    }
    q.push_back(v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{PathStatus, SessionStatus};

    fn status(t: f64, state: &str, stalls: u64, data: u64, repair: u64, hs: u64) -> Status {
        Status {
            role: "gateway".into(),
            uptime_s: t,
            security: Some(serde_json::json!({ "handshakes": hs })),
            sessions: vec![SessionStatus {
                session_id: 7,
                peer: "srv".into(),
                established: true,
                paths: vec![PathStatus {
                    id: 0,
                    name: "lte".into(),
                    state: state.into(),
                    tx_bps: 1e6,
                    rtt_ms: Some(40.0),
                    tx_stalls: stalls,
                    metered: true,
                    metered_bytes: 1234,
                    meter: Some(crate::status::MeterStatus {
                        period_bytes: 5678,
                        cap_bytes: Some(10_000),
                        budget_bytes: 1500,
                        held: true,
                        ..crate::status::MeterStatus::default()
                    }),
                    ..PathStatus::default()
                }],
                engine: Some(serde_json::json!({ "paths": [{
                    "id": 0, "queue_ms": 12.5,
                    "tx_data_packets": data, "tx_repair_packets": repair,
                    "some_other_counter": 3
                }]})),
                ..SessionStatus::default()
            }],
            ..Status::default()
        }
    }

    #[test]
    fn samples_carry_queue_coded_share_and_metered_bytes() {
        let mut s = Sampler::default();
        let (a, ev) = s.update(&status(1.0, "up", 0, 100, 0, 1)).unwrap();
        assert_eq!(ev[0].kind, "session-up");
        let p = &a.sessions[0].paths[0];
        assert_eq!(
            (p.queue_ms, p.coded_share, p.metered_bytes),
            (Some(12.5), None, 1234)
        );
        assert_eq!(
            (p.period_bytes, p.cap_bytes, p.budget_bytes, p.held),
            (Some(5678), Some(10_000), Some(1500), true)
        );
        let (b, _) = s.update(&status(1.5, "up", 0, 190, 10, 1)).unwrap();
        assert_eq!(b.sessions[0].paths[0].coded_share, Some(0.1));
        assert!(
            s.update(&status(1.5, "up", 0, 190, 10, 1)).is_none(),
            "unchanged"
        );
        assert_eq!(s.samples.len(), 2);
    }

    #[test]
    fn failures_revivals_state_changes_and_handshakes_become_events() {
        let mut s = Sampler::default();
        s.update(&status(1.0, "up", 0, 0, 0, 1));
        let (_, ev) = s.update(&status(1.5, "down", 2, 0, 0, 2)).unwrap();
        let kinds: Vec<&str> = ev.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["handshake", "path-failed", "path-state"]);
        assert_eq!(ev[1].path.as_deref(), Some("lte"));
        assert_eq!(ev[2].detail, "up -> down");
        let mut gone = status(2.0, "down", 2, 0, 0, 2);
        gone.sessions.clear();
        let (_, ev) = s.update(&gone).unwrap();
        assert_eq!(ev[0].kind, "session-down");
        assert_eq!(s.events.len(), 5, "session-up first");
    }

    #[test]
    fn history_is_bounded() {
        let mut s = Sampler::default();
        for i in 0..HISTORY + 10 {
            s.update(&status(i as f64, "up", 0, 0, 0, 0));
        }
        assert_eq!(s.samples.len(), HISTORY);
        assert_eq!(s.samples[0].t, 10.0);
    }
}
