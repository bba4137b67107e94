//! TAP ports: Sluice creates a TAP interface and exchanges frames with the
//! host stack (or a VM) through `/dev/net/tun`.
//!
//! With offload the device carries virtio-net headers (IFF_VNET_HDR) and
//! tells the kernel it accepts checksum-less and TSO frames (TUNSETOFFLOAD),
//! so the host stack hands over 64 KB segments. The interface is brought up
//! when opened and disappears when the port is dropped.
//!
//! Multi-queue ([`TapPort::open_queues`]): one TAP device with IFF_MULTI_QUEUE
//! and one descriptor per queue, each a port of its own for one worker. The
//! kernel picks the queue a frame from the host goes to by flow hash (or the
//! queue the flow's packets last came from), so the frames of a flow stay in
//! order on one queue. The device lives while any of its queues is open.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::{
    check, ifname, ioctl_socket, link_error, name_state, state_error, IfReqFlags, LinkEvent, Port, PortStats, RxBatch,
    VnetHdr, BATCH, VNET_HDR_LEN,
};

const IFF_TAP: libc::c_short = 0x0002;
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNGETIFF: libc::c_ulong = 0x8004_54d2;
/// The kernel's limit of queues per TAP device (MAX_TAP_QUEUES).
pub const MAX_QUEUES: usize = 256;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

/// A TAP device created by Sluice.
pub struct TapPort {
    name: String,
    fd: OwnedFd,
    /// For interface ioctls in the network namespace the TAP was created in.
    ctl: OwnedFd,
    offload: bool,
    stats: PortStats,
}

impl TapPort {
    /// Creates (or attaches to) TAP interface `name` and brings it up.
    pub fn open(name: &str, offload: bool) -> io::Result<TapPort> {
        let port = Self::open_one(name, offload, 0)?;
        crate::set_interface_up(name, true)?;
        Ok(port)
    }

