//! A saturating UDP sender (iperf's 1470-byte datagrams), unicast with MAC ACKs, and its sink.

use braid_core::Instant;

use crate::wifi::medium::{Frame, Station, TxOutcome};
use crate::wifi::phy;
use crate::wifi::samplerate::SampleRate;

/// iperf's UDP datagram payload.
pub const DATAGRAM: usize = 1470;

/// Sends `total` bytes as fast as the MAC takes them.
pub struct UdpSender {
    left: u64,
    rate: Result<usize, SampleRate>,
}

impl UdpSender {
    /// At a fixed rate index, or with SampleRate when `rate` is `None`.
    pub fn new(total: u64, rate: Option<usize>, seed: u64) -> UdpSender {
        UdpSender {
            left: total,
            rate: rate.ok_or_else(|| SampleRate::new(seed, DATAGRAM + 64)),
        }
    }
}

impl Station for UdpSender {
    fn poll_frame(&mut self, now: Instant) -> Option<Frame> {
        if self.left == 0 {
            return None;
        }
        let n = (DATAGRAM as u64).min(self.left) as usize;
        self.left -= n as u64;
        let rate = match &mut self.rate {
            Ok(k) => *k,
            Err(s) => s.choose(now),
        };
        Some(Frame {
            payload: vec![0; n],
            overhead: phy::MAC_OVERHEAD + phy::UDP_OVERHEAD,
            protected: n,
            rate,
            acked: true,
            series: None,
        })
    }

    fn on_tx_done(&mut self, now: Instant, o: TxOutcome) {
        if let Err(s) = &mut self.rate {
            s.on_result(now, o.rate, o.delivered, o.attempts, o.airtime_us);
        }
    }

    fn on_frame(&mut self, _now: Instant, _payload: Vec<u8>) {}

    fn is_done(&self) -> bool {
        true
    }
}

/// Counts what arrives; done at `expected` bytes or when told the sender is through.
pub struct UdpSink {
    pub received: u64,
    pub expected: u64,
}

impl Station for UdpSink {
    fn poll_frame(&mut self, _now: Instant) -> Option<Frame> {
        None
    }

    fn on_frame(&mut self, _now: Instant, payload: Vec<u8>) {
        self.received += payload.len() as u64;
    }

    fn is_done(&self) -> bool {
        self.received >= self.expected
    }
}
