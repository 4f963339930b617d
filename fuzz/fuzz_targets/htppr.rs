//! HTPPR's parsers and endpoints on hostile bytes: the tortoise parsers return items or a
//! typed error, a hare packet parses or is too short, and a receiver fed any hare packet
//! and any tortoise message (after a valid start) never panics.
#![no_main]

use braid_core::htppr::hare::HarePacket;
use braid_core::htppr::{tortoise, Receiver, ReceiverConfig, Sender, SenderConfig};
use braid_core::Instant;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tortoise::parse_to_receiver(data);
    let _ = tortoise::parse_to_sender(data);
    let _ = HarePacket::parse(data).map(|p| (p.chunk_id(), p.seq_candidates(), p.payload()));

    let now = Instant::from_millis(1);
    let mut sender = Sender::new(SenderConfig::default());
    sender.write(&[7; 40_000]);
    sender.finish();
    let mut receiver = Receiver::new(ReceiverConfig::default());
    let mut buf = Vec::new();
    while sender.poll_tortoise(now, &mut buf).is_some() {
        let _ = receiver.handle_tortoise(now, &buf);
    }
    let (hare, rest) = data.split_at(data.len() / 2);
    receiver.handle_hare(now, hare);
    let _ = receiver.handle_tortoise(now, rest);
    let _ = sender.handle_tortoise(now, rest);
    receiver.handle_timeout(Instant::from_millis(1_000));
    while receiver.poll_tortoise(now, &mut buf).is_some() {
        let _ = sender.handle_tortoise(now, &buf);
    }
    while receiver.poll_deliver().is_some() {}
});
