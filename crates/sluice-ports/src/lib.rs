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
//! # Several workers on one interface
//!
//! A port is owned by one thread at a time (`Send`, not `Sync`); each worker
//! opens its own port on every interface, one queue per worker:
//! - AF_PACKET: N sockets joined in one PACKET_FANOUT group
//!   ([`afpacket::AfPacketPort::open`] with the same `fanout` id); the kernel
//!   balances flows over them by hash, whatever the interface's queues.
//! - AF_XDP: one XDP program and XSKMAP per interface
//!   ([`afxdp::AfXdpInterface::attach`]), one socket per receive queue
//!   ([`afxdp::AfXdpPort::open_queue`]); the interface (its driver or, for a
//!   veth, the sender's transmit queue choice) spreads flows over its receive
//!   queues, so it needs at least as many queues as workers ([`rx_queues`],
//!   [`require_rx_queues`] for the error message that says how to get more).
//! - TAP: one multi-queue TAP device, one descriptor per queue
//!   ([`tap::TapPort::open_queues`]); the kernel picks the queue by flow hash.
//!
//! # Link state
//!
//! A port whose interface goes down or disappears reports it distinctly from
//! other errors: its `recv`, `send`, `flush` and [`Port::check_link`] return
//! an [`io::Error`] of kind [`io::ErrorKind::NetworkDown`] carrying a
//! [`LinkError`]; [`link_event`] tells [`LinkEvent::Down`] (keep the port)
//! from [`LinkEvent::Gone`] (drop it and open a new one), [`link_down`] says
//! whether an error is either. [`link_is_up`] checks an interface by name.
//!
//! What each backend sees, with a port open, measured on Linux 6.18 (veth,
//! AF_XDP in native mode, copy; `tests/queues_and_links.rs` checks each cell):
//!
//! | event | AF_PACKET | AF_XDP | TAP |
//! |---|---|---|---|
//! | `ip link set X down` | `poll`: POLLERR once; `recv`: ENETDOWN once (that clears it); `send`: ENETDOWN | `poll`: nothing; `recvfrom`/`sendto`: ENETDOWN; frames queued for sending stay in the ring | `poll`: nothing; `read`: nothing; `write`: EIO |
//! | `ip link set X up` again | the same socket works; an ENETDOWN no `recv` took comes with the next send (the port retries it) | the same socket works; frames queued while down leave with the next flush | the same descriptor works |
//! | carrier lost (veth peer down) | no error; frames sent are lost | no error; frames sent are lost | does not happen (carrier on while a queue is attached) |
//! | `ip link del X` | `poll`: POLLERR once; `recv`: ENETDOWN once; `send`: ENXIO; bound index 0 | `poll`: nothing; socket unbound: `recvfrom`/`sendto` ENXIO; program detached | `poll`: POLLERR for good; `read`/`write`: EBADFD |
//! | X created again, same name | old socket deaf (bound to the dead index), `send` ENXIO | old socket stays unbound, the new X has no program | old descriptor stays detached (EBADFD) |
//! | X renamed (down, renamed, up) | as down, then up: the socket works on under the new name; `check_link`: `Gone`, renamed | the same | not measured |
//!
//! How the backends report it: AF_PACKET and TAP from the system call that
//! fails (`recv`, or `send`/`flush`); AF_XDP from `flush` (`send` only
//! queues) and from `recv` within 64 calls after its receive ring ran dry
//! (the rings need no system call, and `poll` stays silent for an XDP
//! socket). [`Port::check_link`] asks at once, for any backend, and also
//! reports a lost carrier as [`LinkEvent::Down`] (no system call on the
//! packet path fails for that) and a rename as [`LinkEvent::Gone`] (a port
//! is named by its interface's name; its socket would work on under the
//! new name, which is no longer the port); it asks the interface the port is bound to,
//! in the network namespace the port was opened in, from any thread. It
//! (and [`link_is_up`]) says up once the kernel marks the interface
//! operational (IFF_RUNNING), which follows the carrier after the kernel's
//! link watch ran: up to a second after frames already flow again.
//!
//! What a caller does to recover:
//! - [`LinkEvent::Down`]: keep the port; stop polling it or poll it rarely
//!   (AF_PACKET's POLLERR fires once and is cleared by the `recv` that
//!   reports it), drop what it would send, and call [`Port::check_link`]
//!   from time to time (say once a second): `Ok` means the same port works
//!   again. A `Gone` from it means the interface was deleted or renamed
//!   meanwhile.
//! - [`LinkEvent::Gone`]: drop the port (for AF_XDP every port of the
//!   interface, which detaches its program), wait until [`link_is_up`] says
//!   an interface of that name exists and is up again, and open new ports on
//!   it (TAP: Sluice creates the interface anew when it opens it).

