//! Two engines joined by tiny in-test pipes: the handshake, in-order delivery over paths of
//! different delay, estimators fed through reports, liveness, and hostile input.

use std::time::Duration;

use super::*;
use crate::SchedulerKind;

/// One direction of one path: fixed delay, optional rate, optional blackhole.
#[derive(Clone, Copy)]
pub(super) struct Pipe {
    delay: Duration,
    rate_bps: Option<u64>,
    pub(super) down: bool,
    free_at: Instant,
}

impl Pipe {
    pub(super) fn new(delay_ms: u64, rate_bps: Option<u64>) -> Pipe {
        Pipe {
            delay: Duration::from_millis(delay_ms),
            rate_bps,
            down: false,
            free_at: Instant::ZERO,
        }
    }

    /// When a datagram of `len` bytes sent now arrives, if it does.
    fn carry(&mut self, now: Instant, len: usize) -> Option<Instant> {
        if self.down {
            return None;
        }
        let start = self.free_at.max(now);
        let tx = self.rate_bps.map_or(Duration::ZERO, |r| {
            crate::path::queue::transmission_time(len + 28, r)
        });
        self.free_at = start + tx;
        Some(self.free_at + self.delay)
    }
}

pub(super) struct Net {
    pub(super) now: Instant,
    pub(super) gw: Session,
    pub(super) srv: Session,
    /// `up[i]`: gateway → server on path i; `down[i]`: server → gateway.
    pub(super) up: Vec<Pipe>,
    pub(super) down: Vec<Pipe>,
    /// (arrival, to_server, path, bytes), kept sorted by arrival then insertion.
    flight: Vec<(Instant, u64, bool, PathId, Vec<u8>)>,
    order: u64,
    pub(super) at_server: Vec<Vec<u8>>,
    /// For each of `at_server`: [`Session::delivered_checksums_verified`].
    pub(super) verified_at_server: Vec<bool>,
    pub(super) at_gateway: Vec<Vec<u8>>,
    pub(super) gw_events: Vec<Event>,
    pub(super) srv_events: Vec<Event>,
}

pub(super) fn config() -> Config {
    Config {
        session_id: 7,
        ..Config::default()
    }
}

impl Net {
    pub(super) fn new(config: Config, up: Vec<Pipe>, down: Vec<Pipe>) -> Net {
        Net::pair(config.clone(), config, up, down)
    }

    /// A gateway and a server with configurations of their own.
    pub(super) fn pair(config: Config, server: Config, up: Vec<Pipe>, down: Vec<Pipe>) -> Net {
        let paths: Vec<PathConfig> = (0..up.len())
            .map(|i| PathConfig {
                id: i as PathId,
                tx_capacity_bps: up[i].rate_bps.unwrap_or(100_000_000),
                rx_capacity_bps: down[i].rate_bps.unwrap_or(100_000_000),
            })
            .collect();
        let srv_paths: Vec<PathConfig> = paths
            .iter()
            .map(|p| PathConfig {
                id: p.id,
                tx_capacity_bps: p.rx_capacity_bps,
                rx_capacity_bps: p.tx_capacity_bps,
            })
            .collect();
        Net {
            now: Instant::ZERO,
            gw: Session::new(config, Role::Gateway, &paths, Instant::ZERO).unwrap(),
            srv: Session::new(server, Role::Server, &srv_paths, Instant::ZERO).unwrap(),
            up,
            down,
            flight: Vec::new(),
            order: 0,
            at_server: Vec::new(),
            verified_at_server: Vec::new(),
            at_gateway: Vec::new(),
            gw_events: Vec::new(),
            srv_events: Vec::new(),
        }
    }

    fn settle(&mut self) {
        let now = self.now;
        let mut buf = vec![0u8; self.gw.transmit_buffer_len()];
        for to_server in [true, false] {
            let (s, pipes) = if to_server {
                (&mut self.gw, &mut self.up)
            } else {
                (&mut self.srv, &mut self.down)
            };
            while let Some(t) = s.poll_transmit(now, &mut buf) {
                if let Some(at) = pipes[usize::from(t.path)].carry(now, t.len) {
                    self.order += 1;
                    self.flight
                        .push((at, self.order, to_server, t.path, buf[..t.len].to_vec()));
                }
            }
        }
        self.flight.sort_by_key(|f| (f.0, f.1));
        let mut out = Vec::new();
        while self.gw.poll_deliver(&mut out) {
            self.at_gateway.push(out.clone());
        }
        while self.srv.poll_deliver(&mut out) {
            self.verified_at_server
                .push(self.srv.delivered_checksums_verified());
            self.at_server.push(out.clone());
        }
        while let Some(e) = self.gw.poll_event() {
            self.gw_events.push(e);
        }
        while let Some(e) = self.srv.poll_event() {
            self.srv_events.push(e);
        }
    }

