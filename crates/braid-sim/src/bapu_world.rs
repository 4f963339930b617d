//! BaPu's world (BaPu §2, §4 Figure 6): a sender uploads through its home AP over a
//! shared WiFi medium that neighbouring monitor APs overhear; every AP forwards what the
//! gateway gives it over its own broadband uplink; the gateway hands the packets to the
//! receiver. The engine's BaPu parts (`braid_core::bapu`) run in every AP and in the
//! gateway; the end hosts are braid-sim's TCP/UDP hosts.
//!
//! ```text
//! sender ~~WiFi~~> home AP (AP 0) ──uplink 0──┐
//!          ~~~~~~> monitor AP i  ──uplink i──┼─> gateway ── receiver
//!  <~~WiFi~~ home AP <──── downlink (ACKs, announcements) ─┘
//! ```
//! - WiFi: one frame at a time at `wifi_mbps`. A frame from the sender is tried until the
//!   home AP takes it (each try lost with `home_loss`), at most `mac_tries` times; each
//!   monitor AP overhears each try with its own loss probability, so it may capture one
//!   frame twice (removed by IP ID). Frames to the sender are tried the same way.
//! - Uplinks: the paper's TCP tunnels, as a reliable FIFO at the AP's rate and one-way
//!   delay. Reports go ahead of data (their own connection); data waits in the AP's send
//!   buffer, whose free space the reports carry. Each message costs its bytes plus a
//!   40-byte TCP/IP header.
//! - Downlinks (gateway to APs, 20 Mbit/s in the paper): only their delay is modelled.
//!
//! Deterministic: one seeded RNG per random thing, one event queue ordered by time and
//! insertion.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

use braid_core::bapu::ap::{ApConfig, BapuAp};
use braid_core::bapu::frame;
use braid_core::bapu::proactive_ack::{AckVerdict, ProactiveAck, ProactiveAckConfig};
use braid_core::bapu::repair::{Repair, RepairConfig, RepairStats};
use braid_core::bapu::report::{self, Announce, Message};
use braid_core::bapu::scheduler::{Choice, Scheduler, SchedulerConfig, SchedulerStats};
use braid_core::bapu::simple_buffer::SimpleBuffer;
use braid_core::bapu::{ApStats, IpIdFilter, ProactiveAckStats, SessionId};
use braid_core::Instant;
use serde::Serialize;

use crate::host::{self, BulkConfig, Direction, Host, UdpCbrConfig, WorkloadConfig};
use crate::{Node, Rng, SimError};

/// TCP/IP header of a tunnel segment.
pub const TUNNEL_HEADER: usize = 40;
/// BaPu's data message header: version, type, APID, zero, session id.
pub const DATA_HEADER: usize = 8;
/// Bytes of 802.11 MAC, LLC and PHY framing counted in each try's airtime.
const WIFI_FRAMING: usize = 60;

/// Which BaPu the gateway and home AP run (BaPu §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BapuSystem {
    /// No buffering, no Proactive-ACK.
    Bapu,
    /// The gateway resequences TCP; no Proactive-ACK.
    SimpleBuffer,
    /// Proactive-ACK at the home AP.
    BapuPro,
    /// Proactive-ACK, with the forwarder picked by earliest expected arrival (braid's
    /// delay-based path scheduling) instead of first come.
    Braid,
}

impl BapuSystem {
    pub fn label(self) -> &'static str {
        match self {
            BapuSystem::Bapu => "BaPu",
            BapuSystem::SimpleBuffer => "SimpleBuffer",
            BapuSystem::BapuPro => "BaPu-Pro",
            BapuSystem::Braid => "braid",
        }
    }

    fn proactive(self) -> bool {
        matches!(self, BapuSystem::BapuPro | BapuSystem::Braid)
    }
}

/// What the sender sends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BapuTraffic {
    /// UDP at this payload rate (Mbit/s).
    Udp { mbps: f64 },
    /// One unlimited TCP upload.
    Tcp,
    /// One TCP upload leaving the sender at this rate (Mbit/s), like nuttcp's fixed rate.
    TcpPaced { mbps: f64 },
}

