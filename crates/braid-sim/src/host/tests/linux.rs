//! The Linux-like model against smoltcp on the same pipes: the initial window, tail loss,
//! SACK recovery of several losses, bulk goodput behind a shallow queue, and web flow
//! completion times under random loss. Each test prints both implementations' figures.

use std::collections::BTreeSet;

use super::*;
use crate::host::tcp::wire::{self, FIN, SYN};
use crate::host::tcp::CaState;
use crate::metrics::Summary;

/// `n` flows of `size` bytes, one every few seconds so they never overlap.
fn fetches(tcp: Tcp, size: u64, n: u64) -> WorkloadConfig {
    WorkloadConfig::Web(WebConfig {
        size_bytes: Some(size),
        mean_interarrival_s: 3.0,
        max_flows: Some(n),
        tcp,
        ..WebConfig::default()
    })
}

/// Runs `workloads` over the pipes with IP MTU `mtu`, to `end_s`.
fn run_mtu(workloads: &[WorkloadConfig], mtu: usize, end_s: u64, up: Pipe, down: Pipe) -> Sim {
    let end = secs(end_s);
    let hosts = build_hosts(workloads, 1, end, mtu).unwrap();
    let mut sim = Sim::with_hosts(hosts, up, down);
    sim.run(end, |_| {});
    sim
}

fn flows(sim: &Sim) -> FlowStats {
    sim.report()[0].flows.clone().unwrap()
}

/// A rule dropping the first `n` packets that carry a FIN: the tail of a download, and
/// then whatever retransmits it.
fn drop_fins(n: usize) -> impl FnMut(&[u8]) -> bool + Send {
    let mut left = n;
    move |p| {
        let fin = wire::parse(p).is_ok_and(|s| s.header.has(FIN));
        if fin && left > 0 {
            left -= 1;
            return true;
        }
        false
    }
}

/// A rule dropping, once each, the first data segment to carry the byte `k · mss` of the
/// server's stream for each `k` in `segments`.
fn drop_segments(segments: &[u32], mss: u32) -> impl FnMut(&[u8]) -> bool + Send {
    let mut pending: BTreeSet<u32> = segments.iter().map(|k| k * mss).collect();
    let mut isn = None;
    move |p| {
        let Ok(s) = wire::parse(p) else { return false };
        if s.header.has(SYN) {
            isn = Some(s.header.seq);
            return false;
        }
        let Some(isn) = isn else { return false };
        let start = s.header.seq.0.wrapping_sub(isn.0.wrapping_add(1));
        let end = start.wrapping_add(s.payload.len() as u32);
        let hit: Vec<u32> = pending.range(start..end).copied().collect();
        for offset in &hit {
            pending.remove(offset);
        }
        !hit.is_empty()
    }
}

#[test]
fn initial_window_of_ten_fetches_14_kb_in_two_round_trips() {
    // RTT 100 ms, 100 Mbit/s, no loss, MTU 1500 (MSS 1460): 14 000 bytes are ten
    // segments. With IW10 a fetch takes the handshake, then the request and the whole
    // response in one window: two round trips plus 1.2 ms of transmission.
    let fct = |tcp| {
        let pipe = || Pipe::new(50).rate(100.0, 1 << 20);
        let sim = run_mtu(&[fetches(tcp, 14_000, 5)], 1500, 30, pipe(), pipe());
        let f = flows(&sim);
        assert_eq!(f.completed, 5, "{tcp:?}");
        f.fct_ms
    };
    let (model, smol) = (fct(Tcp::Linux), fct(Tcp::Smoltcp));
    let rtts = |ms: f64| ms / 100.0;
    println!(
        "14 kB fetch over 100 ms RTT: model {:.1}-{:.1} ms ({:.2} RTT), smoltcp {:.1}-{:.1} ms ({:.2} RTT)",
        model.min,
        model.max,
        rtts(model.max),
        smol.min,
        smol.max,
        rtts(smol.max)
    );
    assert!(
        rtts(model.min) >= 2.0 && rtts(model.max) < 2.05,
        "{model:?}"
    );
    assert!(
        rtts(smol.min) >= 4.0,
        "smoltcp's 2 kB initial window: {smol:?}"
    );
}

