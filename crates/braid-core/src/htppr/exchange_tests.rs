//! One burst at a time between a sender and a receiver, by hand: the receiver's decisions
//! (ACK, ARQ, NACK by gap and by timeout) and fuzzy header matching (§3.1, §3.1.1, §3.2).

use std::time::Duration;

use super::tortoise::{self, ToSender};
use super::*;
use crate::Instant;

const T0: Instant = Instant::ZERO;

struct Pair {
    sender: Sender,
    receiver: Receiver,
    buf: Vec<u8>,
}

impl Pair {
    /// A sender with one chunk of `len` bytes, offered and wanted.
    fn new(len: usize) -> Self {
        let mut pair = Pair {
            sender: Sender::new(SenderConfig::default()),
            receiver: Receiver::new(ReceiverConfig::default()),
            buf: Vec::new(),
        };
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        assert_eq!(pair.sender.write(&data), len);
        pair.sender.finish();
        pair.metadata(T0);
        assert_eq!(pair.feedback(T0), [ToSender::Want { chunk: 0 }]);
        pair
    }

    /// The sender's whole burst, as sent on the hare.
    fn burst(&mut self) -> Vec<Vec<u8>> {
        let mut packets = Vec::new();
        while self.sender.poll_hare(T0, &mut self.buf).is_some() {
            packets.push(self.buf.clone());
        }
        packets
    }

    /// Carries the sender's tortoise messages (metadata) to the receiver.
    fn metadata(&mut self, now: Instant) {
        while self.sender.poll_tortoise(now, &mut self.buf).is_some() {
            self.receiver.handle_tortoise(now, &self.buf).unwrap();
        }
    }

    /// Carries the receiver's feedback to the sender; returns it without BIER reports.
    fn feedback(&mut self, now: Instant) -> Vec<ToSender> {
        let mut items = Vec::new();
        while self.receiver.poll_tortoise(now, &mut self.buf).is_some() {
            self.sender.handle_tortoise(now, &self.buf).unwrap();
            items.extend(tortoise::parse_to_sender(&self.buf).unwrap());
        }
        items.retain(|i| !matches!(i, ToSender::Bier { .. }));
        items
    }
}

fn acks(seqs: impl IntoIterator<Item = u16>) -> Vec<ToSender> {
    seqs.into_iter().map(|seq| ToSender::Ack { seq }).collect()
}

#[test]
fn whole_packets_are_acked_even_when_they_beat_their_notice() {
    let mut p = Pair::new(32 * 1024);
    let burst = p.burst();
    assert_eq!(burst.len(), 5);
    assert_eq!(burst[0].len(), hare::HEADER_LEN + 1408);
    for packet in &burst {
        p.receiver.handle_hare(T0, packet);
    }
    assert_eq!(p.feedback(T0), []);
    p.metadata(T0);
    assert_eq!(p.feedback(T0), acks(0..5));
    // The chunk's next burst continues where this one stopped: block 220.
    assert_eq!(p.burst().len(), 5);
}

#[test]
fn a_sequence_gap_is_nacked_and_resent_whole() {
    let mut p = Pair::new(32 * 1024);
    p.metadata(T0);
    let burst = p.burst();
    p.metadata(T0);
    for i in [0, 1, 3, 4] {
        p.receiver.handle_hare(T0, &burst[i]);
    }
    let mut expected = acks([0, 1]);
    expected.push(ToSender::Nack { seq: 2 });
    expected.extend(acks([3, 4]));
    assert_eq!(p.feedback(T0), expected);
    // The next burst starts with packet 2's blocks (0-based blocks 88..132).
    let next = p.burst();
    assert_eq!(next[0][hare::HEADER_LEN..], burst[2][hare::HEADER_LEN..]);
}

#[test]
fn the_last_packet_is_nacked_when_its_notice_times_out() {
    let mut p = Pair::new(32 * 1024);
    let burst = p.burst();
    for packet in &burst[..4] {
        p.receiver.handle_hare(T0, packet);
    }
    let notice_at = Instant::from_millis(25);
    p.metadata(notice_at);
    assert_eq!(p.feedback(notice_at), acks(0..4));
    let deadline = p.receiver.poll_timeout().unwrap();
    assert_eq!(deadline, notice_at + Duration::from_millis(20));
    p.receiver
        .handle_timeout(deadline - Duration::from_micros(1));
    assert_eq!(p.feedback(deadline), []);
    p.receiver.handle_timeout(deadline);
    assert_eq!(p.feedback(deadline), [ToSender::Nack { seq: 4 }]);
    assert_eq!(p.receiver.stats().nacks_by_timeout, 1);
    assert_eq!(p.receiver.poll_timeout(), None);
}

