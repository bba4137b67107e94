//! AF_PACKET ports: a raw packet socket bound to one interface.
//!
//! Receive and send use `recvmmsg`/`sendmmsg` batches of [`BATCH`] frames, so
//! a batch costs one system call each way. The socket is promiscuous, ignores
//! the frames it sends itself (PACKET_IGNORE_OUTGOING) and, with offload,
//! carries virtio-net headers (PACKET_VNET_HDR). Several sockets on one
//! interface can form a PACKET_FANOUT group that the kernel balances by flow
//! hash, one socket per worker. The group does not ask the kernel to
//! reassemble IP fragments (PACKET_FANOUT_FLAG_DEFRAG): reassembled, a
//! datagram bigger than the link's MTU could not be sent on. The kernel
//! hashes a fragment by its addresses alone (every fragment of a datagram
//! then goes to one worker, in order) and forwarders pass fragments as
//! they come.
//!
//! VLAN tags: the kernel takes an 802.1Q/802.1ad tag out of every frame
//! it receives (into the packet's metadata) before a packet socket sees
//! it, whatever the interface's offload settings. The socket asks for it
//! back (PACKET_AUXDATA) and the tag is put back into the frame after the
//! MAC addresses, so a data plane sees the frame as it was on the wire
//! (the offload header's offsets move with it).
//!
//! Link state: the socket stays bound to the interface's index. While the
//! interface is down the kernel refuses sends with ENETDOWN and reports
//! ENETDOWN once on receive; the same socket works again once it is up. When
//! the interface is deleted the socket's bound index becomes 0 and sends
//! fail with ENXIO, for good. Both come out as link errors (see the crate's
//! documentation).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::{
    check, ifname, index_link, ioctl_socket, link_error, LinkEvent, Port, PortStats, RxBatch, VnetHdr, BATCH,
    MAX_FRAME, VNET_HDR_LEN,
};

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_OUTGOING: u8 = 4;
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_STATISTICS: libc::c_int = 6;
/// `tpacket_auxdata.tp_status` bits: a tag was taken out; its TPID is given.
const TP_STATUS_VLAN_VALID: u32 = 0x10;
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;
/// Bytes of a VLAN tag (TPID and TCI).
const VLAN_TAG_LEN: usize = 4;
/// Room for one control message carrying a `tpacket_auxdata` (20 bytes).
const AUX_SPACE: usize = 64;
/// Socket buffers: room for a few dozen 64 KB segments.
const SOCKET_BUFFER: libc::c_int = 8 << 20;

/// Bytes of frames a send batch holds before it grows (a batch of full-size
/// Ethernet frames; offloaded segments grow it, until the port next idles).
const TX_DATA: usize = BATCH * 2048;

/// An AF_PACKET socket bound to one interface.
pub struct AfPacketPort {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
    /// For interface ioctls in the socket's network namespace.
    ctl: OwnedFd,
    offload: bool,
    stats: PortStats,
    /// The kernel's drops so far (`PACKET_STATISTICS` starts again from
    /// zero at every read, so they are summed here).
    kernel_drops: std::cell::Cell<u64>,
    /// Frames queued by `send`: bytes, and `(start, len)` of each.
    tx_data: Vec<u8>,
    tx_frames: Vec<(usize, usize)>,
    tx_vnet: Vec<[u8; VNET_HDR_LEN]>,
    rx_vnet: [[u8; VNET_HDR_LEN]; BATCH],
    rx_addr: [libc::sockaddr_ll; BATCH],
    rx_aux: Box<[[u64; AUX_SPACE / 8]; BATCH]>,
}

// SAFETY: the raw pointers only live inside one `recv`/`flush` call.
unsafe impl Send for AfPacketPort {}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: &T, what: &str) -> io::Result<()> {
    // SAFETY: `v` is a live value of the size passed.
    let r = unsafe {
        libc::setsockopt(fd, level, opt, v as *const T as *const libc::c_void, std::mem::size_of::<T>() as u32)
    };
    check(r, what).map(|_| ())
}