pub mod afpacket;
pub mod afxdp;
pub mod channel;
pub mod faults;
pub mod memory;
pub mod packet_in;
pub mod pcapfile;
pub mod tap;

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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
    // The field holds the pseudo-header sum; the Internet checksum of
    // everything from `csum_start` folds it in with the rest.
    let c = sluice_hash::csum16(&frame[start..]);
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
    /// Each frame's port, for a port that carries several ([`RxBatch::tag`]).
    ports: [u32; BATCH],
    /// Each tagged frame's origin ([`RxBatch::set_origin`]).
    origins: [u64; BATCH],
    tagged: bool,
}

impl RxBatch {
    /// Room for [`BATCH`] frames of up to `slot` bytes each.
    pub fn new(slot: usize) -> RxBatch {
        let data = vec![0; slot * BATCH];
        // Small pages: a batch of short frames touches the first page of a
        // few slots (a huge page would make each touch cost 2 MiB).
        sluice_lookup::mem::advise_small_pages(&data);
        RxBatch {
            data,
            slot,
            lens: [0; BATCH],
            vnet: [VnetHdr::default(); BATCH],
            count: 0,
            ports: [0; BATCH],
            origins: [0; BATCH],
            tagged: false,
        }
    }

    /// Gives the buffer's pages back to the kernel and forgets the frames
    /// held (a worker that went idle calls it): a burst of large frames
    /// leaves nothing resident behind it, and the next frames received
    /// fault in fresh pages.
    pub fn release_memory(&mut self) {
        self.count = 0;
        // No frame is still wanted (the count is 0).
        sluice_lookup::mem::release_pages(&mut self.data);
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

    /// Frames the batch holds at most ([`BATCH`]).
    pub fn capacity(&self) -> usize {
        BATCH
    }

    /// Puts `frame` (cut to the slot size) with `vnet` at index `i` (a port
    /// building its batch frame by frame; [`RxBatch::set_len`] ends it).
    pub fn put(&mut self, i: usize, frame: &[u8], vnet: &VnetHdr) {
        let len = frame.len().min(self.slot);
        self.slot_mut(i)[..len].copy_from_slice(&frame[..len]);
        self.lens[i] = len;
        self.vnet[i] = *vnet;
    }

    /// Says that frame `i` entered on port `port` (a port object that
    /// carries the frames of several ports, as [`packet_in`]'s); once one
    /// frame is tagged, every frame of the batch must be.
    pub fn tag(&mut self, i: usize, port: u32) {
        self.ports[i] = port;
        self.origins[i] = 0;
        self.tagged = true;
    }

    /// Says which of its producer's frames tagged frame `i` is (a number
    /// the frames made of it are sent with: [`Port::send_to`]'s `origin`).
    pub fn set_origin(&mut self, i: usize, origin: u64) {
        self.origins[i] = origin;
    }

    /// Tagged frame `i`'s origin (0: none).
    pub fn origin_of(&self, i: usize) -> u64 {
        if self.tagged {
            self.origins[i]
        } else {
            0
        }
    }

    /// Forgets the tags (the loop calls it before every `recv`).
    pub fn untag(&mut self) {
        self.tagged = false;
    }

    /// The port frame `i` entered on, when the port that received it
    /// carries several; `None`: the receiving port's own number.
    pub fn port_of(&self, i: usize) -> Option<u32> {
        self.tagged.then(|| self.ports[i])
    }

    /// Says the batch holds the first `n` frames put.
    pub fn set_len(&mut self, n: usize) {
        self.count = n.min(BATCH);
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
    /// Frames the kernel dropped before the port read them (the socket's
    /// buffer or the XDP receive ring full): AF_PACKET's
    /// `PACKET_STATISTICS` drops, AF_XDP's `rx_dropped` and `rx_ring_full`;
    /// zero for the other backends.
    pub rx_dropped: u64,
    /// Messages a port carrying several ports' frames could not read as a
    /// frame ([`packet_in`]: too short, unknown, a bad port or length);
    /// zero for the other backends.
    pub rx_invalid: u64,
    /// What a [`faults::FaultyPort`] injected (zero for the other ports).
    pub faults: faults::FaultCounts,
}

impl PortStats {
    /// The counters of two ports (or two lives of one port) together.
    pub fn plus(&self, o: &PortStats) -> PortStats {
        PortStats {
            rx_packets: self.rx_packets + o.rx_packets,
            rx_bytes: self.rx_bytes + o.rx_bytes,
            tx_packets: self.tx_packets + o.tx_packets,
            tx_bytes: self.tx_bytes + o.tx_bytes,
            tx_dropped: self.tx_dropped + o.tx_dropped,
            rx_dropped: self.rx_dropped + o.rx_dropped,
            rx_invalid: self.rx_invalid + o.rx_invalid,
            faults: self.faults.plus(&o.faults),
        }
    }
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
    /// Sends (or queues) one frame leaving by pipeline port `port`, made of
    /// a frame received with origin `origin` (0: none): the same as
    /// [`Port::send`] for a port that is one pipeline port; a port that
    /// carries several ([`packet_in`], [`channel`]) sends it with that
    /// number (and a channel with its origin).
    fn send_to(&mut self, port: u32, origin: u64, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        let _ = (port, origin);
        self.send(frame, vnet)
    }
    /// [`Port::send_to`] of the frame `head` followed by `tail` (a data
    /// plane's new headers, then the packet they carry). A port that copies
    /// frames into its transmit buffers copies the parts one after the
    /// other (AF_PACKET, AF_XDP); the default joins them first.
    fn send_parts_to(&mut self, port: u32, origin: u64, head: &[u8], tail: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        sluice_dataplane::emit::joined(head, tail, |f| self.send_to(port, origin, f, vnet))
    }
    /// Sends whatever [`Port::send`] queued.
    fn flush(&mut self) -> io::Result<()>;
    /// Counters so far.
    fn stats(&self) -> PortStats;
    /// Whether the port will never receive again (a replayed file that
    /// ended): the caller stops polling it.
    fn finished(&self) -> bool {
        false
    }
    /// Checks the interface this port was opened on (the one it is bound
    /// to, not whatever now has its name): `Ok` while it is up and has a
    /// carrier, else a link error ([`link_event`] says `Down` or `Gone`).
    /// A few system calls: for a port that reported a link error or went
    /// quiet, from time to time, not per batch. Ports without a link say `Ok`.
    fn check_link(&self) -> io::Result<()> {
        Ok(())
    }

    /// Gives back memory a burst left behind (send buffers grown for large
    /// frames); the loop calls it when its worker went idle, after a flush.
    /// The default keeps everything.
    fn release_memory(&mut self) {}
}

/// A boxed port is a port (wrappers such as [`faults::FaultyPort`] take one).
impl<T: Port + ?Sized> Port for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn backend(&self) -> &'static str {
        (**self).backend()
    }
    fn offload(&self) -> bool {
        (**self).offload()
    }
    fn fd(&self) -> RawFd {
        (**self).fd()
    }
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        (**self).recv(batch)
    }
    fn send(&mut self, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        (**self).send(frame, vnet)
    }
    fn send_to(&mut self, port: u32, origin: u64, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        (**self).send_to(port, origin, frame, vnet)
    }
    fn send_parts_to(&mut self, port: u32, origin: u64, head: &[u8], tail: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        (**self).send_parts_to(port, origin, head, tail, vnet)
    }
    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }
    fn stats(&self) -> PortStats {
        (**self).stats()
    }
    fn finished(&self) -> bool {
        (**self).finished()
    }
    fn check_link(&self) -> io::Result<()> {
        (**self).check_link()
    }
    fn release_memory(&mut self) {
        (**self).release_memory()
    }
}