#[test]
fn a_damaged_block_is_repaired_alone() {
    let mut p = Pair::new(32 * 1024);
    let mut burst = p.burst();
    p.metadata(T0);
    // One bit in block 7 of packet 1, one in block 30 of packet 3.
    burst[1][hare::HEADER_LEN + 7 * 32 + 5] ^= 0x20;
    burst[3][hare::HEADER_LEN + 30 * 32] ^= 0x01;
    for packet in &burst {
        p.receiver.handle_hare(T0, packet);
    }
    let mut expected = acks([0]);
    expected.push(ToSender::CrcRequest { seq: 1 });
    expected.extend(acks([2]));
    expected.push(ToSender::CrcRequest { seq: 3 });
    expected.extend(acks([4]));
    assert_eq!(p.feedback(T0), expected);
    // The fine CRCs come back; the ARQs name exactly the damaged blocks.
    p.metadata(T0);
    let bad = |i: usize| (0..44).map(move |b| b == i).collect::<Vec<_>>();
    assert_eq!(
        p.feedback(T0),
        [
            ToSender::Arq {
                seq: 1,
                bad: bad(7)
            },
            ToSender::Arq {
                seq: 3,
                bad: bad(30)
            },
        ]
    );
    // The next burst leads with a packet carrying those two blocks and the next fresh ones.
    let next = p.burst();
    let payload = &next[0][hare::HEADER_LEN..];
    let original = |pkt: usize, block: usize| {
        let at = hare::HEADER_LEN + block * 32;
        let mut b = burst[pkt][at..at + 32].to_vec();
        if pkt == 1 {
            b[5] ^= 0x20;
        } else {
            b[0] ^= 0x01;
        }
        b
    };
    assert_eq!(payload[..32], original(1, 7));
    assert_eq!(payload[32..64], original(3, 30));
    assert_eq!(p.sender.stats().blocks_resent, 2);
}

#[test]
fn damaged_headers_still_count() {
    let mut p = Pair::new(32 * 1024);
    let mut burst = p.burst();
    p.metadata(T0);
    // Packet 0: 40 of the id's 160 bits wrong (the most fuzzy matching forgives).
    for bit in 0..40 {
        burst[0][bit * 4 / 8] ^= 1 << (bit * 4 % 8);
    }
    // Packet 1: one copy of the sequence number damaged.
    burst[1][chunk::CHUNK_ID_LEN + 1] ^= 0x04;
    // Packet 2: both copies damaged in different bits.
    burst[2][chunk::CHUNK_ID_LEN] ^= 0x80;
    burst[2][chunk::CHUNK_ID_LEN + 3] ^= 0x01;
    // Packet 3: 41 id bits wrong: no longer this chunk.
    for bit in 0..41 {
        burst[3][bit / 8] ^= 1 << (bit % 8);
    }
    for packet in &burst {
        p.receiver.handle_hare(T0, packet);
    }
    let mut expected = acks([0, 1, 2]);
    expected.push(ToSender::Nack { seq: 3 });
    expected.extend(acks([4]));
    assert_eq!(p.feedback(T0), expected);
    let s = p.receiver.stats();
    assert_eq!((s.headers_repaired, s.unmatched), (3, 1));
}

#[test]
fn an_unreadable_sequence_number_is_lost_not_misplaced() {
    let mut p = Pair::new(32 * 1024);
    let mut burst = p.burst();
    p.metadata(T0);
    // Five differing bits between the copies: more than the code reads.
    burst[2][chunk::CHUNK_ID_LEN + 2] ^= 0x1f;
    for packet in &burst {
        p.receiver.handle_hare(T0, packet);
    }
    let mut expected = acks([0, 1]);
    expected.push(ToSender::Nack { seq: 2 });
    expected.extend(acks([3, 4]));
    assert_eq!(p.feedback(T0), expected);
    assert_eq!(p.receiver.stats().unreadable, 1);
}

#[test]
fn a_receiver_rejects_a_burst_it_cannot_lay_out() {
    let mut p = Pair::new(32 * 1024);
    p.burst();
    let mut notice = Vec::new();
    while p.sender.poll_tortoise(T0, &mut p.buf).is_some() {
        notice.extend_from_slice(&p.buf);
    }
    // Damage the plan digest (bytes 8..12 of the Burst item: tag, chunk, seq, rate).
    notice[8] ^= 1;
    assert!(matches!(
        p.receiver.handle_tortoise(T0, &notice),
        Err(ReceiverError::PlanMismatch(0))
    ));
}

#[test]
fn bier_samples_enter_in_packet_order() {
    let mut p = Pair::new(32 * 1024);
    let mut burst = p.burst();
    p.metadata(T0);
    burst[1][hare::HEADER_LEN + 3 * 32] ^= 0x01;
    for packet in &burst {
        p.receiver.handle_hare(T0, packet);
    }
    // The sample count in the receiver's latest BIER report.
    let samples = |p: &mut Pair| {
        let mut n = None;
        while p.receiver.poll_tortoise(T0, &mut p.buf).is_some() {
            p.sender.handle_tortoise(T0, &p.buf).unwrap();
            for item in tortoise::parse_to_sender(&p.buf).unwrap() {
                if let ToSender::Bier { samples, .. } = item {
                    n = Some(samples);
                }
            }
        }
        n
    };
    // Packets 2-4 are whole but wait behind packet 1, judged once its finer CRCs come.
    assert_eq!(samples(&mut p), Some(1));
    p.metadata(T0);
    assert_eq!(samples(&mut p), Some(5));
}
