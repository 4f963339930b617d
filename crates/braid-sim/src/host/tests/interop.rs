//! The model against smoltcp, each on one end: random bytes both ways through a lossy
//! pipe must arrive intact and the connection must close on both ends, which catches
//! mistakes in headers, options, checksums, windows and the state machine that a model
//! talking only to itself would share with its peer. Then whole workloads with the client
//! host on one implementation and the internet host on the other.

use super::*;
use crate::host::packets::Packets;
use crate::host::transport::{Buffers, Stack};
use crate::host::{smol, tcp};

const PORT: u16 = 80;
const BUFFERS: Buffers = Buffers {
    rx: 65_536,
    tx: 65_536,
    nagle: false,
    initial_window: None,
    prism: false,
    sack: true,
};

/// One end: a stack, its outgoing packets, and an application that sends `data`, reads
/// everything, and closes once both are done.
struct End<S: Stack> {
    stack: S,
    out: Packets,
    conn: Option<S::Handle>,
    data: Vec<u8>,
    sent: usize,
    got: Vec<u8>,
    expect: usize,
    closed: bool,
}

impl<S: Stack> End<S> {
    fn new(stack: S, data: Vec<u8>, expect: usize) -> End<S> {
        End {
            stack,
            out: Packets::default(),
            conn: None,
            data,
            sent: 0,
            got: Vec::new(),
            expect,
            closed: false,
        }
    }

    fn app(&mut self, now: Instant) {
        let Some(h) = self.conn else { return };
        if self.closed {
            return;
        }
        let Some(socket) = self.stack.socket(h) else {
            return;
        };
        if socket.may_send() {
            self.sent += socket.send_slice(&self.data[self.sent..]);
        }
        let mut buf = [0u8; 3000];
        loop {
            let n = socket.recv_slice(&mut buf);
            if n == 0 {
                break;
            }
            self.got.extend_from_slice(&buf[..n]);
        }
        if self.sent == self.data.len() && self.got.len() == self.expect {
            self.stack.linger(now, h);
            self.closed = true;
        }
    }
}

