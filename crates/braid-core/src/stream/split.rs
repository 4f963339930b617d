//! Split-TCP's stream settings (issue 19 item 3), shared by the daemons
//! (`braid_net::split_tcp`), `braid send` and the simulator's model of split-TCP, so that
//! the simulator measures the stream the daemons run.

use std::time::Duration;

use super::{FastRetransmit, ReceiverConfig, StreamConfig};

/// Bytes written and not yet acknowledged on the stream, and the receive window: the
/// stream's own flow control, sized like split-TCP's per-connection window.
pub const STREAM_BUFFER: usize = 8 << 20;
/// The least [`unsent_limit`]: a few frames, so that every connection's turn has room.
pub const UNSENT_MIN: usize = 64 * 1024;

/// Bytes written onto the stream and not yet sent, beyond which the relay reads no more
/// from the connections' sockets (they keep the rest, and their TCP backpressure holds
/// the source): one window of the live paths together, at least [`UNSENT_MIN`]. The
/// stream is FIFO: with its whole send buffer open to one download, a web response
/// behind it waited for megabytes to drain (lab, bulk-and-web.toml with every TCP
/// connection split: web median 4.7 s; the simulator's split-TCP test: no web flow
/// finished in 20 s). A fixed 256 kB starved lab-split-tcp's 2 MB of windows (0.99 ->
/// 0.83 of the capacity); a window's worth keeps them fed and a new connection's bytes
/// one round trip from the front.
pub fn unsent_limit(tx: &super::StreamSender) -> usize {
    usize::try_from(tx.window_sum())
        .unwrap_or(usize::MAX)
        .max(UNSENT_MIN)
}

/// Gap blocks a SACK carries at most: the full 120 took 2.9 Mbit/s of a 3 Mbit/s uplink
/// once holes opened, and the dropped SACKs fired spurious RTO expiries; 16-32 drop none
/// (`braid bench trace-stream --quick`, docs/benchmarks.md).
pub const GAP_BLOCKS: usize = 32;
/// DATA chunk payload: 1400 bytes, so a chunk with its headers and AEAD tag fits a
/// 1500-byte path MTU.
pub const CHUNK_PAYLOAD: usize = 1400;

/// A full DATA chunk's datagram as the stream writes it: payload and chunk header.
const CHUNK_DATAGRAM: u64 = (CHUNK_PAYLOAD + super::chunk::DATA_HEADER) as u64;

/// The bytes on the wire of `payload` acknowledged payload bytes in full chunks, with
/// `outside` bytes per datagram around the stream's own (the driver's tag or envelope and
/// seal, UDP and IP): what the stream delivered on a path as the tunnel's session counts
/// its own (`Session::note_foreign_traffic`).
pub fn acked_wire_bytes(payload: u64, outside: usize) -> u64 {
    let wire = u128::from(CHUNK_DATAGRAM) + outside as u128;
    (u128::from(payload) * wire / CHUNK_PAYLOAD as u128) as u64
}

/// The stream's own datagram bytes in `wire` bytes on the wire of full chunks, with
/// `outside` bytes per datagram around them: what a wire allowance
/// (`Session::stream_allowance`) lets the stream send (`StreamSender::set_allowance`).
pub fn stream_bytes_of_wire(wire: u64, outside: usize) -> u64 {
    let datagram = u128::from(CHUNK_DATAGRAM);
    (u128::from(wire) * datagram / (datagram + outside as u128)) as u64
}

/// The sending end's options of a split-TCP stream (also what `trace-stream` measures and
/// what `braid send` uses): oSCTP's, with random losses keeping the window and RACK's
/// reordering allowance ([`FastRetransmit::Rack`], RFC 8985) in place of SD-FRT's count,
/// a failed path revived by slow start back to its window (`fast_revival`: trace-stream's
/// 5g-static+lte-walk, its 5G path out for the first 7 s, 0.48 -> 0.72 of the links' sum).
/// MPTCP's `opportunistic_retransmit`: a path that stalls (a 5G trace's outage) holds the
/// chunk the receiver needs next, and it is sent again on a path with room
/// (trace-stream's worst set 0.728 -> 0.847, trace-bulk's 0.747 -> 0.891, once the SACKs
/// report every arrival; docs/benchmarks.md). `slow_start` and `zero_window_probe` stay
/// oSCTP's: [`super::SlowStart::HyStart`] cut the lab demo's 5 s bulk download from 1.117
/// to 0.457-0.674 of the links alone, and the probe changes no recorded set.
pub fn stream_config() -> StreamConfig {
    StreamConfig {
        mtu: CHUNK_PAYLOAD,
        send_buffer: STREAM_BUFFER,
        initial_peer_rwnd: STREAM_BUFFER,
        random_loss: true,
        fast_retransmit: FastRetransmit::Rack,
        fast_revival: true,
        opportunistic_retransmit: true,
        ..StreamConfig::default()
    }
}

/// The receiving end's options of a split-TCP stream.
pub fn receiver_config() -> ReceiverConfig {
    ReceiverConfig {
        buffer: STREAM_BUFFER,
        ack_delay: Duration::from_millis(20),
        // Holding SACK bytes to a share of the data starved the window growth of the lab's
        // slow real paths (docs/benchmarks.md, trace-stream).
        ack_ratio: None,
        gap_blocks: GAP_BLOCKS,
        ..ReceiverConfig::default()
    }
}
