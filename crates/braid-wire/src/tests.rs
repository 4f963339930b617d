//! Round trips of every message type, hand-checked byte layouts, and the property that no
//! byte string makes the parser panic.

use std::net::{Ipv4Addr, SocketAddr};

use proptest::prelude::*;

use crate::*;

fn header(ack: Option<u32>) -> Header {
    Header {
        session_id: 0xdead_beef,
        path: 2,
        path_seq: 77,
        timestamp: 123_456,
        ack,
        path_ack: None,
        unordered: false,
    }
}

fn round_trip(d: Datagram<'_>) {
    let mut buf = vec![0u8; d.buffer_len()];
    let n = d.emit(&mut buf).expect("emit");
    assert_eq!(n, d.buffer_len());
    let back = Datagram::parse(&buf[..n]).expect("parse");
    assert_eq!(back, d);
}

#[test]
fn data_layout_is_as_documented() {
    let d = Datagram {
        header: header(Some(9)),
        message: Message::Data {
            seq: 0x0102_0304,
            payload: b"hi",
        },
    };
    let mut buf = [0u8; 64];
    let n = d.emit(&mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        &[
            1, 1, 2, FLAG_ACK, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 77, 0, 1, 0xe2, 0x40, 0, 0, 0, 9,
            1, 2, 3, 4, b'h', b'i'
        ]
    );
    assert_eq!(Header::peek_session_id(&buf[..n]), Ok(0xdead_beef));
}

#[test]
fn every_message_round_trips() {
    let entries = [
        PathEntry {
            path: 0,
            live: true,
            loss: PathEntry::encode_loss(0.05),
            capacity_kbps: 1500,
            delay_us: Some(20_000),
            highest_seq: 10,
            received: 9,
            echo_timestamp: 5,
            echo_hold_us: 100,
        },
        PathEntry {
            path: 1,
            ..PathEntry::default()
        },
    ];
    let bitmap = [0b1000_0001u8, 0, 0x80];
    let msgs = [
        Message::Data {
            seq: 1,
            payload: &[],
        },
        Message::Data {
            seq: u32::MAX,
            payload: &[0xff; 1400],
        },
        Message::Coded(Coded {
            seq: 100,
            len_xor: 1400 ^ 60,
            bitmap: &bitmap,
            payload: &[7; 1400],
        }),
        Message::Report(PathEntries::Slice(&entries)),
        Message::Report(PathEntries::Slice(&[])),
        Message::Heartbeat,
        Message::Hello(Hello {
            paths: Some(3),
            capabilities: Some(0),
            name: Some("bus-17"),
            metering: Some(&[2, 1, 2, 3]),
            metered_classes: Some(&[4, 5]),
        }),
        Message::Hello(Hello::default()),
        Message::Config(ConfigMsg {
            address: Some((Ipv4Addr::new(10, 7, 0, 2), 24)),
            dns: Some(Ipv4Addr::new(1, 1, 1, 1)),
            mtu: Some(1400),
            hole_timeout_ms: Some(50),
            capabilities: Some(1),
        }),
        Message::AddressChange(SocketAddr::from(([192, 0, 2, 1], 4500))),
        Message::AddressChange("[2001:db8::1]:9".parse().unwrap()),
        Message::Parity(Parity {
            first: 40,
            data_count: 10,
            parity_count: 2,
            index: 1,
            shard: &[9; 1402],
        }),
        Message::Nack(Nack {
            first: 7,
            bitmap: &[],
        }),
        Message::Nack(Nack {
            first: u32::MAX,
            bitmap: &[0b101, 0, 1],
        }),
    ];
    for m in msgs {
        round_trip(Datagram {
            header: header(None),
            message: m,
        });
        round_trip(Datagram {
            header: header(Some(42)),
            message: m,
        });
        round_trip(Datagram {
            header: Header {
                path_ack: Some(PathAck {
                    path: 1,
                    highest_seq: 99,
                    received: 90,
                    queue_us: 1234,
                }),
                unordered: true,
                ..header(Some(42))
            },
            message: m,
        });
    }
}

#[test]
fn coded_members_follow_the_bitmap() {
    let bitmap = [0b0000_0101u8, 0b1000_0000];
    let c = Coded {
        seq: 20,
        len_xor: 0,
        bitmap: &bitmap,
        payload: &[],
    };
    // bit 0 of byte 0 → 19, bit 2 → 17, bit 7 of byte 1 → 20 - 1 - 15 = 4.
    assert_eq!(c.members().collect::<Vec<_>>(), vec![20, 19, 17, 4]);
    assert_eq!(c.member_count(), 4);
    // Wraps below zero.
    let c = Coded {
        seq: 0,
        len_xor: 0,
        bitmap: &[1],
        payload: &[],
    };
    assert_eq!(c.members().collect::<Vec<_>>(), vec![0, u32::MAX]);
}