/// One BaPu-AP's broadband link and its view of the sender's frames.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ApLink {
    pub up_kbps: f64,
    pub rtt_ms: f64,
    /// Chance a monitor AP misses one try of a frame (unused for the home AP).
    pub monitor_loss: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BapuWorldConfig {
    pub seed: u64,
    pub duration_s: f64,
    /// AP 0 is the home AP.
    pub aps: Vec<ApLink>,
    pub system: BapuSystem,
    pub traffic: BapuTraffic,
    /// TCP or UDP payload bytes per packet (BaPu: 1350).
    pub payload: usize,
    pub wifi_mbps: f64,
    /// Chance one try of a frame between sender and home AP is lost.
    pub home_loss: f64,
    /// Tries per frame (802.11: a unicast up to 12 retransmissions, §3.1).
    pub mac_tries: u32,
    /// Each AP's send buffer for forwarded data (at least twice its uplink's
    /// bandwidth-delay product).
    pub send_buffer: usize,
    /// Receiver throughput samples (ms).
    pub sample_ms: u64,
}

impl BapuWorldConfig {
    /// BaPu's testbed (§4): `n` APs of 2 Mbit/s up and 32 ms RTT, 1350-byte payloads.
    pub fn paper(n: usize, system: BapuSystem, traffic: BapuTraffic, seed: u64) -> Self {
        BapuWorldConfig {
            seed,
            duration_s: 30.0,
            aps: vec![
                ApLink {
                    up_kbps: 2000.0,
                    rtt_ms: 32.0,
                    monitor_loss: 0.0,
                };
                n
            ],
            system,
            traffic,
            payload: 1350,
            wifi_mbps: 100.0,
            home_loss: 0.1,
            mac_tries: 13,
            send_buffer: 64 * 1024,
            sample_ms: 1000,
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BapuReport {
    pub system: BapuSystem,
    /// Payload bytes the receiver got in order (TCP) or at all (UDP), per second.
    pub goodput_mbps: f64,
    /// Receiver goodput per `sample_ms`, from the start.
    pub series_mbps: Vec<f64>,
    /// Sum of the APs' uplink rates (Mbit/s).
    pub capacity_mbps: f64,
    /// Reports' share of the uplinks (Mbit/s, tunnel headers included).
    pub control_mbps: f64,
    /// Uplink bytes per forwarded packet of `payload` bytes: packet, data header, tunnel.
    pub data_wire_bytes: usize,
    /// Bytes forwarded per AP.
    pub forwarded_bytes: Vec<u64>,
    /// Frames the air lost for every AP (all tries missed by the home AP).
    pub air_lost: u64,
    pub ap: ApStats,
    pub scheduler: SchedulerStats,
    pub proactive_ack: Option<ProactiveAckStats>,
    /// The gateway's local repair under Proactive-ACK.
    pub repair: Option<RepairStats>,
    /// Packets the gateway got twice (a reassigned forwarder delivered too).
    pub gateway_duplicates: u64,
    /// TCP retransmissions the sender made.
    pub retransmissions: Option<u64>,
    pub workloads: Vec<host::WorkloadReport>,
}

impl BapuReport {
    /// The most goodput the uplinks can carry with BaPu's overhead: their capacity less
    /// the reports' share, times payload over a forwarded packet's uplink bytes.
    pub fn max_goodput_mbps(&self, payload: usize) -> f64 {
        (self.capacity_mbps - self.control_mbps) * payload as f64 / self.data_wire_bytes as f64
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// One try of a frame from the sender as an AP's monitor interface captures it
    /// (radiotap, 802.11).
    Overheard {
        ap: usize,
        frame: Vec<u8>,
    },
    /// A frame reaches the sender.
    ToSender(Vec<u8>),
    ToReceiver(Vec<u8>),
    /// A packet from the receiver reaches the home AP.
    HomeDownlink(Vec<u8>),
    UplinkDone(usize),
    GatewayReport(Vec<u8>),
    GatewayData {
        ap: usize,
        session: SessionId,
        packet: Vec<u8>,
    },
    Announce {
        ap: usize,
        bytes: Vec<u8>,
    },
    Timers,
    Pace,
}

enum Queued {
    Report(Vec<u8>),
    Data(SessionId, Vec<u8>),
}

struct Uplink {
    rate_bps: f64,
    delay: Duration,
    control: VecDeque<Vec<u8>>,
    data: VecDeque<(SessionId, Vec<u8>)>,
    data_bytes: usize,
    /// Send buffer: `send_buffer`, or twice the uplink's bandwidth-delay product if
    /// larger, as Linux autotunes a TCP tunnel's send buffer.
    buffer: usize,
    busy: bool,
    control_bytes: u64,
    forwarded_bytes: u64,
}

struct GatewaySession {
    scheduler: Scheduler,
    filter: IpIdFilter,
    buffer: Option<SimpleBuffer>,
    /// Per AP: (bytes, since) for the rate estimate, and the minimum assign-to-arrival.
    rate: Vec<(u64, Instant)>,
    min_loop: Vec<Duration>,
}

/// Runs one BaPu world.
pub fn run_bapu(cfg: &BapuWorldConfig) -> Result<BapuReport, SimError> {
    World::new(cfg)?.run()
}

struct World<'a> {
    cfg: &'a BapuWorldConfig,
    now: Instant,
    end: Instant,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    serial: u64,
    sender: Host,
    receiver: Host,
    aps: Vec<BapuAp>,
    uplinks: Vec<Uplink>,
    sessions: HashMap<SessionId, GatewaySession>,
    pa: Option<ProactiveAck>,
    pa_session: Option<SessionId>,
    /// The gateway's copies of what it delivered, for Proactive-ACK's flow.
    repair: Option<Repair>,
    air_rng: Rng,
    wifi_free: Instant,
    pace_queue: VecDeque<Vec<u8>>,
    pace_free: Instant,
    pace_armed: Option<Instant>,
    air_lost: u64,
    /// The sender's 802.11 sequence number, one per frame (its retries repeat it).
    frame_seq: u16,
    gateway_duplicates: u64,
    timers_at: Option<Instant>,
}

const BSSID: [u8; 6] = [0x02, 0xba, 0x90, 0, 0, 1];
/// The sender's station address and the next hop it sends to (the home AP's router).
const SENDER: [u8; 6] = [0x02, 0xba, 0x90, 0, 0, 2];
const GATEWAY: [u8; 6] = [0x02, 0xba, 0x90, 0, 0, 3];

fn at_us(t: Instant) -> u64 {
    t.as_micros()
}

impl<'a> World<'a> {
    fn new(cfg: &'a BapuWorldConfig) -> Result<World<'a>, SimError> {
        let end = Instant::from_micros((cfg.duration_s * 1e6) as u64);
        let workload = match cfg.traffic {
            BapuTraffic::Udp { mbps } => WorkloadConfig::UdpCbr(UdpCbrConfig {
                rate_mbps: Some(mbps),
                packet_bytes: cfg.payload,
                direction: Direction::Up,
                ..UdpCbrConfig::default()
            }),
            BapuTraffic::Tcp => WorkloadConfig::Bulk(BulkConfig {
                direction: Direction::Up,
                sample_ms: cfg.sample_ms,
                ..BulkConfig::default()
            }),
            // An application writing at a fixed rate keeps little queued: a 1 MiB
            // window bounds what waits before the pacer (it must still cover what
            // Proactive-ACK acknowledges ahead of the receiver: the APs' buffers).
            BapuTraffic::TcpPaced { .. } => WorkloadConfig::Bulk(BulkConfig {
                direction: Direction::Up,
                sample_ms: cfg.sample_ms,
                buffer_bytes: 1 << 20,
                ..BulkConfig::default()
            }),
        };
        let (sender, receiver) = host::build_hosts(&[workload], cfg.seed, end, cfg.payload + 40)?;
        let aps = (0..cfg.aps.len())
            .map(|i| BapuAp::new(ApConfig::new(i as u8)))
            .collect();
        let uplinks = cfg
            .aps
            .iter()
            .map(|l| Uplink {
                rate_bps: l.up_kbps * 1000.0,
                delay: Duration::from_micros((l.rtt_ms * 500.0) as u64),
                control: VecDeque::new(),
                data: VecDeque::new(),
                data_bytes: 0,
                buffer: cfg
                    .send_buffer
                    .max((2.0 * l.up_kbps * 1000.0 / 8.0 * l.rtt_ms / 1000.0) as usize),
                busy: false,
                control_bytes: 0,
                forwarded_bytes: 0,
            })
            .collect();
        Ok(World {
            cfg,
            now: Instant::ZERO,
            end,
            queue: BinaryHeap::new(),
            serial: 0,
            sender,
            receiver,
            aps,
            uplinks,
            sessions: HashMap::new(),
            pa: cfg
                .system
                .proactive()
                .then(|| ProactiveAck::new(ProactiveAckConfig::default())),
            pa_session: None,
            repair: cfg
                .system
                .proactive()
                .then(|| Repair::new(RepairConfig::default())),
            air_rng: Rng::child(cfg.seed, "bapu/air"),
            wifi_free: Instant::ZERO,
            pace_queue: VecDeque::new(),
            pace_free: Instant::ZERO,
            pace_armed: None,
            air_lost: 0,
            frame_seq: 0,
            gateway_duplicates: 0,
            timers_at: None,
        })
    }

    fn push(&mut self, at: Instant, e: Event) {
        self.serial += 1;
        self.queue.push(Reverse((at_us(at), self.serial, e)));
    }

    fn run(mut self) -> Result<BapuReport, SimError> {
        self.push(Instant::ZERO, Event::Timers);
        while let Some(Reverse((t, _, e))) = self.queue.pop() {
            let t = Instant::from_micros(t);
            if t > self.end {
                break;
            }
            self.now = t;
            self.handle(e);
            self.pump();
        }
        Ok(self.report())
    }

    fn handle(&mut self, e: Event) {
        let now = self.now;
        match e {
            Event::Overheard { ap, frame } => {
                let new = self.aps[ap].on_frame(now, &frame).ok().flatten();
                if let (0, Some((_, packet))) = (ap, new) {
                    if let Some(pa) = &mut self.pa {
                        pa.on_uplink(now, packet);
                    }
                }
            }
            Event::ToSender(p) => self.sender.receive(now, p),
            Event::ToReceiver(p) => self.receiver.receive(now, p),
            Event::HomeDownlink(p) => {
                let pass = match &mut self.pa {
                    Some(pa) => pa.on_downlink(now, &p) == AckVerdict::Pass,
                    None => true,
                };
                if pass {
                    self.air_to_sender(p);
                }
            }
            Event::UplinkDone(ap) => {
                self.uplinks[ap].busy = false;
                self.start_uplink(ap);
            }
            Event::GatewayReport(bytes) => self.gateway_report(&bytes),
            Event::GatewayData {
                ap,
                session,
                packet,
            } => self.gateway_data(ap, session, packet),
            Event::Announce { ap, bytes } => {
                let Ok(Message::Announce(a)) = report::parse(&bytes) else {
                    return;
                };
                self.aps[ap].on_announce(now, &a);
                if ap == 0 && Some(a.session) == self.pa_session {
                    if let Some(pa) = &mut self.pa {
                        for e in &a.entries {
                            pa.on_held(now, e);
                        }
                    }
                }
            }
            Event::Timers => {
                self.timers_at = None;
            }
            Event::Pace => {}
        }
    }

    /// Moves everything that can move at `now`, then arms the timer for the next deadline.
    fn pump(&mut self) {
        let now = self.now;
        // The hosts.
        if self.sender.poll_timeout().is_some_and(|t| t <= now) {
            self.sender.handle_timeout(now);
        }
        while let Some(p) = self.sender.poll_transmit(now) {
            match self.cfg.traffic {
                BapuTraffic::TcpPaced { .. } => self.pace_queue.push_back(p),
                _ => self.air_from_sender(p),
            }
        }
        if let BapuTraffic::TcpPaced { mbps } = self.cfg.traffic {
            while self.pace_free <= now {
                let Some(p) = self.pace_queue.pop_front() else {
                    break;
                };
                let start = self.pace_free.max(now);
                self.pace_free = start + secs(p.len() as f64 * 8.0 / (mbps * 1e6));
                self.air_from_sender(p);
            }
            if !self.pace_queue.is_empty() && self.pace_armed != Some(self.pace_free) {
                self.pace_armed = Some(self.pace_free);
                self.push(self.pace_free, Event::Pace);
            }
        }
        if self.receiver.poll_timeout().is_some_and(|t| t <= now) {
            self.receiver.handle_timeout(now);
        }
        while let Some(p) = self.receiver.poll_transmit(now) {
            if let Some(again) = self
                .repair
                .as_mut()
                .and_then(|r| r.on_receiver_ack(now, &p))
            {
                self.push(now + Duration::from_micros(200), Event::ToReceiver(again));
            }
            // Receiver → gateway (LAN) → home AP's downlink.
            let at = now + self.uplinks[0].delay;
            self.push(at, Event::HomeDownlink(p));
        }
        // The APs: reports and forwarded packets.
        for i in 0..self.aps.len() {
            let u = &self.uplinks[i];
            let free = u.buffer.saturating_sub(u.data_bytes) as u32;
            while let Some(r) = self.aps[i].poll_report(now, free) {
                let mut b = Vec::with_capacity(r.wire_len());
                r.encode(&mut b);
                self.uplinks[i].control.push_back(b);
            }
            while let Some((s, p)) = self.aps[i].poll_forward() {
                self.uplinks[i].data_bytes += p.len();
                self.uplinks[i].data.push_back((s, p));
            }
            self.start_uplink(i);
        }
        // The gateway's timers.
        let mut delivered = Vec::new();
        for s in self.sessions.values_mut() {
            if s.scheduler.poll_timeout().is_some_and(|t| t <= now) {
                s.scheduler.handle_timeout(now);
            }
            if let Some(b) = &mut s.buffer {
                if b.poll_timeout().is_some_and(|t| t <= now) {
                    b.handle_timeout(now);
                }
                while let Some(p) = b.poll_deliver() {
                    delivered.push(p);
                }
            }
        }
        for p in delivered {
            self.push(now + Duration::from_micros(200), Event::ToReceiver(p));
        }
        self.announce_all();
        // Proactive-ACK's ACKs.
        if let Some(pa) = &mut self.pa {
            if pa.poll_timeout().is_some_and(|t| t <= now) {
                pa.handle_timeout(now);
            }
            let mut acks = Vec::new();
            while let Some(a) = pa.poll_ack() {
                acks.push(a);
            }
            for a in acks {
                self.air_to_sender(a);
            }
        }
        self.arm();
    }

    fn arm(&mut self) {
        let now = self.now;
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                let t = t.max(now + Duration::from_micros(1));
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
        };
        consider(self.sender.poll_timeout());
        consider(self.receiver.poll_timeout());
        for ap in &self.aps {
            consider(ap.poll_timeout());
        }
        for s in self.sessions.values() {
            consider(s.scheduler.poll_timeout());
            consider(s.buffer.as_ref().and_then(SimpleBuffer::poll_timeout));
        }
        consider(self.pa.as_ref().and_then(ProactiveAck::poll_timeout));
        if let Some(t) = next {
            if self.timers_at.is_none_or(|a| t < a) {
                self.timers_at = Some(t);
                self.push(t, Event::Timers);
            }
        }
    }

    /// A frame from the sender on the air: tried until the home AP takes it; each try is
    /// overheard by each monitor AP with its own chance.
    fn air_from_sender(&mut self, p: Vec<u8>) {
        let airtime = secs((p.len() + WIFI_FRAMING) as f64 * 8.0 / (self.cfg.wifi_mbps * 1e6));
        let mut t = self.wifi_free.max(self.now);
        let mut taken = false;
        self.frame_seq = self.frame_seq.wrapping_add(1);
        for try_ in 0..self.cfg.mac_tries.max(1) {
            t += airtime;
            let frame =
                frame::build_uplink(BSSID, SENDER, GATEWAY, self.frame_seq, try_ > 0, true, &p);
            for ap in 1..self.cfg.aps.len() {
                if !self.air_rng.chance(self.cfg.aps[ap].monitor_loss) {
                    self.push(
                        t,
                        Event::Overheard {
                            ap,
                            frame: frame.clone(),
                        },
                    );
                }
            }
            if !self.air_rng.chance(self.cfg.home_loss) {
                self.push(t, Event::Overheard { ap: 0, frame });
                taken = true;
                break;
            }
        }
        if !taken {
            self.air_lost += 1;
        }
        self.wifi_free = t;
    }

    /// A frame from the home AP to the sender.
    fn air_to_sender(&mut self, p: Vec<u8>) {
        let airtime = secs((p.len() + WIFI_FRAMING) as f64 * 8.0 / (self.cfg.wifi_mbps * 1e6));
        let mut t = self.wifi_free.max(self.now);
        let mut taken = false;
        for _ in 0..self.cfg.mac_tries.max(1) {
            t += airtime;
            if !self.air_rng.chance(self.cfg.home_loss) {
                taken = true;
                break;
            }
        }
        self.wifi_free = t;
        if taken {
            self.push(t, Event::ToSender(p));
        } else {
            self.air_lost += 1;
        }
    }

    fn start_uplink(&mut self, ap: usize) {
        let u = &mut self.uplinks[ap];
        if u.busy {
            return;
        }
        let item = if let Some(b) = u.control.pop_front() {
            Queued::Report(b)
        } else if let Some((s, p)) = u.data.pop_front() {
            u.data_bytes -= p.len();
            Queued::Data(s, p)
        } else {
            return;
        };
        let wire = match &item {
            Queued::Report(b) => {
                u.control_bytes += (b.len() + TUNNEL_HEADER) as u64;
                b.len() + TUNNEL_HEADER
            }
            Queued::Data(_, p) => {
                u.forwarded_bytes += p.len() as u64;
                p.len() + DATA_HEADER + TUNNEL_HEADER
            }
        };
        let done = self.now + secs(wire as f64 * 8.0 / u.rate_bps);
        u.busy = true;
        let arrive = done + u.delay;
        self.push(done, Event::UplinkDone(ap));
        match item {
            Queued::Report(b) => self.push(arrive, Event::GatewayReport(b)),
            Queued::Data(session, packet) => self.push(
                arrive,
                Event::GatewayData {
                    ap,
                    session,
                    packet,
                },
            ),
        }
    }

    fn gateway_report(&mut self, bytes: &[u8]) {
        let Ok(Message::Report(r)) = report::parse(bytes) else {
            return;
        };
        if !self.sessions.contains_key(&r.session) {
            // Registration (BaPu §3.2 step 3) stands in here: the gateway learns the
            // session's key from the AP that reported it.
            let Some(key) = self
                .aps
                .get(usize::from(r.ap))
                .and_then(|a| a.session_key(r.session))
            else {
                return;
            };
            let tcp = key.flow.protocol == 6;
            let mut sc = SchedulerConfig::new(r.session, 0, tcp);
            if self.cfg.system == BapuSystem::Braid {
                sc.choice = Choice::EarliestArrival;
            }
            if tcp && self.pa.is_some() {
                self.pa_session = Some(r.session);
            }
            let buffer = (tcp && self.cfg.system == BapuSystem::SimpleBuffer)
                .then(|| SimpleBuffer::new(4 << 20, Duration::from_millis(500)));
            self.sessions.insert(
                r.session,
                GatewaySession {
                    scheduler: Scheduler::new(sc),
                    filter: IpIdFilter::new(8192),
                    buffer,
                    rate: vec![(0, self.now); self.aps.len()],
                    min_loop: vec![Duration::MAX; self.aps.len()],
                },
            );
        }
        if let Some(s) = self.sessions.get_mut(&r.session) {
            s.scheduler.on_report(self.now, &r);
        }
    }

    fn announce_all(&mut self) {
        let mut out: Vec<Announce> = Vec::new();
        for s in self.sessions.values_mut() {
            while let Some(a) = s.scheduler.poll_announce() {
                out.push(a);
            }
        }
        for a in out {
            let mut b = Vec::with_capacity(a.wire_len());
            a.encode(&mut b);
            for ap in 0..self.aps.len() {
                let at = self.now + self.uplinks[ap].delay;
                self.push(
                    at,
                    Event::Announce {
                        ap,
                        bytes: b.clone(),
                    },
                );
            }
        }
    }

    fn gateway_data(&mut self, ap: usize, session: SessionId, packet: Vec<u8>) {
        let now = self.now;
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let ip_id = u16::from_be_bytes([packet[4], packet[5]]);
        if !s.filter.insert(ip_id) {
            self.gateway_duplicates += 1;
            return;
        }
        if let Some((_, assigned)) = s.scheduler.on_delivered(ip_id) {
            let l = now.saturating_duration_since(assigned);
            s.min_loop[ap] = s.min_loop[ap].min(l);
        }
        // Rate over the last second of deliveries, for the earliest-arrival choice.
        let (bytes, since) = &mut s.rate[ap];
        *bytes += packet.len() as u64;
        let span = now.saturating_duration_since(*since).as_secs_f64();
        if span >= 1.0 {
            let rate = *bytes as f64 / span;
            *bytes = 0;
            *since = now;
            let delay = s.min_loop[ap];
            s.scheduler.set_path_estimate(ap as u8, rate, delay);
        }
        let mut out = Vec::new();
        match &mut s.buffer {
            Some(b) => {
                b.push(now, packet);
                while let Some(p) = b.poll_deliver() {
                    out.push(p);
                }
            }
            None => out.push(packet),
        }
        for p in out {
            if let Some(r) = &mut self.repair {
                r.on_delivered(now, &p);
            }
            self.push(now + Duration::from_micros(200), Event::ToReceiver(p));
        }
    }

    fn report(self) -> BapuReport {
        let workloads = host::report(&self.sender, &self.receiver, self.end);
        let w = workloads.first();
        let (goodput, series) = match (
            w.and_then(|w| w.bulk.as_ref()),
            w.and_then(|w| w.udp.as_ref()),
        ) {
            (Some(b), _) => (b.goodput_mbps, b.goodput_mbps_series.clone()),
            (None, Some(u)) => (
                u.payload_bytes_received as f64 * 8.0 / 1e6 / self.cfg.duration_s,
                Vec::new(),
            ),
            _ => (0.0, Vec::new()),
        };
        let retransmissions = w
            .and_then(|w| w.tcp.as_ref())
            .and_then(|t| t.sender.as_ref())
            .map(|s| s.retransmits);
        let mut ap = ApStats::default();
        for a in &self.aps {
            let s = a.stats();
            ap.overheard += s.overheard;
            ap.duplicates += s.duplicates;
            ap.reports += s.reports;
            ap.report_bytes += s.report_bytes;
            ap.forwarded += s.forwarded;
            ap.missing += s.missing;
            ap.evicted += s.evicted;
            ap.untracked += s.untracked;
        }
        let mut scheduler = SchedulerStats::default();
        for s in self.sessions.values() {
            let t = s.scheduler.stats();
            scheduler.reports += t.reports;
            scheduler.assigned += t.assigned;
            scheduler.reassigned += t.reassigned;
            scheduler.duplicate_segments += t.duplicate_segments;
            scheduler.dropped += t.dropped;
            scheduler.refused_reports += t.refused_reports;
        }
        let control: u64 = self.uplinks.iter().map(|u| u.control_bytes).sum();
        BapuReport {
            system: self.cfg.system,
            goodput_mbps: goodput,
            series_mbps: series,
            capacity_mbps: self.cfg.aps.iter().map(|a| a.up_kbps).sum::<f64>() / 1000.0,
            control_mbps: control as f64 * 8.0 / 1e6 / self.cfg.duration_s,
            data_wire_bytes: self.cfg.payload + 28 + DATA_HEADER + TUNNEL_HEADER,
            forwarded_bytes: self.uplinks.iter().map(|u| u.forwarded_bytes).collect(),
            air_lost: self.air_lost,
            ap,
            scheduler,
            proactive_ack: self.pa.as_ref().map(|p| p.stats().clone()),
            repair: self.repair.as_ref().map(|r| r.stats().clone()),
            gateway_duplicates: self.gateway_duplicates,
            retransmissions,
            workloads,
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_micros((s * 1e6).round() as u64)
}
