//! A BaPu-AP, home or monitor (BaPu §2.2 steps 2-8): it keeps the session's packets it
//! overheard (once each, by IP ID), reports them with its send-buffer level, and queues
//! for its uplink the ones the gateway's announcements give it.
//!
//! The I/O layer feeds it overheard frames (or their IP packets with their BSSID), tells it how
//! full its uplink's send buffer is, and sends what [`BapuAp::poll_report`] and
//! [`BapuAp::poll_forward`] return.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::dedup::IpIdFilter;
use super::key::{classify, SessionKey};
use super::report::{Announce, Entry, Report, MAX_ENTRIES};
use super::{ApId, SessionId};
use crate::Instant;

/// How an AP reports and how much it keeps.
#[derive(Clone, Debug)]
pub struct ApConfig {
    pub id: ApId,
    /// Entries wait at most this long to be batched into one report.
    pub report_interval: Duration,
    /// Captured packets kept for forwarding; the oldest go first beyond this.
    pub capture_limit: usize,
    /// IP IDs remembered per session for duplicate removal.
    pub dedup_window: usize,
    /// Sessions tracked at once; packets of further sessions are ignored and counted.
    pub max_sessions: usize,
}

impl ApConfig {
    pub fn new(id: ApId) -> ApConfig {
        ApConfig {
            id,
            report_interval: Duration::from_millis(5),
            capture_limit: 8192,
            dedup_window: 4096,
            max_sessions: 64,
        }
    }
}

/// What an AP did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ApStats {
    pub overheard: u64,
    /// MAC retransmissions refused by IP ID.
    pub duplicates: u64,
    pub reports: u64,
    pub report_bytes: u64,
    /// Packets the gateway gave this AP and it queued.
    pub forwarded: u64,
    /// Packets given to this AP it no longer held (evicted from the capture store).
    pub missing: u64,
    /// Captured packets evicted before any announcement named them.
    pub evicted: u64,
    /// Packets of sessions beyond `max_sessions`.
    pub untracked: u64,
    /// Captured frames that carried no upload ([`super::frame::FrameError`]: a bad FCS,
    /// encrypted, not station-to-AP data, ...).
    pub refused_frames: u64,
}

struct ApSession {
    key: SessionKey,
    filter: IpIdFilter,
    pending: Vec<Entry>,
    since: Option<Instant>,
    /// The free send buffer the last report of this session told the gateway.
    reported_free: Option<u32>,
}

/// One BaPu-AP's part of every session it overhears.
pub struct BapuAp {
    cfg: ApConfig,
    sessions: HashMap<SessionId, ApSession>,
    store: HashMap<(SessionId, u16), Vec<u8>>,
    order: VecDeque<(SessionId, u16)>,
    forward: VecDeque<(SessionId, Vec<u8>)>,
    enqueued: u32,
    /// The most free send buffer seen: the buffer's size.
    buffer_size: u32,
    stats: ApStats,
}

impl BapuAp {
    pub fn new(cfg: ApConfig) -> BapuAp {
        BapuAp {
            cfg,
            sessions: HashMap::new(),
            store: HashMap::new(),
            order: VecDeque::new(),
            forward: VecDeque::new(),
            enqueued: 0,
            buffer_size: 0,
            stats: ApStats::default(),
        }
    }

    pub fn id(&self) -> ApId {
        self.cfg.id
    }

    pub fn stats(&self) -> &ApStats {
        &self.stats
    }

    /// The key of session `id`, if this AP tracks it.
    pub fn session_key(&self, id: SessionId) -> Option<SessionKey> {
        self.sessions.get(&id).map(|s| s.key)
    }

