//! TAP ports: Sluice creates a TAP interface and exchanges frames with the
//! host stack (or a VM) through `/dev/net/tun`.
//!
//! With offload the device carries virtio-net headers (IFF_VNET_HDR) and
//! tells the kernel it accepts checksum-less and TSO frames (TUNSETOFFLOAD),
//! so the host stack hands over 64 KB segments. The interface is brought up
//! when opened and disappears when the port is dropped.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::{check, ifname, Port, PortStats, RxBatch, VnetHdr, BATCH, VNET_HDR_LEN};

const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

/// A TAP device created by Sluice.
pub struct TapPort {
    name: String,
    fd: OwnedFd,
    offload: bool,
    stats: PortStats,
}

#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl TapPort {
    /// Creates (or attaches to) TAP interface `name` and brings it up.
    pub fn open(name: &str, offload: bool) -> io::Result<TapPort> {
        let cname = ifname(name)?;
        let path = c"/dev/net/tun";
        let raw = check(
            unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) },
            "/dev/net/tun (needs root or CAP_NET_ADMIN)",
        )?;
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = IfReqFlags { name: cname, flags: IFF_TAP | IFF_NO_PI, _pad: [0; 22] };
        if offload {
            req.flags |= IFF_VNET_HDR;
        }
        check(unsafe { libc::ioctl(raw, TUNSETIFF as _, &mut req) }, &format!("{name}: TUNSETIFF"))?;
        if offload {
            let f = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
            check(
                unsafe { libc::ioctl(raw, TUNSETOFFLOAD as _, f as libc::c_ulong) },
                &format!("{name}: TUNSETOFFLOAD"),
            )?;
        }
        set_up(&cname, name)?;
        Ok(TapPort { name: name.to_string(), fd, offload, stats: PortStats::default() })
    }
}

/// Sets IFF_UP on an interface.
fn set_up(cname: &[libc::c_char; libc::IFNAMSIZ], name: &str) -> io::Result<()> {
    let s = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }, "socket")?;
    // SAFETY: fresh descriptor we own.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut req = IfReqFlags { name: *cname, flags: 0, _pad: [0; 22] };
    check(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) }, &format!("{name}: SIOCGIFFLAGS"))?;
    req.flags |= libc::IFF_UP as libc::c_short;
    check(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS as _, &mut req) }, &format!("{name}: SIOCSIFFLAGS"))?;
    Ok(())
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
            let r = unsafe { libc::readv(self.fd.as_raw_fd(), ptr, cnt) };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => break,
                    _ => return Err(io::Error::new(e.kind(), format!("{}: read: {e}", self.name))),
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
        let r = unsafe { libc::writev(self.fd.as_raw_fd(), ptr, cnt) };
        if r < 0 {
            self.stats.tx_dropped += 1;
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
}
