//! Message bodies (docs/wire.md, "Message types") and the [`Datagram`] that pairs one with a
//! [`Header`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::cursor::{Reader, Writer};
use crate::header::{Header, MessageType};
use crate::{Error, Result};

/// Bytes of a data message body before the inner packet (the data sequence number).
pub const DATA_FIXED_LEN: usize = 4;
/// Bytes of a coded message body before the bitmap.
pub const CODED_FIXED_LEN: usize = 7;
/// Longest composition bitmap: 255 bytes name up to 2040 packets below the highest member.
pub const MAX_BITMAP_LEN: usize = 255;
/// Bytes of a parity message body before the shard.
pub const PARITY_FIXED_LEN: usize = 7;
/// Bytes of a nack message body before the bitmap.
pub const NACK_FIXED_LEN: usize = 5;
/// Bytes of one path entry in a report.
pub const PATH_ENTRY_LEN: usize = 28;

/// One whole datagram: header and message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub header: Header,
    pub message: Message<'a>,
}

/// A message body. Variable-length parts borrow from the parsed datagram (or, when
/// emitting, from the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// An inner packet with its data-level sequence number.
    Data { seq: u32, payload: &'a [u8] },
    /// The XOR of several data packets.
    Coded(Coded<'a>),
    /// The reporter's estimates for each path it receives on.
    Report(PathEntries<'a>),
    /// Keeps a path's estimators and liveness fed when it carries nothing else.
    Heartbeat,
    /// Gateway opens a session.
    Hello(Hello<'a>),
    /// Server configures the gateway.
    Config(ConfigMsg),
    /// A path's local address changed.
    AddressChange(SocketAddr),
    /// A Reed-Solomon recovery shard over a block of data packets.
    Parity(Parity<'a>),
    /// Data packets the receiver misses and asks to be sent again.
    Nack(Nack<'a>),
}

impl Message<'_> {
    pub fn kind(&self) -> MessageType {
        match self {
            Message::Data { .. } => MessageType::Data,
            Message::Coded(_) => MessageType::Coded,
            Message::Report(_) => MessageType::Report,
            Message::Heartbeat => MessageType::Heartbeat,
            Message::Hello(_) => MessageType::Hello,
            Message::Config(_) => MessageType::Config,
            Message::AddressChange(_) => MessageType::AddressChange,
            Message::Parity(_) => MessageType::Parity,
            Message::Nack(_) => MessageType::Nack,
        }
    }
}

/// A coded packet: the XOR of data packets `seq` and those the bitmap names below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coded<'a> {
    /// The highest member's data sequence number; always a member.
    pub seq: u32,
    /// XOR of the members' inner-packet lengths.
    pub len_xor: u16,
    /// Bit `i` of byte `j` set: packet `seq - 1 - (8 j + i)` is a member. At most
    /// [`MAX_BITMAP_LEN`] bytes.
    pub bitmap: &'a [u8],
    /// XOR of the members, each zero-padded to the longest.
    pub payload: &'a [u8],
}

impl<'a> Coded<'a> {
    /// The members' data sequence numbers, highest first.
    pub fn members(&self) -> impl Iterator<Item = u32> + 'a {
        let seq = self.seq;
        let bitmap = self.bitmap;
        std::iter::once(seq).chain(bitmap.iter().enumerate().flat_map(move |(j, &byte)| {
            (0..8u32)
                .filter(move |i| byte & (1 << i) != 0)
                .map(move |i| seq.wrapping_sub(1 + 8 * j as u32 + i))
        }))
    }

    /// How many data packets this coded packet combines.
    pub fn member_count(&self) -> usize {
        1 + self
            .bitmap
            .iter()
            .map(|b| b.count_ones() as usize)
            .sum::<usize>()
    }
}

/// A Reed-Solomon recovery shard (docs/wire.md, "Parity"): shard `index` of `parity_count`
/// computed over the `data_count` data packets numbered from `first`. Each data packet
/// enters the code as an original shard holding its length (u16) and its bytes, zero-padded
/// to the shard length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parity<'a> {
    /// Data sequence number of the block's first packet.
    pub first: u32,
    /// Data packets in the block (at least 1).
    pub data_count: u8,
    /// Recovery shards computed for the block (at least 1).
    pub parity_count: u8,
    /// Which recovery shard this is, below `parity_count`.
    pub index: u8,
    /// The recovery shard: non-empty, even length, the same for every shard of the block.
    pub shard: &'a [u8],
}

impl<'a> Parity<'a> {
    fn parse(r: &mut Reader<'a>) -> Result<Parity<'a>> {
        let first = r.u32()?;
        let data_count = r.u8()?;
        let parity_count = r.u8()?;
        let index = r.u8()?;
        let shard = r.take(r.remaining())?;
        if data_count == 0 || parity_count == 0 {
            return Err(Error::Malformed(
                "parity block with no data or no parity shards",
            ));
        }
        if index >= parity_count {
            return Err(Error::Malformed("parity index beyond the parity count"));
        }
        if shard.is_empty() || shard.len() % 2 != 0 {
            return Err(Error::Malformed("parity shard length is zero or odd"));
        }
        Ok(Parity {
            first,
            data_count,
            parity_count,
            index,
            shard,
        })
    }

    /// The data sequence numbers the block covers.
    pub fn members(&self) -> impl Iterator<Item = u32> {
        let first = self.first;
        (0..u32::from(self.data_count)).map(move |i| first.wrapping_add(i))
    }
}

/// Data packets a receiver misses (docs/wire.md, "Nack"): `first`, and `first + 1 + (8 j +
/// i)` for every bit `i` of bitmap byte `j` that is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack<'a> {
    /// The lowest missing data sequence number.
    pub first: u32,
    /// At most [`MAX_BITMAP_LEN`] bytes.
    pub bitmap: &'a [u8],
}

impl<'a> Nack<'a> {
    /// The missing data sequence numbers, lowest first.
    pub fn missing(&self) -> impl Iterator<Item = u32> + 'a {
        let first = self.first;
        let bitmap = self.bitmap;
        std::iter::once(first).chain(bitmap.iter().enumerate().flat_map(move |(j, &byte)| {
            (0..8u32)
                .filter(move |i| byte & (1 << i) != 0)
                .map(move |i| first.wrapping_add(1 + 8 * j as u32 + i))
        }))
    }
}

