//! One 802.11 collision domain shared by every station, and the tortoise beside it.
//!
//! The MAC is 802.11 DCF in the slotted form of Bianchi's model (JSAC 2000): a station with
//! a frame waits DIFS after the medium goes idle, then counts down a backoff drawn from
//! `[0, CW]` in 9 µs slots, frozen while another station sends; the lowest counter sends,
//! equal counters collide. A frame sent with a MAC ACK (`acked`) is retried on a collision
//! or a bit error with CW doubled, up to 7 attempts at its rate, or through its multi-rate
//! retry series when it has one (Atheros hardware, as Madwifi's SampleRate uses it); a
//! frame without one (HTPPR's hare
//! packets, whose feedback is on the tortoise) is sent once at CWmin and reaches the
//! receiver damaged or not at all. Every station hears every other (no hidden terminals),
//! MAC ACKs at ≤ 24 Mbit/s always get through, and the medium's own SNR to a station is
//! its flow's. That is what HTPPR §5.1 gains on: its receiver never contends for the medium
//! and its frames carry no MAC ACK.
//!
//! The tortoise is a reliable, in-order link per direction with a rate and a one-way delay;
//! each message costs its bytes plus a 2-byte length prefix, as on TCP.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use braid_core::Instant;

use super::phy;
use crate::Rng;

/// MAC attempts of an acked frame (802.11's dot11ShortRetryLimit of 7).
pub const RETRY_LIMIT: u32 = 7;

/// A frame a station hands to its MAC.
#[derive(Clone, Debug)]
pub struct Frame {
    /// What the receiving station gets: a datagram's payload or an IP packet.
    pub payload: Vec<u8>,
    /// Bytes on the air in front of `payload` and after it (MAC header, FCS, LLC, IP, UDP);
    /// an error in them loses the frame.
    pub overhead: usize,
    /// Leading bytes of `payload` under a checksum (UDP-Lite's coverage): an error in them
    /// loses a frame sent without a MAC ACK.
    pub protected: usize,
    /// Rate index into [`phy::RATES_KBPS`].
    pub rate: usize,
    /// Unicast with a MAC ACK and retries; only whole frames are delivered.
    pub acked: bool,
    /// Acked frames: the multi-rate retry series, (rate, tries) in order, the first at
    /// `rate`; `None` retries at `rate` up to [`RETRY_LIMIT`] attempts.
    pub series: Option<Series>,
}

/// A multi-rate retry chain: (rate index, tries) per series, as Atheros hardware takes it.
pub type Series = [(usize, u32); 3];

/// What a station learns when its MAC is done with a frame.
#[derive(Clone, Copy, Debug)]
pub struct TxOutcome {
    /// The rate of the first attempt (the one the station chose).
    pub rate: usize,
    /// Acked frames: whether an attempt was acknowledged. Others: always true.
    pub delivered: bool,
    pub attempts: u32,
    /// Airtime of every attempt, with DIFS, mean backoff, SIFS and ACK, µs.
    pub airtime_us: u64,
}

/// One end of a flow, driven by the world (sans-IO like the engine: `now` in every call).
pub trait Station {
    /// The next frame for the medium, when the MAC holds none.
    fn poll_frame(&mut self, now: Instant) -> Option<Frame>;
    /// The MAC is done with the last frame.
    fn on_tx_done(&mut self, _now: Instant, _outcome: TxOutcome) {}
    /// A frame from the peer, possibly damaged.
    fn on_frame(&mut self, now: Instant, payload: Vec<u8>);
    /// The next message for the peer on the tortoise.
    fn poll_tortoise(&mut self, _now: Instant) -> Option<Vec<u8>> {
        None
    }
    fn on_tortoise(&mut self, _now: Instant, _msg: Vec<u8>) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn on_timeout(&mut self, _now: Instant) {}
    /// Whether this station's part of the run is over (the world stops when all are).
    fn is_done(&self) -> bool;
}

/// How frames get damaged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Errors {
    /// Independent bit errors at the rate's BER for the flow's SNR ([`phy::ber`]).
    Snr,
    /// Independent bit errors at this BER in each frame's payload beyond its protected bytes,
    /// whatever the rate; headers untouched, no loss (HTPPR §5.2's induced errors).
    PayloadBer(f64),
}

