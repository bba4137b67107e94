//! AF_XDP ports: XDP sockets bound to the receive queues of an interface,
//! one socket (one port, one worker) per queue.
//!
//! What is loaded into the kernel, and how it goes away: Sluice builds a
//! five-instruction XDP program (no compiler needed) that sends every frame
//! arriving on the interface to the XDP socket registered for its receive
//! queue in an XSKMAP, and lets the frame continue into the kernel stack when
//! no socket is registered (`bpf_redirect_map(&map, rx_queue, XDP_PASS)`).
//! [`AfXdpInterface::attach`] loads the program and its map (one entry per
//! queue) once per interface and attaches it with a BPF link
//! (BPF_LINK_CREATE); [`AfXdpPort::open_queue`] opens the socket of one queue
//! and registers it in the map under the queue's number. Every port holds
//! the interface (an `Arc`): the link's descriptor closes with the last of
//! them, and the kernel then detaches the program, also when Sluice exits or
//! crashes; nothing is pinned and nothing is left behind. Native (driver)
//! mode is tried first, then generic (skb) mode; the interface reports which
//! one it got. Frames are copied between the kernel and the socket's memory
//! (XDP_COPY), the only mode veth offers. Each socket transmits on the queue
//! it is bound to.
//!
//! Memory: one UMEM of `FRAMES` 2 KB frames per port, half lent to the kernel
//! for reception (fill ring), half used for transmission.
//!
//! Link state: an XDP socket reports nothing through `poll`. While the
//! interface is down `sendto`/`recvfrom` fail with ENETDOWN; once it is
//! deleted the kernel unbinds the socket (ENXIO) and the program's link is
//! dead. A port reports these from [`Port::flush`] and from [`Port::recv`]
//! after its receive ring stayed empty for a while, and [`Port::check_link`]
//! asks at once (see the crate's documentation).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use sluice_lookup::mem::AnonMapping;

use crate::{
    check, ifname, index_link, ioctl_socket, link_error, require_rx_queues, LinkEvent, Port, PortStats, RxBatch,
    VnetHdr, BATCH,
};

const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
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
/// Most queues one interface's map takes.
pub const MAX_QUEUES: usize = 1024;
/// Empty receive calls between two checks of the socket's link.
const IDLE_CHECK: u32 = 64;

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

/// The XDP program and XSKMAP of one interface, shared by the ports of its
/// queues; attached while any of them (or the caller's `Arc`) lives.
pub struct AfXdpInterface {
    name: String,
    ifindex: u32,
    queues: u32,
    mode: &'static str,
    /// For interface ioctls in the network namespace of the interface.
    ctl: OwnedFd,
    // Field order is drop order: the link (which detaches the program) first.
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
}