/// A reporter's view of one path it receives on (docs/wire.md, "Report").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathEntry {
    pub path: u8,
    /// The reporter hears this path.
    pub live: bool,
    /// Loss rate EWMA as a fraction × 65535.
    pub loss: u16,
    /// Capacity estimate, kbit/s (PluriBus §4.2).
    pub capacity_kbps: u32,
    /// Propagation delay plus clock skew, µs, wrapping (PluriBus §4.3); `None` before the
    /// reporter has a sample.
    pub delay_us: Option<u32>,
    /// Highest path sequence number received.
    pub highest_seq: u32,
    /// Datagrams received on the path (wrapping).
    pub received: u32,
    /// Send timestamp of the latest datagram received on the path.
    pub echo_timestamp: u32,
    /// µs from receiving that datagram to sending this report.
    pub echo_hold_us: u32,
}

impl PathEntry {
    fn parse(b: &[u8]) -> Result<PathEntry> {
        let mut r = Reader::new(b);
        let path = r.u8()?;
        let flags = r.u8()?;
        let loss = r.u16()?;
        let capacity_kbps = r.u32()?;
        let delay = r.u32()?;
        Ok(PathEntry {
            path,
            live: flags & 1 != 0,
            loss,
            capacity_kbps,
            delay_us: (flags & 2 != 0).then_some(delay),
            highest_seq: r.u32()?,
            received: r.u32()?,
            echo_timestamp: r.u32()?,
            echo_hold_us: r.u32()?,
        })
    }

    fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.u8(self.path)?;
        w.u8(u8::from(self.live) | if self.delay_us.is_some() { 2 } else { 0 })?;
        w.u16(self.loss)?;
        w.u32(self.capacity_kbps)?;
        w.u32(self.delay_us.unwrap_or(0))?;
        w.u32(self.highest_seq)?;
        w.u32(self.received)?;
        w.u32(self.echo_timestamp)?;
        w.u32(self.echo_hold_us)
    }

    /// The loss rate as a fraction in [0, 1].
    pub fn loss_fraction(&self) -> f64 {
        f64::from(self.loss) / f64::from(u16::MAX)
    }

    /// Encodes a loss fraction, clamped to [0, 1].
    pub fn encode_loss(fraction: f64) -> u16 {
        (fraction.clamp(0.0, 1.0) * f64::from(u16::MAX)).round() as u16
    }
}