    /// Runs until `until`, delivering datagrams and firing timers in time order.
    pub(super) fn run_until(&mut self, until: Instant) {
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
                let (_, _, to_server, path, bytes) = self.flight.remove(0);
                let s = if to_server {
                    &mut self.srv
                } else {
                    &mut self.gw
                };
                s.handle_datagram(self.now, path, &bytes).unwrap();
            }
            self.gw.handle_timeout(self.now);
            self.srv.handle_timeout(self.now);
            if self.now >= until {
                self.settle();
                return;
            }
        }
    }

    pub(super) fn at(&self, ms: u64) -> Instant {
        Instant::from_millis(ms)
    }
}

pub(super) fn packet(i: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(4)];
    p[..4].copy_from_slice(&i.to_be_bytes());
    p
}

pub(super) fn ids(ps: &[Vec<u8>]) -> Vec<u32> {
    ps.iter()
        .map(|p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
        .collect()
}

#[test]
fn handshake_and_in_order_delivery_over_unequal_paths() {
    let mut net = Net::new(
        Config {
            scheduler: SchedulerKind::RoundRobin,
            hole_timeout_mode: crate::HoleTimeoutMode::Fixed,
            ..config()
        },
        vec![Pipe::new(20, None), Pipe::new(60, None)],
        vec![Pipe::new(20, None), Pipe::new(60, None)],
    );
    net.run_until(net.at(300));
    assert!(net
        .srv_events
        .contains(&Event::PeerHello { paths: Some(2) }));
    assert!(net
        .gw_events
        .iter()
        .any(|e| matches!(e, Event::Configured { .. })));
    // Round-robin alternates paths 20 ms and 60 ms apart (within the 50 ms hole timeout): the receiver must resequence.
    for i in 0..200 {
        net.gw.send(net.now, &packet(i, 500)).unwrap();
        let t = net.now + Duration::from_millis(1);
        net.run_until(t);
    }
    net.run_until(net.now + Duration::from_millis(500));
    assert_eq!(ids(&net.at_server), (0..200).collect::<Vec<_>>());
    let st = net.srv.stats();
    assert_eq!(st.delivered_packets, 200);
    assert!(st.reorder.buffered > 50, "{:?}", st.reorder);
    assert_eq!(st.reorder.holes_skipped, 0);
    // Both paths carried data.
    let gw = net.gw.stats();
    assert!(gw.paths.iter().all(|p| p.tx_data_packets == 100));
}

#[test]
fn reports_carry_delay_loss_and_rtt_estimates() {
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, None), Pipe::new(80, None)],
        vec![Pipe::new(30, None), Pipe::new(10, None)],
    );
    net.run_until(net.at(5000));
    let p = net.gw.paths();
    let d0 = p[0].delay_skew_us().unwrap();
    let d1 = p[1].delay_skew_us().unwrap();
    // The skew and base cancel: path 1 is 60 ms slower one way (heartbeats are tiny, so
    // the size / capacity term is negligible).
    assert!((d1 - d0 - 60_000).abs() < 500, "{d0} {d1}");
    // RTTs from report echoes: 50 ms and 90 ms.
    let r0 = p[0].srtt().unwrap().as_secs_f64() * 1e3;
    let r1 = p[1].srtt().unwrap().as_secs_f64() * 1e3;
    assert!(
        (r0 - 50.0).abs() < 2.0 && (r1 - 90.0).abs() < 2.0,
        "{r0} {r1}"
    );
    assert!(p.iter().all(|p| p.loss_rate() == 0.0 && p.is_usable()));
    // The server sees the reverse delays.
    let s = net.srv.paths();
    let sd = s[0].delay_skew_us().unwrap() - s[1].delay_skew_us().unwrap();
    assert!((sd - 20_000).abs() < 500, "{sd}");
}

