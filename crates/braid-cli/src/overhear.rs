//! `braid overhear`: what a BaPu AP on this node would overhear (BaPu §3.1). Frames come
//! from a monitor-mode interface (radiotap, through an AF_PACKET socket) or from a pcap
//! file of one; each goes through the AP's own parser and session table
//! (`braid_core::bapu::frame`, `BapuAp::on_frame`), so what it prints is what the AP would
//! report: uploads by session <BSSID, protocol, addresses, ports>, MAC retransmissions
//! removed by IP ID, and the frames refused and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use braid_core::bapu::ap::{ApConfig, BapuAp};
use braid_core::bapu::frame::parse_80211;
use braid_core::bapu::{ApStats, SessionId};
use braid_core::Instant;
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;
use serde::Serialize;

/// Linux's link type of a monitor interface that prepends radiotap headers.
const ARPHRD_IEEE80211_RADIOTAP: u32 = 803;

#[derive(clap::Args)]
pub struct Args {
    /// A monitor-mode interface to capture from (needs root), e.g. one made with
    /// `iw dev wlan0 interface add mon0 type monitor` on the AP's channel.
    #[arg(long, required_unless_present = "pcap", conflicts_with = "pcap")]
    interface: Option<String>,
    /// A pcap file to read instead (link type 802.11 with radiotap, 127, as `tcpdump -i
    /// mon0 -w FILE` writes it; or plain 802.11, 105).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// How long to capture from `--interface`.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// One session the AP would bunch.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SessionRow {
    pub bssid: String,
    pub flow: String,
    pub packets: u64,
    pub bytes: u64,
}

/// What was overheard.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Frames read.
    pub frames: u64,
    /// Frames refused, by reason (`FrameError`'s text).
    pub refused: BTreeMap<String, u64>,
    /// Uploads in frames that no session takes (not IPv4 TCP or UDP, or a fragment).
    pub not_bunched: u64,
    pub sessions: Vec<SessionRow>,
    pub ap: ApStats,
}

/// Feeds frames to a BaPu AP and keeps the counts.
struct Listener {
    ap: BapuAp,
    /// Link type 105 frames carry no radiotap header.
    plain_80211: bool,
    frames: u64,
    refused: BTreeMap<String, u64>,
    rows: BTreeMap<SessionId, SessionRow>,
}

impl Listener {
    fn new(plain_80211: bool) -> Listener {
        Listener {
            ap: BapuAp::new(ApConfig::new(0)),
            plain_80211,
            frames: 0,
            refused: BTreeMap::new(),
            rows: BTreeMap::new(),
        }
    }

    fn frame(&mut self, now: Instant, frame: &[u8]) {
        self.frames += 1;
        let taken = if self.plain_80211 {
            parse_80211(frame, false).map(|f| {
                self.ap
                    .on_overheard(now, f.bssid, f.packet)
                    .map(|id| (id, f.packet))
            })
        } else {
            self.ap.on_frame(now, frame)
        };
        match taken {
            Ok(Some((id, packet))) => {
                let len = packet.len() as u64;
                let row = self.rows.entry(id).or_default();
                row.packets += 1;
                row.bytes += len;
            }
            Ok(None) => {}
            Err(e) => *self.refused.entry(e.to_string()).or_default() += 1,
        }
        // Nothing is sent: the reports only empty the AP's batches.
        while self.ap.poll_report(now, u32::MAX).is_some() {}
    }

    fn summary(self) -> Summary {
        let stats = self.ap.stats().clone();
        let refused_here: u64 = self.refused.values().sum();
        let uplinks = self.frames - refused_here;
        let sessions = (self.rows.into_iter())
            .map(|(id, mut row)| {
                if let Some(k) = self.ap.session_key(id) {
                    row.bssid = (k.bssid.iter())
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(":");
                    let proto = match k.flow.protocol {
                        6 => "tcp".to_string(),
                        17 => "udp".to_string(),
                        p => format!("ip proto {p}"),
                    };
                    row.flow = format!(
                        "{proto} {}:{} -> {}:{}",
                        k.flow.src, k.flow.src_port, k.flow.dst, k.flow.dst_port
                    );
                }
                row
            })
            .collect();
        Summary {
            frames: self.frames,
            refused: self.refused,
            not_bunched: uplinks
                .saturating_sub(stats.overheard + stats.duplicates + stats.untracked),
            sessions,
            ap: stats,
        }
    }
}

/// Reads every frame of a pcap file.
pub fn from_pcap(path: &Path) -> anyhow::Result<Summary> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = PcapReader::new(std::io::BufReader::new(file))
        .with_context(|| format!("{}: not a pcap file", path.display()))?;
    let plain = match reader.header().datalink {
        DataLink::IEEE802_11_RADIOTAP => false,
        DataLink::IEEE802_11 => true,
        other => bail!(
            "{}: link type {other:?}; overhearing needs 802.11 frames (radiotap, 127, from a \
             monitor interface; or 105)",
            path.display()
        ),
    };
    let mut l = Listener::new(plain);
    let mut first = None;
    while let Some(p) = reader.next_packet() {
        let p = p.with_context(|| format!("{}: a damaged record", path.display()))?;
        let start = *first.get_or_insert(p.timestamp);
        let now = Instant::ZERO + p.timestamp.saturating_sub(start);
        l.frame(now, &p.data);
    }
    Ok(l.summary())
}