#[test]
fn parity_layout_and_members() {
    let d = Datagram {
        header: header(None),
        message: Message::Parity(Parity {
            first: 0x0102_0304,
            data_count: 3,
            parity_count: 2,
            index: 1,
            shard: &[0xaa, 0xbb],
        }),
    };
    let mut buf = [0u8; 64];
    let n = d.emit(&mut buf).unwrap();
    assert_eq!(&buf[16..n], &[1, 2, 3, 4, 3, 2, 1, 0xaa, 0xbb]);
    let Message::Parity(p) = Datagram::parse(&buf[..n]).unwrap().message else {
        panic!("not parity");
    };
    assert_eq!(
        p.members().collect::<Vec<_>>(),
        vec![0x0102_0304, 0x0102_0305, 0x0102_0306]
    );
    // Index not below the count, an odd shard, an empty shard, zero counts: all malformed.
    for (i, v) in [(22, 2), (n - 1, 0), (23, 0)] {
        let mut b = buf[..n].to_vec();
        if v == 0 {
            b.truncate(i);
        } else {
            b[i] = v;
        }
        assert!(
            matches!(Datagram::parse(&b), Err(Error::Malformed(_))),
            "{i} {v}"
        );
    }
    let mut b = buf[..n].to_vec();
    b[20] = 0;
    assert!(matches!(Datagram::parse(&b), Err(Error::Malformed(_))));
}

#[test]
fn nack_names_missing_packets_upwards() {
    let n = Nack {
        first: 10,
        bitmap: &[0b0000_0101, 0b1000_0000],
    };
    // 10, then bit 0 → 11, bit 2 → 13, bit 7 of byte 1 → 10 + 1 + 15 = 26.
    assert_eq!(n.missing().collect::<Vec<_>>(), vec![10, 11, 13, 26]);
    let w = Nack {
        first: u32::MAX,
        bitmap: &[1],
    };
    assert_eq!(w.missing().collect::<Vec<_>>(), vec![u32::MAX, 0]);
    // Trailing bytes after the bitmap are malformed.
    let d = Datagram {
        header: header(None),
        message: Message::Nack(n),
    };
    let mut buf = [0u8; 64];
    let len = d.emit(&mut buf).unwrap();
    assert_eq!(&buf[16..len], &[0, 0, 0, 10, 2, 0b101, 0x80]);
    assert!(matches!(
        Datagram::parse(&buf[..len + 1]),
        Err(Error::Malformed(_))
    ));
}

#[test]
fn errors_are_typed() {
    assert_eq!(Datagram::parse(&[]), Err(Error::Truncated));
    assert_eq!(
        Datagram::parse(&[2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(Error::Version(2))
    );
    assert_eq!(
        Datagram::parse(&[1, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(Error::UnknownType(99))
    );
    // A report claiming two entries but carrying none.
    let mut b = vec![1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    assert_eq!(Datagram::parse(&b), Err(Error::Truncated));
    b[16] = 0;
    b.push(0);
    assert!(matches!(Datagram::parse(&b), Err(Error::Malformed(_))));
    // Emitting into a short buffer.
    let d = Datagram {
        header: header(None),
        message: Message::Heartbeat,
    };
    assert_eq!(
        d.emit(&mut [0u8; 10]),
        Err(Error::BufferTooSmall { need: 16, have: 10 })
    );
}

#[test]
fn unknown_options_and_flags_are_ignored() {
    // Hello with an unknown option 200 between known ones, and an unknown flag bit.
    let mut b = vec![1, 5, 0, 0x80, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    b.extend_from_slice(&[1, 1, 4, 200, 3, 9, 9, 9, 3, 2, b'o', b'k']);
    let d = Datagram::parse(&b).unwrap();
    assert_eq!(
        d.message,
        Message::Hello(Hello {
            paths: Some(4),
            capabilities: None,
            name: Some("ok"),
            metering: None,
            metered_classes: None,
        })
    );
    // A truncated option is an error.
    b.truncate(b.len() - 1);
    assert_eq!(Datagram::parse(&b), Err(Error::Truncated));
}

fn arb_header() -> impl Strategy<Value = Header> {
    (
        any::<u32>(),
        any::<u8>(),
        any::<u32>(),
        any::<u32>(),
        any::<Option<u32>>(),
        any::<Option<(u8, u32, u32, u32)>>(),
    )
        .prop_map(|(session_id, path, path_seq, timestamp, ack, pa)| Header {
            session_id,
            path,
            path_seq,
            timestamp,
            ack,
            path_ack: pa.map(|(path, highest_seq, received, queue_us)| PathAck {
                path,
                highest_seq,
                received,
                queue_us,
            }),
            unordered: session_id % 2 == 0,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    /// No byte string makes the parser panic, and whatever parses re-emits to a datagram
    /// that parses to the same value.
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(d) = Datagram::parse(&bytes) {
            let mut buf = vec![0u8; d.buffer_len()];
            let n = d.emit(&mut buf).unwrap();
            prop_assert_eq!(Datagram::parse(&buf[..n]).unwrap(), d);
        }
    }

    /// Random bytes behind a valid header reach every message parser.
    #[test]
    fn bodies_never_panic(kind in 0u8..12, flags in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..120)) {
        let mut bytes = vec![VERSION, kind, 0, flags, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&body);
        let _ = Datagram::parse(&bytes);
    }

    #[test]
    fn data_round_trips(h in arb_header(), seq in any::<u32>(), payload in proptest::collection::vec(any::<u8>(), 0..1500)) {
        round_trip(Datagram { header: h, message: Message::Data { seq, payload: &payload } });
    }

    #[test]
    fn coded_round_trips(h in arb_header(), seq in any::<u32>(), len_xor in any::<u16>(),
                         bitmap in proptest::collection::vec(any::<u8>(), 0..=MAX_BITMAP_LEN),
                         payload in proptest::collection::vec(any::<u8>(), 0..200)) {
        round_trip(Datagram { header: h, message: Message::Coded(Coded { seq, len_xor, bitmap: &bitmap, payload: &payload }) });
    }
}