#[test]
fn rfc3390_initial_window_fetches_10_kb_in_three_round_trips() {
    // RTT 100 ms, 100 Mbit/s, no loss, MSS 1460: 10 000 bytes are seven segments. With
    // RFC 3390's three-segment window they take two flights (3, then 4 of the 6 allowed)
    // after the handshake: three round trips; with the default IW10 one flight, two.
    let fct = |iw| {
        let pipe = || Pipe::new(50).rate(100.0, 1 << 20);
        let w = WorkloadConfig::Web(WebConfig {
            initial_window: iw,
            ..match fetches(Tcp::Linux, 10_000, 5) {
                WorkloadConfig::Web(c) => c,
                _ => unreachable!(),
            }
        });
        let sim = run_mtu(&[w], 1500, 30, pipe(), pipe());
        let f = flows(&sim);
        assert_eq!(f.completed, 5, "{iw:?}");
        f.fct_ms
    };
    let rtts = |ms: f64| ms / 100.0;
    let default = fct(None);
    let rfc3390 = fct(Some(InitialWindow::Rfc3390));
    let four = fct(Some(InitialWindow::Segments(4)));
    let seven = fct(Some(InitialWindow::Segments(7)));
    println!(
        "10 kB fetch over 100 ms RTT: IW10 {:.2} RTT, RFC 3390 {:.2} RTT, IW4 {:.2}, IW7 {:.2}",
        rtts(default.max),
        rtts(rfc3390.max),
        rtts(four.max),
        rtts(seven.max)
    );
    assert!(rtts(default.max) < 2.05, "{default:?}");
    assert!(
        rtts(rfc3390.min) >= 3.0 && rtts(rfc3390.max) < 3.05,
        "{rfc3390:?}"
    );
    assert!(rtts(four.min) >= 3.0 && rtts(four.max) < 3.05, "{four:?}");
    assert!(rtts(seven.max) < 2.05, "{seven:?}");
}

#[test]
fn tail_loss_is_repaired_by_a_probe_or_a_short_timeout_not_a_1_s_one() {
    // RTT 100 ms; a 40-segment download whose last segment (it carries the FIN) is lost:
    // no later segment can trigger fast retransmit. The model's tail loss probe fires
    // 2·SRTT + 200 ms (one segment in flight) after the last ACK, or at the RTO if that
    // comes first (SRTT plus at least 200 ms, as Linux's); if the probe is lost too, the
    // RTO follows. smoltcp waits for its 1 s minimum RTO.
    let fct = |tcp, lost: usize| {
        let down = Pipe::new(50).rate(20.0, 1 << 20).drop_when(drop_fins(lost));
        let sim = run_mtu(&[fetches(tcp, 40 * 1360, 1)], 1400, 20, Pipe::new(50), down);
        let f = flows(&sim);
        assert_eq!(f.completed, 1, "{tcp:?}, {lost} lost");
        let sender = sim.report()[0].tcp.clone().unwrap().sender;
        (f.fct_ms.max, sender)
    };
    let (base, _) = fct(Tcp::Linux, 0);
    let (probe, probe_stats) = fct(Tcp::Linux, 1);
    let (rto, rto_stats) = fct(Tcp::Linux, 2);
    let (smol_base, _) = fct(Tcp::Smoltcp, 0);
    let (smol_lost, _) = fct(Tcp::Smoltcp, 1);
    println!(
        "tail loss over 100 ms RTT: model {base:.0} ms, +{:.0} ms repaired by the probe \
         ({probe_stats:?}), +{:.0} ms when the probe is lost too ({rto_stats:?}); \
         smoltcp {smol_base:.0} ms, +{:.0} ms",
        probe - base,
        rto - base,
        smol_lost - smol_base,
    );
    let probe_stats = probe_stats.unwrap();
    assert_eq!((probe_stats.loss_probes, probe_stats.timeouts), (1, 0));
    assert_eq!(probe_stats.retransmits, 1);
    // The probe goes at the RTO, 300-400 ms after the last ACK, and its ACK comes back
    // an RTT later.
    assert!((400.0..500.0).contains(&(probe - base)), "{}", probe - base);
    let rto_stats = rto_stats.unwrap();
    assert_eq!((rto_stats.loss_probes, rto_stats.timeouts), (1, 1));
    // Then one RTO of 300-350 ms more, not a second.
    assert!(rto - probe < 350.0, "{}", rto - probe);
    assert!(smol_lost - smol_base >= 1000.0, "{}", smol_lost - smol_base);
}