/// The tortoise of every flow: one direction's rate and delay.
#[derive(Clone, Copy, Debug)]
pub struct TortoiseLink {
    pub rate_kbps: f64,
    pub one_way_ms: f64,
}

/// A station and its place in the world.
pub struct Member {
    pub station: Box<dyn Station>,
    /// The station its frames and tortoise messages go to.
    pub peer: usize,
    /// SNR of its link to the peer, dB.
    pub snr_db: f64,
    /// Its tortoise towards the peer, if it has one.
    pub tortoise: Option<TortoiseLink>,
}

/// Per-station counters.
#[derive(Clone, Debug, Default)]
pub struct StationStats {
    pub frames: u64,
    pub attempts: u64,
    pub collisions: u64,
    /// Medium time this station's attempts took (frames, ACKs, SIFS), µs.
    pub airtime_us: u64,
    pub tortoise_bytes: u64,
    /// Tortoise bytes sent in each second of the run.
    pub tortoise_per_s: Vec<u64>,
    /// When the station first reported itself done.
    pub done_at: Option<Instant>,
}

impl StationStats {
    /// The busiest second on the tortoise, bit/s.
    pub fn peak_tortoise_bps(&self) -> f64 {
        self.tortoise_per_s.iter().copied().max().unwrap_or(0) as f64 * 8.0
    }
}

struct Mac {
    frame: Option<Frame>,
    /// The frame became ready at this time, µs.
    ready_at: u64,
    attempts: u32,
    cw: u32,
    backoff: u32,
    /// Airtime spent on the frame so far.
    spent_us: u64,
    /// Between an attempt and its end: the station waits.
    in_tx: bool,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    TxEnd(usize),
    Deliver(usize, Vec<u8>),
    Tortoise(usize, Vec<u8>),
}

/// Where a run stopped.
#[derive(Debug)]
pub struct WorldReport {
    pub end: Instant,
    pub stations: Vec<StationStats>,
    /// Whether every station was done before the time limit.
    pub finished: bool,
}

/// Runs `members` on one medium until all are done or `limit` passes.
pub fn run(
    members: Vec<Member>,
    errors: Errors,
    seed: u64,
    limit: Instant,
) -> (Vec<Member>, WorldReport) {
    World::new(members, errors, seed).run(limit)
}

struct World {
    members: Vec<Member>,
    macs: Vec<Mac>,
    stats: Vec<StationStats>,
    tortoise_free: Vec<u64>,
    errors: Errors,
    rng: Rng,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    order: u64,
    /// The medium is busy until then, µs.
    busy_until: u64,
    /// Outcomes of the attempt being made, and per station the one its `TxEnd` reports.
    pending: Vec<(usize, TxOutcome)>,
    outcomes: Vec<Option<TxOutcome>>,
}

impl World {
    fn new(members: Vec<Member>, errors: Errors, seed: u64) -> World {
        let n = members.len();
        let mut rng = Rng::new(seed);
        let macs = (0..n)
            .map(|_| Mac {
                frame: None,
                ready_at: 0,
                attempts: 0,
                cw: phy::CW_MIN,
                backoff: rng.below(u64::from(phy::CW_MIN) + 1) as u32,
                spent_us: 0,
                in_tx: false,
            })
            .collect();
        World {
            members,
            macs,
            stats: vec![StationStats::default(); n],
            tortoise_free: vec![0; n],
            errors,
            rng,
            events: BinaryHeap::new(),
            order: 0,
            busy_until: 0,
            pending: Vec::new(),
            outcomes: vec![None; n],
        }
    }

    fn push(&mut self, at: u64, e: Event) {
        self.order += 1;
        self.events.push(Reverse((at, self.order, e)));
    }