/// The VLAN tag the kernel took out of a received frame (TPID and TCI,
/// in network order), from the message's PACKET_AUXDATA.
fn vlan_tag(hdr: &libc::msghdr) -> Option<[u8; VLAN_TAG_LEN]> {
    // SAFETY: the kernel filled `msg_control` with well-formed control
    // messages of `msg_controllen` bytes; the CMSG macros stay inside it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let data_len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
            if (*c).cmsg_level == SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA && data_len >= 20 {
                let mut aux = [0u8; 20];
                std::ptr::copy_nonoverlapping(libc::CMSG_DATA(c), aux.as_mut_ptr(), 20);
                let word = |i: usize| u32::from_ne_bytes([aux[i], aux[i + 1], aux[i + 2], aux[i + 3]]);
                let half = |i: usize| u16::from_ne_bytes([aux[i], aux[i + 1]]);
                let (status, tci, tpid) = (word(0), half(16), half(18));
                if status & TP_STATUS_VLAN_VALID == 0 {
                    return None;
                }
                let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 { tpid } else { 0x8100 };
                let mut tag = [0u8; VLAN_TAG_LEN];
                tag[..2].copy_from_slice(&tpid.to_be_bytes());
                tag[2..].copy_from_slice(&tci.to_be_bytes());
                return Some(tag);
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    None
}

impl AfPacketPort {
    /// Opens interface `name`; `offload` asks for virtio-net headers;
    /// `fanout` joins the socket to that PACKET_FANOUT group (flow hash).
    pub fn open(name: &str, offload: bool, fanout: Option<u16>) -> io::Result<AfPacketPort> {
        let cname = ifname(name)?;
        // SAFETY: plain system calls on values we own.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("interface {name} does not exist")));
        }
        let raw = check(
            unsafe {
                libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    i32::from(ETH_P_ALL.to_be()),
                )
            },
            &format!("{name}: AF_PACKET socket (needs root or CAP_NET_RAW)"),
        )?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if offload {
            setsockopt(raw, SOL_PACKET, PACKET_VNET_HDR, &1i32, &format!("{name}: PACKET_VNET_HDR"))?;
        }
        setsockopt(raw, SOL_PACKET, PACKET_AUXDATA, &1i32, &format!("{name}: PACKET_AUXDATA"))?;
        // Frames we send must not come back to us (kernel >= 4.20).
        setsockopt(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32, &format!("{name}: PACKET_IGNORE_OUTGOING"))?;
        // Larger buffers (the forced variant needs CAP_NET_ADMIN; fall back quietly to the plain one).
        for (force, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
            if setsockopt(raw, libc::SOL_SOCKET, force, &SOCKET_BUFFER, "buffer").is_err() {
                let _ = setsockopt(raw, libc::SOL_SOCKET, plain, &SOCKET_BUFFER, "buffer");
            }
        }
        // SAFETY: zeroed sockaddr_ll is a valid value; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        check(
            unsafe {
                libc::bind(
                    raw,
                    &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            },
            &format!("{name}: bind"),
        )?;
        // SAFETY: zeroed packet_mreq is valid.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = PACKET_MR_PROMISC;
        setsockopt(raw, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq, &format!("{name}: promiscuous mode"))?;
        if let Some(group) = fanout {
            let arg: u32 = u32::from(group) | (PACKET_FANOUT_HASH << 16);
            setsockopt(raw, SOL_PACKET, PACKET_FANOUT, &arg, &format!("{name}: PACKET_FANOUT"))?;
        }
        Ok(AfPacketPort {
            name: name.to_string(),
            ifindex,
            fd,
            ctl: ioctl_socket()?,
            offload,
            stats: PortStats::default(),
            kernel_drops: std::cell::Cell::new(0),
            tx_data: Vec::with_capacity(TX_DATA),
            tx_frames: Vec::with_capacity(BATCH),
            tx_vnet: Vec::with_capacity(BATCH),
            rx_vnet: [[0; VNET_HDR_LEN]; BATCH],
            // SAFETY: zeroed sockaddr_ll values are valid.
            rx_addr: unsafe { std::mem::zeroed() },
            rx_aux: Box::new([[0; AUX_SPACE / 8]; BATCH]),
        })
    }
}

