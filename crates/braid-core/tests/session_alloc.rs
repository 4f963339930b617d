//! The whole engine allocates nothing per packet once warm (issue 5): a gateway sends a TCP
//! flow (208 Mbit/s) to a server over two paths of 150 Mbit/s and 10 and 30 ms (so the server resequences), with
//! acknowledgements and reports flowing back, under a counting global allocator. The
//! harness's own buffers are allocated up front.

// A global allocator is necessarily `unsafe`; it only counts and forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::time::Duration;

use braid_core::{Config, Instant, PathConfig, Role, Session};

struct Counting;
thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}
fn bump() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}
// SAFETY: forwards to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        bump();
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        bump();
        // SAFETY: forwarded.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;
fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// One direction of one path: 150 Mbit/s, fixed delay.
struct Pipe {
    delay: Duration,
    free_at: Instant,
    q: VecDeque<(Instant, usize, Vec<u8>)>,
}

#[test]
fn engine_allocates_nothing_per_packet_once_warm() {
    let paths: Vec<PathConfig> = (0..2)
        .map(|i| PathConfig {
            id: i,
            tx_capacity_bps: 150_000_000,
            rx_capacity_bps: 150_000_000,
        })
        .collect();
    let cfg = Config {
        session_id: 7,
        ..Config::default()
    };
    let mut gw = Session::new(cfg.clone(), Role::Gateway, &paths, Instant::ZERO).unwrap();
    let mut srv = Session::new(cfg, Role::Server, &paths, Instant::ZERO).unwrap();
    let mk = |ms| Pipe {
        delay: Duration::from_millis(ms),
        free_at: Instant::ZERO,
        q: VecDeque::with_capacity(1 << 16),
    };
    let mut up = [mk(10), mk(30)];
    let mut down = [mk(10), mk(30)];
    let mut free: Vec<Vec<u8>> = (0..(1 << 15)).map(|_| vec![0u8; 2048]).collect();
    let mut txbuf = vec![0u8; gw.transmit_buffer_len().max(2048)];
    let mut out = Vec::with_capacity(2048);
    let mut pkt = vec![0u8; 1300];
    pkt[0] = 0x45;
    pkt[2..4].copy_from_slice(&1300u16.to_be_bytes());
    pkt[9] = 6;
    pkt[12..16].copy_from_slice(&[10, 0, 0, 2]);
    pkt[16..20].copy_from_slice(&[10, 1, 0, 2]);
    pkt[20..22].copy_from_slice(&1000u16.to_be_bytes());
    pkt[22..24].copy_from_slice(&80u16.to_be_bytes());
    pkt[32] = 5 << 4;
    pkt[33] = 0x10;
    let mut delivered = 0u64;
    let mut mark = None;
    let steps = 60_000u64;
    for step in 0..steps {
        let now = Instant::from_micros(step * 50);
        if step == 20_000 {
            // `stats()` allocates (its path list): read it before the count.
            let buffered = srv.stats().reorder.buffered;
            mark = Some((allocs(), delivered, buffered));
        }
        let seq = (step as u32).wrapping_mul(1260);
        pkt[24..28].copy_from_slice(&seq.to_be_bytes());
        let _ = gw.send(now, &pkt);
        for (to_srv, pipes) in [(true, &mut up), (false, &mut down)] {
            for (i, p) in pipes.iter_mut().enumerate() {
                while p.q.front().is_some_and(|f| f.0 <= now) {
                    let (_, len, b) = p.q.pop_front().unwrap();
                    let s = if to_srv { &mut srv } else { &mut gw };
                    let _ = s.handle_datagram(now, i as u8, &b[..len]);
                    free.push(b);
                }
            }
        }
        gw.handle_timeout(now);
        srv.handle_timeout(now);
        for (s, pipes) in [(&mut gw, &mut up), (&mut srv, &mut down)] {
            while let Some(t) = s.poll_transmit(now, &mut txbuf) {
                let p = &mut pipes[usize::from(t.path)];
                let mut b = free.pop().unwrap();
                b[..t.len].copy_from_slice(&txbuf[..t.len]);
                // Serialised at 150 Mbit/s behind what the pipe already carries.
                let tx = Duration::from_nanos((t.len as u64 + 28) * 8 * 1000 / 150);
                p.free_at = p.free_at.max(now) + tx;
                p.q.push_back((p.free_at + p.delay, t.len, b));
            }
        }
        while srv.poll_deliver(&mut out) {
            delivered += 1;
        }
        while gw.poll_deliver(&mut out) {}
        while gw.poll_event().is_some() {}
        while srv.poll_event().is_some() {}
    }
    let (a0, d0, b0) = mark.unwrap();
    let a = allocs() - a0;
    let d = delivered - d0;
    let reorder = srv.stats().reorder;
    // 20 000 packets of warm-up, then 40 000 sent (one every 50 µs) and delivered.
    assert_eq!(d, 40_000, "{reorder:?}");
    assert!(
        reorder.buffered > b0,
        "no reordering exercised: {reorder:?}"
    );
    assert_eq!(
        a, 0,
        "{a} allocations for {d} packets after warm-up; {reorder:?}"
    );
}