#[test]
fn a_lost_config_is_asked_for_again_while_the_gateway_is_busy_reporting() {
    // The server's first Config is lost; its heartbeats then keep the gateway reporting
    // every 100 ms, which defers the gateway's heartbeats (and the Hellos they carry).
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, None)],
        vec![Pipe::new(20, None)],
    );
    net.down[0].down = true;
    net.run_until(net.at(30));
    net.down[0].down = false;
    // A packet from the LAN puts the gateway's next heartbeat after the server's.
    net.run_until(net.at(50));
    net.gw.send(net.now, &packet(0, 100)).unwrap();
    net.run_until(net.at(2000));
    assert!(
        net.gw_events
            .iter()
            .any(|e| matches!(e, Event::Configured { .. })),
        "{:?}",
        net.gw_events
    );
}

#[test]
fn a_download_keeps_the_senders_rtt_of_every_path_current() {
    // A download: the server sends, the gateway acknowledges. The server's RTT of a path is measured
    // by the echo in a report the gateway sends on that path, so the gateway must rotate
    // its reports over the paths by what it sent, not by its own (fresh) RTT samples.
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, None), Pipe::new(60, None)],
        vec![Pipe::new(20, None), Pipe::new(60, None)],
    );
    net.run_until(net.at(300));
    let mut i = 0;
    let mut send_until = |net: &mut Net, ms: u64| {
        while net.now < net.at(ms) {
            net.srv.send(net.now, &packet(i, 500)).unwrap();
            // The download's acknowledgements.
            net.gw.send(net.now, &packet(i, 60)).unwrap();
            i += 1;
            let t = net.now + Duration::from_millis(5);
            net.run_until(t);
        }
    };
    send_until(&mut net, 3000);
    let rtt = |net: &Net, p: usize| net.srv.paths()[p].srtt().unwrap().as_secs_f64() * 1e3;
    assert!((rtt(&net, 1) - 120.0).abs() < 5.0, "{}", rtt(&net, 1));
    // The gateway's datagrams on path 1 are lost for 1.5 s: the server's RTT of path 1
    // goes stale while the gateway's (from the server's reports on path 1) stays fresh.
    net.up[1].down = true;
    send_until(&mut net, 4500);
    net.up[1].down = false;
    // Path 1 slows to 200 ms each way: a sample a refresh interval (1 s) moves the smoothed
    // RTT an eighth of the way each, more than 0.4 of the way in 6.5 s. (Rotating reports by
    // the gateway's own RTT samples, the server's stayed at 120 ms.)
    net.up[1].delay = Duration::from_millis(200);
    net.down[1].delay = Duration::from_millis(200);
    send_until(&mut net, 11_000);
    assert!(
        rtt(&net, 1) > 240.0 && rtt(&net, 1) < 400.0,
        "{}",
        rtt(&net, 1)
    );
    assert!((rtt(&net, 0) - 40.0).abs() < 5.0, "{}", rtt(&net, 0));
}

#[test]
fn capacity_estimate_follows_a_slower_path() {
    // The gateway expects 10 Mbit/s upstream but the path carries 2 Mbit/s.
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, Some(2_000_000))],
        vec![Pipe::new(20, None)],
    );
    net.gw.paths[0].tx_capacity_for_test(10_000_000);
    net.srv.paths[0].rx_capacity_for_test(10_000_000);
    // Saturate: 1200-byte packets at 2.7 Mbit/s for 20 s. Each run of three intervals
    // halves the error (PluriBus §4.2), so 13 runs bring it within 1%. Once the estimate
    // falls, the scheduler holds what the path cannot take and the send queue refuses some.
    for i in 0..5600u32 {
        let _ = net.gw.send(net.now, &packet(i, 1200));
        let t = net.now + Duration::from_micros(3600);
        net.run_until(t);
    }
    net.run_until(net.now + Duration::from_secs(1));
    let est = net.gw.paths()[0].capacity_bps() as f64;
    assert!((est - 2_000_000.0).abs() / 2e6 < 0.01, "{est}");
    assert!(net
        .gw_events
        .iter()
        .any(|e| matches!(e, Event::CapacityChanged { path: 0, .. })));
}

