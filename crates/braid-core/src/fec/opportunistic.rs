//! Coded packets sent opportunistically (PluriBus §3.2, §4): "PluriBus transmits data
//! packets as soon as they arrive ... It sends coded packets along a path only when its
//! estimated queue length is zero", and only while "new data packets arrived within the
//! last RTT". A coded packet is the XOR of packets chosen at random from W, the data sent
//! within about the last round trip; how many is the code's business:
//!
//! - [`Evolution`] (§4.1): `max(1, ⌊-1 / ln r⌋)` packets, never all of W when |W| > 1,
//!   where `r` is the sender's estimate of the fraction of W present at the receiver
//!   (`estimate = "fraction"`); by default, braid's deviation [`super::sampled`]: the
//!   members, and so their number, that maximise the expected yield over simulated
//!   receivers;
//! - [`Lt`] (§6.4.1): a degree drawn from the robust soliton distribution over |W|.
//!
//! Coded packets therefore never delay data by more than one packet's transmission time,
//! and the session is woken when a path's queue estimate drains while coding is wanted.

use std::time::Duration;

use braid_wire::Message;

use super::decoder::XorDecoder;
use super::rng::Rng;
use super::sampled;
use super::window::{Window, DEFAULT_RTT};
use super::xor::CodedBuilder;
use super::{LossRecovery, RecoveredSink, Repair, RepairBody};
use crate::path::Path;
use crate::stats::LossRecoveryStats;
use crate::{EvolutionParams, Instant, LtParams, MemberChoice, PresenceEstimate};

/// Most data packets in W: bounds memory and keeps every member within the coded bitmap's
/// 2040-packet reach.
pub const MAX_WINDOW: usize = 1024;

/// After a coded packet, its path waits this fraction of the packet's transmission time
/// beyond the queue estimate's drain before the next one. PluriBus §4.2 relies on idle
/// periods to reset the queue estimate's errors; back-to-back coding would never leave
/// one, and an estimate a fraction of a percent fast (rounding, a capacity estimate a
/// little high) would grow a real queue without bound. The headroom drains errors up to 5%.
pub const CODED_HEADROOM: f64 = 0.05;
/// Coverage at which W is left alone: no coded packet once every packet of W is in at
/// least [`coverage_cap`] coded packets. A deviation from PluriBus §3.2, which codes for as
/// long as data arrived within the last round trip: a short flow's lone packet (a SYN-ACK,
/// a request) would otherwise go out as dozens of identical copies, one each time a queue
/// estimate drains, and each copy still in a real bottleneck when the flow's next data
/// packet arrives delays it by up to a packet's transmission time.
/// `braid demo --sim --quick`, braid's median FCT, seeds 1/2/3: 183/180/185 ms without the
/// cap, 175/174/170 with it (p95 1285 -> 638 ms at seed 1); `braid bench pluribus-fig8
/// --quick` MinConnPath / PluriBus 2.03/1.85/2.11 -> 2.12/1.90/2.14.
pub const COVERAGE_MISS: f64 = 1e-5;
/// Most coded packets any packet of W is put in (bounds the cap at high loss).
pub const MAX_COVERAGE: u32 = 8;

/// Coded packets per packet of W after which more add little: the fewest `k` for which all
/// `k` coded packets are lost with probability under [`COVERAGE_MISS`] at loss `p`.
pub fn coverage_cap(p: f64) -> u32 {
    let mut k = 1;
    let mut miss = p.clamp(0.0, 1.0);
    while miss > COVERAGE_MISS && k < MAX_COVERAGE {
        miss *= p;
        k += 1;
    }
    k
}
/// Bytes a coded datagram carries besides its payload and bitmap, for the headroom: the
/// braid header with ack, the coded fields, and the IPv4 and UDP headers.
const CODED_DATAGRAM_EXTRA: usize = 20 + 7 + 28;