impl AfXdpInterface {
    /// Loads the XDP program and an XSKMAP with `queues` entries for
    /// interface `iface` and attaches the program (native mode, else
    /// generic). Fails with a message saying how to add queues when the
    /// interface has fewer than `queues` receive or transmit queues.
    pub fn attach(iface: &str, queues: usize) -> io::Result<Arc<AfXdpInterface>> {
        let cname = ifname(iface)?;
        // SAFETY: plain call with a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("interface {iface} does not exist")));
        }
        if queues == 0 || queues > MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{iface}: {queues} AF_XDP queues asked; 1 to {MAX_QUEUES} can be"),
            ));
        }
        // Every interface has queue 0; more must exist.
        if queues > 1 {
            require_rx_queues(iface, queues)?;
        }
        let e = |what: &str| format!("{iface}: {what}");
        // XSKMAP with one entry per queue.
        let mut attr = [0u64; 16];
        attr[0] = u64::from(BPF_MAP_TYPE_XSKMAP) | (4u64 << 32); // map_type, key_size
        attr[1] = 4 | ((queues as u64) << 32); // value_size, max_entries
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
        let pname = *b"sluice_xsk\0\0\0\0\0\0";
        attr[6] = u64::from_le_bytes([pname[0], pname[1], pname[2], pname[3], pname[4], pname[5], pname[6], pname[7]]);
        attr[7] =
            u64::from_le_bytes([pname[8], pname[9], pname[10], pname[11], pname[12], pname[13], pname[14], pname[15]]);
        attr[8] = u64::from(BPF_XDP) << 32; // prog_ifindex, expected_attach_type
        let prog_fd = bpf(BPF_PROG_LOAD, &mut attr, &e("load the XDP program")).map_err(|err| {
            let l = String::from_utf8_lossy(&log);
            io::Error::new(err.kind(), format!("{err}; verifier: {}", l.trim_end_matches('\0').trim()))
        })?;
        // SAFETY: fresh descriptor.
        let prog = unsafe { OwnedFd::from_raw_fd(prog_fd) };
        let mut last_err = None;
        for (flags, mode) in [(XDP_FLAGS_DRV_MODE, "native"), (XDP_FLAGS_SKB_MODE, "generic")] {
            let mut attr = [0u64; 8];
            attr[0] = prog_fd as u64 | (u64::from(ifindex) << 32); // prog_fd, target_ifindex
            attr[1] = u64::from(BPF_XDP) | (u64::from(flags) << 32); // attach_type, flags
            match bpf(BPF_LINK_CREATE, &mut attr, &e(&format!("attach the XDP program in {mode} mode"))) {
                Ok(fd) => {
                    return Ok(Arc::new(AfXdpInterface {
                        name: iface.to_string(),
                        ifindex,
                        queues: queues as u32,
                        mode,
                        ctl: ioctl_socket()?,
                        // SAFETY: fresh descriptor.
                        _link: unsafe { OwnedFd::from_raw_fd(fd) },
                        _prog: prog,
                        map,
                    }));
                }
                Err(err) => last_err = Some(err),
            }
        }
        let err = last_err.unwrap_or_else(|| io::Error::other("no attach mode"));
        Err(io::Error::new(
            err.kind(),
            format!("{err} (neither native nor generic XDP works on {iface}; use the af_packet backend)"),
        ))
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// How many queues the map has room for.
    pub fn queues(&self) -> usize {
        self.queues as usize
    }

    /// "native" or "generic": how the XDP program is attached.
    pub fn mode(&self) -> &'static str {
        self.mode
    }
}

/// An XDP socket on one receive queue of an interface.
pub struct AfXdpPort {
    name: String,
    queue: u32,
    stats: PortStats,
    // Field order is drop order: rings, then the socket, then the UMEM, then
    // the interface (the last port's drop detaches the program).
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    sock: OwnedFd,
    /// The frames' memory, populated up front (a socket that registered it
    /// keeps its pages pinned by itself until it is closed).
    umem: AnonMapping,
    /// TX frames not in use.
    free_tx: Vec<u64>,
    tx_pending: u32,
    /// Receive calls in a row that found nothing.
    idle: u32,
    iface: Arc<AfXdpInterface>,
}