    /// A frame a monitor interface captured (radiotap, 802.11; [`super::frame`]): its
    /// upload, if it carries one, as [`BapuAp::on_overheard`]; a frame that carries none
    /// is counted and its reason returned.
    pub fn on_frame<'a>(
        &mut self,
        now: Instant,
        frame: &'a [u8],
    ) -> Result<Option<(SessionId, &'a [u8])>, super::FrameError> {
        let f = super::frame::parse_radiotap(frame).inspect_err(|_| {
            self.stats.refused_frames += 1;
        })?;
        Ok(self
            .on_overheard(now, f.bssid, f.packet)
            .map(|id| (id, f.packet)))
    }

    /// An IP packet overheard (or, at the home AP, received) in a frame of `bssid`.
    /// Returns the session it belongs to if it was new (not a MAC retransmission).
    pub fn on_overheard(
        &mut self,
        now: Instant,
        bssid: [u8; 6],
        packet: &[u8],
    ) -> Option<SessionId> {
        let o = classify(bssid, packet)?;
        let id = o.key.id();
        if !self.sessions.contains_key(&id) {
            if self.sessions.len() >= self.cfg.max_sessions {
                self.stats.untracked += 1;
                return None;
            }
            self.sessions.insert(
                id,
                ApSession {
                    key: o.key,
                    filter: IpIdFilter::new(self.cfg.dedup_window),
                    pending: Vec::new(),
                    since: None,
                    reported_free: None,
                },
            );
        }
        let s = self.sessions.get_mut(&id)?;
        if !s.filter.insert(o.ip_id) {
            self.stats.duplicates += 1;
            return None;
        }
        self.stats.overheard += 1;
        s.pending.push(Entry {
            ip_id: o.ip_id,
            home_only: o.home_only,
            seq: o.seq,
            seq_len: o.seq_len,
            bytes: o.bytes,
        });
        s.since.get_or_insert(now);
        if let Some(old) = self.store.insert((id, o.ip_id), packet.to_vec()) {
            drop(old);
        } else {
            self.order.push_back((id, o.ip_id));
        }
        while self.order.len() > self.cfg.capture_limit {
            if let Some(k) = self.order.pop_front() {
                if self.store.remove(&k).is_some() {
                    self.stats.evicted += 1;
                }
            }
        }
        Some(id)
    }

    /// A report that is due, given `buffer_free` bytes free in the uplink's send buffer:
    /// one per session with entries waiting, once the oldest waited `report_interval` or
    /// [`MAX_ENTRIES`] are waiting; or, with no entries, a buffer update.
    ///
    /// The update goes to a session whose last report showed the buffer over half full
    /// once a quarter of the buffer has drained since (TCP's window update). BaPu §3.4
    /// has reports carry the free space but sends them only with new captures: when
    /// the sender stops, its window waiting on a packet only full APs hold, the gateway
    /// never hears their buffers drain and the upload stalls until the sender's
    /// retransmission timeout (bapu-fig12b's full run: 0.31 of the uplinks at 60% monitor
    /// loss, 0.12 with 2 APs at 20%).
    pub fn poll_report(&mut self, now: Instant, buffer_free: u32) -> Option<Report> {
        let interval = self.cfg.report_interval;
        self.buffer_size = self.buffer_size.max(buffer_free);
        let size = self.buffer_size;
        let due = |s: &ApSession| {
            s.since.is_some_and(|t| now >= t + interval) || s.pending.len() >= MAX_ENTRIES
        };
        let update = |s: &ApSession| {
            s.pending.is_empty()
                && s.reported_free
                    .is_some_and(|r| r < size / 2 && buffer_free >= r.saturating_add(size / 4))
        };
        let (&id, s) = match self.sessions.iter_mut().find(|(_, s)| due(s)) {
            Some(found) => found,
            None => self.sessions.iter_mut().find(|(_, s)| update(s))?,
        };
        let n = s.pending.len().min(MAX_ENTRIES);
        let entries: Vec<Entry> = s.pending.drain(..n).collect();
        s.since = (!s.pending.is_empty()).then_some(now);
        s.reported_free = Some(buffer_free);
        let r = Report {
            ap: self.cfg.id,
            session: id,
            buffer_free,
            enqueued: self.enqueued,
            entries,
        };
        self.stats.reports += 1;
        self.stats.report_bytes += r.wire_len() as u64;
        Some(r)
    }

    /// When a report falls due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sessions
            .values()
            .filter_map(|s| s.since)
            .min()
            .map(|t| t + self.cfg.report_interval)
    }

    /// An announcement from the gateway: packets given to this AP are queued for the
    /// uplink; the others are forgotten (their forwarder is someone else).
    pub fn on_announce(&mut self, _now: Instant, a: &Announce) {
        for e in &a.entries {
            let packet = self.store.remove(&(a.session, e.ip_id));
            if a.forwarder != self.cfg.id {
                continue;
            }
            self.enqueued = self.enqueued.wrapping_add(u32::from(e.bytes));
            match packet {
                Some(p) => {
                    self.stats.forwarded += 1;
                    self.forward.push_back((a.session, p));
                }
                None => self.stats.missing += 1,
            }
        }
    }

    /// The next packet to write to the uplink, with its session.
    pub fn poll_forward(&mut self) -> Option<(SessionId, Vec<u8>)> {
        self.forward.pop_front()
    }
}
