//! Two engines joined by a lossy, rate-limited pipe (the harness of the session tests with
//! Bernoulli loss): every method masks losses end to end, and Evolution, sent
//! opportunistically, recovers a good share of them while adding no delay on a lossless
//! path.

use std::time::Duration;

use super::rng::Rng;
use crate::path::queue::transmission_time;
use crate::{
    Config, EvolutionParams, Instant, LossRecoveryKind, PathConfig, PathId, Role, Session,
    SessionStats,
};

/// One direction of the path: rate, delay, Bernoulli loss.
struct Pipe {
    delay: Duration,
    rate_bps: u64,
    loss: f64,
    rng: Rng,
    free_at: Instant,
    lost_data: u64,
    sent_data: u64,
}

impl Pipe {
    fn new(delay_ms: u64, rate_bps: u64, loss: f64, seed: u64) -> Pipe {
        Pipe {
            delay: Duration::from_millis(delay_ms),
            rate_bps,
            loss,
            rng: Rng::new(seed),
            free_at: Instant::ZERO,
            lost_data: 0,
            sent_data: 0,
        }
    }

    /// When a datagram sent now arrives, if it does. Lost datagrams used the capacity.
    fn carry(&mut self, now: Instant, bytes: &[u8]) -> Option<Instant> {
        let start = self.free_at.max(now);
        self.free_at = start + transmission_time(bytes.len() + 28, self.rate_bps);
        let data = bytes.get(1) == Some(&1);
        self.sent_data += u64::from(data);
        if self.rng.f64() < self.loss {
            self.lost_data += u64::from(data);
            return None;
        }
        Some(self.free_at + self.delay)
    }
}

struct Net {
    now: Instant,
    gw: Session,
    srv: Session,
    up: Pipe,
    down: Pipe,
    flight: Vec<(Instant, u64, bool, Vec<u8>)>,
    order: u64,
    /// One-way delay of each inner packet the server delivered, by packet number.
    delays: Vec<Option<Duration>>,
}

impl Net {
    fn new(kind: LossRecoveryKind, loss: f64, seed: u64) -> Net {
        let config = Config {
            session_id: 9,
            loss_recovery: kind,
            seed,
            ..Config::default()
        };
        let rate = 2_000_000;
        let p = [PathConfig {
            id: 0,
            tx_capacity_bps: rate,
            rx_capacity_bps: rate,
        }];
        Net {
            now: Instant::ZERO,
            gw: Session::new(config.clone(), Role::Gateway, &p, Instant::ZERO).unwrap(),
            srv: Session::new(config, Role::Server, &p, Instant::ZERO).unwrap(),
            up: Pipe::new(30, rate, loss, seed ^ 1),
            down: Pipe::new(30, rate, 0.0, seed ^ 2),
            flight: Vec::new(),
            order: 0,
            delays: Vec::new(),
        }
    }

    fn settle(&mut self) {
        let now = self.now;
        let mut buf = vec![0u8; self.gw.transmit_buffer_len()];
        for to_server in [true, false] {
            let (s, pipe) = if to_server {
                (&mut self.gw, &mut self.up)
            } else {
                (&mut self.srv, &mut self.down)
            };
            while let Some(t) = s.poll_transmit(now, &mut buf) {
                let _: PathId = t.path;
                if let Some(at) = pipe.carry(now, &buf[..t.len]) {
                    self.order += 1;
                    self.flight
                        .push((at, self.order, to_server, buf[..t.len].to_vec()));
                }
            }
        }
        self.flight.sort_by_key(|f| (f.0, f.1));
        let mut out = Vec::new();
        while self.srv.poll_deliver(&mut out) {
            let id = u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
            let sent = u64::from_be_bytes(out[4..12].try_into().unwrap());
            if self.delays.len() <= id {
                self.delays.resize(id + 1, None);
            }
            self.delays[id] = Some(now.saturating_duration_since(Instant::from_micros(sent)));
        }
        while self.gw.poll_deliver(&mut out) {}
    }

    fn run_until(&mut self, until: Instant) {
        loop {
            self.settle();
            let mut next = until;
            for t in [self.gw.poll_timeout(), self.srv.poll_timeout()]
                .into_iter()
                .flatten()
            {
                next = next.min(t);
            }
            if let Some(f) = self.flight.first() {
                next = next.min(f.0);
            }
            self.now = next.max(self.now);
            while self.flight.first().is_some_and(|f| f.0 <= self.now) {
                let (_, _, to_server, bytes) = self.flight.remove(0);
                let s = if to_server {
                    &mut self.srv
                } else {
                    &mut self.gw
                };
                s.handle_datagram(self.now, 0, &bytes).unwrap();
            }
            self.gw.handle_timeout(self.now);
            self.srv.handle_timeout(self.now);
            if self.now >= until {
                self.settle();
                return;
            }
        }
    }

    /// Bursts of 10 packets of 1000 bytes every 100 ms (40% of the 2 Mbit/s path) for
    /// `seconds`, then a second to drain.
    fn bursts(&mut self, seconds: u64) -> u32 {
        let mut id = 0u32;
        for b in 0..seconds * 10 {
            self.run_until(Instant::from_millis(500 + 100 * b));
            for _ in 0..10 {
                let mut p = vec![0u8; 1000];
                p[..4].copy_from_slice(&id.to_be_bytes());
                p[4..12].copy_from_slice(&self.now.as_micros().to_be_bytes());
                self.gw.send(self.now, &p).unwrap();
                id += 1;
            }
        }
        self.run_until(self.now + Duration::from_secs(1));
        id
    }