/// Captures from monitor interface `name` for `seconds`.
pub fn from_interface(name: &str, seconds: f64) -> anyhow::Result<Summary> {
    let kind_file = format!("/sys/class/net/{name}/type");
    let kind: u32 = std::fs::read_to_string(&kind_file)
        .with_context(|| format!("no interface '{name}' ({kind_file})"))?
        .trim()
        .parse()
        .with_context(|| format!("reading {kind_file}"))?;
    if kind != ARPHRD_IEEE80211_RADIOTAP {
        bail!(
            "'{name}' is not a monitor interface with radiotap headers (link type {kind}, not \
             {ARPHRD_IEEE80211_RADIOTAP}): make one with `iw dev <wifi> interface add mon0 \
             type monitor` and `ip link set mon0 up`"
        );
    }
    if !(seconds.is_finite() && seconds > 0.0) {
        bail!("--seconds {seconds}: must be a positive number");
    }
    let mut socket = braid_lab::emulator::socket::PacketSocket::bind(name)?;
    eprintln!("listening on {name} for {seconds} s");
    let mut l = Listener::new(false);
    let clock = braid_net::clock::Clock::start();
    let end = clock.now() + Duration::from_secs_f64(seconds);
    let mut buf = vec![0u8; 65536];
    while clock.now() < end {
        let left = end.saturating_duration_since(clock.now());
        let wait = u16::try_from(left.as_millis().min(200)).unwrap_or(200);
        let mut poll = [nix::poll::PollFd::new(
            socket.fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut poll, wait) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("waiting for frames"),
        }
        while let Some(r) = socket.recv(&mut buf)? {
            l.frame(clock.now(), &buf[..r.len.min(buf.len())]);
        }
    }
    Ok(l.summary())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let s = match (&a.interface, &a.pcap) {
        (_, Some(p)) => from_pcap(p)?,
        (Some(i), None) => from_interface(i, a.seconds)?,
        (None, None) => bail!("give --interface or --pcap"),
    };
    if a.json {
        println!("{}", serde_json::to_string(&s)?);
        return Ok(());
    }
    println!(
        "{} frames: {} uploads kept, {} MAC retransmissions removed, {} not bunched, {} refused",
        s.frames,
        s.ap.overheard,
        s.ap.duplicates,
        s.not_bunched,
        s.refused.values().sum::<u64>()
    );
    for (why, n) in &s.refused {
        println!("  refused, {why}: {n}");
    }
    if !s.sessions.is_empty() {
        println!(
            "{:<18} {:<48} {:>8} {:>12}",
            "BSSID", "flow", "packets", "bytes"
        );
    }
    for r in &s.sessions {
        println!(
            "{:<18} {:<48} {:>8} {:>12}",
            r.bssid, r.flow, r.packets, r.bytes
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::bapu::frame::build_uplink;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

    const AP: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const STA: [u8; 6] = [2, 0, 0, 0, 0, 2];

    /// An IPv4 UDP packet from 192.168.1.5:`port` to 10.1.0.2:5001 with IP ID `id`.
    fn udp(port: u16, id: u16) -> Vec<u8> {
        let mut p = vec![0u8; 128];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&128u16.to_be_bytes());
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[192, 168, 1, 5]);
        p[16..20].copy_from_slice(&[10, 1, 0, 2]);
        p[20..22].copy_from_slice(&port.to_be_bytes());
        p[22..24].copy_from_slice(&5001u16.to_be_bytes());
        p[24..26].copy_from_slice(&108u16.to_be_bytes());
        p
    }

    #[test]
    fn a_capture_file_is_read_by_session_with_retries_removed() {
        let dir = std::env::temp_dir().join(format!("braid-overhear-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mon0.pcap");
        let header = PcapHeader {
            datalink: DataLink::IEEE802_11_RADIOTAP,
            ..PcapHeader::default()
        };
        let mut w = PcapWriter::with_header(std::fs::File::create(&path).unwrap(), header).unwrap();
        let mut frames = Vec::new();
        for i in 0..10u16 {
            frames.push(build_uplink(AP, STA, AP, i, false, true, &udp(4000, i)));
        }
        // Two MAC retries, a frame with a bad FCS, and another session.
        frames.push(build_uplink(AP, STA, AP, 3, true, true, &udp(4000, 3)));
        frames.push(build_uplink(AP, STA, AP, 4, true, true, &udp(4000, 4)));
        let mut bad = build_uplink(AP, STA, AP, 11, false, true, &udp(4000, 11));
        let at = bad.len() - 20;
        bad[at] ^= 1;
        frames.push(bad);
        frames.push(build_uplink(AP, STA, AP, 12, false, true, &udp(4001, 12)));
        for (i, f) in frames.iter().enumerate() {
            let t = Duration::from_millis(i as u64);
            w.write_packet(&PcapPacket::new(t, f.len() as u32, f))
                .unwrap();
        }
        drop(w);
        let s = from_pcap(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(s.frames, 14);
        assert_eq!((s.ap.overheard, s.ap.duplicates), (11, 2));
        assert_eq!(s.refused.get("bad FCS"), Some(&1));
        assert_eq!(s.sessions.len(), 2);
        let main = s.sessions.iter().find(|r| r.packets == 10).unwrap();
        assert_eq!(main.bssid, "02:00:00:00:00:01");
        assert_eq!(main.flow, "udp 192.168.1.5:4000 -> 10.1.0.2:5001");
        assert_eq!(main.bytes, 1280);
    }

    #[test]
    fn what_is_not_a_monitor_capture_is_refused_by_name() {
        let e = from_interface("lo", 1.0).unwrap_err().to_string();
        assert!(
            e.contains("'lo' is not a monitor interface") && e.contains("772"),
            "{e}"
        );
        let e = from_interface("no-such-if0", 1.0).unwrap_err().to_string();
        assert!(e.contains("no interface 'no-such-if0'"), "{e}");
        let dir = std::env::temp_dir().join(format!("braid-overhear-eth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("eth.pcap");
        let w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
        drop(w);
        let e = from_pcap(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("ETHERNET") && e.contains("802.11"), "{e}");
    }
}