#[test]
fn a_dead_path_goes_down_and_comes_back() {
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, None), Pipe::new(20, None)],
        vec![Pipe::new(20, None), Pipe::new(20, None)],
    );
    net.run_until(net.at(1000));
    net.up[1].down = true;
    net.down[1].down = true;
    net.run_until(net.at(2000));
    assert!(net.gw_events.contains(&Event::PathDown(1)));
    assert!(net.srv_events.contains(&Event::PathDown(1)));
    assert!(!net.gw.paths()[1].is_usable());
    // Round-robin now uses path 0 only, and nothing is lost.
    let before = net.gw.stats().paths[1].tx_data_packets;
    for i in 0..50 {
        net.gw.send(net.now, &packet(i, 100)).unwrap();
    }
    net.run_until(net.at(2500));
    assert_eq!(net.gw.stats().paths[1].tx_data_packets, before);
    assert_eq!(ids(&net.at_server), (0..50).collect::<Vec<_>>());
    // Heartbeats keep probing: the path comes back when it heals.
    net.up[1].down = false;
    net.down[1].down = false;
    net.run_until(net.at(3000));
    assert_eq!(
        net.gw_events
            .iter()
            .filter(|e| **e == Event::PathUp(1))
            .count(),
        2
    );
    assert!(net.gw.paths()[1].is_usable());
}

#[test]
fn one_way_failure_is_learned_from_reports() {
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, None), Pipe::new(20, None)],
        vec![Pipe::new(20, None), Pipe::new(20, None)],
    );
    net.run_until(net.at(1000));
    // Only the gateway → server direction of path 1 fails: the gateway still hears path 1
    // but the server's reports say it does not.
    net.up[1].down = true;
    net.run_until(net.at(2000));
    assert!(net.gw.paths()[1].rx_live());
    assert!(!net.gw.paths()[1].is_usable());
}

#[test]
fn hostile_input_is_counted_not_fatal() {
    let mut net = Net::new(config(), vec![Pipe::new(1, None)], vec![Pipe::new(1, None)]);
    let now = net.at(1);
    assert!(matches!(
        net.srv.handle_datagram(now, 0, &[1, 2, 3]),
        Err(HandleError::Malformed(_))
    ));
    // A valid heartbeat for another session, on a path that does not exist, on the wrong path.
    let mut buf = [0u8; 64];
    let mk = |session_id, path, buf: &mut [u8]| {
        Datagram {
            header: Header {
                session_id,
                path,
                path_seq: 0,
                timestamp: 0,
                ack: None,
                path_ack: None,
                unordered: false,
            },
            message: Message::Heartbeat,
        }
        .emit(buf)
        .unwrap()
    };
    let n = mk(8, 0, &mut buf);
    assert!(matches!(
        net.srv.handle_datagram(now, 0, &buf[..n]),
        Err(HandleError::WrongSession { .. })
    ));
    let n = mk(7, 9, &mut buf);
    assert!(matches!(
        net.srv.handle_datagram(now, 9, &buf[..n]),
        Err(HandleError::UnknownPath(9))
    ));
    assert!(matches!(
        net.srv.handle_datagram(now, 0, &buf[..n]),
        Err(HandleError::PathMismatch { .. })
    ));
    let st = net.srv.stats();
    assert_eq!(
        (st.malformed_datagrams, st.wrong_session, st.unknown_path),
        (1, 1, 2)
    );
}

#[test]
fn send_limits_are_enforced_and_counted() {
    let cfg = Config {
        send_queue_limit: 3,
        max_packet_size: 100,
        ..config()
    };
    let mut net = Net::new(cfg, vec![Pipe::new(1, None)], vec![Pipe::new(1, None)]);
    let now = net.at(0);
    assert_eq!(
        net.gw.send(now, &[0; 101]),
        Err(SendError::TooLarge { len: 101, max: 100 })
    );
    for _ in 0..3 {
        net.gw.send(now, &[0; 10]).unwrap();
    }
    assert_eq!(net.gw.send(now, &[0; 10]), Err(SendError::QueueFull(3)));
    let st = net.gw.stats();
    assert_eq!(
        (st.oversize_drops, st.send_queue_drops, st.sent_packets),
        (1, 1, 3)
    );
}