/// What a link error says about a port's interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// The interface exists but is down (or, from [`Port::check_link`], has
    /// no carrier). The port works again once the interface is up: keep it.
    Down,
    /// The interface the port was opened on does not exist any more
    /// (deleted, or moved to another network namespace) or no longer has
    /// the port's name (renamed: a port is named by its interface's name).
    /// The port will not work again: drop it and open a new one once an
    /// interface of that name is up.
    Gone,
}

/// The error a port returns when its interface is down or gone: carried in
/// an [`io::Error`] of kind [`io::ErrorKind::NetworkDown`]; see [`link_event`].
#[derive(Debug)]
pub struct LinkError {
    /// The interface's name as the port was opened.
    pub iface: String,
    /// Down or gone.
    pub event: LinkEvent,
    /// The system call's error that revealed it, when one did.
    pub os_error: Option<i32>,
    /// The interface's new name, when it was renamed.
    pub renamed_to: Option<String>,
    /// Down because the interface, itself up, has no carrier (a veth
    /// whose peer is down, a cable unplugged).
    pub no_carrier: bool,
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.event {
            LinkEvent::Down if self.no_carrier => {
                write!(f, "{}: the interface has no carrier (its peer is down or unplugged)", self.iface)?
            }
            LinkEvent::Down => write!(f, "{}: the interface is down", self.iface)?,
            LinkEvent::Gone => match &self.renamed_to {
                Some(to) => write!(f, "{}: the interface is gone (renamed {to})", self.iface)?,
                None => write!(f, "{}: the interface is gone (deleted or moved away)", self.iface)?,
            },
        }
        if let Some(e) = self.os_error {
            write!(f, " ({})", io::Error::from_raw_os_error(e))?;
        }
        Ok(())
    }
}