#[test]
fn sack_repairs_several_losses_in_one_round_trip() {
    // 100 Mbit/s, RTT 60 ms, a deep queue; a 200-segment download loses four segments of
    // one flight (40, 43, 46, 49 of segments 30-69, first transmissions). With SACK, RACK marks all four
    // lost once three segments above them are SACKed, and fast recovery retransmits each
    // once: the recovery lasts about one round trip. (Losses at the end of a flight take
    // a round trip longer to detect: only the next flight's SACKs show them, for Linux
    // too.) smoltcp repairs one hole per round trip at best, then times out.
    let segments = [40, 43, 46, 49];
    let run = |tcp, lossy: bool| {
        let mut down = Pipe::new(30).rate(100.0, 1 << 20);
        if lossy {
            down = down.drop_when(drop_segments(&segments, 1360));
        }
        let end = secs(20);
        let hosts = build_hosts(&[fetches(tcp, 200 * 1360, 1)], 1, end, 1400).unwrap();
        let mut sim = Sim::with_hosts(hosts, Pipe::new(30), down);
        let mut recovery: Option<(Instant, Instant)> = None;
        sim.run(end, |s| {
            let recovering = s.internet.stacks.linux.as_ref().is_some_and(|l| {
                l.conns()
                    .any(|c| c.sender().ca_state() == CaState::Recovery)
            });
            if recovering {
                let first = recovery.map_or(s.now, |r| r.0);
                recovery = Some((first, s.now));
            }
        });
        let f = flows(&sim);
        assert_eq!(f.completed, 1, "{tcp:?}");
        let sender = sim.report()[0].tcp.clone().unwrap().sender;
        (f.fct_ms.max, sender, recovery)
    };
    let (base, _, _) = run(Tcp::Linux, false);
    let (lossy, stats, recovery) = run(Tcp::Linux, true);
    let (smol_base, _, _) = run(Tcp::Smoltcp, false);
    let (smol_lossy, _, _) = run(Tcp::Smoltcp, true);
    let (entered, last) = recovery.expect("the model entered fast recovery");
    let lasted = (last - entered).as_secs_f64() * 1e3;
    println!(
        "4 losses in one flight, 60 ms RTT: model {base:.0} ms, +{:.0} ms, recovery lasted \
         {lasted:.1} ms ({stats:?}); smoltcp {smol_base:.0} ms, +{:.0} ms",
        lossy - base,
        smol_lossy - smol_base,
    );
    let stats = stats.unwrap();
    assert_eq!(stats.retransmits, 4, "each loss retransmitted once");
    assert_eq!((stats.fast_recoveries, stats.timeouts), (1, 0));
    assert!(lasted < 1.5 * 60.0, "{lasted}");
    // The flow also pays for the smaller window after recovery: Cubic instead of slow
    // start for the rest of it.
    assert!(lossy - base < 3.0 * 60.0, "{}", lossy - base);
    assert!(smol_lossy - smol_base > 4.0 * (lossy - base));
}