/// Evolution's member choice with `members = "coverage"`, a deviation from PluriBus §4.1
/// (which picks the `x` members at random): puts in `picks[..x]` first the entry of W that
/// the fewest earlier coded packets included, then the `x - 1` that the most included (ties
/// at random; at random when the `|W| - 1` cap binds). §4.1 assumes every packet of W
/// present with the same probability `r` and notes that in practice it differs with "the
/// contents of earlier packets"; a packet no coded packet has covered is the likeliest
/// missing, and a coded packet recovers only when exactly one member is missing, so it
/// pairs the likeliest-missing packet with the likeliest-present ones. `x` and `r` stay the
/// paper's. Full-length `braid bench pluribus-fig10` cells (3600 s, immediate decoder),
/// median FCT random -> coverage: 5% loss 477.6 -> 479.3 ms, 30% 757 -> 710, 50% 1223 ->
/// 1087, 70% 3466 -> 2619 (undecodable coded packets 15-28% fewer). Not the default:
/// Fig 12's ratios of an offset loss estimate over none grow with it, since the base
/// improves more than the offsets do.
pub fn choose_by_coverage(
    window: &Window,
    x: usize,
    rng: &mut Rng,
    keys: &mut Vec<u64>,
    picks: &mut Vec<u16>,
) {
    // Key: coverage (21 bits), a random tie-break (32), the index (10; W <= 1024).
    const INDEX: u64 = (1 << 10) - 1;
    const LOW: u64 = (1 << 42) - 1;
    const MAX_COVER: u64 = (1 << 21) - 1;
    let n = window.len();
    let x = x.min(n);
    keys.clear();
    picks.clear();
    if x == 0 {
        return;
    }
    for i in 0..n {
        let cover = u64::from(window.coverage(i)).min(MAX_COVER);
        let tie = rng.next_u64() & 0xffff_ffff;
        keys.push(cover << 42 | tie << 10 | i as u64);
    }
    let least = (0..n).min_by_key(|&i| keys[i]).unwrap_or(0);
    keys.swap(0, least);
    if x + 1 >= n {
        // The |W| - 1 cap binds: the others at random, so that which packet is left out
        // varies (§4.1's reason for the cap); by coverage, the two least covered would
        // take turns and two missing among the rest would never be recovered.
        for i in 1..x {
            let j = i + rng.below(n - i);
            keys.swap(i, j);
        }
    } else {
        for k in &mut keys[1..] {
            *k = (MAX_COVER - (*k >> 42)) << 42 | (*k & LOW);
        }
        keys[1..].select_nth_unstable(x - 1);
    }
    picks.extend(keys[..x].iter().map(|k| (k & INDEX) as u16));
}

/// How many packets a coded packet combines: the policy that tells Evolution from LT.
pub trait Degree: Send {
    /// A data packet was sent on a path whose loss estimate is `p`; W now holds `n`
    /// packets, the new one included.
    fn on_data_sent(&mut self, p: f64, n: usize);
    /// The degree of the next coded packet over a window of `n >= 1` packets.
    fn degree(&mut self, n: usize, rng: &mut Rng) -> usize;
    /// A coded packet of `x` packets was sent on a path whose loss estimate is `p`.
    fn on_coded_sent(&mut self, x: usize, p: f64, n: usize);
    /// `r`, where the policy keeps one.
    fn present_fraction(&self) -> f64 {
        0.0
    }
}

/// Evolution's choice of degree (PluriBus §4.1): the `x` maximising the expected yield
/// `Y(x) = x (1 - r) r^(x-1)` (Eq. 1) is `-1 / ln r`; PluriBus takes
/// `max(1, ⌊-1 / ln r⌋)`, and `|W| - 1` when that reaches `|W| > 1` (never the whole
/// window, so an unchanging window does not yield the same useless packet again).
pub fn evolution_degree(r: f64, window: usize) -> usize {
    if window <= 1 {
        return 1;
    }
    let x = if r >= 1.0 {
        usize::MAX
    } else if r > 0.0 {
        // Saturating: huge values (r close to 1) become usize::MAX, NaN becomes 0.
        (-1.0 / r.ln()).floor() as usize
    } else {
        1
    };
    let x = x.max(1);
    if x >= window {
        window - 1
    } else {
        x
    }
}

/// Eq. 1: the expected number of packets a coded packet of `x` members recovers when each
/// is present with probability `r`.
pub fn expected_yield(x: usize, r: f64) -> f64 {
    x as f64 * (1.0 - r) * r.powi(i32::try_from(x.saturating_sub(1)).unwrap_or(i32::MAX))
}