/// Connects `client` to `server`, exchanges `n` random bytes each way over pipes with 2%
/// loss and a 100 kB drop-tail queue at 20 Mbit/s, and returns when both ends have
/// closed; panics if that takes more than five virtual minutes.
fn exchange<A: Stack, B: Stack>(client: A, server: B, n: usize, seed: u64) -> f64 {
    let mut rng = Rng::new(seed);
    let mut bytes = |n| (0..n).map(|_| rng.below(256) as u8).collect::<Vec<u8>>();
    let (to_server, to_client) = (bytes(n), bytes(n));
    let mut c = End::new(client, to_server.clone(), n);
    let mut s = End::new(server, to_client.clone(), n);
    c.conn = c.stack.connect(INTERNET_ADDR, PORT, BUFFERS);
    assert!(c.conn.is_some());
    let mut up = Pipe::new(10).rate(20.0, 100_000).loss(0.02, seed);
    let mut down = Pipe::new(10).rate(20.0, 100_000).loss(0.02, seed + 1);
    let mut now = Instant::ZERO;
    let limit = secs(300);
    loop {
        while up.next().is_some_and(|t| t <= now) {
            let (_, p) = up.in_flight.pop_front().unwrap();
            let mut accept = |port, _| (port == PORT).then_some(BUFFERS);
            if let Some((h, _, _)) = s.stack.ingress(now, p, &mut s.out, &mut accept) {
                assert!(s.conn.is_none(), "one connection only");
                s.conn = Some(h);
            }
        }
        while down.next().is_some_and(|t| t <= now) {
            let (_, p) = down.in_flight.pop_front().unwrap();
            c.stack.ingress(now, p, &mut c.out, &mut |_, _| None);
        }
        c.app(now);
        s.app(now);
        for (end_out, stack, pipe) in [
            (&mut c.out, &mut c.stack as &mut dyn StackDyn, &mut up),
            (&mut s.out, &mut s.stack as &mut dyn StackDyn, &mut down),
        ] {
            stack.egress_reap(now, end_out);
            while let Some(p) = end_out.pop() {
                pipe.send(now, p);
            }
        }
        if c.closed && s.closed && c.stack.sockets() == 0 && s.stack.sockets() == 0 {
            break;
        }
        let next = [
            c.stack.poll_at(now),
            s.stack.poll_at(now),
            up.next(),
            down.next(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else {
            panic!(
                "stuck at {now}: client sent {} got {}, server sent {} got {}",
                c.sent,
                c.got.len(),
                s.sent,
                s.got.len()
            );
        };
        assert!(next <= limit, "not done after {limit}");
        now = next.max(Instant::from_micros(now.as_micros() + 1));
    }
    for (name, got, want) in [
        ("client", &c.got, &to_client),
        ("server", &s.got, &to_server),
    ] {
        let first = got.iter().zip(want.iter()).position(|(a, b)| a != b);
        assert!(
            got == want,
            "the {name} got different bytes: {} of {}, first difference at {first:?}",
            got.len(),
            want.len()
        );
    }
    now.as_secs_f64()
}

/// Egress and reaping through one object, whatever the stack.
trait StackDyn {
    fn egress_reap(&mut self, now: Instant, out: &mut Packets);
}

impl<S: Stack> StackDyn for S {
    fn egress_reap(&mut self, now: Instant, out: &mut Packets) {
        self.egress(now, out);
        self.reap(now);
    }
}

fn model(addr: [u8; 4], seed: u64) -> tcp::Stack {
    tcp::Stack::new(addr, 1400, Rng::new(seed))
}

fn smoltcp(addr: [u8; 4], seed: u64) -> smol::Stack {
    smol::Stack::new(addr, 1400, seed)
}

#[test]
fn model_client_and_smoltcp_server_exchange_bytes_intact() {
    for seed in 1..4 {
        let t = exchange(
            model(CLIENT_ADDR, seed),
            smoltcp(INTERNET_ADDR, seed),
            300_000,
            seed,
        );
        println!("model → smoltcp, seed {seed}: done and closed at {t:.3} s");
    }
}

#[test]
fn smoltcp_client_and_model_server_exchange_bytes_intact() {
    for seed in 1..4 {
        let t = exchange(
            smoltcp(CLIENT_ADDR, seed),
            model(INTERNET_ADDR, seed),
            300_000,
            seed,
        );
        println!("smoltcp → model, seed {seed}: done and closed at {t:.3} s");
    }
}

#[test]
fn model_and_model_exchange_bytes_intact() {
    for seed in 1..4 {
        let t = exchange(
            model(CLIENT_ADDR, seed),
            model(INTERNET_ADDR, seed + 7),
            300_000,
            seed,
        );
        println!("model → model, seed {seed}: done and closed at {t:.3} s");
    }
}

#[test]
fn workloads_run_with_each_implementation_on_one_end() {
    let workloads = [
        web(1.0),
        WorkloadConfig::Web(WebConfig {
            direction: Direction::Up,
            mean_interarrival_s: 2.0,
            ..WebConfig::default()
        }),
        WorkloadConfig::Bulk(BulkConfig {
            bytes: Some(2_000_000),
            ..BulkConfig::default()
        }),
        WorkloadConfig::Bulk(BulkConfig {
            bytes: Some(1_000_000),
            direction: Direction::Up,
            ..BulkConfig::default()
        }),
    ];
    for (client, internet) in [(Tcp::Linux, Tcp::Smoltcp), (Tcp::Smoltcp, Tcp::Linux)] {
        let end = secs(60);
        let pick = |role, _| match role {
            Role::Client => client,
            Role::Internet => internet,
        };
        let hosts = build_hosts_with(&workloads, 12, end, 1400, pick).unwrap();
        let up = Pipe::new(20).rate(5.0, 64_000).loss(0.01, 1);
        let down = Pipe::new(20).rate(10.0, 128_000).loss(0.01, 2);
        let mut sim = Sim::with_hosts(hosts, up, down);
        sim.run(end, |_| {});
        for w in sim.report() {
            let f = w.flows.unwrap();
            println!("client {client:?}, server {internet:?}, {}: {f:?}", w.name);
            assert_eq!(f.failed, 0, "{}", w.name);
            assert!(f.completed > 0 && f.incomplete <= 2, "{}: {f:?}", w.name);
        }
    }
}