// SAFETY: the raw pointers point into mappings this port owns exclusively;
// the interface is shared through an `Arc` of plain descriptors.
unsafe impl Send for AfXdpPort {}

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
    /// Opens interface `name` with one socket on queue 0: attaches the XDP
    /// program (for this port alone) and opens the queue's socket.
    pub fn open(name: &str) -> io::Result<AfXdpPort> {
        let iface = AfXdpInterface::attach(name, 1)?;
        AfXdpPort::open_queue(&iface, 0)
    }

    /// Opens the XDP socket of receive queue `queue` of an attached
    /// interface, with its own UMEM and rings, binds it to the queue and
    /// registers it in the interface's map.
    pub fn open_queue(iface: &Arc<AfXdpInterface>, queue: usize) -> io::Result<AfXdpPort> {
        let name = iface.name();
        if queue >= iface.queues() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name}: queue {queue} asked; the interface was attached for {} queue(s)", iface.queues()),
            ));
        }
        let e = |what: &str| format!("{name} queue {queue}: {what}");
        // The socket, its UMEM and rings.
        // SAFETY: plain system call.
        let raw =
            check(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) }, &e("AF_XDP socket"))?;
        // SAFETY: fresh descriptor.
        let sock = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = AnonMapping::new((FRAMES * FRAME_SIZE) as usize, true)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, e("UMEM")))?;
        let reg = UmemReg {
            addr: umem.as_ptr() as u64,
            len: umem.len() as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        // SAFETY: the option value is a live UmemReg of the size passed.
        let r = unsafe {
            libc::setsockopt(
                raw,
                SOL_XDP,
                XDP_UMEM_REG,
                &reg as *const UmemReg as *const libc::c_void,
                std::mem::size_of::<UmemReg>() as u32,
            )
        };
        check(r, &e("register the UMEM"))?;
        for (opt, what) in [
            (XDP_UMEM_FILL_RING, "fill ring"),
            (XDP_UMEM_COMPLETION_RING, "completion ring"),
            (XDP_RX_RING, "rx ring"),
            (XDP_TX_RING, "tx ring"),
        ] {
            setsockopt_u32(raw, opt, RING, &e(what))?;
        }
        let mut off = MmapOffsets::default();
        let mut len = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `off`.
        let r = unsafe {
            libc::getsockopt(
                raw,
                SOL_XDP,
                XDP_MMAP_OFFSETS,
                &mut off as *mut MmapOffsets as *mut libc::c_void,
                &mut len,
            )
        };
        check(r, &e("ring offsets"))?;
        let port = AfXdpPort {
            name: name.to_string(),
            queue: queue as u32,
            stats: PortStats::default(),
            rx: Ring::map(raw, &off.rx, XDP_PGOFF_RX_RING, RING, 16, "rx")?,
            tx: Ring::map(raw, &off.tx, XDP_PGOFF_TX_RING, RING, 16, "tx")?,
            fill: Ring::map(raw, &off.fr, XDP_UMEM_PGOFF_FILL_RING, RING, 8, "fill")?,
            comp: Ring::map(raw, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, RING, 8, "completion")?,
            sock,
            umem,
            free_tx: (FRAMES / 2..FRAMES).map(|f| u64::from(f * FRAME_SIZE)).collect(),
            tx_pending: 0,
            idle: 0,
            iface: Arc::clone(iface),
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
            ifindex: iface.ifindex,
            queue_id: queue as u32,
            shared_umem_fd: 0,
        };
        // SAFETY: the address is a live SockaddrXdp of the size passed.
        let r = unsafe {
            libc::bind(
                raw,
                &sa as *const SockaddrXdp as *const libc::sockaddr,
                std::mem::size_of::<SockaddrXdp>() as u32,
            )
        };
        check(r, &e("bind the XDP socket to its queue (another socket on it? an interface without it?)"))?;
        let key: u32 = queue as u32;
        let val: u32 = raw as u32;
        let mut attr = [0u64; 8];
        attr[0] = iface.map.as_raw_fd() as u64;
        attr[1] = &key as *const u32 as u64;
        attr[2] = &val as *const u32 as u64;
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr, &e("register the socket in the XSKMAP"))?;
        Ok(port)
    }

    /// "native" or "generic": how the XDP program is attached.
    pub fn mode(&self) -> &'static str {
        self.iface.mode
    }

    /// The receive queue this socket is bound to.
    pub fn queue(&self) -> usize {
        self.queue as usize
    }

    /// The interface this port belongs to.
    pub fn interface(&self) -> &Arc<AfXdpInterface> {
        &self.iface
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

    /// A system call's error as a link error when it is one: ENETDOWN
    /// (down), ENXIO (the kernel unbound the socket: gone).
    fn classify(&self, code: Option<i32>) -> Option<io::Error> {
        match code {
            Some(libc::ENETDOWN) => Some(link_error(&self.name, LinkEvent::Down, code)),
            Some(libc::ENXIO | libc::ENODEV) => Some(link_error(&self.name, LinkEvent::Gone, code)),
            _ => None,
        }
    }

    /// Asks the socket about its link with an empty non-blocking receive.
    fn probe(&self) -> io::Result<()> {
        // SAFETY: a receive of no data.
        let r = unsafe {
            libc::recvfrom(
                self.sock.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            if let Some(e) = self.classify(io::Error::last_os_error().raw_os_error()) {
                return Err(e);
            }
        }
        Ok(())
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
            let d = unsafe { *self.rx.desc_slot(c.wrapping_add(i)) };
            // The kernel keeps descriptors inside the UMEM; clamp anyway rather than trust it blindly.
            let at = usize::try_from(d.addr).unwrap_or(usize::MAX).min(self.umem.len());
            let len = (d.len as usize).min(batch.slot).min(self.umem.len() - at);
            // SAFETY: `at + len` lies inside the UMEM (clamped above).
            let src = unsafe { std::slice::from_raw_parts(self.umem.as_ptr().add(at), len) };
            batch.slot_mut(i as usize)[..len].copy_from_slice(src);
            batch.lens[i as usize] = len;
            batch.vnet[i as usize] = VnetHdr::default();
            // The frame goes straight back to the kernel.
            // SAFETY: slot inside the fill ring (it has room for every RX frame).
            unsafe { *self.fill.addr_slot(fp.wrapping_add(i)) = d.addr & !u64::from(FRAME_SIZE - 1) };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
        }
        self.rx.cons().store(c.wrapping_add(n), Ordering::Release);
        self.fill.prod().store(fp.wrapping_add(n), Ordering::Release);
        batch.count = n as usize;
        if n > 0 {
            self.idle = 0;
            if self.fill.needs_wakeup() {
                // A poke with no data; a link error shows up in a later call.
                let _ = self.probe();
            }
        } else {
            self.idle = self.idle.wrapping_add(1);
            if self.idle.is_multiple_of(IDLE_CHECK) {
                self.probe()?;
            }
        }
        Ok(n as usize)
    }

    fn send(&mut self, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        self.send_parts_to(0, 0, frame, &[], vnet)
    }

    fn send_parts_to(&mut self, _port: u32, _origin: u64, head: &[u8], tail: &[u8], _vnet: &VnetHdr) -> io::Result<()> {
        let len = head.len() + tail.len();
        if self.free_tx.is_empty() {
            self.reclaim();
        }
        let Some(addr) = self.free_tx.pop() else {
            self.stats.tx_dropped += 1;
            return Ok(());
        };
        if len > FRAME_SIZE as usize {
            self.free_tx.push(addr);
            self.stats.tx_dropped += 1;
            return Ok(());
        }
        // SAFETY: a free TX frame of the UMEM, FRAME_SIZE >= len bytes long.
        unsafe {
            let to = self.umem.as_ptr().add(addr as usize);
            std::ptr::copy_nonoverlapping(head.as_ptr(), to, head.len());
            std::ptr::copy_nonoverlapping(tail.as_ptr(), to.add(head.len()), tail.len());
        }
        let p = self.tx.prod().load(Ordering::Relaxed);
        // SAFETY: TX has RING slots and at most FRAMES / 2 <= RING frames are in flight.
        unsafe { *self.tx.desc_slot(p.wrapping_add(self.tx_pending)) = XdpDesc { addr, len: len as u32, options: 0 } };
        self.tx_pending += 1;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += len as u64;
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
        let mut link = None;
        for _ in 0..64 {
            if self.tx.cons().load(Ordering::Acquire) == self.tx.prod().load(Ordering::Relaxed) {
                break;
            }
            // SAFETY: a kick with no data.
            let r = unsafe {
                libc::sendto(self.sock.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0)
            };
            if r < 0 {
                let code = io::Error::last_os_error().raw_os_error();
                if matches!(code, Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR)) {
                    continue;
                }
                link = self.classify(code);
                break;
            }
        }
        self.reclaim();
        match link {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn stats(&self) -> PortStats {
        // struct xdp_statistics: rx_dropped, rx_invalid_descs,
        // tx_invalid_descs, rx_ring_full, ... (counts since the socket
        // was made; older kernels fill only the first three).
        let mut st = [0u64; 6];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `st`.
        let r = unsafe {
            libc::getsockopt(
                self.sock.as_raw_fd(),
                SOL_XDP,
                XDP_STATISTICS,
                st.as_mut_ptr().cast::<libc::c_void>(),
                &mut len,
            )
        };
        let rx_dropped = if r == 0 { st[0] + st[3] } else { 0 };
        PortStats { rx_dropped, ..self.stats }
    }

    fn check_link(&self) -> io::Result<()> {
        self.probe()?;
        index_link(self.iface.ctl.as_raw_fd(), self.iface.ifindex, &self.name)
    }
}
