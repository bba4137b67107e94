//! AF_XDP ports: an XDP socket bound to queue 0 of an interface.
//!
//! What is loaded into the kernel, and how it goes away: Sluice builds a
//! five-instruction XDP program (no compiler needed) that sends every frame
//! arriving on the interface to the XDP socket registered for its receive
//! queue in an XSKMAP, and lets the frame continue into the kernel stack when
//! no socket is registered (`bpf_redirect_map(&map, rx_queue, XDP_PASS)`).
//! The program is attached with a BPF link (BPF_LINK_CREATE): the link
//! belongs to Sluice's file descriptor, so the kernel detaches the program as
//! soon as Sluice exits or the port is dropped, even after a crash; nothing is
//! pinned and nothing is left behind. Native (driver) mode is tried first,
//! then generic (skb) mode; the port reports which one it got. Frames are
//! copied between the kernel and the socket's memory (XDP_COPY), the only
//! mode veth offers.
//!
//! Memory: one UMEM of `FRAMES` 2 KB frames per port, half lent to the kernel
//! for reception (fill ring), half used for transmission.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{check, ifname, Port, PortStats, RxBatch, VnetHdr, BATCH};

const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// UMEM frames per port and their size.
const FRAMES: u32 = 4096;
const FRAME_SIZE: u32 = 2048;
/// Ring sizes (powers of two).
const RING: u32 = 2048;

#[repr(C)]
#[derive(Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

/// One mmapped ring: producer/consumer indices and the descriptor array.
struct Ring {
    map: *mut libc::c_void,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    size: u32,
}

impl Ring {
    fn map(fd: RawFd, off: &RingOffset, pgoff: i64, size: u32, desc_size: usize, what: &str) -> io::Result<Ring> {
        let map_len = off.desc as usize + size as usize * desc_size;
        // SAFETY: mapping the ring the kernel created for this socket.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::other(format!("mmap {what} ring: {}", io::Error::last_os_error())));
        }
        let at = |o: u64| (map as usize + o as usize) as *mut u8;
        Ok(Ring {
            map,
            map_len,
            producer: at(off.producer) as *const AtomicU32,
            consumer: at(off.consumer) as *const AtomicU32,
            flags: at(off.flags) as *const AtomicU32,
            desc: at(off.desc),
            size,
        })
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping.
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    fn addr_slot(&self, i: u32) -> *mut u64 {
        // SAFETY: index masked into the descriptor array.
        unsafe { (self.desc as *mut u64).add((i & (self.size - 1)) as usize) }
    }