/// Evolution's state: `r` and the loss-estimate offset (§4.1 updates i and ii).
#[derive(Clone, Debug)]
pub struct EvolutionDegree {
    r: f64,
    offset: f64,
}

impl EvolutionDegree {
    fn loss(&self, p: f64) -> f64 {
        (p + self.offset).clamp(0.0, 1.0)
    }
}

impl Degree for EvolutionDegree {
    /// §4.1 (i): `r = ((|W| - 1) r + (1 - p)) / |W|`.
    fn on_data_sent(&mut self, p: f64, n: usize) {
        let n = n.max(1) as f64;
        self.r = (((n - 1.0) * self.r + (1.0 - self.loss(p))) / n).clamp(0.0, 1.0);
    }

    fn degree(&mut self, n: usize, _rng: &mut Rng) -> usize {
        evolution_degree(self.r, n)
    }

    /// §4.1 (ii): `r = (|W| r + (1 - p) Y(x)) / |W|`.
    fn on_coded_sent(&mut self, x: usize, p: f64, n: usize) {
        let n = n.max(1) as f64;
        let y = expected_yield(x, self.r);
        self.r = ((n * self.r + (1.0 - self.loss(p)) * y) / n).clamp(0.0, 1.0);
    }

    fn present_fraction(&self) -> f64 {
        self.r
    }
}

/// The robust soliton distribution of LT codes (Luby, FOCS 2002) over `k` input packets
/// with parameters `c` and `δ`, as a cumulative table: `out[d - 1]` is `P(degree <= d)`.
/// `R = c ln(k/δ) √k`; `ρ(1) = 1/k`, `ρ(d) = 1/(d(d-1))`; `τ(d) = R/(d k)` below the spike
/// at `k/R` (rounded down, at least 1), `τ(k/R) = R ln(R/δ) / k`; normalised.
pub fn robust_soliton_cdf(k: usize, c: f64, delta: f64, out: &mut Vec<f64>) {
    out.clear();
    let k = k.max(1);
    let kf = k as f64;
    let big_r = c * (kf / delta).ln() * kf.sqrt();
    let spike = ((kf / big_r).floor() as usize).clamp(1, k);
    let mut acc = 0.0;
    for d in 1..=k {
        let df = d as f64;
        let rho = if d == 1 {
            1.0 / kf
        } else {
            1.0 / (df * (df - 1.0))
        };
        let tau = if d < spike {
            big_r / (df * kf)
        } else if d == spike {
            (big_r * (big_r / delta).ln() / kf).max(0.0)
        } else {
            0.0
        };
        acc += rho + tau;
        out.push(acc);
    }
    for v in out.iter_mut() {
        *v /= acc;
    }
}

/// LT's degree policy: the robust soliton over the current window size.
#[derive(Clone, Debug)]
pub struct LtDegree {
    c: f64,
    delta: f64,
    cdf: Vec<f64>,
    cdf_k: usize,
}

impl Degree for LtDegree {
    fn on_data_sent(&mut self, _p: f64, _n: usize) {}

    fn degree(&mut self, n: usize, rng: &mut Rng) -> usize {
        if self.cdf_k != n {
            robust_soliton_cdf(n, self.c, self.delta, &mut self.cdf);
            self.cdf_k = n;
        }
        let u = rng.f64();
        (self.cdf.partition_point(|&v| v <= u) + 1).min(n)
    }

    fn on_coded_sent(&mut self, _x: usize, _p: f64, _n: usize) {}
}

/// Opportunistic XOR coding with a degree policy `D`, and the receiver's XOR decoder.
pub struct Opportunistic<D: Degree> {
    name: &'static str,
    degree: D,
    window: Window,
    /// New data arrived within the last round trip until this instant.
    fresh_until: Option<Instant>,
    rng: Rng,
    builder: CodedBuilder,
    picks: Vec<u16>,
    /// Selection keys of [`choose_by_coverage`].
    keys: Vec<u64>,
    members: MemberChoice,
    /// With the sampled estimate ([`sampled`]): the loss-estimate offset its samples use.
    sampled: Option<f64>,
    /// Scratch space of [`sampled::choose`].
    cand: Vec<u16>,
    decoder: XorDecoder,
    stats: LossRecoveryStats,
    /// Per path id: no coded packet before this instant (see [`CODED_HEADROOM`]).
    rest_until: Box<[Instant; 256]>,
    /// Whether W's coverage caps coding (see [`COVERAGE_MISS`]); off only in tests.
    capped: bool,
}

