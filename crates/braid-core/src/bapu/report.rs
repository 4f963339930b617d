//! BaPu's control messages on an AP's tunnel (BaPu §2.2 steps 5-6, §3.4): an AP's
//! reception report, naming the packets it overheard and its send-buffer level, and the
//! gateway's announcement of the forwarder it picked.
//!
//! Layout (big-endian), version 1:
//! ```text
//! 0 version  1 type (1 report, 2 announce)  2 APID (reporter or forwarder)  3 zero
//! 4..8 session id
//! report:   8..12 send-buffer bytes free  12..16 bytes of announced packets queued so far
//!           16..18 entry count
//! announce: 8..10 entry count
//! entries, 12 bytes each: IP ID (2), flags (1: bit 0 home-only), zero (1), TCP sequence
//!           number (4), sequence space (2), IP packet bytes (2)
//! ```
//! The parser checks every length and never panics on any input.

use thiserror::Error;

use super::{ApId, SessionId};

pub const VERSION: u8 = 1;
const TYPE_REPORT: u8 = 1;
const TYPE_ANNOUNCE: u8 = 2;
pub const REPORT_HEADER: usize = 18;
pub const ANNOUNCE_HEADER: usize = 10;
pub const ENTRY_LEN: usize = 12;
/// Most entries in one message (a report fits well inside one tunnel segment).
pub const MAX_ENTRIES: usize = 100;
const FLAG_HOME_ONLY: u8 = 1;

/// One packet named in a report or announcement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Entry {
    pub ip_id: u16,
    pub home_only: bool,
    pub seq: u32,
    pub seq_len: u16,
    pub bytes: u16,
}

/// An AP's reception report.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Report {
    pub ap: ApId,
    pub session: SessionId,
    /// Free bytes in the AP's send buffer (its uplink queue) when it wrote the report.
    pub buffer_free: u32,
    /// Bytes of announced packets the AP has queued so far (wrapping): with it the gateway
    /// counts what it assigned that the level above does not show yet.
    pub enqueued: u32,
    pub entries: Vec<Entry>,
}

/// The gateway's choice of forwarder for some packets, sent to every AP of the session.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Announce {
    pub forwarder: ApId,
    pub session: SessionId,
    pub entries: Vec<Entry>,
}

/// A parsed control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Report(Report),
    Announce(Announce),
}

/// Why bytes are not a control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ReportError {
    #[error("BaPu message truncated: {0} bytes")]
    Truncated(usize),
    #[error("BaPu message version {0}; this build speaks version 1")]
    Version(u8),
    #[error("unknown BaPu message type {0}")]
    Type(u8),
    #[error("BaPu message names {0} packets; at most 100 fit")]
    TooMany(usize),
    #[error("BaPu message length {got} disagrees with its entry count (expected {expected})")]
    Length { got: usize, expected: usize },
}

impl Entry {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ip_id.to_be_bytes());
        out.push(if self.home_only { FLAG_HOME_ONLY } else { 0 });
        out.push(0);
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.seq_len.to_be_bytes());
        out.extend_from_slice(&self.bytes.to_be_bytes());
    }

    fn read(b: &[u8; ENTRY_LEN]) -> Entry {
        Entry {
            ip_id: u16::from_be_bytes([b[0], b[1]]),
            home_only: b[2] & FLAG_HOME_ONLY != 0,
            seq: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            seq_len: u16::from_be_bytes([b[8], b[9]]),
            bytes: u16::from_be_bytes([b[10], b[11]]),
        }
    }
}

fn write_entries(entries: &[Entry], out: &mut Vec<u8>) {
    for e in entries {
        e.write(out);
    }
}

impl Report {
    /// Appends the report's bytes to `out`. At most [`MAX_ENTRIES`] entries are written.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let n = self.entries.len().min(MAX_ENTRIES);
        out.extend_from_slice(&[VERSION, TYPE_REPORT, self.ap, 0]);
        out.extend_from_slice(&self.session.to_be_bytes());
        out.extend_from_slice(&self.buffer_free.to_be_bytes());
        out.extend_from_slice(&self.enqueued.to_be_bytes());
        out.extend_from_slice(&(n as u16).to_be_bytes());
        write_entries(&self.entries[..n], out);
    }

    /// Bytes on the wire.
    pub fn wire_len(&self) -> usize {
        REPORT_HEADER + ENTRY_LEN * self.entries.len().min(MAX_ENTRIES)
    }
}