#[test]
fn bad_configs_are_rejected() {
    let p = PathConfig {
        id: 1,
        tx_capacity_bps: 1,
        rx_capacity_bps: 1,
    };
    let now = Instant::ZERO;
    assert_eq!(
        Session::new(config(), Role::Gateway, &[], now).err(),
        Some(ConfigError::NoPaths)
    );
    assert_eq!(
        Session::new(config(), Role::Gateway, &[p.clone(), p.clone()], now).err(),
        Some(ConfigError::DuplicatePath(1))
    );
    let zero = Config {
        heartbeat_interval: Duration::ZERO,
        ..config()
    };
    assert_eq!(
        Session::new(zero, Role::Gateway, &[p], now).err(),
        Some(ConfigError::Zero("heartbeat_interval"))
    );
}

#[test]
fn idle_session_only_heartbeats() {
    let mut net = Net::new(
        config(),
        vec![Pipe::new(10, None), Pipe::new(10, None)],
        vec![Pipe::new(10, None), Pipe::new(10, None)],
    );
    net.run_until(net.at(10_000));
    let st = net.gw.stats();
    for p in &st.paths {
        // 10 s at one heartbeat per 100 ms, plus reports: a bounded trickle.
        assert!(
            p.tx_packets >= 90 && p.tx_packets <= 220,
            "{}",
            p.tx_packets
        );
        assert_eq!(p.tx_data_packets, 0);
    }
    assert!(net.at_server.is_empty());
}

#[test]
fn the_server_gives_the_gateway_its_tunnel_address() {
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, None)],
        vec![Pipe::new(20, None)],
    );
    let addr = (std::net::Ipv4Addr::new(10, 77, 0, 17), 24);
    net.srv.set_tunnel_address(Some(addr));
    net.run_until(net.at(300));
    let got = net.gw_events.iter().find_map(|e| match e {
        Event::Configured { address, mtu, .. } => Some((*address, *mtu)),
        _ => None,
    });
    assert_eq!(got, Some((Some(addr), Some(1500))));
}

/// An IPv4 + TCP segment of flow `sport` (to port 80) with `seq` and 100 bytes of payload.
fn segment(sport: u16, seq: u32) -> Vec<u8> {
    let mut p = vec![0u8; 140];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&140u16.to_be_bytes());
    p[9] = crate::flow::parse::PROTO_TCP;
    p[12..16].copy_from_slice(&[10, 0, 0, 2]);
    p[16..20].copy_from_slice(&[10, 1, 0, 2]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&80u16.to_be_bytes());
    p[24..28].copy_from_slice(&seq.to_be_bytes());
    p[32] = 5 << 4;
    p[33] = 0x10;
    p
}

/// Per-flow resequencing: a packet lost on the way holds back only its own flow's later
/// packets' order, not other flows; with session-wide order everything waits out the hole.
#[test]
fn flow_order_keeps_a_hole_from_holding_other_flows() {
    let delivered_soon = |flow_order: bool| {
        let mut net = Net::new(
            Config {
                hole_timeout_mode: crate::HoleTimeoutMode::Fixed,
                flow_order,
                ..config()
            },
            vec![Pipe::new(20, None)],
            vec![Pipe::new(20, None)],
        );
        net.run_until(net.at(300));
        let t0 = net.now;
        net.gw.send(t0, &segment(1000, 0)).unwrap();
        net.run_until(t0 + Duration::from_millis(1));
        net.up[0].down = true;
        net.gw.send(net.now, &segment(1000, 100)).unwrap();
        net.run_until(t0 + Duration::from_millis(2));
        net.up[0].down = false;
        net.gw.send(net.now, &segment(2000, 0)).unwrap();
        net.gw.send(net.now, &segment(1000, 200)).unwrap();
        // 25 ms later everything but the lost packet has arrived; the 50 ms hole timeout
        // has not passed.
        net.run_until(t0 + Duration::from_millis(27));
        net.at_server.len()
    };
    assert_eq!(delivered_soon(false), 1);
    assert_eq!(delivered_soon(true), 3);
}

/// `segment` with valid IPv4 and TCP checksums and the IP length field set, as a real
/// segment carries them (the compressor leaves anything else as it is).
fn checked_segment(sport: u16, seq: u32) -> Vec<u8> {
    let mut p = segment(sport, seq);
    p[6] = 0x40;
    p[8] = 64;
    let sum = |d: &[u8], mut acc: u32| {
        for c in d.chunks(2) {
            acc += u32::from(c[0]) << 8 | c.get(1).map_or(0, |&b| u32::from(b));
        }
        acc
    };
    let fold = |mut a: u32| {
        while a > 0xffff {
            a = (a & 0xffff) + (a >> 16);
        }
        !(a as u16)
    };
    let ip = fold(sum(&p[..20], 0));
    p[10..12].copy_from_slice(&ip.to_be_bytes());
    let tcp_len = p.len() as u32 - 20;
    let tcp = fold(sum(&p[20..], sum(&p[12..20], 6 + tcp_len)));
    p[36..38].copy_from_slice(&tcp.to_be_bytes());
    p
}