impl std::error::Error for LinkError {}

/// A link error for `iface` (see [`LinkError`]).
pub(crate) fn link_error(iface: &str, event: LinkEvent, os_error: Option<i32>) -> io::Error {
    io::Error::new(
        io::ErrorKind::NetworkDown,
        LinkError { iface: iface.to_string(), event, os_error, renamed_to: None, no_carrier: false },
    )
}

/// The link error for an interface found in `state`, or `None` when it is up.
pub(crate) fn state_error(iface: &str, state: NameState) -> Option<io::Error> {
    let event = match state {
        NameState::Up => return None,
        NameState::Down | NameState::NoCarrier => LinkEvent::Down,
    };
    let no_carrier = state == NameState::NoCarrier;
    let e = LinkError { iface: iface.to_string(), event, os_error: None, renamed_to: None, no_carrier };
    Some(io::Error::new(io::ErrorKind::NetworkDown, e))
}

/// Whether an error from a port (`recv`, `send`, `flush`, `check_link`)
/// means its interface is down or gone, and which; `None` for any other error.
pub fn link_event(e: &io::Error) -> Option<LinkEvent> {
    e.get_ref()?.downcast_ref::<LinkError>().map(|l| l.event)
}

/// Whether an error from a port means its interface is down or gone
/// ([`link_event`] tells which).
pub fn link_down(e: &io::Error) -> bool {
    link_event(e).is_some()
}

/// Whether interface `iface` exists in the calling thread's network
/// namespace, is up (IFF_UP), operational (IFF_RUNNING) and has a carrier
/// (the driver's link state, which a lost carrier clears at once).
pub fn link_is_up(iface: &str) -> bool {
    let (Ok(ctl), Ok(name)) = (ioctl_socket(), ifname(iface)) else {
        return false;
    };
    matches!(name_state(ctl.as_raw_fd(), name), Ok(NameState::Up))
}

/// The link speed of `iface` in Mbit/s and whether it is full duplex, as
/// the kernel reports them (`/sys/class/net/IFACE/speed` and `duplex`);
/// `None` when it reports none (a link that is down, an interface without
/// a speed, one that does not exist). veth pairs report 10 000 Mbit/s, TAP
/// interfaces 10.
pub fn link_speed(iface: &str) -> Option<(u32, bool)> {
    if iface.is_empty() || iface.contains('/') {
        return None;
    }
    let dir = std::path::Path::new("/sys/class/net").join(iface);
    let mbps: i64 = std::fs::read_to_string(dir.join("speed")).ok()?.trim().parse().ok()?;
    let full = std::fs::read_to_string(dir.join("duplex")).map_or(true, |d| d.trim() != "half");
    u32::try_from(mbps).ok().filter(|m| *m > 0).map(|m| (m, full))
}