#[test]
fn newreno_repairs_one_hole_per_partial_ack_and_leaves_recovery_on_the_full_ack() {
    // Without SACK (RFC 6582): 100 Mbit/s, RTT 60 ms; a bulk download of 400 segments
    // loses four segments of one flight (40, 43, 46, 49). Three duplicate ACKs retransmit
    // 40, and each partial ACK the next hole: four retransmissions, one recovery. The ACK
    // that reaches the recovery point ends it and marks nothing lost: a sender that took
    // the new head for lost there would retransmit it and start another recovery on
    // every full ACK, cutting its window each time.
    let segments = [40, 43, 46, 49];
    let down = Pipe::new(30)
        .rate(100.0, 1 << 20)
        .drop_when(drop_segments(&segments, 1360));
    let bulk = WorkloadConfig::Bulk(BulkConfig {
        bytes: Some(400 * 1360),
        sack: false,
        ..BulkConfig::default()
    });
    let sim = run_mtu(&[bulk], 1400, 10, Pipe::new(30), down);
    let sender = sim.report()[0].tcp.clone().unwrap().sender.unwrap();
    println!("NewReno, 4 losses in one flight: {sender:?}");
    assert_eq!(sender.retransmits, 4, "each loss retransmitted once");
    assert_eq!((sender.fast_recoveries, sender.timeouts), (1, 0));
}

#[test]
fn bulk_fills_a_drop_tail_pipe() {
    // As `bulk_recovers_from_drop_tail_losses`: 10 Mbit/s, RTT 60 ms, a drop-tail queue
    // of one bandwidth-delay product (75 kB). HyStart leaves slow start before the queue
    // overflows, Cubic's β = 0.7 keeps more than a BDP in flight after a loss, and SACK
    // recovery repairs a window's losses without a timeout.
    let goodput = |tcp| {
        let down = Pipe::new(30).rate(10.0, 75_000);
        let bulk = on(tcp, WorkloadConfig::Bulk(BulkConfig::default()));
        let r = run(&[bulk], 5, 30, Pipe::new(30), down);
        let b = r[0].bulk.clone().unwrap();
        let stalled = b.goodput_mbps_series.iter().filter(|&&g| g == 0.0).count();
        (b.goodput_mbps, stalled, r[0].tcp.clone().unwrap().sender)
    };
    let (model, stalled, stats) = goodput(Tcp::Linux);
    let (smol, smol_stalled, _) = goodput(Tcp::Smoltcp);
    println!(
        "bulk over 10 Mbit/s, 1-BDP drop-tail: model {model:.2} Mbit/s ({:.0}% of the \
         9.71 Mbit/s possible, {stalled} stalled 100 ms intervals, {stats:?}); smoltcp \
         {smol:.2} Mbit/s ({smol_stalled} stalled)",
        model / 9.714 * 100.0
    );
    assert!(model > 9.2, "{model}");
    // The handshake's first interval, and a few while a hole at the head of the window is
    // repaired (a round trip is 60-120 ms here).
    assert!(stalled <= 5, "{stalled}");
    assert_eq!(stats.unwrap().timeouts, 0);
    assert!(model > 1.4 * smol, "{model} vs {smol}");
}

#[test]
fn web_fcts_under_3_percent_loss_beat_smoltcp() {
    // As `web_flows_survive_loss`: RTT 60 ms, 5 Mbit/s down, 3% random loss each way,
    // SURGE flows for 200 s. Under loss smoltcp's 1 s minimum RTO and one-segment
    // recovery dominate the tail of the FCT distribution.
    let fcts = |tcp| -> Summary {
        let up = Pipe::new(30).loss(0.03, 5);
        let down = Pipe::new(30).rate(5.0, 128_000).loss(0.03, 6);
        let r = run(&[on(tcp, web(0.5))], 3, 200, up, down);
        let f = r[0].flows.clone().unwrap();
        assert_eq!(f.failed, 0);
        assert!(f.completed > 300);
        f.fct_ms
    };
    let (model, smol) = (fcts(Tcp::Linux), fcts(Tcp::Smoltcp));
    println!(
        "web FCT under 3% loss, 60 ms RTT: model median {:.0} ms, p95 {:.0} ms; smoltcp \
         median {:.0} ms, p95 {:.0} ms",
        model.median, model.p95, smol.median, smol.p95
    );
    assert!(model.median < smol.median, "{model:?} vs {smol:?}");
    assert!(model.p95 < 0.7 * smol.p95, "{model:?} vs {smol:?}");
}