/// Inner header compression is negotiated: a gateway compresses only after the server's
/// Config announced that it restores headers, so a server from before compression (which
/// announces nothing) is sent plain IP packets (docs/wire.md, "Hello and Config").
#[test]
fn headers_are_compressed_only_towards_a_peer_that_restores_them() {
    let first_nibbles = |server_announces: bool| {
        let paths = [PathConfig {
            id: 0,
            tx_capacity_bps: 10_000_000,
            rx_capacity_bps: 10_000_000,
        }];
        let mut gw = Session::new(config(), Role::Gateway, &paths, Instant::ZERO).unwrap();
        let mut srv = Session::new(config(), Role::Server, &paths, Instant::ZERO).unwrap();
        let mut buf = vec![0u8; gw.transmit_buffer_len()];
        let mut now = Instant::ZERO;
        // Hello to the server, its Config back (stripped of capabilities for an old server).
        while let Some(t) = gw.poll_transmit(now, &mut buf) {
            srv.handle_datagram(now, t.path, &buf[..t.len]).unwrap();
        }
        assert!(
            srv.peer_restores_headers,
            "the gateway's Hello announces it"
        );
        now = Instant::from_millis(1);
        let mut configs = 0;
        while let Some(t) = srv.poll_transmit(now, &mut buf) {
            let mut d = Datagram::parse(&buf[..t.len]).unwrap();
            if let Message::Config(c) = &mut d.message {
                configs += 1;
                assert_eq!(c.capabilities, Some(braid_wire::CAP_RESTORES_HEADERS));
                if !server_announces {
                    c.capabilities = None;
                }
                let mut out = vec![0u8; 256];
                let len = d.emit(&mut out).unwrap();
                gw.handle_datagram(now, t.path, &out[..len]).unwrap();
            }
        }
        assert_eq!(configs, 1);
        now = Instant::from_millis(2);
        for i in 0..20 {
            gw.send(now, &checked_segment(1000, 1 + 100 * i)).unwrap();
        }
        let mut nibbles = Vec::new();
        while let Some(t) = gw.poll_transmit(now, &mut buf) {
            if let Message::Data { payload, .. } = Datagram::parse(&buf[..t.len]).unwrap().message {
                nibbles.push(payload[0] >> 4);
            }
        }
        nibbles
    };
    let old = first_nibbles(false);
    assert_eq!(old, vec![4; 20], "plain IPv4 towards an old server");
    let new = first_nibbles(true);
    assert_eq!(new.len(), 20);
    assert!(
        new.iter().all(|&n| n != 4),
        "establishing or compressed forms towards a server that restores headers: {new:?}"
    );
}

/// An IPv4 UDP packet from source port `port`, `len` bytes, carrying `i` first.
pub(super) fn udp(port: u16, i: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(32)];
    p[0] = 0x45;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[8] = 64;
    p[9] = crate::flow::parse::PROTO_UDP;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&port.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p[24..26].copy_from_slice(&(total - 20).to_be_bytes());
    p[28..32].copy_from_slice(&i.to_be_bytes());
    p
}

#[test]
fn a_sparse_flow_passes_a_full_send_queue() {
    // One 2 Mbit/s path; flow 1 offers 3 Mbit/s, flow 2 a 200-byte packet every 50 ms
    // (`session/send_queue.rs`). The send queue fills and refuses flow 1; flow 2 is never
    // refused and crosses in the path's delay and bottleneck queue (at most
    // `sched::delay::QUEUE_CAP`), not also the send queue's 600 ms.
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, Some(2_000_000))],
        vec![Pipe::new(20, None)],
    );
    let arrived = |net: &Net, k: u32| {
        net.at_server
            .iter()
            .any(|p| p[20..22] == 2u16.to_be_bytes() && p[28..32] == k.to_be_bytes())
    };
    let (mut refused, mut late) = (0, 0);
    for i in 0..1500u32 {
        if net.gw.send(net.now, &udp(1, i, 1200)).is_err() {
            refused += 1;
        }
        if i % 16 == 0 {
            let k = i / 16;
            // The one sent 205 ms ago has arrived.
            if k > 20 && !arrived(&net, k - 4) {
                late += 1;
            }
            net.gw.send(net.now, &udp(2, k, 200)).unwrap();
        }
        let t = net.now + Duration::from_micros(3200);
        net.run_until(t);
    }
    assert!(refused > 300, "{refused}");
    assert_eq!(late, 0);
}