    /// Lets every station say what it has to say at `now`.
    fn settle(&mut self, now: u64) {
        let t = Instant::from_micros(now);
        loop {
            let mut progress = false;
            for i in 0..self.members.len() {
                while let Some(msg) = self.members[i].station.poll_tortoise(t) {
                    progress = true;
                    let Some(link) = self.members[i].tortoise else {
                        continue;
                    };
                    let bytes = msg.len() as u64 + 2;
                    let st = &mut self.stats[i];
                    st.tortoise_bytes += bytes;
                    let sec = (now / 1_000_000) as usize;
                    if st.tortoise_per_s.len() <= sec {
                        st.tortoise_per_s.resize(sec + 1, 0);
                    }
                    st.tortoise_per_s[sec] += bytes;
                    let ser = (bytes as f64 * 8.0 * 1000.0 / link.rate_kbps) as u64;
                    let free = self.tortoise_free[i].max(now) + ser;
                    self.tortoise_free[i] = free;
                    let at = free + (link.one_way_ms * 1000.0) as u64;
                    let peer = self.members[i].peer;
                    self.push(at, Event::Tortoise(peer, msg));
                }
                let mac = &mut self.macs[i];
                if mac.frame.is_none() && !mac.in_tx {
                    if let Some(f) = self.members[i].station.poll_frame(t) {
                        mac.frame = Some(f);
                        mac.ready_at = now;
                        mac.attempts = 0;
                        mac.spent_us = 0;
                        progress = true;
                    }
                }
            }
            if !progress {
                break;
            }
        }
        for (i, m) in self.members.iter().enumerate() {
            if self.stats[i].done_at.is_none() && m.station.is_done() {
                self.stats[i].done_at = Some(t);
            }
        }
    }

    /// When the next attempt starts and which stations make it.
    fn next_attempt(&self) -> Option<(u64, Vec<usize>)> {
        let base = self.busy_until + phy::DIFS_US;
        let mut best: Option<(u64, Vec<usize>)> = None;
        for (i, mac) in self.macs.iter().enumerate() {
            if mac.frame.is_none() || mac.in_tx {
                continue;
            }
            let t = self.attempt_time(mac, base);
            match &mut best {
                Some((bt, who)) if *bt == t => who.push(i),
                Some((bt, _)) if *bt < t => {}
                _ => best = Some((t, vec![i])),
            }
        }
        best
    }

    /// When `mac` would send if nothing else did: its countdown starts at the first slot
    /// boundary after DIFS at which it has a frame.
    fn attempt_time(&self, mac: &Mac, base: u64) -> u64 {
        base + phy::SLOT_US * (self.start_slot(mac, base) + u64::from(mac.backoff))
    }

    fn start_slot(&self, mac: &Mac, base: u64) -> u64 {
        mac.ready_at.saturating_sub(base).div_ceil(phy::SLOT_US)
    }

    fn attempt(&mut self, at: u64, who: Vec<usize>) {
        let base = self.busy_until + phy::DIFS_US;
        // Everyone else counts down the slots that passed, then freezes.
        for i in 0..self.macs.len() {
            if who.contains(&i) || self.macs[i].frame.is_none() || self.macs[i].in_tx {
                continue;
            }
            let start = base + phy::SLOT_US * self.start_slot(&self.macs[i], base);
            if at > start {
                let passed = ((at - start) / phy::SLOT_US) as u32;
                self.macs[i].backoff = self.macs[i].backoff.saturating_sub(passed);
            }
        }
        let collision = who.len() > 1;
        let mut end = at;
        for &i in &who {
            let frame = self.macs[i]
                .frame
                .as_ref()
                .expect("attempting stations hold a frame");
            let bytes = frame.payload.len() + frame.overhead;
            let mut dur = phy::frame_us(frame.rate, bytes);
            if frame.acked {
                dur += phy::SIFS_US + phy::ack_us(frame.rate);
            }
            end = end.max(at + dur);
        }
        for &i in &who {
            let frame = self.macs[i]
                .frame
                .take()
                .expect("attempting stations hold a frame");
            let bytes = frame.payload.len() + frame.overhead;
            let frame_us = phy::frame_us(frame.rate, bytes);
            let mut dur = frame_us;
            if frame.acked {
                dur += phy::SIFS_US + phy::ack_us(frame.rate);
            }
            let mac_cw = self.macs[i].cw;
            let st = &mut self.stats[i];
            st.attempts += 1;
            st.airtime_us += dur;
            if collision {
                st.collisions += 1;
            }
            let spent = dur + phy::DIFS_US + phy::SLOT_US * u64::from(mac_cw) / 2;
            let peer = self.members[i].peer;
            let ber = phy::ber(frame.rate, self.members[i].snr_db);
            let mac = &mut self.macs[i];
            mac.attempts += 1;
            mac.spent_us += spent;
            let (delivered, retry) = if collision {
                (None, frame.acked)
            } else if frame.acked {
                let ok = match self.errors {
                    Errors::Snr => phy::clean(bytes, ber, &mut self.rng),
                    Errors::PayloadBer(ber) => ber == 0.0,
                };
                if ok {
                    (Some(frame.payload.clone()), false)
                } else {
                    (None, true)
                }
            } else {
                let mut payload = frame.payload.clone();
                let lost = match self.errors {
                    Errors::Snr => {
                        !phy::clean(frame.overhead, ber, &mut self.rng)
                            || phy::corrupt(&mut payload, 0, ber, &mut self.rng) > 0
                                && payload[..frame.protected.min(payload.len())]
                                    != frame.payload[..frame.protected.min(payload.len())]
                    }
                    Errors::PayloadBer(ber) => {
                        let from = frame.protected.min(payload.len());
                        phy::corrupt(&mut payload, from, ber, &mut self.rng);
                        false
                    }
                };
                ((!lost).then_some(payload), false)
            };
            let delivered_ok = delivered.is_some() || !frame.acked;
            let retry = retry && !delivered_ok;
            if let Some(p) = delivered {
                self.push(at + frame_us, Event::Deliver(peer, p));
            }
            let mac = &mut self.macs[i];
            let next_rate = match &frame.series {
                Some(series) => rate_of_attempt(series, mac.attempts),
                None => (mac.attempts < RETRY_LIMIT).then_some(frame.rate),
            };
            if let (true, Some(rate)) = (retry, next_rate) {
                mac.cw = (mac.cw * 2 + 1).min(phy::CW_MAX);
                mac.frame = Some(Frame { rate, ..frame });
            } else {
                let outcome = TxOutcome {
                    rate: frame.series.map_or(frame.rate, |s| s[0].0),
                    delivered: delivered_ok,
                    attempts: mac.attempts,
                    airtime_us: mac.spent_us,
                };
                mac.cw = phy::CW_MIN;
                mac.in_tx = true;
                self.stats[i].frames += 1;
                self.pending.push((i, outcome));
            }
            let mac = &mut self.macs[i];
            mac.backoff = self.rng.below(u64::from(mac.cw) + 1) as u32;
            mac.ready_at = end;
        }
        for (i, outcome) in std::mem::take(&mut self.pending) {
            self.outcomes[i] = Some(outcome);
            self.push(end, Event::TxEnd(i));
        }
        self.busy_until = end;
    }

