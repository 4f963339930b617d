//! Host tests: the two hosts joined by a simple pipe (fixed delay, optional rate limit
//! with a drop-tail queue, optional random or chosen loss), driven by a small event loop.
//! The tests of the Linux-like model against smoltcp are in `linux`, those of the two
//! TCP implementations against each other in `interop`.

mod interop;
mod linux;

use std::collections::VecDeque;

use super::*;

/// Decides, for each packet offered to a pipe, whether to drop it.
type DropRule = Box<dyn FnMut(&[u8]) -> bool + Send>;

/// One direction of the test pipe.
struct Pipe {
    delay_us: u64,
    /// Serialization rate; `None` is infinitely fast.
    rate_bps: Option<f64>,
    /// Drop-tail limit on bytes waiting for serialization.
    queue_bytes: f64,
    loss: f64,
    /// Probability that a packet has one bit flipped.
    corrupt: f64,
    rng: Rng,
    /// Drops the packets it picks, before any other impairment.
    drop_rule: Option<DropRule>,
    /// When the line is free again, in µs.
    busy_until: f64,
    in_flight: VecDeque<(Instant, Packet)>,
    dropped: u64,
}

impl Pipe {
    fn new(delay_ms: u64) -> Pipe {
        Pipe {
            delay_us: delay_ms * 1000,
            rate_bps: None,
            queue_bytes: f64::INFINITY,
            loss: 0.0,
            corrupt: 0.0,
            rng: Rng::new(99),
            drop_rule: None,
            busy_until: 0.0,
            in_flight: VecDeque::new(),
            dropped: 0,
        }
    }

    fn rate(mut self, mbps: f64, queue_bytes: usize) -> Pipe {
        self.rate_bps = Some(mbps * 1e6);
        self.queue_bytes = queue_bytes as f64;
        self
    }

    fn loss(mut self, p: f64, seed: u64) -> Pipe {
        self.loss = p;
        self.rng = Rng::new(seed);
        self
    }

    fn corrupt(mut self, p: f64, seed: u64) -> Pipe {
        self.corrupt = p;
        self.rng = Rng::new(seed);
        self
    }

    fn drop_when(mut self, rule: impl FnMut(&[u8]) -> bool + Send + 'static) -> Pipe {
        self.drop_rule = Some(Box::new(rule));
        self
    }

    fn send(&mut self, now: Instant, mut packet: Packet) {
        if self.drop_rule.as_mut().is_some_and(|rule| rule(&packet)) {
            self.dropped += 1;
            return;
        }
        if self.rng.chance(self.loss) {
            self.dropped += 1;
            return;
        }
        if self.rng.chance(self.corrupt) && !packet.is_empty() {
            let bit = self.rng.below(packet.len() as u64 * 8);
            packet[(bit / 8) as usize] ^= 1 << (bit % 8);
        }
        let now_us = now.as_micros() as f64;
        let leaves = match self.rate_bps {
            Some(rate) => {
                let start = self.busy_until.max(now_us);
                let backlog = (start - now_us) * rate / 8e6;
                if backlog + packet.len() as f64 > self.queue_bytes {
                    self.dropped += 1;
                    return;
                }
                self.busy_until = start + packet.len() as f64 * 8e6 / rate;
                self.busy_until
            }
            None => now_us,
        };
        let at = Instant::from_micros(leaves.ceil() as u64 + self.delay_us);
        self.in_flight.push_back((at, packet));
    }

    fn next(&self) -> Option<Instant> {
        self.in_flight.front().map(|(t, _)| *t)
    }
}

/// The two hosts and the pipes between them.
struct Sim {
    client: Host,
    internet: Host,
    up: Pipe,
    down: Pipe,
    now: Instant,
}

impl Sim {
    fn new(workloads: &[WorkloadConfig], seed: u64, end: Instant, up: Pipe, down: Pipe) -> Sim {
        Sim::with_hosts(build_hosts(workloads, seed, end, 1400).unwrap(), up, down)
    }