/// The entries of a report: still in wire form after parsing (decoded on iteration), or a
/// caller's slice when emitting. Equality compares the entries, not the representation.
#[derive(Clone, Copy, Debug)]
pub enum PathEntries<'a> {
    /// `count × PATH_ENTRY_LEN` bytes, length already validated.
    Wire(&'a [u8]),
    /// At most 255 entries.
    Slice(&'a [PathEntry]),
}

impl<'a> PathEntries<'a> {
    pub fn len(&self) -> usize {
        match self {
            PathEntries::Wire(b) => b.len() / PATH_ENTRY_LEN,
            PathEntries::Slice(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = PathEntry> + 'a {
        let (wire, slice): (&'a [u8], &'a [PathEntry]) = match *self {
            PathEntries::Wire(b) => (b, &[]),
            PathEntries::Slice(s) => (&[], s),
        };
        wire.chunks_exact(PATH_ENTRY_LEN)
            .filter_map(|c| PathEntry::parse(c).ok())
            .chain(slice.iter().copied())
    }
}

impl PartialEq for PathEntries<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for PathEntries<'_> {}

/// Option numbers of [`Hello`].
mod hello_opt {
    pub const PATHS: u8 = 1;
    pub const CAPABILITIES: u8 = 2;
    pub const NAME: u8 = 3;
    pub const METERING: u8 = 4;
    pub const METERED_CLASSES: u8 = 5;
}

/// Option numbers of [`ConfigMsg`].
mod config_opt {
    pub const ADDRESS_V4: u8 = 1;
    pub const DNS_V4: u8 = 2;
    pub const MTU: u8 = 3;
    pub const HOLE_TIMEOUT: u8 = 4;
    pub const CAPABILITIES: u8 = 5;
}

/// Capability bit (Hello and Config `capabilities`): the sender restores inner packets
/// sent with compressed headers (docs/wire.md, "Inner header compression"). A peer
/// compresses only towards a peer that announced it, so an engine from before header
/// compression is never sent a form it would hand on as a broken IP packet.
pub const CAP_RESTORES_HEADERS: u32 = 1;

/// Gateway's opening message (docs/wire.md, "Hello").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hello<'a> {
    pub paths: Option<u8>,
    pub capabilities: Option<u32>,
    /// At most 255 bytes of UTF-8.
    pub name: Option<&'a str>,
    /// The gateway's metered paths, for the server to budget its sends on them: the
    /// option's value, read with [`crate::MeteringOpt::parse`].
    pub metering: Option<&'a [u8]>,
    /// The gateway's traffic classes with their utilities, for the server to budget each
    /// class's downloads on its own: read with [`crate::MeteredClassesOpt::parse`].
    pub metered_classes: Option<&'a [u8]>,
}

/// Server's configuration for a gateway (docs/wire.md, "Config").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfigMsg {
    pub address: Option<(Ipv4Addr, u8)>,
    pub dns: Option<Ipv4Addr>,
    pub mtu: Option<u16>,
    pub hole_timeout_ms: Option<u16>,
    /// The server's capability bits ([`CAP_RESTORES_HEADERS`]).
    pub capabilities: Option<u32>,
}

/// Iterates the TLV options of a hello or config body.
fn options(body: &[u8]) -> impl Iterator<Item = Result<(u8, &[u8])>> {
    let mut r = Reader::new(body);
    std::iter::from_fn(move || {
        if r.is_empty() {
            return None;
        }
        let item = (|| {
            let kind = r.u8()?;
            let len = r.u8()?;
            Ok((kind, r.take(usize::from(len))?))
        })();
        if item.is_err() {
            // Stop after the first error.
            r = Reader::new(&[]);
        }
        Some(item)
    })
}

fn fixed<const N: usize>(v: &[u8], what: &'static str) -> Result<[u8; N]> {
    v.try_into().map_err(|_| Error::Malformed(what))
}

impl<'a> Hello<'a> {
    fn parse(body: &'a [u8]) -> Result<Hello<'a>> {
        let mut h = Hello::default();
        for opt in options(body) {
            let (kind, v) = opt?;
            match kind {
                hello_opt::PATHS => h.paths = Some(fixed::<1>(v, "hello paths option")?[0]),
                hello_opt::CAPABILITIES => {
                    h.capabilities = Some(u32::from_be_bytes(fixed(v, "hello capabilities")?))
                }
                hello_opt::NAME => {
                    h.name =
                        Some(std::str::from_utf8(v).map_err(|_| Error::Malformed("hello name"))?)
                }
                hello_opt::METERING => h.metering = Some(v),
                hello_opt::METERED_CLASSES => h.metered_classes = Some(v),
                _ => {}
            }
        }
        Ok(h)
    }

    fn buffer_len(&self) -> usize {
        self.paths.map_or(0, |_| 3)
            + self.capabilities.map_or(0, |_| 6)
            + self.name.map_or(0, |n| 2 + n.len())
            + self.metering.map_or(0, |m| 2 + m.len())
            + self.metered_classes.map_or(0, |m| 2 + m.len())
    }

    fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        if let Some(p) = self.paths {
            w.put(&[hello_opt::PATHS, 1, p])?;
        }
        if let Some(c) = self.capabilities {
            w.put(&[hello_opt::CAPABILITIES, 4])?;
            w.u32(c)?;
        }
        if let Some(n) = self.name {
            let len = u8::try_from(n.len())
                .map_err(|_| Error::Malformed("hello name longer than 255 bytes"))?;
            w.put(&[hello_opt::NAME, len])?;
            w.put(n.as_bytes())?;
        }
        for (kind, value) in [
            (hello_opt::METERING, self.metering),
            (hello_opt::METERED_CLASSES, self.metered_classes),
        ] {
            if let Some(m) = value {
                let len = u8::try_from(m.len())
                    .map_err(|_| Error::Malformed("hello metering longer than 255 bytes"))?;
                w.put(&[kind, len])?;
                w.put(m)?;
            }
        }
        Ok(())
    }
}

impl ConfigMsg {
    fn parse(body: &[u8]) -> Result<ConfigMsg> {
        let mut c = ConfigMsg::default();
        for opt in options(body) {
            let (kind, v) = opt?;
            match kind {
                config_opt::ADDRESS_V4 => {
                    let b = fixed::<5>(v, "config address option")?;
                    if b[4] > 32 {
                        return Err(Error::Malformed("config address prefix longer than 32"));
                    }
                    c.address = Some((Ipv4Addr::new(b[0], b[1], b[2], b[3]), b[4]));
                }
                config_opt::DNS_V4 => {
                    c.dns = Some(Ipv4Addr::from(fixed::<4>(v, "config dns option")?))
                }
                config_opt::MTU => c.mtu = Some(u16::from_be_bytes(fixed(v, "config mtu option")?)),
                config_opt::HOLE_TIMEOUT => {
                    c.hole_timeout_ms =
                        Some(u16::from_be_bytes(fixed(v, "config hole timeout option")?))
                }
                config_opt::CAPABILITIES => {
                    c.capabilities = Some(u32::from_be_bytes(fixed(v, "config capabilities")?))
                }
                _ => {}
            }
        }
        Ok(c)
    }

    fn buffer_len(&self) -> usize {
        self.address.map_or(0, |_| 7)
            + self.dns.map_or(0, |_| 6)
            + self.mtu.map_or(0, |_| 4)
            + self.hole_timeout_ms.map_or(0, |_| 4)
            + self.capabilities.map_or(0, |_| 6)
    }

    fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        if let Some((addr, prefix)) = self.address {
            if prefix > 32 {
                return Err(Error::Malformed("config address prefix longer than 32"));
            }
            w.put(&[config_opt::ADDRESS_V4, 5])?;
            w.put(&addr.octets())?;
            w.u8(prefix)?;
        }
        if let Some(dns) = self.dns {
            w.put(&[config_opt::DNS_V4, 4])?;
            w.put(&dns.octets())?;
        }
        if let Some(mtu) = self.mtu {
            w.put(&[config_opt::MTU, 2])?;
            w.u16(mtu)?;
        }
        if let Some(t) = self.hole_timeout_ms {
            w.put(&[config_opt::HOLE_TIMEOUT, 2])?;
            w.u16(t)?;
        }
        if let Some(c) = self.capabilities {
            w.put(&[config_opt::CAPABILITIES, 4])?;
            w.u32(c)?;
        }
        Ok(())
    }
}

