//! The TUN device, with the kernel's offloads: reads may be TSO super-packets (up to 64 KB
//! of one TCP flow) that are split here into MTU-sized inner packets, and writes are
//! coalesced back into super-packets (GRO) before they reach the kernel, as wireguard-go
//! does. Both directions go through the `tun-rs` crate (`IFF_VNET_HDR`, `TUNSETOFFLOAD`),
//! whose segmentation and coalescing are ports of wireguard-go's.
//!
//! Buffers are allocated once; a batch costs one `read` per super-packet and one `write`
//! per coalesced run.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, RawFd};

use tun_rs::{DeviceBuilder, GROTable, SyncDevice, IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

/// Largest read: a virtio header and a 64 KB super-packet.
const RAW_LEN: usize = VIRTIO_NET_HDR_LEN + 65_535;

/// Counters of the TUN side.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct TunStats {
    /// Reads from the device (each may hold many packets).
    pub reads: u64,
    /// Inner packets read (after segmentation).
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Reads the kernel handed us that could not be segmented.
    pub rx_errors: u64,
    /// Inner packets written (before coalescing).
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Writes to the device (each may hold many packets).
    pub writes: u64,
    /// Batches the kernel refused (packets in them are lost).
    pub tx_errors: u64,
    /// Inner packets refused because they exceed the MTU.
    pub tx_oversize: u64,
}

/// A TUN device opened for batched, offloaded I/O.
pub struct Tun {
    dev: SyncDevice,
    name: String,
    mtu: u16,
    offload: bool,
    raw: Vec<u8>,
    rx_bufs: Vec<Vec<u8>>,
    rx_sizes: Vec<usize>,
    rx_count: usize,
    tx_bufs: Vec<Vec<u8>>,
    tx_count: usize,
    gro: GROTable,
    stats: TunStats,
}

impl Tun {
    /// Creates (or takes over) the device `name` with inner MTU `mtu`, up, with `address`
    /// if given. Offloads are asked for; without them (an old kernel) packets go one by one.
    pub fn open(name: &str, mtu: u16, address: Option<(Ipv4Addr, u8)>) -> io::Result<Tun> {
        let build = |offload: bool| {
            let mut b = DeviceBuilder::new().name(name).mtu(mtu).offload(offload);
            if let Some((a, p)) = address {
                b = b.ipv4(a, p, None);
            }
            b.build_sync()
        };
        let dev = match build(true) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(tun = name, error = %e, "TUN offloads unavailable; packets go one by one");
                build(false)?
            }
        };
        dev.set_nonblocking(true)?;
        let offload = dev.tcp_gso();
        let seg_len = usize::from(mtu) + 64;
        Ok(Tun {
            dev,
            name: name.to_owned(),
            mtu,
            offload,
            raw: vec![0; RAW_LEN],
            rx_bufs: vec![vec![0; seg_len]; IDEAL_BATCH_SIZE],
            rx_sizes: vec![0; IDEAL_BATCH_SIZE],
            rx_count: 0,
            tx_bufs: (0..IDEAL_BATCH_SIZE)
                .map(|_| Vec::with_capacity(RAW_LEN + VIRTIO_NET_HDR_LEN))
                .collect(),
            tx_count: 0,
            gro: GROTable::default(),
            stats: TunStats::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn mtu(&self) -> u16 {
        self.mtu
    }

    /// Whether TSO/GRO offloads are on.
    pub fn offload(&self) -> bool {
        self.offload
    }

    pub fn stats(&self) -> TunStats {
        self.stats
    }

    /// Gives the device an IPv4 address (replacing none).
    pub fn add_address(&self, address: Ipv4Addr, prefix: u8) -> io::Result<()> {
        self.dev.add_address_v4(address, prefix)
    }

    /// Reads the next batch: one super-packet split into inner packets, or one packet.
    /// `Ok(0)` when nothing is waiting. The packets are then [`Tun::packet`]`(0..n)`.
    pub fn read_batch(&mut self) -> io::Result<usize> {
        self.rx_count = 0;
        match self
            .dev
            .recv_multiple(&mut self.raw, &mut self.rx_bufs, &mut self.rx_sizes, 0)
        {
            Ok(n) => {
                self.stats.reads += 1;
                self.stats.rx_packets += n as u64;
                self.stats.rx_bytes += self.rx_sizes[..n].iter().sum::<usize>() as u64;
                self.rx_count = n;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) if e.raw_os_error().is_some() => Err(e),
            // Not an OS error: a super-packet tun-rs could not split. Dropped and counted.
            Err(e) => {
                self.stats.rx_errors += 1;
                tracing::debug!(error = %e, "TUN read dropped");
                Ok(0)
            }
        }
    }

    /// Packet `i` of the last batch read.
    pub fn packet(&self, i: usize) -> &[u8] {
        if i >= self.rx_count {
            return &[];
        }
        &self.rx_bufs[i][..self.rx_sizes[i]]
    }

    /// Queues an inner packet for the device; written by [`Tun::flush`] (or when the batch
    /// is full).
    pub fn queue(&mut self, packet: &[u8]) -> io::Result<()> {
        if packet.len() > usize::from(self.mtu) {
            self.stats.tx_oversize += 1;
            return Ok(());
        }
        if self.tx_count == self.tx_bufs.len() {
            self.flush()?;
        }
        let b = &mut self.tx_bufs[self.tx_count];
        b.clear();
        b.resize(VIRTIO_NET_HDR_LEN, 0);
        b.extend_from_slice(packet);
        self.tx_count += 1;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += packet.len() as u64;
        Ok(())
    }

    /// Writes the queued packets, coalesced where offloads allow.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.tx_count == 0 {
            return Ok(());
        }
        let n = self.tx_count;
        self.tx_count = 0;
        let r = self
            .dev
            .send_multiple(&mut self.gro, &mut self.tx_bufs[..n], VIRTIO_NET_HDR_LEN);
        self.stats.writes += 1;
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBADFD) => Err(e),
            Err(e) => {
                // A full device queue or a packet the kernel refused: lost like on a wire.
                self.stats.tx_errors += 1;
                tracing::debug!(error = %e, "TUN write failed");
                Ok(())
            }
        }
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.dev.as_raw_fd()
    }
}
