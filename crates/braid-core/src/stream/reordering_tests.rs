//! The reordering allowance ([`FastRetransmit::Rack`]) against SD-FRT over three paths as
//! `braid send` uses them: a path that reorders within itself keeps its chunks from being
//! sent twice, and a path that really loses still recovers as fast.

use std::time::Duration;

use super::link::LinkParams;
use super::tests::{pattern, run, Outcome};
use super::*;

/// braid's own stream options (braid-net's `split_tcp::session::stream_config`, which
/// `braid send` uses) with the fast retransmit given.
fn braid(fast_retransmit: FastRetransmit) -> (StreamConfig, ReceiverConfig) {
    let sender = StreamConfig {
        mtu: 1400,
        send_buffer: 8 << 20,
        initial_peer_rwnd: 8 << 20,
        random_loss: true,
        fast_retransmit,
        ..StreamConfig::default()
    };
    let receiver = ReceiverConfig {
        buffer: 8 << 20,
        ack_delay: Duration::from_millis(20),
        ..ReceiverConfig::default()
    };
    (sender, receiver)
}

/// The lab's three paths of `braid send` (20 Mbit/s at 10, 25 and 15 ms one way), the
/// third with `jitter` per datagram (both ways) and `loss` on the first.
fn three(jitter_ms: u64, loss: f64) -> Vec<LinkParams> {
    let mut third = LinkParams::new(20.0, 15);
    third.jitter_sigma = Duration::from_millis(jitter_ms);
    vec![
        LinkParams::new(20.0, 10).loss(loss),
        LinkParams::new(20.0, 25),
        third,
    ]
}

const SIZE: usize = 16 << 20;

fn send(frt: FastRetransmit, links: Vec<LinkParams>) -> Outcome {
    let (s, r) = braid(frt);
    let o = run(
        s,
        r,
        links.clone(),
        links,
        SIZE,
        3,
        Duration::from_secs(120),
    );
    assert!(o.data == pattern(SIZE), "{frt:?}: bytes differ");
    o
}

#[test]
fn a_path_reordering_within_itself_is_not_sent_twice() {
    for jitter in [1, 2] {
        let sd = send(FastRetransmit::SackDriven, three(jitter, 0.0));
        let rack = send(FastRetransmit::Rack, three(jitter, 0.0));
        eprintln!(
            "{jitter} ms jitter: SD-FRT {:.1} Mbit/s, {} fast retransmits, {} received twice; \
             RACK {:.1} Mbit/s, {} fast retransmits, {} received twice",
            sd.mbit(),
            sd.sender.fast_retransmits,
            sd.receiver.duplicates,
            rack.mbit(),
            rack.sender.fast_retransmits,
            rack.receiver.duplicates,
        );
        // Spurious retransmissions (both copies arrived) fall by an order of magnitude
        // (the rest of the fast retransmits are the drop-tail queues' real losses), and
        // the transfer is faster.
        assert!(
            rack.receiver.duplicates * 10 <= sd.receiver.duplicates,
            "{jitter} ms: {} against {}",
            rack.receiver.duplicates,
            sd.receiver.duplicates
        );
        assert!(rack.sender.fast_retransmits < sd.sender.fast_retransmits);
        assert!(rack.mbit() > sd.mbit() * 1.1, "{jitter} ms");
    }
}

#[test]
fn a_path_that_really_loses_still_recovers_fast() {
    let clean = send(FastRetransmit::Rack, three(0, 0.0));
    for (jitter, loss) in [(0, 0.01), (0, 0.03), (1, 0.01)] {
        let sd = send(FastRetransmit::SackDriven, three(jitter, loss));
        let rack = send(FastRetransmit::Rack, three(jitter, loss));
        eprintln!(
            "{jitter} ms jitter, {loss} loss: SD-FRT {:.1} Mbit/s, {} fast retransmits, \
             {} timeouts; RACK {:.1} Mbit/s, {} fast retransmits, {} timeouts \
             (lossless {:.1} Mbit/s)",
            sd.mbit(),
            sd.sender.fast_retransmits,
            sd.sender.timeouts,
            rack.mbit(),
            rack.sender.fast_retransmits,
            rack.sender.timeouts,
            clean.mbit(),
        );
        // The losses are found by the fast retransmit, not left to the T3 timer, and cost
        // little against the lossless run.
        assert!(
            rack.sender.timeouts <= sd.sender.timeouts + 3,
            "{jitter} {loss}"
        );
        assert!(rack.mbit() >= sd.mbit(), "{jitter} {loss}");
        assert!(rack.mbit() >= clean.mbit() * 0.8, "{jitter} {loss}");
    }
}