/// A packet whose checksums the sender vouches for is compressed without summing it, and
/// one rebuilt from the compressed form is delivered as verified; a packet vouched for
/// wrongly fails its rebuilt checksum at the peer and is dropped, where one not vouched
/// for travels in full and is delivered as it was sent.
#[test]
fn checksums_vouched_for_are_not_summed_and_rebuilt_packets_are_verified() {
    let (mut net, sent) = send_segments(20, |gw, now, _, p| {
        gw.send_checked(now, p, true).unwrap();
    });
    assert_eq!(net.at_server, sent, "delivered as sent");
    let stats = net.srv.stats().header_compression;
    let verified = net.verified_at_server.iter().filter(|&&v| v).count() as u64;
    assert!(stats.decompressed > 0);
    assert_eq!(verified, stats.decompressed, "exactly the rebuilt ones");
    for (p, &v) in net.at_server.iter().zip(&net.verified_at_server) {
        if v {
            assert_eq!(
                crate::compress::ip_checksum(p),
                u16::from_be_bytes([p[10], p[11]])
            );
            assert!(crate::compress::tcp_checksum_ok(p));
        }
    }

    let mut bad = checked_segment(1000, 1 + 100 * 20);
    bad[60] ^= 1;
    net.gw.send(net.now, &bad).unwrap();
    net.run_until(net.now + Duration::from_millis(100));
    assert_eq!(
        net.at_server.last(),
        Some(&bad),
        "not vouched for: sent in full"
    );
    assert!(!net.verified_at_server.last().unwrap());
    let delivered = net.at_server.len();
    bad[24..28].copy_from_slice(&(1 + 100 * 21u32).to_be_bytes());
    net.gw.send_checked(net.now, &bad, true).unwrap();
    net.run_until(net.now + Duration::from_millis(100));
    assert_eq!(
        net.at_server.len(),
        delivered,
        "vouched for wrongly: dropped"
    );
    assert_eq!(net.srv.stats().header_compression.failed, 1);
}

/// `send_buffer` queues the caller's buffer itself: the peer gets the same bytes as
/// through `send`, the caller gets an empty spare back, and a refused packet stays as it
/// was.
#[test]
fn send_buffer_takes_the_packet_and_leaves_a_spare() {
    let (mut net, sent) = send_segments(5, |gw, now, i, p| {
        let mut buf = p.to_vec();
        gw.send_buffer(now, &mut buf, i % 2 == 0).unwrap();
        assert!(buf.is_empty(), "a spare in its place");
    });
    assert_eq!(net.at_server, sent);
    let mut big = vec![0x45; net.gw.config().max_packet_size + 1];
    let before = big.clone();
    assert!(matches!(
        net.gw.send_buffer(net.now, &mut big, false),
        Err(SendError::TooLarge { .. })
    ));
    assert_eq!(big, before, "refused: left as it was");
}

/// One path each way; after the handshake, `n` checksummed segments handed to the gateway
/// by `send` (with their index) 5 ms apart, then 100 ms to deliver them. Returns the net
/// and the segments sent.
fn send_segments(
    n: u32,
    mut send: impl FnMut(&mut Session, Instant, u32, &[u8]),
) -> (Net, Vec<Vec<u8>>) {
    let mut net = Net::new(
        config(),
        vec![Pipe::new(20, None)],
        vec![Pipe::new(20, None)],
    );
    net.run_until(net.at(300));
    let mut sent = Vec::new();
    for i in 0..n {
        let p = checked_segment(1000, 1 + 100 * i);
        send(&mut net.gw, net.now, i, &p);
        sent.push(p);
        let t = net.now + Duration::from_millis(5);
        net.run_until(t);
    }
    net.run_until(net.now + Duration::from_millis(100));
    (net, sent)
}
