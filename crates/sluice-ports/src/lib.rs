//! Packet I/O for Sluice: Linux interfaces behind one small batch interface.
//!
//! A [`Port`] receives frames in batches into preallocated buffers
//! ([`RxBatch`]) and sends frames one by one (a backend may queue them until
//! [`Port::flush`]). Nothing on the packet path allocates.
//!
//! Offloads: Linux veth and TAP devices hand over TCP segments of up to 64 KB
//! with a partial checksum when the sender has TSO/GSO on. With
//! `offload: true` a backend asks the kernel for the virtio-net header that
//! describes such a frame ([`VnetHdr`]) and gives the same kind of header back
//! on transmit, so the kernel finishes the checksum and segments on the way
//! out (what Open vSwitch's user-space datapath does with TSO). The pipeline
//! only ever sees the (possibly large) frame itself.
//!
//! Concurrency: a port is owned by one thread at a time (`Send`, not `Sync`);
//! several workers share an interface through separate sockets joined in a
//! PACKET_FANOUT group.

pub mod afpacket;
pub mod afxdp;
pub mod pcapfile;
pub mod tap;

use std::io;
use std::os::fd::RawFd;

/// Largest frame a port accepts: a 64 KB GSO segment plus its Ethernet header.
pub const MAX_FRAME: usize = 65536 + 64;
/// Frames received per call at most: the batch size of the packet loop.
pub use sluice_dataplane::BATCH;

/// The virtio-net header (the kernel's `struct virtio_net_hdr`, 10 bytes, host
/// byte order as the kernel uses it for packet sockets and TAP).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

/// `flags`: the checksum at `csum_start + csum_offset` must still be completed.
pub const VNET_F_NEEDS_CSUM: u8 = 1;
/// `gso_type` values.
pub const VNET_GSO_NONE: u8 = 0;
pub const VNET_GSO_TCPV4: u8 = 1;
pub const VNET_GSO_UDP: u8 = 3;
pub const VNET_GSO_TCPV6: u8 = 4;
pub const VNET_GSO_ECN: u8 = 0x80;
/// Size of [`VnetHdr`] on the wire to and from the kernel.
pub const VNET_HDR_LEN: usize = 10;

impl VnetHdr {
    /// Decodes the kernel's layout.
    pub fn from_bytes(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr { flags: b[0], gso_type: b[1], hdr_len: u(2), gso_size: u(4), csum_start: u(6), csum_offset: u(8) }
    }

    /// Encodes the kernel's layout.
    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// Whether the frame is a segment the kernel must still cut (GSO).
    pub fn is_gso(&self) -> bool {
        self.gso_type & !VNET_GSO_ECN != VNET_GSO_NONE
    }

    /// Whether the frame carries a checksum to complete.
    pub fn needs_csum(&self) -> bool {
        self.flags & VNET_F_NEEDS_CSUM != 0
    }

    /// The header for a frame whose headers before the checksummed part grew
    /// (or shrank) by `delta` bytes in the pipeline, e.g. a pushed VLAN tag.
    pub fn shifted(&self, delta: isize) -> VnetHdr {
        let mv = |v: u16| if v == 0 { 0 } else { (v as isize + delta).clamp(0, u16::MAX as isize) as u16 };
        VnetHdr {
            hdr_len: mv(self.hdr_len),
            csum_start: if self.needs_csum() { mv(self.csum_start) } else { 0 },
            ..*self
        }
    }
}

/// Completes a partial checksum in software: for a frame whose header says
/// [`VnetHdr::needs_csum`] but goes out through a port without offload.
/// Returns false when the offsets do not fit the frame.
pub fn complete_checksum(frame: &mut [u8], h: &VnetHdr) -> bool {
    let (start, at) = (h.csum_start as usize, h.csum_start as usize + h.csum_offset as usize);
    if !h.needs_csum() {
        return true;
    }
    if start > frame.len() || at + 2 > frame.len() {
        return false;
    }
    // The field holds the pseudo-header sum; fold it in with the rest.
    let mut sum: u64 = 0;
    let mut chunks = frame[start..].chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = !(sum as u16);
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Frames received by one [`Port::recv`] call, in preallocated slots.
pub struct RxBatch {
    data: Vec<u8>,
    slot: usize,
    lens: [usize; BATCH],
    vnet: [VnetHdr; BATCH],
    count: usize,
}

impl RxBatch {
    /// Room for [`BATCH`] frames of up to `slot` bytes each.
    pub fn new(slot: usize) -> RxBatch {
        RxBatch { data: vec![0; slot * BATCH], slot, lens: [0; BATCH], vnet: [VnetHdr::default(); BATCH], count: 0 }
    }

    /// Frames received.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether nothing was received.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Frame `i` and its offload header (all zero without offload).
    pub fn frame(&self, i: usize) -> (&[u8], &VnetHdr) {
        (&self.data[i * self.slot..i * self.slot + self.lens[i]], &self.vnet[i])
    }

    /// Copies frames into the batch (for ports that are not sockets);
    /// returns how many fitted, each cut to the slot size.
    pub fn fill_from(&mut self, frames: &[&[u8]]) -> usize {
        let n = frames.len().min(BATCH);
        for (i, f) in frames[..n].iter().enumerate() {
            let len = f.len().min(self.slot);
            self.slot_mut(i)[..len].copy_from_slice(&f[..len]);
            self.lens[i] = len;
            self.vnet[i] = VnetHdr::default();
        }
        self.count = n;
        n
    }

    fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * self.slot..(i + 1) * self.slot]
    }
}