fn parse_address(body: &[u8]) -> Result<SocketAddr> {
    let mut r = Reader::new(body);
    let family = r.u8()?;
    let port = r.u16()?;
    let ip = match family {
        4 => IpAddr::V4(Ipv4Addr::from(fixed::<4>(r.take(4)?, "address")?)),
        6 => IpAddr::V6(Ipv6Addr::from(fixed::<16>(r.take(16)?, "address")?)),
        _ => return Err(Error::Malformed("address family is neither 4 nor 6")),
    };
    if !r.is_empty() {
        return Err(Error::Malformed("trailing bytes after address"));
    }
    Ok(SocketAddr::new(ip, port))
}

impl<'a> Datagram<'a> {
    /// Parses a datagram. Never panics; every failure is a typed [`Error`].
    pub fn parse(bytes: &'a [u8]) -> Result<Datagram<'a>> {
        let mut r = Reader::new(bytes);
        let (header, kind) = Header::parse(&mut r)?;
        let message = match kind {
            MessageType::Data => {
                let seq = r.u32()?;
                Message::Data {
                    seq,
                    payload: r.rest(),
                }
            }
            MessageType::Coded => {
                let seq = r.u32()?;
                let len_xor = r.u16()?;
                let n = r.u8()?;
                let bitmap = r.take(usize::from(n))?;
                Message::Coded(Coded {
                    seq,
                    len_xor,
                    bitmap,
                    payload: r.rest(),
                })
            }
            MessageType::Report => {
                let count = r.u8()?;
                let entries = r.take(usize::from(count) * PATH_ENTRY_LEN)?;
                if !r.is_empty() {
                    return Err(Error::Malformed("trailing bytes after report entries"));
                }
                Message::Report(PathEntries::Wire(entries))
            }
            MessageType::Heartbeat => {
                if !r.is_empty() {
                    return Err(Error::Malformed("heartbeat has a body"));
                }
                Message::Heartbeat
            }
            MessageType::Hello => Message::Hello(Hello::parse(r.rest())?),
            MessageType::Config => Message::Config(ConfigMsg::parse(r.rest())?),
            MessageType::AddressChange => Message::AddressChange(parse_address(r.rest())?),
            MessageType::Parity => Message::Parity(Parity::parse(&mut r)?),
            MessageType::Nack => {
                let first = r.u32()?;
                let n = r.u8()?;
                let bitmap = r.take(usize::from(n))?;
                if !r.is_empty() {
                    return Err(Error::Malformed("trailing bytes after nack bitmap"));
                }
                Message::Nack(Nack { first, bitmap })
            }
        };
        Ok(Datagram { header, message })
    }

    /// Bytes [`Datagram::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.header.buffer_len()
            + match &self.message {
                Message::Data { payload, .. } => DATA_FIXED_LEN + payload.len(),
                Message::Coded(c) => CODED_FIXED_LEN + c.bitmap.len() + c.payload.len(),
                Message::Report(e) => 1 + e.len() * PATH_ENTRY_LEN,
                Message::Heartbeat => 0,
                Message::Hello(h) => h.buffer_len(),
                Message::Config(c) => c.buffer_len(),
                Message::AddressChange(a) => 3 + if a.is_ipv4() { 4 } else { 16 },
                Message::Parity(p) => PARITY_FIXED_LEN + p.shard.len(),
                Message::Nack(n) => NACK_FIXED_LEN + n.bitmap.len(),
            }
    }