    fn desc_slot(&self, i: u32) -> *mut XdpDesc {
        // SAFETY: as above.
        unsafe { (self.desc as *mut XdpDesc).add((i & (self.size - 1)) as usize) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

fn bpf(cmd: libc::c_long, attr: &mut [u64], what: &str) -> io::Result<RawFd> {
    // SAFETY: `attr` is a zero-padded bpf_attr of the size passed.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(attr)) };
    check(r as libc::c_int, what)
}

/// An XDP socket on queue 0 of one interface, with its program and map.
pub struct AfXdpPort {
    name: String,
    stats: PortStats,
    mode: &'static str,
    // Field order is drop order: rings and the socket before the UMEM; the
    // link (which detaches the program) last.
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    sock: OwnedFd,
    umem: *mut u8,
    umem_len: usize,
    /// TX frames not in use.
    free_tx: Vec<u64>,
    tx_pending: u32,
    _map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
}

// SAFETY: the raw pointers point into mappings this port owns exclusively.
unsafe impl Send for AfXdpPort {}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        // SAFETY: our own UMEM mapping; the socket that used it is closed
        // after this (fields drop after `drop`), and the kernel holds its own
        // reference to the pages until then.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}

fn setsockopt_u32(fd: RawFd, opt: libc::c_int, v: u32, what: &str) -> io::Result<()> {
    // SAFETY: a u32 option value.
    let r = unsafe { libc::setsockopt(fd, SOL_XDP, opt, &v as *const u32 as *const libc::c_void, 4) };
    check(r, what).map(|_| ())
}

/// The XDP program: redirect to the XSKMAP entry of the receive queue, else pass.
fn program(map_fd: RawFd) -> Vec<u64> {
    // struct bpf_insn { u8 code; u8 dst:4, src:4; s16 off; s32 imm } in little-endian.
    let insn = |code: u8, dst: u8, src: u8, off: i16, imm: i32| -> u64 {
        u64::from(code)
            | (u64::from(dst | (src << 4)) << 8)
            | (u64::from(off as u16) << 16)
            | (u64::from(imm as u32) << 32)
    };
    vec![
        insn(0x61, 2, 1, 16, 0),     // r2 = ctx->rx_queue_index
        insn(0x18, 1, 1, 0, map_fd), // r1 = map (ld_imm64, BPF_PSEUDO_MAP_FD)
        insn(0, 0, 0, 0, 0),         // (second half of ld_imm64)
        insn(0xb7, 3, 0, 0, 2),      // r3 = XDP_PASS (action when no socket)
        insn(0x85, 0, 0, 0, 51),     // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),      // exit
    ]
}

impl AfXdpPort {
    /// Opens interface `name`: loads and attaches the XDP program, creates
    /// the socket with its UMEM and rings and binds it to queue 0.
    pub fn open(name: &str) -> io::Result<AfXdpPort> {
        let cname = ifname(name)?;
        // SAFETY: plain call with a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("interface {name} does not exist")));
        }
        let e = |what: &str| format!("{name}: {what}");
        // XSKMAP with one entry per possible queue.
        let mut attr = [0u64; 16];
        attr[0] = u64::from(BPF_MAP_TYPE_XSKMAP) | (4u64 << 32); // map_type, key_size
        attr[1] = 4 | (64u64 << 32); // value_size, max_entries
        let map_fd = bpf(BPF_MAP_CREATE, &mut attr, &e("create the XSKMAP (needs root / CAP_BPF)"))?;
        // SAFETY: fresh descriptor.
        let map = unsafe { OwnedFd::from_raw_fd(map_fd) };
        let insns = program(map_fd);
        let license = c"GPL";
        let mut log = vec![0u8; 4096];
        let mut attr = [0u64; 16];
        attr[0] = u64::from(BPF_PROG_TYPE_XDP) | ((insns.len() as u64) << 32);
        attr[1] = insns.as_ptr() as u64;
        attr[2] = license.as_ptr() as u64;
        attr[3] = 1 | ((log.len() as u64) << 32); // log_level, log_size
        attr[4] = log.as_mut_ptr() as u64;
        // prog_name at byte 48 (after kern_version and prog_flags at 40, 44).
        let pname = b"sluice_xsk\0\0\0\0\0\0";
        attr[6] = u64::from_le_bytes(pname[0..8].try_into().expect("8"));
        attr[7] = u64::from_le_bytes(pname[8..16].try_into().expect("8"));
        attr[8] = u64::from(BPF_XDP) << 32; // prog_ifindex, expected_attach_type
        let prog_fd = bpf(BPF_PROG_LOAD, &mut attr, &e("load the XDP program")).map_err(|err| {
            let l = String::from_utf8_lossy(&log);
            io::Error::new(err.kind(), format!("{err}; verifier: {}", l.trim_end_matches('\0').trim()))
        })?;
        // SAFETY: fresh descriptor.
        let prog = unsafe { OwnedFd::from_raw_fd(prog_fd) };
        let mut link = None;
        let mut mode = "";
        let mut last_err = None;
        for (flags, m) in [(XDP_FLAGS_DRV_MODE, "native"), (XDP_FLAGS_SKB_MODE, "generic")] {
            let mut attr = [0u64; 8];
            attr[0] = prog_fd as u64 | (u64::from(ifindex) << 32); // prog_fd, target_ifindex
            attr[1] = u64::from(BPF_XDP) | (u64::from(flags) << 32); // attach_type, flags
            match bpf(BPF_LINK_CREATE, &mut attr, &e(&format!("attach the XDP program in {m} mode"))) {
                Ok(fd) => {
                    // SAFETY: fresh descriptor.
                    link = Some(unsafe { OwnedFd::from_raw_fd(fd) });
                    mode = m;
                    break;
                }
                Err(err) => last_err = Some(err),
            }
        }
        let Some(link) = link else {
            let err = last_err.expect("two attempts");
            return Err(io::Error::new(
                err.kind(),
                format!("{err} (neither native nor generic XDP works on {name}; use the af_packet backend)"),
            ));
        };
        // The socket, its UMEM and rings.
        let raw =
            check(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) }, &e("AF_XDP socket"))?;
        // SAFETY: fresh descriptor.
        let sock = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem_len = (FRAMES * FRAME_SIZE) as usize;
        // SAFETY: anonymous private mapping for the UMEM.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, e("UMEM allocation failed")));
        }
        let reg = UmemReg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let r = unsafe {
            libc::setsockopt(
                raw,
                SOL_XDP,
                XDP_UMEM_REG,
                &reg as *const UmemReg as *const libc::c_void,
                std::mem::size_of::<UmemReg>() as u32,
            )
        };
        let unmap = || unsafe { libc::munmap(umem, umem_len) };
        if let Err(err) = check(r, &e("register the UMEM")) {
            unmap();
            return Err(err);
        }
        for (opt, what) in [
            (XDP_UMEM_FILL_RING, "fill ring"),
            (XDP_UMEM_COMPLETION_RING, "completion ring"),
            (XDP_RX_RING, "rx ring"),
            (XDP_TX_RING, "tx ring"),
        ] {
            if let Err(err) = setsockopt_u32(raw, opt, RING, &e(what)) {
                unmap();
                return Err(err);
            }
        }
        let mut off = MmapOffsets::default();
        let mut len = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
        let r = unsafe {
            libc::getsockopt(
                raw,
                SOL_XDP,
                XDP_MMAP_OFFSETS,
                &mut off as *mut MmapOffsets as *mut libc::c_void,
                &mut len,
            )
        };
        if let Err(err) = check(r, &e("ring offsets")) {
            unmap();
            return Err(err);
        }
        let rings = (|| -> io::Result<(Ring, Ring, Ring, Ring)> {
            Ok((
                Ring::map(raw, &off.rx, XDP_PGOFF_RX_RING, RING, 16, "rx")?,
                Ring::map(raw, &off.tx, XDP_PGOFF_TX_RING, RING, 16, "tx")?,
                Ring::map(raw, &off.fr, XDP_UMEM_PGOFF_FILL_RING, RING, 8, "fill")?,
                Ring::map(raw, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, RING, 8, "completion")?,
            ))
        })();
        let (rx, tx, fill, comp) = match rings {
            Ok(r) => r,
            Err(err) => {
                unmap();
                return Err(err);
            }
        };
        let port = AfXdpPort {
            name: name.to_string(),
            stats: PortStats::default(),
            mode,
            rx,
            tx,
            fill,
            comp,
            sock,
            umem: umem as *mut u8,
            umem_len,
            free_tx: (FRAMES / 2..FRAMES).map(|f| u64::from(f * FRAME_SIZE)).collect(),
            tx_pending: 0,
            _map: map,
            _prog: prog,
            _link: link,
        };
        // Lend the first half of the frames to the kernel for reception.
        let p = port.fill.prod().load(Ordering::Relaxed);
        for f in 0..FRAMES / 2 {
            // SAFETY: slot inside the fill ring.
            unsafe { *port.fill.addr_slot(p + f) = u64::from(f * FRAME_SIZE) };
        }
        port.fill.prod().store(p + FRAMES / 2, Ordering::Release);
        let sa = SockaddrXdp {
            family: libc::AF_XDP as u16,
            flags: XDP_COPY | XDP_USE_NEED_WAKEUP,
            ifindex,
            queue_id: 0,
            shared_umem_fd: 0,
        };
        let r = unsafe {
            libc::bind(
                raw,
                &sa as *const SockaddrXdp as *const libc::sockaddr,
                std::mem::size_of::<SockaddrXdp>() as u32,
            )
        };
        check(r, &e("bind the XDP socket to queue 0"))?;
        let key: u32 = 0;
        let val: u32 = raw as u32;
        let mut attr = [0u64; 8];
        attr[0] = map_fd as u64;
        attr[1] = &key as *const u32 as u64;
        attr[2] = &val as *const u32 as u64;
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr, &e("register the socket in the XSKMAP"))?;
        Ok(port)
    }

    /// "native" or "generic": how the XDP program is attached.
    pub fn mode(&self) -> &'static str {
        self.mode
    }

    /// Takes back transmitted frames from the completion ring.
    fn reclaim(&mut self) {
        let c = self.comp.cons().load(Ordering::Relaxed);
        let p = self.comp.prod().load(Ordering::Acquire);
        for i in c..p {
            // SAFETY: slot inside the completion ring, published by the kernel.
            self.free_tx.push(unsafe { *self.comp.addr_slot(i) });
        }
        self.comp.cons().store(p, Ordering::Release);
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "af_xdp"
    }

    fn offload(&self) -> bool {
        false
    }

    fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let c = self.rx.cons().load(Ordering::Relaxed);
        let p = self.rx.prod().load(Ordering::Acquire);
        let n = (p.wrapping_sub(c)).min(BATCH as u32);
        let fp = self.fill.prod().load(Ordering::Relaxed);
        for i in 0..n {
            // SAFETY: descriptor published by the kernel; its frame lies in the UMEM.
            let d = unsafe { *self.rx.desc_slot(c + i) };
            // The kernel keeps descriptors inside the UMEM; clamp anyway rather than trust it blindly.
            let len = (d.len as usize).min(batch.slot).min(self.umem_len.saturating_sub(d.addr as usize));
            let src = unsafe { std::slice::from_raw_parts(self.umem.add(d.addr as usize), len) };
            batch.slot_mut(i as usize)[..len].copy_from_slice(src);
            batch.lens[i as usize] = len;
            batch.vnet[i as usize] = VnetHdr::default();
            // The frame goes straight back to the kernel.
            // SAFETY: slot inside the fill ring (it has room for every RX frame).
            unsafe { *self.fill.addr_slot(fp + i) = d.addr & !u64::from(FRAME_SIZE - 1) };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
        }
        self.rx.cons().store(c.wrapping_add(n), Ordering::Release);
        self.fill.prod().store(fp.wrapping_add(n), Ordering::Release);
        if n > 0 && self.fill.needs_wakeup() {
            // SAFETY: a poke with no data.
            unsafe {
                libc::recvfrom(
                    self.sock.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
        batch.count = n as usize;
        Ok(n as usize)
    }

    fn send(&mut self, frame: &[u8], _vnet: &VnetHdr) -> io::Result<()> {
        if self.free_tx.is_empty() {
            self.reclaim();
        }
        let Some(addr) = self.free_tx.pop() else {
            self.stats.tx_dropped += 1;
            return Ok(());
        };
        if frame.len() > FRAME_SIZE as usize {
            self.free_tx.push(addr);
            self.stats.tx_dropped += 1;
            return Ok(());
        }
        // SAFETY: a free TX frame of the UMEM.
        unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), self.umem.add(addr as usize), frame.len()) };
        let p = self.tx.prod().load(Ordering::Relaxed);
        // SAFETY: TX has RING slots and at most FRAMES / 2 <= RING frames are in flight.
        unsafe {
            *self.tx.desc_slot(p.wrapping_add(self.tx_pending)) = XdpDesc { addr, len: frame.len() as u32, options: 0 }
        };
        self.tx_pending += 1;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.tx_pending > 0 {
            let p = self.tx.prod().load(Ordering::Relaxed);
            self.tx.prod().store(p.wrapping_add(self.tx_pending), Ordering::Release);
            self.tx_pending = 0;
        }
        // Copy mode transmits on a kick, a few dozen frames per kick: kick
        // until the kernel has taken everything (bounded), then reclaim.
        for _ in 0..64 {
            if self.tx.cons().load(Ordering::Acquire) == self.tx.prod().load(Ordering::Relaxed) {
                break;
            }
            // SAFETY: a kick with no data.
            let r = unsafe {
                libc::sendto(self.sock.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0)
            };
            if r < 0
                && !matches!(
                    io::Error::last_os_error().raw_os_error(),
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)
                )
            {
                break;
            }
        }
        self.reclaim();
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}