/// Evolution codes sent opportunistically (PluriBus §4.1).
pub type Evolution = Opportunistic<EvolutionDegree>;
/// LT codes sent opportunistically (PluriBus §6.4.1).
pub type Lt = Opportunistic<LtDegree>;

impl Evolution {
    pub fn new(p: EvolutionParams, seed: u64) -> Evolution {
        let degree = EvolutionDegree {
            r: 0.0,
            offset: p.loss_offset,
        };
        let mut e = Opportunistic::with_degree("evolution", degree, p.decoder, seed);
        e.members = p.members;
        if p.estimate == PresenceEstimate::Sampled {
            e.sampled = Some(p.loss_offset);
        }
        e
    }
}

impl Lt {
    pub fn new(p: LtParams, seed: u64) -> Lt {
        let degree = LtDegree {
            c: p.c,
            delta: p.delta,
            cdf: Vec::new(),
            cdf_k: 0,
        };
        Opportunistic::with_degree("lt", degree, p.decoder, seed)
    }
}

impl<D: Degree> Opportunistic<D> {
    fn with_degree(
        name: &'static str,
        degree: D,
        decoder: crate::XorDecoder,
        seed: u64,
    ) -> Opportunistic<D> {
        Opportunistic {
            name,
            degree,
            window: Window::new(MAX_WINDOW),
            fresh_until: None,
            rng: Rng::new(seed),
            builder: CodedBuilder::default(),
            picks: Vec::with_capacity(MAX_WINDOW),
            keys: Vec::with_capacity(MAX_WINDOW),
            members: MemberChoice::Random,
            sampled: None,
            cand: Vec::with_capacity(MAX_WINDOW),
            decoder: XorDecoder::new(decoder),
            stats: LossRecoveryStats::default(),
            rest_until: Box::new([Instant::ZERO; 256]),
            capped: true,
        }
    }

    /// The degree policy (for tests and inspection).
    pub fn degree_policy(&self) -> &D {
        &self.degree
    }

    /// Forgets the per-path rest after coded packets and lifts the coverage cap (tests that
    /// poll many at one instant).
    #[cfg(test)]
    pub(crate) fn unrest(&mut self) {
        self.capped = false;
        self.rest_until.fill(Instant::ZERO);
    }

    /// Packets in W.
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    /// Whether coding is wanted at `now`: W is not empty and new data arrived within the
    /// last round trip.
    fn wanted(&self, now: Instant, paths: &[Path]) -> bool {
        !self.window.is_empty() && self.fresh_until.is_some_and(|t| now < t) && !self.covered(paths)
    }

    /// Whether every packet of W is already in enough coded packets for the worst usable
    /// path's loss (see [`COVERAGE_MISS`]).
    fn covered(&self, paths: &[Path]) -> bool {
        if !self.capped {
            return false;
        }
        let p = paths
            .iter()
            .filter(|p| p.is_usable())
            .map(Path::loss_rate)
            .fold(0.0, f64::max);
        let cap = coverage_cap(p);
        (0..self.window.len()).all(|i| self.window.coverage(i) >= cap)
    }

    /// Whether `p` may carry a coded packet now: usable, queue estimated empty, rested. (Not
    /// its congestion window: coded packets fill what data leaves of the bottleneck, and
    /// the window does not count them, `Path::in_flight_bytes`.)
    fn open(&self, now: Instant, p: &Path) -> bool {
        p.is_usable() && p.queue_is_empty(now) && self.rest_until[usize::from(p.id())] <= now
    }
}

impl<D: Degree> LossRecovery for Opportunistic<D> {
    /// W keeps a packet for one round trip from when it leaves the bottleneck queue (the
    /// session has already added it to the path's queue estimate), so that a burst's
    /// queueing does not eat the time its coded packets have.
    fn on_data_sent(&mut self, now: Instant, seq: u32, path: &Path, payload: &[u8]) {
        let rtt: Duration = path.srtt().unwrap_or(DEFAULT_RTT);
        let expires = now + path.queue_delay(now) + rtt;
        self.fresh_until = Some(self.fresh_until.map_or(expires, |t| t.max(expires)));
        self.window.expire(now);
        self.window.push(seq, expires, payload);
        if let Some(offset) = self.sampled {
            let p = (path.loss_rate() + offset).clamp(0.0, 1.0);
            let mask = sampled::loss_mask(p, &mut self.rng);
            self.window.set_missing(self.window.len() - 1, mask);
        }
        self.degree
            .on_data_sent(path.loss_rate(), self.window.len());
    }