impl AfPacketPort {
    /// The interface index the socket is bound to now: 0 (or negative) once
    /// the interface was deleted.
    fn bound_index(&self) -> i32 {
        // SAFETY: a zeroed sockaddr_ll is valid; getsockname writes at most `len` bytes into it.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: as above.
        let r = unsafe {
            libc::getsockname(self.fd.as_raw_fd(), &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr, &mut len)
        };
        if r < 0 {
            0
        } else {
            sll.sll_ifindex
        }
    }

    /// Whether an ENETDOWN is stale: the kernel keeps the error of a down
    /// event until a receive or send takes it, which may be after the
    /// interface came back up.
    fn stale(&self, e: &io::Error) -> bool {
        e.raw_os_error() == Some(libc::ENETDOWN)
            && self.bound_index() > 0
            && index_link(self.ctl.as_raw_fd(), self.ifindex, &self.name).is_ok()
    }

    /// A system call's error as a link error when it is one: ENETDOWN (down,
    /// or gone when the socket lost its interface), ENXIO or ENODEV (gone).
    fn classify(&self, e: io::Error, what: &str) -> io::Error {
        match e.raw_os_error() {
            Some(code @ libc::ENETDOWN) => {
                let event = if self.bound_index() <= 0 { LinkEvent::Gone } else { LinkEvent::Down };
                link_error(&self.name, event, Some(code))
            }
            Some(code @ (libc::ENXIO | libc::ENODEV)) => link_error(&self.name, LinkEvent::Gone, Some(code)),
            _ => io::Error::new(e.kind(), format!("{}: {what}: {e}", self.name)),
        }
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "af_packet"
    }