    /// Writes the datagram to the front of `buf` and returns its length. Allocates nothing.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let need = self.buffer_len();
        if buf.len() < need {
            return Err(Error::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        let mut w = Writer::new(buf);
        self.header.emit(self.message.kind(), &mut w)?;
        match &self.message {
            Message::Data { seq, payload } => {
                w.u32(*seq)?;
                w.put(payload)?;
            }
            Message::Coded(c) => {
                let n = u8::try_from(c.bitmap.len())
                    .map_err(|_| Error::Malformed("coded bitmap longer than 255 bytes"))?;
                w.u32(c.seq)?;
                w.u16(c.len_xor)?;
                w.u8(n)?;
                w.put(c.bitmap)?;
                w.put(c.payload)?;
            }
            Message::Report(entries) => {
                let n = u8::try_from(entries.len())
                    .map_err(|_| Error::Malformed("report with more than 255 paths"))?;
                w.u8(n)?;
                for e in entries.iter() {
                    e.emit(&mut w)?;
                }
            }
            Message::Heartbeat => {}
            Message::Hello(h) => h.emit(&mut w)?,
            Message::Config(c) => c.emit(&mut w)?,
            Message::AddressChange(addr) => match addr.ip() {
                IpAddr::V4(ip) => {
                    w.u8(4)?;
                    w.u16(addr.port())?;
                    w.put(&ip.octets())?;
                }
                IpAddr::V6(ip) => {
                    w.u8(6)?;
                    w.u16(addr.port())?;
                    w.put(&ip.octets())?;
                }
            },
            Message::Parity(p) => {
                w.u32(p.first)?;
                w.put(&[p.data_count, p.parity_count, p.index])?;
                w.put(p.shard)?;
            }
            Message::Nack(n) => {
                let len = u8::try_from(n.bitmap.len())
                    .map_err(|_| Error::Malformed("nack bitmap longer than 255 bytes"))?;
                w.u32(n.first)?;
                w.u8(len)?;
                w.put(n.bitmap)?;
            }
        }
        Ok(w.pos())
    }
}