/// What the kernel says of an interface: set up (`ip link set up`, the
/// administrative state), up with a carrier (the operational state) and
/// its MAC address, when it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterfaceState {
    pub admin_up: bool,
    pub oper_up: bool,
    pub mac: Option<[u8; 6]>,
}

/// The state of interface `iface` in the calling thread's network
/// namespace; an error when there is no such interface.
pub fn interface_state(iface: &str) -> io::Result<InterfaceState> {
    let ctl = ioctl_socket()?;
    let name = ifname(iface)?;
    let admin_up = flags_via(ctl.as_raw_fd(), name)? & libc::IFF_UP as libc::c_short != 0;
    let oper_up = name_state(ctl.as_raw_fd(), name)? == NameState::Up;
    #[repr(C)]
    struct IfReqAddr {
        name: [libc::c_char; libc::IFNAMSIZ],
        addr: libc::sockaddr,
        _pad: [u8; 8],
    }
    // SAFETY: an all-zero sockaddr is valid.
    let mut req = IfReqAddr { name, addr: unsafe { std::mem::zeroed() }, _pad: [0; 8] };
    // SAFETY: SIOCGIFHWADDR reads the name and writes the address of a live ifreq.
    let r = unsafe { libc::ioctl(ctl.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) };
    let mac = (r == 0 && req.addr.sa_family == libc::ARPHRD_ETHER).then(|| {
        let mut m = [0u8; 6];
        for (d, s) in m.iter_mut().zip(req.addr.sa_data.iter()) {
            *d = *s as u8;
        }
        m
    });
    Ok(InterfaceState { admin_up, oper_up, mac })
}

/// Sets interface `iface` up or down (IFF_UP, as `ip link set up|down`):
/// down, its link partner loses its carrier, as a disabled switch port's
/// does.
pub fn set_interface_up(iface: &str, up: bool) -> io::Result<()> {
    let s = ioctl_socket()?;
    let mut req = IfReqFlags { name: ifname(iface)?, flags: 0, _pad: [0; 22] };
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS on a live ifreq.
    check(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) }, &format!("{iface}: SIOCGIFFLAGS"))?;
    if up {
        req.flags |= libc::IFF_UP as libc::c_short;
    } else {
        req.flags &= !(libc::IFF_UP as libc::c_short);
    }
    // SAFETY: as above.
    check(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS as _, &mut req) }, &format!("{iface}: SIOCSIFFLAGS"))?;
    Ok(())
}

/// What [`name_state`] finds of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameState {
    /// Up, operational, with a carrier.
    Up,
    /// Set down.
    Down,
    /// Up, but without a carrier (or not yet operational).
    NoCarrier,
}

/// The state of interface `name` in the network namespace of socket `ctl`;
/// an error when no interface has that name there.
pub(crate) fn name_state(ctl: RawFd, name: [libc::c_char; libc::IFNAMSIZ]) -> io::Result<NameState> {
    let flags = flags_via(ctl, name)?;
    if flags & libc::IFF_UP as libc::c_short == 0 {
        return Ok(NameState::Down);
    }
    // IFF_RUNNING (the operational state) follows the carrier when the
    // kernel's link watch gets to it, up to a second later; the driver's
    // link state tells a lost carrier at once. Up takes both.
    let running = flags & libc::IFF_RUNNING as libc::c_short != 0;
    let carrier = carrier_via(ctl, name).unwrap_or(running);
    Ok(if running && carrier { NameState::Up } else { NameState::NoCarrier })
}

const ETHTOOL_GLINK: u32 = 0x0a;