/// Counters every port keeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames the port could not send (queue full, too large, error).
    pub tx_dropped: u64,
}

/// One attached interface.
pub trait Port: Send {
    /// Interface name.
    fn name(&self) -> &str;
    /// Which backend this is, for the start-up report ("af_packet", "tap").
    fn backend(&self) -> &'static str;
    /// Whether frames carry virtio-net offload headers.
    fn offload(&self) -> bool;
    /// The descriptor to poll for readability.
    fn fd(&self) -> RawFd;
    /// Receives up to [`BATCH`] frames without blocking; 0 when none is waiting.
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize>;
    /// Sends (or queues) one frame; `vnet` is used only when [`Port::offload`].
    fn send(&mut self, frame: &[u8], vnet: &VnetHdr) -> io::Result<()>;
    /// Sends whatever [`Port::send`] queued.
    fn flush(&mut self) -> io::Result<()>;
    /// Counters so far.
    fn stats(&self) -> PortStats;
    /// Whether the port will never receive again (a replayed file that
    /// ended): the caller stops polling it.
    fn finished(&self) -> bool {
        false
    }
}

/// Whether interface `iface` exists in this network namespace and is
/// administratively up (IFF_UP), as `SIOCGIFFLAGS` reports it.
pub fn link_is_up(iface: &str) -> bool {
    let Ok(name) = ifname(iface) else { return false };
    // SAFETY: plain system calls on a descriptor owned here; the request
    // struct is zeroed and then carries a NUL-terminated name.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return false;
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name = name;
        let r = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req);
        libc::close(fd);
        r == 0 && (req.ifr_ifru.ifru_flags as libc::c_int & libc::IFF_UP) != 0
    }
}

/// Whether an error from a port means that its interface went down or
/// away (the port must be closed and opened again once the interface is
/// back), rather than a fault of the frame or of the program.
pub fn is_link_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENETDOWN | libc::ENODEV | libc::ENXIO | libc::ENETUNREACH | libc::EBADFD | libc::EIO)
    )
}

/// `ioctl`/`setsockopt` results as `io::Result`.
pub(crate) fn check(r: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if r < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(r)
    }
}

/// An interface name as the kernel's fixed 16-byte array.
pub(crate) fn ifname(name: &str) -> io::Result<[libc::c_char; libc::IFNAMSIZ]> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(name.bytes()) {
        *o = b as libc::c_char;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Offload headers come from the kernel and frames from the network:
        /// any combination is handled without a panic, and a checksum is only
        /// written inside the frame.
        #[test]
        fn any_frame_and_offload_header_is_handled(
            frame in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            raw in proptest::prelude::any::<[u8; VNET_HDR_LEN]>(),
            delta in -100isize..100,
        ) {
            let h = VnetHdr::from_bytes(&raw);
            let s = h.shifted(delta);
            let mut f = frame.clone();
            let ok = complete_checksum(&mut f, &s);
            proptest::prop_assert_eq!(f.len(), frame.len());
            if !ok || !s.needs_csum() {
                proptest::prop_assert_eq!(&f, &frame);
            }
        }
    }

    #[test]
    fn vnet_header_round_trips() {
        let h = VnetHdr {
            flags: 1,
            gso_type: VNET_GSO_TCPV4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::from_bytes(&h.to_bytes()), h);
        assert!(h.is_gso() && h.needs_csum());
        let s = h.shifted(4);
        assert_eq!((s.hdr_len, s.csum_start, s.gso_size), (70, 38, 1448));
    }

    #[test]
    fn software_checksum_completes_a_partial_udp_checksum() {
        // IPv4/UDP frame; the UDP checksum field holds the pseudo-header sum.
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[38..40].copy_from_slice(&12u16.to_be_bytes());
        f[42..46].copy_from_slice(b"abcd");
        // Pseudo-header: src, dst, proto, udp length.
        let mut ps: u32 = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 17 + 12;
        ps = (ps & 0xffff) + (ps >> 16);
        f[40..42].copy_from_slice(&(ps as u16).to_be_bytes());
        let h = VnetHdr { flags: VNET_F_NEEDS_CSUM, csum_start: 34, csum_offset: 6, ..Default::default() };
        assert!(complete_checksum(&mut f, &h));
        // A correct UDP checksum makes pseudo-header + segment sum to 0xffff.
        let mut sum: u32 = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 17 + 12;
        for c in f[34..].chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff);
        let bad = VnetHdr { csum_start: 60, ..h };
        assert!(!complete_checksum(&mut f, &bad));
    }
}