    fn with_hosts((client, internet): (Host, Host), up: Pipe, down: Pipe) -> Sim {
        Sim {
            client,
            internet,
            up,
            down,
            now: Instant::ZERO,
        }
    }

    /// Runs until `end`, calling `observe` after every instant's events.
    fn run(&mut self, end: Instant, mut observe: impl FnMut(&Sim)) {
        loop {
            let now = self.now;
            loop {
                let mut moved = false;
                while self.up.next().is_some_and(|t| t <= now) {
                    let (_, p) = self.up.in_flight.pop_front().unwrap();
                    self.internet.receive(now, p);
                    moved = true;
                }
                while self.down.next().is_some_and(|t| t <= now) {
                    let (_, p) = self.down.in_flight.pop_front().unwrap();
                    self.client.receive(now, p);
                    moved = true;
                }
                for (host, pipe) in [
                    (&mut self.client, &mut self.up),
                    (&mut self.internet, &mut self.down),
                ] {
                    if host.poll_timeout().is_some_and(|t| t <= now) {
                        host.handle_timeout(now);
                    }
                    while let Some(p) = host.poll_transmit(now) {
                        pipe.send(now, p);
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
            observe(self);
            let next = [
                self.client.poll_timeout(),
                self.internet.poll_timeout(),
                self.up.next(),
                self.down.next(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= end => {
                    assert!(t > now, "time must move forward: {t} after {now}");
                    self.now = t;
                }
                _ => break,
            }
        }
        self.now = end;
    }

    fn report(&self) -> Vec<WorkloadReport> {
        report(&self.client, &self.internet, self.now)
    }
}

fn secs(s: u64) -> Instant {
    Instant::from_millis(s * 1000)
}

fn run(
    workloads: &[WorkloadConfig],
    seed: u64,
    end_s: u64,
    up: Pipe,
    down: Pipe,
) -> Vec<WorkloadReport> {
    let end = secs(end_s);
    let mut sim = Sim::new(workloads, seed, end, up, down);
    sim.run(end, |_| {});
    sim.report()
}

fn web(mean_interarrival_s: f64) -> WorkloadConfig {
    WorkloadConfig::Web(WebConfig {
        mean_interarrival_s,
        ..WebConfig::default()
    })
}

/// `w` carried by `tcp`.
fn on(tcp: Tcp, mut w: WorkloadConfig) -> WorkloadConfig {
    match &mut w {
        WorkloadConfig::Web(c) => c.tcp = tcp,
        WorkloadConfig::Bulk(c) => c.tcp = tcp,
        WorkloadConfig::FetchLoop(c) => c.tcp = tcp,
        WorkloadConfig::UdpCbr(_) => {}
    }
    w
}

const BOTH: [Tcp; 2] = [Tcp::Smoltcp, Tcp::Linux];

#[test]
fn web_flows_complete_with_plausible_fcts() {
    for tcp in BOTH {
        // RTT 100 ms; 10 Mbit/s down, 2 Mbit/s up.
        let up = Pipe::new(50).rate(2.0, 64_000);
        let down = Pipe::new(50).rate(10.0, 256_000);
        let end = secs(120);
        let mut sim = Sim::new(&[on(tcp, web(0.5))], 1, end, up, down);
        sim.run(end, |_| {});
        let r = sim.report();
        let f = r[0].flows.as_ref().unwrap();
        // Finished flows leave the socket set.
        assert!(sim.client.sockets() <= 10, "{}", sim.client.sockets());
        assert!(sim.internet.sockets() <= 10, "{}", sim.internet.sockets());
        println!("web ({tcp:?}): {f:?}");
        assert!(f.started > 150, "{}", f.started);
        assert_eq!(f.failed, 0);
        assert_eq!(f.rejected, 0);
        assert!(f.incomplete <= 5, "{}", f.incomplete);
        assert_eq!(f.started, f.completed + f.incomplete);
        // Handshake plus request and response: at least two round trips.
        assert!(f.fct_ms.min >= 200.0, "{}", f.fct_ms.min);
        // A median SURGE flow (13 kB) needs a few round trips of slow start.
        assert!(f.fct_ms.median < 1000.0, "{}", f.fct_ms.median);
        assert!(f.fct_ms.max < 10_000.0, "{}", f.fct_ms.max);
        assert_eq!(r[0].tcp.as_ref().unwrap().stack, tcp);
    }
}

#[test]
fn web_uploads_complete() {
    for tcp in BOTH {
        let cfg = WorkloadConfig::Web(WebConfig {
            direction: Direction::Up,
            mean_interarrival_s: 1.0,
            tcp,
            ..WebConfig::default()
        });
        let r = run(&[cfg], 2, 60, Pipe::new(20), Pipe::new(20));
        let f = r[0].flows.as_ref().unwrap();
        println!("web up ({tcp:?}): {f:?}");
        assert!(f.completed > 30, "{}", f.completed);
        assert_eq!(f.failed, 0);
        assert!(f.fct_ms.min >= 80.0, "{}", f.fct_ms.min);
    }
}

#[test]
fn web_flows_survive_loss() {
    for tcp in BOTH {
        let up = Pipe::new(30).loss(0.03, 5);
        let down = Pipe::new(30).rate(5.0, 128_000).loss(0.03, 6);
        let r = run(&[on(tcp, web(0.5))], 3, 200, up, down);
        let f = r[0].flows.as_ref().unwrap();
        println!("web with 3% loss ({tcp:?}): {f:?}");
        assert!(f.completed > 300, "{}", f.completed);
        assert_eq!(f.failed, 0);
        assert!(f.incomplete <= 5, "{}", f.incomplete);
    }
}

#[test]
fn bulk_download_of_one_megabyte_completes() {
    for tcp in BOTH {
        let cfg = WorkloadConfig::Bulk(BulkConfig {
            bytes: Some(1_000_000),
            tcp,
            ..BulkConfig::default()
        });
        let r = run(&[cfg], 4, 20, Pipe::new(20), Pipe::new(20));
        let b = r[0].bulk.as_ref().unwrap();
        let f = r[0].flows.as_ref().unwrap();
        println!("bulk 1 MB ({tcp:?}): {:?} {:?}", f, b.per_flow);
        assert_eq!(b.bytes_received, 1_000_000);
        assert_eq!(b.per_flow[0].bytes_received, 1_000_000);
        assert_eq!(f.completed, 1);
        let done = b.per_flow[0].completion_ms.unwrap();
        // Slow start over a 40 ms RTT from 2 segments (smoltcp) or 10 (the model):
        // about ten or six round trips.
        assert!((120.0..2000.0).contains(&done), "{done}");
    }
}

#[test]
fn bulk_upload_of_one_megabyte_completes() {
    for tcp in BOTH {
        let cfg = WorkloadConfig::Bulk(BulkConfig {
            bytes: Some(1_000_000),
            direction: Direction::Up,
            tcp,
            ..BulkConfig::default()
        });
        let r = run(&[cfg], 4, 20, Pipe::new(20), Pipe::new(20));
        let b = r[0].bulk.as_ref().unwrap();
        assert_eq!(b.per_flow[0].bytes_received, 1_000_000);
        assert!(b.per_flow[0].completion_ms.is_some());
    }
}

#[test]
fn bulk_goodput_fills_a_10_mbit_pipe() {
    for tcp in BOTH {
        // RTT 60 ms; a queue deeper than the 4 MiB window, so TCP never loses a packet.
        let down = Pipe::new(30).rate(10.0, 8 << 20);
        let bulk = WorkloadConfig::Bulk(BulkConfig {
            tcp,
            ..BulkConfig::default()
        });
        let r = run(&[bulk], 5, 30, Pipe::new(30), down);
        let b = r[0].bulk.as_ref().unwrap();
        println!(
            "bulk 10 Mbit/s ({tcp:?}): goodput {:.3} Mbit/s, first second {:?}",
            b.goodput_mbps,
            &b.goodput_mbps_series[..10]
        );
        // 1360 payload bytes per 1400-byte packet: 9.714 Mbit/s at most.
        assert!(b.goodput_mbps <= 9.715, "{}", b.goodput_mbps);
        // Slow start takes the first ~0.7 s.
        assert!(b.goodput_mbps > 9.45, "{}", b.goodput_mbps);
        assert_eq!(b.goodput_mbps_series.len(), 300);
        let late = &b.goodput_mbps_series[10..];
        assert!(late.iter().all(|&g| g > 9.6), "{late:?}");
    }
}

#[test]
fn bulk_recovers_from_drop_tail_losses() {
    // A drop-tail queue of one bandwidth-delay product (75 kB at 10 Mbit/s × 60 ms):
    // slow start overshoots and loses a burst. smoltcp retransmits one segment per three
    // duplicate ACKs and otherwise waits for the retransmission timeout (at least 1 s),
    // so each burst loss costs about a second; the flow must still recover every time.
    // (The model's figures are in `linux::bulk_fills_a_drop_tail_pipe`.)
    let down = Pipe::new(30).rate(10.0, 75_000);
    let bulk = on(Tcp::Smoltcp, WorkloadConfig::Bulk(BulkConfig::default()));
    let r = run(&[bulk], 5, 30, Pipe::new(30), down);
    let b = r[0].bulk.as_ref().unwrap();
    let series = &b.goodput_mbps_series;
    let stalled = series.iter().filter(|&&g| g == 0.0).count();
    let busy = series.iter().filter(|&&g| g > 9.0).count();
    println!(
        "bulk 10 Mbit/s drop-tail: goodput {:.3} Mbit/s, {stalled} stalled and {busy} full intervals of 300",
        b.goodput_mbps
    );
    assert!(b.goodput_mbps > 5.0, "{}", b.goodput_mbps);
    assert!(busy > 100, "{busy}");
    // Never stalled for longer than two back-to-back timeouts.
    let longest = series
        .split(|&g| g > 0.0)
        .map(<[f64]>::len)
        .max()
        .unwrap_or(0);
    assert!(longest <= 20, "{longest}");
    assert!(series[290..].iter().any(|&g| g > 0.0));
}

#[test]
fn fetch_loop_keeps_exactly_n_flows_open() {
    for tcp in BOTH {
        let cfg = WorkloadConfig::FetchLoop(FetchLoopConfig {
            concurrency: 3,
            start_s: 1.0,
            tcp,
            ..FetchLoopConfig::default()
        });
        let end = secs(20);
        let mut sim = Sim::new(&[cfg], 6, end, Pipe::new(25), Pipe::new(25));
        let mut seen = std::collections::BTreeSet::new();
        sim.run(end, |s| {
            // New flows stop at the end of the run; look before.
            if s.now >= secs(1) && s.now < end {
                seen.insert(s.client.open_flows(0));
            }
        });
        let r = sim.report();
        let f = r[0].flows.as_ref().unwrap();
        println!("fetch-loop ({tcp:?}): {f:?}");
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![3]);
        assert!(f.completed > 100, "{}", f.completed);
        assert_eq!(f.started, f.completed + f.incomplete);
        assert!(f.fct_ms.min >= 100.0, "{}", f.fct_ms.min);
        // No socket piles up: finished flows' sockets close within a round trip or two.
        assert!(sim.client.lingering_sockets() <= 6);
        assert!(sim.internet.lingering_sockets() <= 6);
    }
}

fn cbr(direction: Direction) -> WorkloadConfig {
    WorkloadConfig::UdpCbr(UdpCbrConfig {
        rate_mbps: Some(1.0),
        direction,
        ..UdpCbrConfig::default()
    })
}

#[test]
fn udp_cbr_delivers_its_rate_without_loss() {
    for direction in [Direction::Up, Direction::Down] {
        let r = run(&[cbr(direction)], 7, 10, Pipe::new(30), Pipe::new(30));
        let u = r[0].udp.as_ref().unwrap();
        println!("cbr {direction:?}: {u:?}");
        // 1200-byte payloads every 9.6 ms for 10 s, the last ones still in flight.
        assert_eq!(u.packets_sent, 1042);
        assert_eq!(u.packets_received, 1039);
        assert_eq!(u.packets_lost, 0);
        assert_eq!(u.reorder_events, 0);
        assert!((u.goodput_mbps - 1.0).abs() < 0.001, "{}", u.goodput_mbps);
        assert_eq!(u.one_way_delay_ms.min, 30.0);
        assert_eq!(u.one_way_delay_ms.max, 30.0);
    }
}

#[test]
fn udp_cbr_measures_loss() {
    let r = run(
        &[cbr(Direction::Up)],
        7,
        10,
        Pipe::new(30).loss(0.1, 3),
        Pipe::new(30),
    );
    let u = r[0].udp.as_ref().unwrap();
    assert!((u.loss_rate - 0.1).abs() < 0.03, "{}", u.loss_rate);
}

#[test]
fn same_seed_same_report_and_different_seed_differs() {
    for tcp in BOTH {
        let workloads = [on(tcp, web(0.3)), cbr(Direction::Down)];
        let json = |seed| {
            let down = Pipe::new(40).rate(4.0, 100_000).loss(0.01, seed);
            serde_json::to_string(&run(&workloads, seed, 30, Pipe::new(40), down)).unwrap()
        };
        let a = json(11);
        assert_eq!(a, json(11));
        assert_ne!(a, json(12));
        assert!(!a.contains("NaN") && !a.contains("null,\"bulk"), "{a}");
    }
}

#[test]
fn workloads_parse_from_toml_with_defaults() {
    #[derive(serde::Deserialize)]
    struct Scenario {
        workload: Vec<WorkloadConfig>,
    }
    let s: Scenario = toml::from_str(
        r#"
        [[workload]]
        kind = "web"
        scale = 2.0

        [[workload]]
        kind = "bulk"
        flows = 8
        direction = "up"
        tcp = "smoltcp"

        [[workload]]
        kind = "udp-cbr"
        rate_kbps = 500

        [[workload]]
        kind = "fetch-loop"
        tcp = "linux"
        "#,
    )
    .unwrap();
    let expected = vec![
        WorkloadConfig::Web(WebConfig {
            scale: 2.0,
            ..WebConfig::default()
        }),
        WorkloadConfig::Bulk(BulkConfig {
            flows: 8,
            direction: Direction::Up,
            tcp: Tcp::Smoltcp,
            ..BulkConfig::default()
        }),
        WorkloadConfig::UdpCbr(UdpCbrConfig {
            rate_kbps: Some(500.0),
            ..UdpCbrConfig::default()
        }),
        WorkloadConfig::FetchLoop(FetchLoopConfig::default()),
    ];
    assert_eq!(s.workload, expected);
    // Written back out, the tables read the same.
    #[derive(serde::Serialize)]
    struct Out<'a> {
        workload: &'a [WorkloadConfig],
    }
    let text = toml::to_string(&Out {
        workload: &expected,
    })
    .unwrap();
    let again: Scenario = toml::from_str(&text).unwrap();
    assert_eq!(again.workload, expected, "{text}");
    assert!(build_hosts(&s.workload, 1, secs(10), 1400).is_ok());
}

#[test]
fn config_errors_name_the_field() {
    let parse = |text: &str| {
        toml::from_str::<WorkloadConfig>(text)
            .unwrap_err()
            .to_string()
    };
    let e = parse("kind = \"udp-cbr\"\nrate_mpbs = 1.0");
    assert!(e.contains("rate_mpbs"), "{e}");
    let e = parse("kind = \"web\"\nscale = \"high\"");
    assert!(e.contains("`scale`") && e.contains("f64"), "{e}");
    let e = parse("kind = \"bulk\"\ndirection = \"sideways\"");
    assert!(e.contains("`direction`") && e.contains("sideways"), "{e}");
    let e = parse("kind = \"fetch-loop\"\nsize_bytes = -5");
    assert!(e.contains("`size_bytes`"), "{e}");
    let e = parse("kind = \"web\"\ntcp = \"bsd\"");
    assert!(
        e.contains("`tcp`") && e.contains("bsd") && e.contains("linux"),
        "{e}"
    );
    let e = parse("kind = \"udp-cbr\"\nrate_mbps = 1.0\ntcp = \"linux\"");
    assert!(e.contains("tcp"), "UDP has no TCP to choose: {e}");
    let e = parse("scale = 2.0");
    assert!(e.contains("`kind`"), "{e}");
    let e = parse("kind = \"ftp\"");
    assert!(e.contains("ftp"), "{e}");

    let build = |w: WorkloadConfig| {
        build_hosts(&[w], 1, secs(10), 1400)
            .unwrap_err()
            .to_string()
    };
    let e = build(WorkloadConfig::Web(WebConfig {
        scale: -1.0,
        ..WebConfig::default()
    }));
    assert!(e.contains("`scale`") && e.contains("positive"), "{e}");
    let e = build(WorkloadConfig::UdpCbr(UdpCbrConfig::default()));
    assert!(e.contains("rate_mbps") && e.contains("rate_kbps"), "{e}");
    let e = build(WorkloadConfig::UdpCbr(UdpCbrConfig {
        rate_mbps: Some(1.0),
        packet_bytes: 1400,
        ..UdpCbrConfig::default()
    }));
    assert!(e.contains("packet_bytes") && e.contains("1372"), "{e}");
    let e = build(WorkloadConfig::Bulk(BulkConfig {
        flows: 0,
        ..BulkConfig::default()
    }));
    assert!(e.contains("`flows`"), "{e}");
    let e = build(WorkloadConfig::FetchLoop(FetchLoopConfig {
        stop_s: Some(f64::NAN),
        ..FetchLoopConfig::default()
    }));
    assert!(e.contains("`stop_s`"), "{e}");
    let e = build(WorkloadConfig::FetchLoop(FetchLoopConfig {
        initial_window: Some(InitialWindow::Segments(0)),
        ..FetchLoopConfig::default()
    }));
    assert!(e.contains("`initial_window`") && e.contains("1000"), "{e}");
    let e = build(WorkloadConfig::Web(WebConfig {
        initial_window: Some(InitialWindow::Rfc3390),
        tcp: Tcp::Smoltcp,
        ..WebConfig::default()
    }));
    assert!(
        e.contains("`initial_window`") && e.contains("smoltcp"),
        "{e}"
    );
    let e = parse("kind = \"bulk\"\ninitial_window = \"rfc6928\"");
    assert!(
        e.contains("`initial_window`") && e.contains("rfc3390"),
        "{e}"
    );
    let e = parse("kind = \"bulk\"\ninitial_window = -3");
    assert!(e.contains("`initial_window`"), "{e}");
    let e = build_hosts(&[], 1, secs(1), 100).unwrap_err().to_string();
    assert!(e.contains("mtu"), "{e}");
}

#[test]
fn initial_window_parses_as_segments_or_rfc3390() {
    let iw = |text: &str| match toml::from_str::<WorkloadConfig>(text).unwrap() {
        WorkloadConfig::FetchLoop(c) => c.initial_window,
        other => panic!("{other:?}"),
    };
    assert_eq!(iw("kind = \"fetch-loop\""), None);
    assert_eq!(
        iw("kind = \"fetch-loop\"\ninitial_window = 4"),
        Some(InitialWindow::Segments(4))
    );
    assert_eq!(
        iw("kind = \"fetch-loop\"\ninitial_window = \"rfc3390\""),
        Some(InitialWindow::Rfc3390)
    );
    // RFC 3390 §1: min(4·MSS, max(2·MSS, 4380 bytes)).
    assert_eq!(InitialWindow::Rfc3390.segments(536), 4);
    assert_eq!(InitialWindow::Rfc3390.segments(1095), 4);
    assert_eq!(InitialWindow::Rfc3390.segments(1096), 3);
    assert_eq!(InitialWindow::Rfc3390.segments(1460), 3);
    assert_eq!(InitialWindow::Rfc3390.segments(2190), 2);
    assert_eq!(InitialWindow::Rfc3390.segments(9000), 2);
    assert_eq!(InitialWindow::Segments(7).segments(1460), 7);
}

#[test]
fn excess_arrivals_are_rejected_and_counted() {
    for tcp in BOTH {
        let cfg = WorkloadConfig::Web(WebConfig {
            mean_interarrival_s: 0.01,
            size_bytes: Some(2_000_000),
            max_open: 5,
            tcp,
            ..WebConfig::default()
        });
        // 1 Mbit/s: each 2 MB flow takes 16 s alone, so at most 5 are open.
        let r = run(&[cfg], 8, 5, Pipe::new(10), Pipe::new(10).rate(1.0, 50_000));
        let f = r[0].flows.as_ref().unwrap();
        println!("rejected ({tcp:?}): {f:?}");
        assert_eq!(f.started, 5);
        assert!(f.rejected > 400, "{}", f.rejected);
        assert_eq!(f.incomplete, 5);
    }
}

/// Eight bulk flows sharing 15 Mbit/s for 60 simulated seconds; time it in release mode:
/// `cargo test --release -p braid-sim speed_eight_bulk_flows -- --ignored --nocapture`
/// (the model), `speed_eight_bulk_flows_smoltcp` likewise.
#[test]
#[ignore = "a speed measurement, not a test"]
fn speed_eight_bulk_flows() {
    eight_bulk_flows(Tcp::Linux);
}

#[test]
#[ignore = "a speed measurement, not a test"]
fn speed_eight_bulk_flows_smoltcp() {
    eight_bulk_flows(Tcp::Smoltcp);
}

fn eight_bulk_flows(tcp: Tcp) {
    let cfg = WorkloadConfig::Bulk(BulkConfig {
        flows: 8,
        tcp,
        ..BulkConfig::default()
    });
    let down = Pipe::new(30).rate(15.0, 150_000);
    let end = secs(60);
    let mut sim = Sim::new(&[cfg], 9, end, Pipe::new(30), down);
    sim.run(end, |_| {});
    let r = sim.report();
    let b = r[0].bulk.as_ref().unwrap();
    println!(
        "8 bulk flows ({tcp:?}): {:.2} Mbit/s total, per flow {:?}, packets {} + {}, {:?}",
        b.goodput_mbps,
        b.per_flow
            .iter()
            .map(|f| f.goodput_mbps)
            .collect::<Vec<_>>(),
        sim.client.stats().packets_sent,
        sim.internet.stats().packets_sent,
        r[0].tcp,
    );
    assert!(b.goodput_mbps > 13.0);
}

#[test]
fn corrupted_and_hostile_packets_are_survived() {
    for tcp in BOTH {
        let workloads = [on(tcp, web(0.5)), cbr(Direction::Down), cbr(Direction::Up)];
        let end = secs(60);
        let up = Pipe::new(20).corrupt(0.05, 1);
        let down = Pipe::new(20).rate(5.0, 100_000).corrupt(0.05, 2);
        let mut sim = Sim::new(&workloads, 10, end, up, down);
        sim.run(end, |_| {});
        // Garbage and truncated headers must be dropped, not panic.
        let mut rng = Rng::new(3);
        for len in 0..200 {
            let mut junk: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            if len > 0 {
                junk[0] = 0x45;
            }
            sim.client.receive(end, junk.clone());
            sim.internet.receive(end, junk);
        }
        sim.client.handle_timeout(end);
        sim.internet.handle_timeout(end);
        let r = sim.report();
        let f = r[0].flows.as_ref().unwrap();
        let (down, up) = (r[1].udp.as_ref().unwrap(), r[2].udp.as_ref().unwrap());
        println!("corrupting pipe ({tcp:?}): {f:?}\n{down:?}\n{up:?}");
        assert!(f.completed > 80, "{}", f.completed);
        assert_eq!(f.failed, 0);
        // About 5 % of packets have a flipped bit: the IPv4 header checksum catches the
        // 20/1228 that land there, the UDP checksum the rest.
        for u in [down, up] {
            let share = u.corrupted as f64 / u.packets_sent as f64;
            assert!((0.03..0.07).contains(&share), "{share}");
        }
    }
}

#[test]
fn hosts_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<Host>();
}