/// The driver's link state (ETHTOOL_GLINK), when it reports one.
fn carrier_via(ctl: RawFd, name: [libc::c_char; libc::IFNAMSIZ]) -> Option<bool> {
    let mut v: [u32; 2] = [ETHTOOL_GLINK, 0]; // struct ethtool_value { cmd, data }
    let mut req = IfReqData { name, data: v.as_mut_ptr() as *mut libc::c_void, _pad: [0; 16] };
    // SAFETY: SIOCETHTOOL with ETHTOOL_GLINK writes one ethtool_value into the live array the request points to.
    let r = unsafe { libc::ioctl(ctl, SIOCETHTOOL as _, &mut req) };
    (r == 0).then_some(v[1] != 0)
}

/// The link of the interface with index `ifindex` in the network namespace
/// of socket `ctl` (the one the port was opened in, whichever thread asks),
/// for a port opened on it under the name `iface`: `Ok` when it is up with
/// a carrier and still has that name, else the link error the port must
/// report (`Gone` when it was deleted or renamed).
pub(crate) fn index_link(ctl: RawFd, ifindex: u32, iface: &str) -> io::Result<()> {
    // Twice: the interface may be renamed between the two calls.
    for _ in 0..2 {
        let mut req = IfReqIndex { name: [0; libc::IFNAMSIZ], ifindex: ifindex as libc::c_int, _pad: [0; 20] };
        // SAFETY: SIOCGIFNAME reads the index and writes the name of a live ifreq.
        if ifindex == 0 || unsafe { libc::ioctl(ctl, libc::SIOCGIFNAME as _, &mut req) } < 0 {
            break;
        }
        let now: Vec<u8> = req.name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        if now != iface.as_bytes() {
            let renamed_to = Some(String::from_utf8_lossy(&now).into_owned());
            let e = LinkError {
                iface: iface.to_string(),
                event: LinkEvent::Gone,
                os_error: None,
                renamed_to,
                no_carrier: false,
            };
            return Err(io::Error::new(io::ErrorKind::NetworkDown, e));
        }
        if let Ok(state) = name_state(ctl, req.name) {
            return state_error(iface, state).map_or(Ok(()), Err);
        }
    }
    Err(link_error(iface, LinkEvent::Gone, None))
}

/// The flags of interface `name` in the network namespace of socket `ctl`.
pub(crate) fn flags_via(ctl: RawFd, name: [libc::c_char; libc::IFNAMSIZ]) -> io::Result<libc::c_short> {
    let mut req = IfReqFlags { name, flags: 0, _pad: [0; 22] };
    // SAFETY: SIOCGIFFLAGS reads the name and writes the flags of a live ifreq.
    check(unsafe { libc::ioctl(ctl, libc::SIOCGIFFLAGS as _, &mut req) }, "SIOCGIFFLAGS")?;
    Ok(req.flags)
}

/// `struct ifreq` with the index member of its union.
#[repr(C)]
struct IfReqIndex {
    name: [libc::c_char; libc::IFNAMSIZ],
    ifindex: libc::c_int,
    _pad: [u8; 20],
}

/// `struct ifreq` with the flags member of its union.
#[repr(C)]
pub(crate) struct IfReqFlags {
    pub(crate) name: [libc::c_char; libc::IFNAMSIZ],
    pub(crate) flags: libc::c_short,
    pub(crate) _pad: [u8; 22],
}

/// `struct ifreq` with the data pointer of its union (SIOCETHTOOL).
#[repr(C)]
struct IfReqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// A datagram socket for interface ioctls.
pub(crate) fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call.
    let s = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }, "socket")?;
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(s) })
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// How many receive and transmit queues `iface` (in the calling thread's
/// network namespace) has in use: from the
/// driver's channel counts (ETHTOOL_GCHANNELS: combined plus rx-only, and
/// combined plus tx-only), else from `/sys/class/net/IFACE/queues` when
/// that view belongs to this network namespace.
pub fn queue_counts(iface: &str) -> io::Result<(usize, usize)> {
    let name = ifname(iface)?;
    // SAFETY: plain call with a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("interface {iface} does not exist")));
    }
    let mut ch = EthtoolChannels { cmd: ETHTOOL_GCHANNELS, ..Default::default() };
    let mut req = IfReqData { name, data: &mut ch as *mut EthtoolChannels as *mut libc::c_void, _pad: [0; 16] };
    let s = ioctl_socket()?;
    // SAFETY: SIOCETHTOOL with ETHTOOL_GCHANNELS fills the live struct the
    // request points to, no more than its size.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if r == 0 {
        let rx = ch.rx_count.saturating_add(ch.combined_count) as usize;
        let tx = ch.tx_count.saturating_add(ch.combined_count) as usize;
        if rx > 0 && tx > 0 {
            return Ok((rx, tx));
        }
    }
    // sysfs shows the namespace it was mounted in: use it only when it
    // shows this interface.
    let dir = format!("/sys/class/net/{iface}");
    let same = std::fs::read_to_string(format!("{dir}/ifindex")).ok().and_then(|s| s.trim().parse::<u32>().ok());
    if same != Some(ifindex) {
        return Err(io::Error::other(format!(
            "{iface}: cannot tell its queues (no channel counts from the driver, and {dir} is another namespace's)"
        )));
    }
    let (mut rx, mut tx) = (0, 0);
    for e in std::fs::read_dir(format!("{dir}/queues"))? {
        let n = e?.file_name();
        let n = n.to_string_lossy();
        rx += usize::from(n.starts_with("rx-"));
        tx += usize::from(n.starts_with("tx-"));
    }
    Ok((rx, tx))
}