    fn on_ack(&mut self, _now: Instant, highest: u32) {
        self.window.ack(highest);
    }

    fn poll_repair(&mut self, now: Instant, paths: &[Path]) -> Option<Repair<'_>> {
        self.window.expire(now);
        if !self.wanted(now, paths) {
            return None;
        }
        let path = paths.iter().find(|p| self.open(now, p))?;
        let n = self.window.len();
        let by_samples = self.sampled.is_some()
            && sampled::choose(&self.window, &mut self.cand, &mut self.picks) > 0;
        let x = if by_samples {
            self.picks.len()
        } else {
            self.degree.degree(n, &mut self.rng).clamp(1, n)
        };
        match self.members {
            _ if by_samples => {}
            MemberChoice::Random => {
                // A random x-subset of W: a partial Fisher-Yates shuffle of its indices.
                self.picks.clear();
                self.picks.extend((0..n).map(|i| i as u16));
                for i in 0..x {
                    let j = i + self.rng.below(n - i);
                    self.picks.swap(i, j);
                }
            }
            MemberChoice::Coverage => choose_by_coverage(
                &self.window,
                x,
                &mut self.rng,
                &mut self.keys,
                &mut self.picks,
            ),
        }
        let top = usize::from(*self.picks[..x].iter().max()?);
        let (highest, _) = self.window.get(top)?;
        self.builder.begin(highest);
        for &i in &self.picks[..x] {
            if let Some((seq, packet)) = self.window.get(usize::from(i)) {
                self.builder.add(seq, packet);
            }
            self.window.cover(usize::from(i));
        }
        if let Some(offset) = self.sampled {
            let p = (path.loss_rate() + offset).clamp(0.0, 1.0);
            sampled::on_coded_sent(&mut self.window, &self.picks[..x], p, &mut self.rng);
        }
        let x = self.builder.members();
        self.degree.on_coded_sent(x, path.loss_rate(), n);
        let c = self.builder.coded();
        let tx = path.transmission_time(c.payload.len() + c.bitmap.len() + CODED_DATAGRAM_EXTRA);
        self.rest_until[usize::from(path.id())] = now + tx + tx.mul_f64(CODED_HEADROOM);
        self.stats.coded_sent += 1;
        self.stats.coded_members += x as u64;
        Some(Repair {
            path: path.id(),
            body: RepairBody::Coded(self.builder.coded()),
        })
    }

    fn on_data_received(
        &mut self,
        _now: Instant,
        seq: u32,
        payload: &[u8],
        sink: &mut dyn RecoveredSink,
    ) {
        self.decoder.on_data(seq, payload, sink, &mut self.stats);
    }

    fn on_repair_received(
        &mut self,
        _now: Instant,
        message: &Message<'_>,
        sink: &mut dyn RecoveredSink,
    ) {
        if let Message::Coded(c) = message {
            self.decoder.on_coded(c, sink, &mut self.stats);
        }
    }

    fn poll_timeout(&self, now: Instant, paths: &[Path]) -> Option<Instant> {
        if !self.wanted(now, paths) {
            return None;
        }
        let until = self.fresh_until?;
        paths
            .iter()
            .filter(|p| p.is_usable() && !self.open(now, p))
            .map(|p| (now + p.queue_delay(now)).max(self.rest_until[usize::from(p.id())]))
            .filter(|&t| t > now && t < until)
            .min()
    }

    fn stats(&self) -> LossRecoveryStats {
        LossRecoveryStats {
            method: self.name,
            window: self.window.len() as u64,
            window_drops: self.window.drops(),
            present_fraction: if self.sampled.is_some() {
                sampled::present_fraction(&self.window)
            } else {
                self.degree.present_fraction()
            },
            ..self.stats.clone()
        }
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests;