    fn offload(&self) -> bool {
        self.offload
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let slot = batch.slot;
        // SAFETY: zeroed iovec/mmsghdr arrays are valid; every pointer set
        // below points into `batch`/`self`, which outlive the call.
        let mut iov: [[libc::iovec; 2]; BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let base = batch.data.as_mut_ptr();
        for i in 0..BATCH {
            let parts = &mut iov[i];
            let mut n = 0;
            if self.offload {
                parts[0] = libc::iovec { iov_base: self.rx_vnet[i].as_mut_ptr() as *mut _, iov_len: VNET_HDR_LEN };
                n = 1;
            }
            // SAFETY: slot `i` lies inside `batch.data`. Its last bytes
            // stay free for a VLAN tag put back.
            parts[n] = libc::iovec { iov_base: unsafe { base.add(i * slot) } as *mut _, iov_len: slot - VLAN_TAG_LEN };
            msgs[i].msg_hdr.msg_iov = parts.as_mut_ptr();
            msgs[i].msg_hdr.msg_iovlen = n + 1;
            msgs[i].msg_hdr.msg_name = &mut self.rx_addr[i] as *mut libc::sockaddr_ll as *mut _;
            msgs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            msgs[i].msg_hdr.msg_control = self.rx_aux[i].as_mut_ptr() as *mut _;
            msgs[i].msg_hdr.msg_controllen = AUX_SPACE;
        }
        // SAFETY: `msgs` describes BATCH live buffers (see above).
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            batch.count = 0;
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                // Down and up again already: frames may wait behind the error.
                _ if self.stale(&e) => Ok(0),
                _ => Err(self.classify(e, "receive")),
            };
        }
        let mut kept = 0;
        for (i, msg) in msgs.iter().enumerate().take(r as usize) {
            let mut len = msg.msg_len as usize;
            if self.offload {
                len = len.saturating_sub(VNET_HDR_LEN);
            }
            // Older kernels without PACKET_IGNORE_OUTGOING still loop our frames back.
            if self.rx_addr[i].sll_pkttype == PACKET_OUTGOING || msg.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                continue;
            }
            let mut vnet = if self.offload { VnetHdr::from_bytes(&self.rx_vnet[i]) } else { VnetHdr::default() };
            if kept != i {
                batch.data.copy_within(i * slot..i * slot + len, kept * slot);
            }
            if let Some(tag) = vlan_tag(&msg.msg_hdr) {
                if len >= 12 {
                    let frame = &mut batch.data[kept * slot..kept * slot + len + VLAN_TAG_LEN];
                    frame.copy_within(12..len, 12 + VLAN_TAG_LEN);
                    frame[12..16].copy_from_slice(&tag);
                    len += VLAN_TAG_LEN;
                    vnet = vnet.shifted(VLAN_TAG_LEN as isize);
                }
            }
            batch.lens[kept] = len;
            batch.vnet[kept] = vnet;
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            kept += 1;
        }
        batch.count = kept;
        Ok(kept)
    }

    fn send(&mut self, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        self.send_parts_to(0, 0, frame, &[], vnet)
    }

    fn send_parts_to(&mut self, _port: u32, _origin: u64, head: &[u8], tail: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        let len = head.len() + tail.len();
        if len > MAX_FRAME {
            self.stats.tx_dropped += 1;
            return Ok(());
        }
        if self.tx_frames.len() == BATCH {
            if let Err(e) = self.flush() {
                self.stats.tx_dropped += 1;
                return Err(e);
            }
        }
        let start = self.tx_data.len();
        self.tx_data.extend_from_slice(head);
        self.tx_data.extend_from_slice(tail);
        self.tx_frames.push((start, len));
        self.tx_vnet.push(vnet.to_bytes());
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let n = self.tx_frames.len();
        if n == 0 {
            return Ok(());
        }
        // SAFETY: as in `recv`; the pointers point into `self.tx_*`.
        let mut iov: [[libc::iovec; 2]; BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            let (start, len) = self.tx_frames[i];
            let mut k = 0;
            if self.offload {
                iov[i][0] = libc::iovec { iov_base: self.tx_vnet[i].as_mut_ptr() as *mut _, iov_len: VNET_HDR_LEN };
                k = 1;
            }
            iov[i][k] = libc::iovec { iov_base: self.tx_data[start..].as_mut_ptr() as *mut _, iov_len: len };
            msgs[i].msg_hdr.msg_iov = iov[i].as_mut_ptr();
            msgs[i].msg_hdr.msg_iovlen = k + 1;
        }
        let mut sent = 0;
        let mut link = None;
        let mut retried = false;
        while sent < n {
            // SAFETY: `msgs[sent..]` describes live buffers (see above).
            let r = unsafe {
                libc::sendmmsg(self.fd.as_raw_fd(), msgs[sent..].as_mut_ptr(), (n - sent) as u32, libc::MSG_DONTWAIT)
            };
            if r <= 0 {
                // Buffer full or a frame the interface refuses: drop the rest of the batch, count it.
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // A down event's error that the interface outlived: nothing was sent, try again.
                    _ if !retried && self.stale(&e) => {
                        retried = true;
                        continue;
                    }
                    _ if matches!(e.raw_os_error(), Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV)) => {
                        // The interface is down or gone: the whole batch is lost.
                        self.stats.tx_dropped += (n - sent) as u64;
                        link = Some(self.classify(e, "send"));
                        break;
                    }
                    _ => {
                        // Skip the frame at the head (e.g. too large for the MTU) and go on.
                        self.stats.tx_dropped += 1;
                        sent += 1;
                        continue;
                    }
                }
            }
            for i in sent..sent + r as usize {
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += self.tx_frames[i].1 as u64;
            }
            sent += r as usize;
        }
        self.tx_data.clear();
        self.tx_frames.clear();
        self.tx_vnet.clear();
        match link {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn stats(&self) -> PortStats {
        // struct tpacket_stats { tp_packets, tp_drops }: counts since the last read.
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `st`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr().cast::<libc::c_void>(),
                &mut len,
            )
        };
        if r == 0 {
            self.kernel_drops.set(self.kernel_drops.get() + u64::from(st[1]));
        }
        PortStats { rx_dropped: self.kernel_drops.get(), ..self.stats }
    }

    fn check_link(&self) -> io::Result<()> {
        if self.bound_index() <= 0 {
            return Err(link_error(&self.name, LinkEvent::Gone, None));
        }
        index_link(self.ctl.as_raw_fd(), self.ifindex, &self.name)
    }

    /// The send buffer back to its initial size once large frames grew it,
    /// and its pages back to the kernel (they fault in again on the next send).
    fn release_memory(&mut self) {
        if !self.tx_data.is_empty() {
            return;
        }
        if self.tx_data.capacity() > TX_DATA {
            self.tx_data = Vec::with_capacity(TX_DATA);
        }
        sluice_lookup::mem::release_spare_capacity(&mut self.tx_data);
    }
}