    fn delivered(&self) -> usize {
        self.delays.iter().filter(|d| d.is_some()).count()
    }

    fn stats(&self) -> (SessionStats, SessionStats) {
        (self.gw.stats(), self.srv.stats())
    }
}

fn evolution() -> LossRecoveryKind {
    LossRecoveryKind::Evolution(EvolutionParams::default())
}

/// Recovered over lost data packets upstream, with `kind`, 10% loss.
fn recovered_share(kind: LossRecoveryKind) -> f64 {
    let mut net = Net::new(kind, 0.1, 5);
    let sent = net.bursts(20);
    let (gw, srv) = net.stats();
    let lost = net.up.lost_data;
    let rec = srv.loss_recovery.recovered;
    assert!(gw.loss_recovery.coded_sent > 1000, "{:?}", gw.loss_recovery);
    assert!(lost > 150, "{lost}");
    assert_eq!(net.delivered() as u64, u64::from(sent) - lost + rec);
    assert!(gw.loss_recovery.present_fraction > 0.5);
    rec as f64 / lost as f64
}

#[test]
fn evolution_recovers_most_bernoulli_losses() {
    // About 200 data packets lost. With §4.1's estimate, most of them are recovered (0.68
    // since the path's congestion window paces the bursts; 0.70-0.75 before), not all: the idle time drives r to 1 and the degree to |W| - 1, and a burst of 10 that
    // lost three or more (a fifth of the losses at 10%) leaves every such coded packet with
    // two missing members. The sampled estimate (braid's default) sees those states and
    // recovers more.
    let paper = recovered_share(LossRecoveryKind::Evolution(EvolutionParams::paper()));
    let sampled = recovered_share(evolution());
    assert!(paper > 0.65, "{paper:.2}");
    assert!(sampled > paper + 0.05, "{sampled:.2} vs {paper:.2}");
    // Without loss protection every loss reaches the receiver.
    let mut none = Net::new(LossRecoveryKind::None, 0.1, 5);
    let sent = none.bursts(20);
    assert_eq!(none.delivered() as u64, u64::from(sent) - none.up.lost_data);
}

#[test]
fn evolution_adds_no_delay_on_a_lossless_path() {
    let mut coded = Net::new(evolution(), 0.0, 6);
    let mut plain = Net::new(LossRecoveryKind::None, 0.0, 6);
    let n = coded.bursts(10);
    assert_eq!(plain.bursts(10), n);
    let (gw, _) = coded.stats();
    // Without loss each packet of W is put in one coded packet (the coverage cap), so
    // about a tenth as many coded as data packets go out, at degree about 9.
    assert!(gw.loss_recovery.coded_sent > 150, "{:?}", gw.loss_recovery);
    assert_eq!(coded.delivered(), n as usize);
    assert_eq!(plain.delivered(), n as usize);
    // A coded packet in the bottleneck delays data by at most its own transmission time
    // (PluriBus §3.2: "coded packets always defer to data packets and delay them by at most
    // one packet"): 1000 bytes of XOR plus headers at 2 Mbit/s.
    let one = transmission_time(1000 + 28 + 40, 2_000_000);
    let (mut sum_c, mut sum_p) = (Duration::ZERO, Duration::ZERO);
    for (c, p) in coded.delays.iter().zip(&plain.delays) {
        let (c, p) = (c.unwrap(), p.unwrap());
        assert!(c <= p + one, "{c:?} vs {p:?}");
        sum_c += c;
        sum_p += p;
    }
    // Coding runs on between bursts, so a burst finds a coded packet half sent on average.
    let extra = (sum_c.as_secs_f64() - sum_p.as_secs_f64()) / f64::from(n);
    assert!(
        extra < 0.6 * one.as_secs_f64(),
        "mean extra delay {:.2} ms",
        extra * 1e3
    );
}

#[test]
fn every_method_masks_losses_end_to_end() {
    let kinds = LossRecoveryKind::NAMES.map(|n| LossRecoveryKind::from_name(n).unwrap());
    let mut base = None;
    for kind in kinds {
        let mut net = Net::new(kind, 0.1, 7);
        let sent = net.bursts(10);
        let (gw, srv) = net.stats();
        let got = net.delivered();
        if kind == LossRecoveryKind::None {
            base = Some(got);
            assert_eq!(srv.loss_recovery.recovered, 0);
            continue;
        }
        let base = base.unwrap();
        // Every method delivers more than none (10% XOR recovers about a third of the
        // losses: a group of 10 needs exactly one of its 11 packets lost).
        assert!(got > base + 15, "{kind}: {got} vs none {base} of {sent}");
        assert!(
            srv.recovered > 0 || gw.loss_recovery.retransmissions_sent > 0,
            "{kind}"
        );
        assert_eq!(gw.loss_recovery.method, kind.name());
    }
}

#[test]
fn same_seed_same_bytes() {
    let run = |seed| {
        let mut net = Net::new(evolution(), 0.2, seed);
        net.bursts(3);
        (
            net.delays.clone(),
            net.stats().0.loss_recovery.coded_members,
        )
    };
    assert_eq!(run(11), run(11));
    assert_ne!(run(11).1, run(12).1);
}