/// How many receive queues `iface` has in use (see [`queue_counts`]).
pub fn rx_queues(iface: &str) -> io::Result<usize> {
    queue_counts(iface).map(|(rx, _)| rx)
}

/// Checks that `iface` has at least `needed` receive and transmit queues,
/// one per worker; the error says how to get more. Returns the receive
/// queues it has.
pub fn require_rx_queues(iface: &str, needed: usize) -> io::Result<usize> {
    let (rx, tx) = queue_counts(iface)?;
    if rx >= needed && tx >= needed {
        return Ok(rx);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{iface} has {rx} receive and {tx} transmit queue(s) but {needed} workers need one each: \
             give it more (`ethtool -L {iface} combined {needed}` on a NIC; \
             `ethtool -L {iface} rx {needed} tx {needed}` on a veth created with enough, \
             else create the pair with `ip link add {iface} numrxqueues {needed} numtxqueues {needed} \
             type veth peer name PEER numrxqueues {needed} numtxqueues {needed}`) or run fewer workers"
        ),
    ))
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
    fn ports_move_to_worker_threads() {
        fn send<T: Send>() {}
        fn shared<T: Send + Sync>() {}
        send::<afpacket::AfPacketPort>();
        send::<afxdp::AfXdpPort>();
        send::<tap::TapPort>();
        shared::<std::sync::Arc<afxdp::AfXdpInterface>>();
    }

    #[test]
    fn a_renamed_interface_is_gone_under_its_old_name() {
        // The loopback interface, index 1, asked for under another name.
        let ctl = ioctl_socket().unwrap();
        let e = index_link(ctl.as_raw_fd(), 1, "sl-not-lo").unwrap_err();
        assert_eq!(link_event(&e), Some(LinkEvent::Gone));
        assert_eq!(e.to_string(), "sl-not-lo: the interface is gone (renamed lo)");
        assert!(index_link(ctl.as_raw_fd(), 1, "lo").is_ok());
    }

    #[test]
    fn link_errors_are_told_from_other_errors() {
        let e = link_error("x0", LinkEvent::Gone, Some(libc::ENXIO));
        assert_eq!(e.kind(), io::ErrorKind::NetworkDown);
        assert_eq!(link_event(&e), Some(LinkEvent::Gone));
        assert!(link_down(&e) && e.to_string().starts_with("x0: the interface is gone"), "{e}");
        let down = link_error("x0", LinkEvent::Down, None);
        assert_eq!(link_event(&down), Some(LinkEvent::Down));
        assert_eq!(down.to_string(), "x0: the interface is down");
        let carrier = state_error("x0", NameState::NoCarrier).expect("no carrier is a link error");
        assert_eq!(link_event(&carrier), Some(LinkEvent::Down));
        assert_eq!(carrier.to_string(), "x0: the interface has no carrier (its peer is down or unplugged)");
        assert!(state_error("x0", NameState::Up).is_none());
        for other in [io::Error::from_raw_os_error(libc::ENETDOWN), io::Error::other("x0: receive: boom")] {
            assert!(!link_down(&other), "{other}");
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