    /// Creates multi-queue TAP interface `name` with `queues` queues (or
    /// adds them to an existing multi-queue TAP of that name) and brings it
    /// up: one port per queue, for one worker each. The interface goes away
    /// when the last of them is dropped.
    pub fn open_queues(name: &str, offload: bool, queues: usize) -> io::Result<Vec<TapPort>> {
        if queues == 0 || queues > MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name}: {queues} TAP queues asked; a TAP device has 1 to {MAX_QUEUES}"),
            ));
        }
        let mut ports = Vec::with_capacity(queues);
        for q in 0..queues {
            ports.push(Self::open_one(name, offload, IFF_MULTI_QUEUE).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "{e} (queue {q} of {queues}; an existing {name} must be a multi-queue TAP with the same flags)"
                    ),
                )
            })?);
        }
        crate::set_interface_up(name, true)?;
        Ok(ports)
    }

    /// Opens /dev/net/tun and attaches it to TAP `name` (created if missing).
    fn open_one(name: &str, offload: bool, extra: libc::c_short) -> io::Result<TapPort> {
        let cname = ifname(name)?;
        let path = c"/dev/net/tun";
        let raw = check(
            // SAFETY: plain system call with a NUL-terminated path.
            unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) },
            "/dev/net/tun (needs root or CAP_NET_ADMIN)",
        )?;
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReqFlags { name: cname, flags: IFF_TAP | IFF_NO_PI | extra, _pad: [0; 22] };
        if offload {
            req.flags |= IFF_VNET_HDR;
        }
        // SAFETY: TUNSETIFF reads (and may rewrite) a live ifreq.
        check(unsafe { libc::ioctl(raw, TUNSETIFF as _, &mut req) }, &format!("{name}: TUNSETIFF"))?;
        if offload {
            let f = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
            check(
                // SAFETY: TUNSETOFFLOAD takes its argument by value.
                unsafe { libc::ioctl(raw, TUNSETOFFLOAD as _, f as libc::c_ulong) },
                &format!("{name}: TUNSETOFFLOAD"),
            )?;
        }
        Ok(TapPort { name: name.to_string(), fd, ctl: ioctl_socket()?, offload, stats: PortStats::default() })
    }

    /// A read or write error as a link error when it is one: EIO is the
    /// kernel refusing a frame for a down device, EBADFD a descriptor whose
    /// device was deleted.
    fn classify(&self, e: io::Error, what: &str) -> io::Error {
        match e.raw_os_error() {
            Some(libc::EIO) => link_error(&self.name, LinkEvent::Down, Some(libc::EIO)),
            Some(libc::EBADFD) => link_error(&self.name, LinkEvent::Gone, Some(libc::EBADFD)),
            _ => io::Error::new(e.kind(), format!("{}: {what}: {e}", self.name)),
        }
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "tap"
    }

    fn offload(&self) -> bool {
        self.offload
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let mut n = 0;
        while n < BATCH {
            let hdr = if self.offload { VNET_HDR_LEN } else { 0 };
            let slot = batch.slot;
            let mut vh = [0u8; VNET_HDR_LEN];
            let buf = batch.slot_mut(n);
            let mut iov = [
                libc::iovec { iov_base: vh.as_mut_ptr() as *mut _, iov_len: hdr },
                libc::iovec { iov_base: buf.as_mut_ptr() as *mut _, iov_len: slot },
            ];
            let (ptr, cnt) = if self.offload { (iov.as_mut_ptr(), 2) } else { (iov[1..].as_mut_ptr(), 1) };
            // SAFETY: the iovecs point into `vh` and the batch's slot `n`, both live.
            let r = unsafe { libc::readv(self.fd.as_raw_fd(), ptr, cnt) };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => break,
                    _ => {
                        // Frames read before the error stay in the batch; the error comes with the next call.
                        if n > 0 {
                            break;
                        }
                        batch.count = 0;
                        return Err(self.classify(e, "read"));
                    }
                }
            }
            let len = (r as usize).saturating_sub(hdr);
            batch.lens[n] = len;
            batch.vnet[n] = if self.offload { VnetHdr::from_bytes(&vh) } else { VnetHdr::default() };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            n += 1;
        }
        batch.count = n;
        Ok(n)
    }

    fn send(&mut self, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        let mut vh = vnet.to_bytes();
        let mut iov = [
            libc::iovec { iov_base: vh.as_mut_ptr() as *mut _, iov_len: VNET_HDR_LEN },
            libc::iovec { iov_base: frame.as_ptr() as *mut _, iov_len: frame.len() },
        ];
        let (ptr, cnt) = if self.offload { (iov.as_mut_ptr(), 2) } else { (iov[1..].as_mut_ptr(), 1) };
        // SAFETY: the iovecs point into `vh` and `frame`, both live; the kernel only reads them.
        let r = unsafe { libc::writev(self.fd.as_raw_fd(), ptr, cnt) };
        if r < 0 {
            self.stats.tx_dropped += 1;
            let e = self.classify(io::Error::last_os_error(), "write");
            // Other refusals (a malformed frame) only count as drops.
            if crate::link_down(&e) {
                return Err(e);
            }
        } else {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += frame.len() as u64;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn check_link(&self) -> io::Result<()> {
        let mut req = IfReqFlags { name: [0; libc::IFNAMSIZ], flags: 0, _pad: [0; 22] };
        // SAFETY: TUNGETIFF writes the device's name and flags into a live ifreq.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNGETIFF as _, &mut req) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(self.classify(e, "TUNGETIFF"));
        }
        // The device's name now (it may have been renamed); if this network
        // namespace does not know it, it was moved away with its queues still
        // attached: nothing to say from here.
        match name_state(self.ctl.as_raw_fd(), req.name) {
            Ok(state) => state_error(&self.name, state).map_or(Ok(()), Err),
            Err(_) => Ok(()),
        }
    }
}