    fn run(mut self, limit: Instant) -> (Vec<Member>, WorldReport) {
        let limit = limit.as_micros();
        let mut now = 0u64;
        self.settle(now);
        let finished = loop {
            if self.members.iter().all(|m| m.station.is_done()) {
                break true;
            }
            let attempt = self.next_attempt();
            let event_at = self.events.peek().map(|Reverse((t, _, _))| *t);
            let timer_at = self
                .members
                .iter()
                .filter_map(|m| m.station.poll_timeout())
                .map(|t| t.as_micros().max(now))
                .min();
            let next = [attempt.as_ref().map(|a| a.0), event_at, timer_at]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next else { break false };
            if next > limit {
                break false;
            }
            now = next;
            if event_at == Some(next) {
                let Some(Reverse((_, _, e))) = self.events.pop() else {
                    unreachable!("peeked")
                };
                let t = Instant::from_micros(now);
                match e {
                    Event::TxEnd(i) => {
                        self.macs[i].in_tx = false;
                        if let Some(o) = self.outcomes[i].take() {
                            self.members[i].station.on_tx_done(t, o);
                        }
                    }
                    Event::Deliver(i, p) => self.members[i].station.on_frame(t, p),
                    Event::Tortoise(i, m) => self.members[i].station.on_tortoise(t, m),
                }
            } else if timer_at == Some(next) {
                let t = Instant::from_micros(now);
                for m in &mut self.members {
                    if m.station
                        .poll_timeout()
                        .is_some_and(|d| d.as_micros() <= now)
                    {
                        m.station.on_timeout(t);
                    }
                }
            } else if let Some((at, who)) = attempt {
                self.attempt(at, who);
            }
            self.settle(now);
        };
        let report = WorldReport {
            end: Instant::from_micros(now),
            stations: self.stats,
            finished,
        };
        (self.members, report)
    }
}

/// The rate of attempt `n` (0-based) through `series`, or `None` past its last try.
pub fn rate_of_attempt(series: &Series, n: u32) -> Option<usize> {
    let mut before = 0;
    for &(rate, tries) in series {
        if n < before + tries {
            return Some(rate);
        }
        before += tries;
    }
    None
}