impl Announce {
    /// Appends the announcement's bytes to `out`. At most [`MAX_ENTRIES`] entries.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let n = self.entries.len().min(MAX_ENTRIES);
        out.extend_from_slice(&[VERSION, TYPE_ANNOUNCE, self.forwarder, 0]);
        out.extend_from_slice(&self.session.to_be_bytes());
        out.extend_from_slice(&(n as u16).to_be_bytes());
        write_entries(&self.entries[..n], out);
    }

    /// Bytes on the wire.
    pub fn wire_len(&self) -> usize {
        ANNOUNCE_HEADER + ENTRY_LEN * self.entries.len().min(MAX_ENTRIES)
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses one control message. Total: never panics, whatever the bytes.
pub fn parse(b: &[u8]) -> Result<Message, ReportError> {
    if b.len() < ANNOUNCE_HEADER {
        return Err(ReportError::Truncated(b.len()));
    }
    if b[0] != VERSION {
        return Err(ReportError::Version(b[0]));
    }
    let header = match b[1] {
        TYPE_REPORT => REPORT_HEADER,
        TYPE_ANNOUNCE => ANNOUNCE_HEADER,
        t => return Err(ReportError::Type(t)),
    };
    if b.len() < header {
        return Err(ReportError::Truncated(b.len()));
    }
    let n = usize::from(u16::from_be_bytes([b[header - 2], b[header - 1]]));
    if n > MAX_ENTRIES {
        return Err(ReportError::TooMany(n));
    }
    let expected = header + n * ENTRY_LEN;
    if b.len() != expected {
        return Err(ReportError::Length {
            got: b.len(),
            expected,
        });
    }
    let entries = b[header..]
        .chunks_exact(ENTRY_LEN)
        .filter_map(|c| c.try_into().ok().map(Entry::read))
        .collect();
    let session = be32(b, 4);
    Ok(if b[1] == TYPE_REPORT {
        Message::Report(Report {
            ap: b[2],
            session,
            buffer_free: be32(b, 8),
            enqueued: be32(b, 12),
            entries,
        })
    } else {
        Message::Announce(Announce {
            forwarder: b[2],
            session,
            entries,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry() -> impl Strategy<Value = Entry> {
        (
            any::<u16>(),
            any::<bool>(),
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
        )
            .prop_map(|(ip_id, home_only, seq, seq_len, bytes)| Entry {
                ip_id,
                home_only,
                seq,
                seq_len,
                bytes,
            })
    }

    proptest! {
        #[test]
        fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..1400)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn never_panics_on_mutated_reports(
            entries in proptest::collection::vec(entry(), 0..8),
            flip in any::<(usize, u8)>(),
            cut in any::<usize>(),
        ) {
            let r = Report { ap: 3, session: 7, buffer_free: 9, enqueued: 11, entries };
            let mut b = Vec::new();
            r.encode(&mut b);
            let at = flip.0 % b.len();
            b[at] ^= flip.1;
            let _ = parse(&b);
            b.truncate(cut % (b.len() + 1));
            let _ = parse(&b);
        }

        #[test]
        fn reports_and_announcements_round_trip(
            entries in proptest::collection::vec(entry(), 0..=MAX_ENTRIES),
            ap in any::<u8>(), session in any::<u32>(), free in any::<u32>(), enq in any::<u32>(),
        ) {
            let r = Report { ap, session, buffer_free: free, enqueued: enq, entries: entries.clone() };
            let mut b = Vec::new();
            r.encode(&mut b);
            prop_assert_eq!(b.len(), r.wire_len());
            prop_assert_eq!(parse(&b), Ok(Message::Report(r)));
            let a = Announce { forwarder: ap, session, entries };
            let mut b = Vec::new();
            a.encode(&mut b);
            prop_assert_eq!(b.len(), a.wire_len());
            prop_assert_eq!(parse(&b), Ok(Message::Announce(a)));
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert_eq!(parse(&[1, 1, 0]), Err(ReportError::Truncated(3)));
        assert_eq!(parse(&[2; 20]), Err(ReportError::Version(2)));
        assert_eq!(
            parse(&[1, 9, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(ReportError::Type(9))
        );
        let mut b = Vec::new();
        Announce {
            forwarder: 1,
            session: 2,
            entries: vec![Entry::default()],
        }
        .encode(&mut b);
        b.push(0);
        assert_eq!(
            parse(&b),
            Err(ReportError::Length {
                got: 23,
                expected: 22
            })
        );
        let mut b = vec![1, 2, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&101u16.to_be_bytes());
        assert_eq!(parse(&b), Err(ReportError::TooMany(101)));
    }
}
