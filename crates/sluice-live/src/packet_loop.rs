//! One worker's packet loop over its ports.
//!
//! Contract. Reads: frames from the worker's own ports (each port's socket,
//! queue or file belongs to this worker alone). Writes: the data plane
//! replica it is handed, the ports' transmit queues, the capture files, the
//! events going up. Leaves: every frame the data plane emits goes out of
//! the port its number names, with the offload header of the frame it came
//! from (adjusted for headers pushed or popped); frames for the CPU port go
//! up as PacketIns; frames for a port that does not exist, or whose link is
//! down, are dropped and counted.
//!
//! Link state (see `sluice_ports` for what each backend reports): a port
//! whose interface went down is kept but neither polled nor sent to, and
//! asked every [`RETRY`] whether its link is back ([`Port::check_link`]); a
//! port whose interface went away or was renamed is closed and opened anew
//! once an interface of its name is up (a TAP device at once: Sluice
//! creates it). AF_XDP and AF_PACKET ports that are up are asked every
//! [`WATCH`] too.
//! A change is reported once for all workers ([`LinkBoard`]). The other
//! ports never stop.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_dataplane::emit::joined;
use sluice_dataplane::workers::{Waker, WorkerIo};
use sluice_dataplane::{DataPlane, Emit, Level, Metrics, Profile, StageClock, Stop, TraceOut, BATCH};
use sluice_ports::{complete_checksum, link_event, LinkEvent, Port, PortStats, RxBatch, VnetHdr, MAX_FRAME};

use crate::capture::{Captures, Direction};
use crate::{Backend, LiveConfig, Opener, PortSpec, TraceTaps, Up, UpSink, WorkerReport};

/// Largest frame a port receives without offload headers.
pub(crate) const FRAME: usize = 16384;

/// How often a worker looks whether the interface of a port that went down is back.
const RETRY: Duration = Duration::from_millis(100);

/// The longest a worker sleeps in poll with nothing due: a stop set
/// without a wake-up (another worker's failure) is seen within it, and
/// [`WATCH`] is kept. The pool wakes a worker for every control message.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// How often a worker asks the link of an AF_XDP or AF_PACKET port that is
/// up: an XDP socket's poll never reports its interface going down or
/// away, and no socket reports a rename or a lost carrier (frames sent
/// without one are lost in the kernel, without an error).
const WATCH: Duration = Duration::from_secs(1);

/// Batches taken from one port before the next port's turn (keeps ports fair).
const ROUNDS_PER_PORT: usize = 8;

/// The loop's own stages, as `--profile` reports them.
const STAGES: &[&str] = &["receive", "send"];
const RECEIVE: usize = 0;
const SEND: usize = 1;

/// Counters of the live loop, printed at the end.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LiveStats {
    pub received: u64,
    pub sent: u64,
    /// Batches handed to the data plane (`received / batches` frames each).
    pub batches: u64,
    /// Emitted to a port number no interface is attached to.
    pub no_port: u64,
    /// Offloaded segments that had to leave through a port without offload.
    pub gso_dropped: u64,
    /// Emitted to a port whose interface was down or gone.
    pub link_dropped: u64,
    /// Times a port of this worker went down or came back.
    pub link_changes: u64,
    /// PacketIns and notifications the control plane's queue had no room for.
    pub up_dropped: u64,
    /// Frames (and copies) the data plane itself dropped (its
    /// [`DataPlane::stats`]).
    pub program_dropped: u64,
}

impl LiveStats {
    pub(crate) fn plus(&self, o: &LiveStats) -> LiveStats {
        LiveStats {
            received: self.received + o.received,
            sent: self.sent + o.sent,
            batches: self.batches + o.batches,
            no_port: self.no_port + o.no_port,
            gso_dropped: self.gso_dropped + o.gso_dropped,
            link_dropped: self.link_dropped + o.link_dropped,
            link_changes: self.link_changes + o.link_changes,
            up_dropped: self.up_dropped + o.up_dropped,
            program_dropped: self.program_dropped + o.program_dropped,
        }
    }
}

/// Which ports are down or gone, shared by the workers, so that a change
/// is reported once and not once per worker.
#[derive(Default)]
pub(crate) struct LinkBoard {
    links: Mutex<BTreeMap<u32, Link>>,
}

impl LinkBoard {
    /// Records port `port`'s link; true when that is news.
    fn set(&self, port: u32, link: Link) -> bool {
        let mut m = self.links.lock().unwrap_or_else(|e| e.into_inner());
        let was = m.insert(port, link).unwrap_or(Link::Up);
        was != link
    }
}

/// What every worker of one loop shares.
pub(crate) struct Shared<N> {
    pub(crate) captures: Option<Arc<Captures>>,
    pub(crate) report: Arc<Mutex<Vec<WorkerReport>>>,
    pub(crate) stop: Stop,
    pub(crate) board: Arc<LinkBoard>,
    pub(crate) up: Option<UpSink<N>>,
}

impl<N> Shared<N> {
    /// Records a fatal error (the first one wins) and stops every worker.
    fn fail(&self, e: String) {
        self.stop.fail(e);
    }
}

/// The state of one port of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Up,
    /// The interface is down: the port is kept for when it is up again.
    Down,
    /// The interface went away: the port is closed.
    Gone,
}

/// One port of this worker.
struct Slot {
    number: u32,
    opener: Arc<Opener>,
    /// `None` once the interface went away.
    port: Option<Box<dyn Port>>,
    link: Link,
    /// Counters of earlier openings of this port.
    retired: PortStats,
    /// When the port was last tried again (while down).
    last_try: Instant,
    /// Frames were sent since the last flush.
    dirty: bool,
    /// A replayed file that ended.
    finished: bool,
    /// Group-addressed frames received and sent (the rest are unicast).
    casts: Casts,
}

/// Frames to a group address (I/G bit of the destination set), by kind.
#[derive(Debug, Default, Clone, Copy)]
struct Casts {
    rx_multicast: u64,
    rx_broadcast: u64,
    tx_multicast: u64,
    tx_broadcast: u64,
}

/// Whether `frame` goes to a group address: `Some(true)` for broadcast,
/// `Some(false)` for multicast, `None` for unicast (or a runt).
#[inline]
fn group_kind(frame: &[u8]) -> Option<bool> {
    match frame.first() {
        Some(b) if b & 1 != 0 => Some(frame.len() >= 6 && frame[..6] == [0xff; 6]),
        _ => None,
    }
}

impl Slot {
    fn stats(&self) -> PortStats {
        let now = self.port.as_ref().map(|p| p.stats()).unwrap_or_default();
        self.retired.plus(&now)
    }

    /// Closes the port, keeping its counters.
    fn close(&mut self) {
        if let Some(p) = self.port.take() {
            self.retired = self.retired.plus(&p.stats());
        }
    }
}

/// The ports and counters the send path needs, apart from the receive
/// buffer (so that frames borrowed from it can be sent from inside the
/// data plane's output callback).
struct Outputs<N> {
    slots: Vec<Slot>,
    /// Port number -> index in `slots` (`usize::MAX`: none).
    by_number: Vec<usize>,
    /// The slot that carries every port number no slot of its own has
    /// (packet I/O over nanomsg), if any.
    catch_all: Option<usize>,
    /// One per slot (descriptor -1 while down), then the wake-up eventfd.
    pfds: Vec<libc::pollfd>,
    stats: LiveStats,
    clock: StageClock,
    cpu_port: Option<u32>,
    shared: Shared<N>,
    /// A frame whose checksum is completed in software.
    scratch: Vec<u8>,
    /// The data plane's drop count as last read (a data plane swapped in
    /// by the control plane starts again from zero).
    program_dropped_seen: u64,
    /// Where the trace goes, and whether the data plane traces now.
    taps: TraceTaps,
    traced: bool,
    /// This batch's frames dumped (`--dump-packet-data`), received then
    /// sent, one log line each, written out with the batch's trace.
    dumped_in: Vec<String>,
    dumped_out: Vec<String>,
}

/// One worker's I/O: its ports, its receive buffer and its counters.
pub(crate) struct LiveIo<N> {
    rx: RxBatch,
    out: Outputs<N>,
    offload: bool,
    fanout_base: Option<u16>,
    /// Faults ports added at run time inject, as the others.
    faults: Option<crate::Faults>,
    /// Written by the control plane to cut the poll short.
    wake: Arc<OwnedFd>,
    last_retry: Instant,
    /// When the loop started (the clock [`DataPlane::tick`] gets) and last ticked.
    started: Instant,
    last_tick: Option<Instant>,
    replayed: bool,
    /// The receive buffer's pages were given back since the last input.
    rx_released: bool,
    /// This worker's number: the queue it takes of a multi-queue port.
    worker: usize,
}

impl<N> Drop for LiveIo<N> {
    fn drop(&mut self) {
        let ports = self
            .out
            .slots
            .iter()
            .map(|s| {
                let backend = s.port.as_ref().map_or("down", |p| p.backend());
                (s.number, s.opener.spec.iface.clone(), backend, s.stats())
            })
            .collect();
        self.out.shared.report.lock().unwrap_or_else(|e| e.into_inner()).push((self.out.stats, ports));
    }
}

impl<N: Send + 'static> LiveIo<N> {
    pub(crate) fn new(
        ports: Vec<(Arc<Opener>, Box<dyn Port>)>,
        shared: Shared<N>,
        cfg: &LiveConfig,
        fanout_base: Option<u16>,
        worker: usize,
    ) -> Result<LiveIo<N>, String> {
        // SAFETY: plain system call; the descriptor is owned right away.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `efd` is a fresh descriptor nobody else owns.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let mut pfds: Vec<libc::pollfd> =
            ports.iter().map(|(_, p)| libc::pollfd { fd: p.fd(), events: libc::POLLIN, revents: 0 }).collect();
        pfds.push(libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 });
        let mut by_number = vec![usize::MAX; 512];
        let mut catch_all = None;
        let slots: Vec<Slot> = ports
            .into_iter()
            .enumerate()
            .map(|(i, (opener, port))| {
                if opener.spec.backend.carries_every_port() {
                    catch_all = Some(i);
                } else {
                    by_number[opener.spec.port as usize] = i;
                }
                Slot {
                    number: opener.spec.port,
                    opener,
                    port: Some(port),
                    link: Link::Up,
                    retired: PortStats::default(),
                    last_try: Instant::now(),
                    dirty: false,
                    finished: false,
                    casts: Casts::default(),
                }
            })
            .collect();
        let mut clock = StageClock::new(STAGES);
        clock.set(cfg.profile);
        Ok(LiveIo {
            rx: RxBatch::new(if cfg.offload { MAX_FRAME } else { FRAME }),
            out: Outputs {
                slots,
                by_number,
                catch_all,
                pfds,
                stats: LiveStats::default(),
                clock,
                cpu_port: cfg.cpu_port,
                shared,
                scratch: Vec::new(),
                program_dropped_seen: 0,
                taps: cfg.trace.clone(),
                traced: false,
                dumped_in: Vec::new(),
                dumped_out: Vec::new(),
            },
            offload: cfg.offload,
            fanout_base,
            faults: cfg.faults,
            wake,
            last_retry: Instant::now(),
            started: Instant::now(),
            last_tick: None,
            replayed: false,
            rx_released: false,
            worker,
        })
    }

    /// Runs the data plane's `tick`; what it sends carries no offload header.
    fn run_tick<D: DataPlane<Notification = N>>(&mut self, dp: &mut D) {
        self.last_tick = Some(Instant::now());
        let none = VnetHdr::default();
        let out = &mut self.out;
        let now = self.started.elapsed().as_nanos() as u64;
        dp.tick(now, &mut |p, bytes: &[u8]| out.send(p, 0, bytes, bytes.len(), &none));
        self.out.after_batch(dp);
    }

    /// Runs the `n` frames in the receive buffer (from port index `k`)
    /// through the data plane and sends what it emits: as one batch, or,
    /// from a port that carries several ports' frames, one batch per run of
    /// frames that entered on the same port.
    fn run_frames<D: DataPlane<Notification = N>>(&mut self, dp: &mut D, k: usize, n: usize) {
        let own = self.out.slots[k].number;
        let port_of = |rx: &RxBatch, i: usize| rx.port_of(i).unwrap_or(own);
        if let Some(c) = &self.out.shared.captures {
            for i in 0..n {
                c.record(port_of(&self.rx, i), Direction::In, self.rx.frame(i).0);
            }
        }
        if self.out.dumps() {
            for i in 0..n {
                let line =
                    dump_line("Received", self.rx.frame(i).0, port_of(&self.rx, i), self.out.taps.dump_packet_data);
                self.out.dumped_in.push(line);
            }
        }
        let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
        for (i, f) in frames.iter_mut().enumerate().take(n) {
            *f = self.rx.frame(i).0;
        }
        let mut start = 0;
        while start < n {
            let number = port_of(&self.rx, start);
            let end = (start + 1..n).find(|&i| port_of(&self.rx, i) != number).unwrap_or(n);
            let mut partial = 0u128;
            for i in start..end {
                partial |= u128::from(self.rx.frame(i).1.needs_csum()) << (i - start);
            }
            if partial != 0 {
                dp.partial_checksums(partial);
            }
            self.out.stats.batches += 1;
            let mut to = ToPorts { rx: &self.rx, out: &mut self.out, start };
            dp.process_batch_to(number, &frames[start..end], &mut to);
            self.out.after_batch(dp);
            start = end;
        }
    }
}

/// Where the frames a batch emits go: to the ports, with the length and
/// offload header of the input frame each came from.
struct ToPorts<'a, N> {
    rx: &'a RxBatch,
    out: &'a mut Outputs<N>,
    /// The batch's first frame in the receive buffer.
    start: usize,
}

impl<N> Emit for ToPorts<'_, N> {
    fn emit(&mut self, i: usize, p: u32, frame: &[u8]) {
        self.emit_parts(i, p, frame, &[]);
    }

    fn emit_parts(&mut self, i: usize, p: u32, head: &[u8], tail: &[u8]) {
        let k = self.start + i;
        let (input, vnet) = self.rx.frame(k);
        self.out.send_parts(p, self.rx.origin_of(k), head, tail, input.len(), vnet);
    }
}

/// bmv2's `--dump-packet-data` line: `Received packet of length L on port
/// P: HEX` (or `Sending`), the frame's first `max` bytes in lowercase hex.
fn dump_line(verb: &str, frame: &[u8], port: u32, max: usize) -> String {
    use std::fmt::Write;
    let mut s = format!("{verb} packet of length {} on port {port}: ", frame.len());
    for b in &frame[..frame.len().min(max)] {
        let _ = write!(s, "{b:02x}");
    }
    s
}

impl<N> Outputs<N> {
    /// Whether frames are dumped to the log now (`--dump-packet-data` with
    /// a log at info or below).
    fn dumps(&self) -> bool {
        self.taps.dump_packet_data > 0 && self.taps.log_level.is_some_and(|l| l <= Level::Info)
    }

    /// Sends one emitted frame to port number `p`; `in_len` and `vnet` are
    /// the length and offload header of the frame it came from.
    fn send(&mut self, p: u32, origin: u64, bytes: &[u8], in_len: usize, vnet: &VnetHdr) {
        self.send_parts(p, origin, bytes, &[], in_len, vnet);
    }

    /// [`Outputs::send`] of the frame `head` followed by `tail`: the port
    /// copies the parts into its transmit buffer (what needs the frame
    /// whole, a packet-in, a checksum to finish, a dump or a capture,
    /// joins them first).
    fn send_parts(&mut self, p: u32, origin: u64, head: &[u8], tail: &[u8], in_len: usize, vnet: &VnetHdr) {
        let len = head.len() + tail.len();
        if Some(p) == self.cpu_port {
            if let Some(up) = &self.shared.up {
                let mut whole = Vec::with_capacity(len);
                whole.extend_from_slice(head);
                whole.extend_from_slice(tail);
                if !up(Up::PacketIn(whole)) {
                    self.stats.up_dropped += 1;
                }
            }
            return;
        }
        let Some(k) = self.by_number.get(p as usize).copied().filter(|k| *k != usize::MAX).or(self.catch_all) else {
            self.stats.no_port += 1;
            return;
        };
        let t = self.clock.start();
        let dump = self.dumps();
        let slot = &mut self.slots[k];
        let (Link::Up, Some(port)) = (slot.link, slot.port.as_mut()) else {
            self.stats.link_dropped += 1;
            return;
        };
        let v = vnet.shifted(len as isize - in_len as isize);
        // Without offload on the way out: finish the checksum here; a segment cannot go.
        let no_offload = !port.offload();
        let (mut head, mut tail) = (head, tail);
        if no_offload && (v.is_gso() || v.needs_csum()) {
            self.scratch.clear();
            self.scratch.extend_from_slice(head);
            self.scratch.extend_from_slice(tail);
            if v.is_gso() || !complete_checksum(&mut self.scratch, &v) {
                self.stats.gso_dropped += 1;
                return;
            }
            (head, tail) = (&self.scratch, &[]);
        }
        let v = if no_offload { VnetHdr::default() } else { v };
        match port.send_parts_to(p, origin, head, tail, &v) {
            Ok(()) => {
                slot.dirty = true;
                self.stats.sent += 1;
                let kind = if head.len() >= 6 { group_kind(head) } else { joined(head, tail, group_kind) };
                match kind {
                    Some(true) => slot.casts.tx_broadcast += 1,
                    Some(false) => slot.casts.tx_multicast += 1,
                    None => {}
                }
                if dump || self.shared.captures.is_some() {
                    joined(head, tail, |frame| {
                        if dump {
                            self.dumped_out.push(dump_line("Sending", frame, p, self.taps.dump_packet_data));
                        }
                        if let Some(c) = &self.shared.captures {
                            c.record(p, Direction::Out, frame);
                        }
                    });
                }
            }
            Err(e) => match link_event(&e) {
                Some(ev) => {
                    self.stats.link_dropped += 1;
                    self.link_lost(k, ev, &e.to_string());
                }
                None => self.shared.fail(format!("port {p}: {e}")),
            },
        }
        self.clock.record(SEND, t, 1);
    }

    /// After a batch: the data plane's notifications and log go out.
    fn after_batch<D: DataPlane<Notification = N>>(&mut self, dp: &mut D) {
        let dropped = dp.stats().dropped;
        let seen = std::mem::replace(&mut self.program_dropped_seen, dropped);
        self.stats.program_dropped += dropped.checked_sub(seen).unwrap_or(dropped);
        let (up, stats) = (&self.shared.up, &mut self.stats);
        dp.drain_notifications(&mut |n| {
            if !up.as_ref().is_some_and(|u| u(Up::Notification(n))) {
                stats.up_dropped += 1;
            }
        });
        if self.traced || !self.dumped_in.is_empty() || !self.dumped_out.is_empty() {
            let mut out = BatchTrace::new(&self.taps);
            for line in self.dumped_in.drain(..) {
                out.log(Level::Info, &line);
            }
            if self.traced {
                dp.drain_trace(&mut out);
            }
            for line in self.dumped_out.drain(..) {
                out.log(Level::Info, &line);
            }
            out.finish();
        }
    }

    /// Sends what the ports queued.
    fn flush(&mut self) {
        let t = self.clock.start();
        for k in 0..self.slots.len() {
            let slot = &mut self.slots[k];
            if !std::mem::take(&mut slot.dirty) {
                continue;
            }
            let Some(port) = slot.port.as_mut() else { continue };
            if let Err(e) = port.flush() {
                match link_event(&e) {
                    Some(ev) => self.link_lost(k, ev, &e.to_string()),
                    None => {
                        let n = slot.number;
                        self.shared.fail(format!("port {n}: {e}"));
                    }
                }
            }
        }
        self.clock.extend(SEND, t);
    }

    /// Port index `k` met its interface down or gone: it stops being
    /// polled and sent to (and, gone, is closed).
    fn link_lost(&mut self, k: usize, ev: LinkEvent, why: &str) {
        let slot = &mut self.slots[k];
        let was = slot.link;
        slot.link = match ev {
            LinkEvent::Down => Link::Down,
            LinkEvent::Gone => Link::Gone,
        };
        if slot.link == Link::Gone {
            slot.close();
        }
        slot.last_try = Instant::now();
        slot.dirty = false;
        self.pfds[k].fd = -1;
        if was == Link::Up {
            self.stats.link_changes += 1;
        }
        if self.shared.board.set(slot.number, slot.link) {
            crate::log::report(format!(
                "sluice: port {} ({}): {why}; its frames are dropped until it is back",
                slot.number, slot.opener.spec.iface
            ));
        }
    }

    /// Brings back the ports whose interfaces are up again: a port that
    /// was down when its link says so, a port whose interface went away
    /// once an interface of that name is up (opened anew).
    fn retry_down_ports(&mut self, worker: usize) {
        for k in 0..self.slots.len() {
            let slot = &mut self.slots[k];
            let watched = matches!(slot.opener.spec.backend, Backend::AfXdp | Backend::AfPacket | Backend::Memory);
            if slot.link == Link::Up && watched && slot.last_try.elapsed() >= WATCH {
                // What no socket reports (see WATCH): ask.
                slot.last_try = Instant::now();
                if let Some(Err(e)) = slot.port.as_ref().map(|p| p.check_link()) {
                    if let Some(ev) = link_event(&e) {
                        self.link_lost(k, ev, &e.to_string());
                    }
                }
                continue;
            }
            if slot.link == Link::Up || slot.last_try.elapsed() < RETRY {
                continue;
            }
            slot.last_try = Instant::now();
            if slot.link == Link::Down {
                match slot.port.as_ref().map(|p| p.check_link()) {
                    Some(Ok(())) => {}
                    Some(Err(e)) if link_event(&e) == Some(LinkEvent::Gone) => {
                        self.link_lost(k, LinkEvent::Gone, &e.to_string());
                        continue;
                    }
                    _ => continue,
                }
            } else {
                if !slot.opener.iface_up() {
                    continue;
                }
                let Ok(p) = slot.opener.open(worker) else { continue };
                slot.port = Some(p);
            }
            slot.link = Link::Up;
            self.pfds[k].fd = slot.port.as_ref().map_or(-1, |p| p.fd());
            self.stats.link_changes += 1;
            if self.shared.board.set(slot.number, Link::Up) {
                crate::log::report(format!(
                    "sluice: port {} ({}): the interface is back",
                    slot.number, slot.opener.spec.iface
                ));
            }
        }
    }
}

impl<D: DataPlane> WorkerIo<D> for LiveIo<D::Notification> {
    fn inject(&mut self, dp: &mut D, port: u32, frame: &[u8]) {
        let none = VnetHdr::default();
        let out = &mut self.out;
        dp.process_batch(port, &[frame], &mut |_, p, bytes: &[u8]| out.send(p, 0, bytes, frame.len(), &none));
        self.out.after_batch(dp);
        self.out.flush();
    }

    fn add_port(&mut self, number: u32, iface: &str) -> Result<(), String> {
        if number >= 511 {
            return Err(format!("port {number} is out of range (0-510)"));
        }
        if self.out.catch_all.is_some() {
            // As bmv2: the peer's frames name their ports.
            return Err("with packet I/O over nanomsg or gRPC, ports come with the peer's frames".into());
        }
        if self.out.slots.iter().any(|s| s.number == number) {
            return Err(format!("port {number} exists"));
        }
        let opener = Arc::new(Opener {
            spec: PortSpec { port: number, iface: iface.to_string(), backend: Backend::AfPacket },
            offload: self.offload,
            fanout: self.fanout_base.map(|b| b.wrapping_add(number as u16)),
            workers: 1,
            xdp: Mutex::new(None),
            faults: self.faults,
            wire: None,
            channel: None,
        });
        let port = opener.open(self.worker).map_err(|e| e.to_string())?;
        if let Some(c) = &self.out.shared.captures {
            c.add(number, iface)?;
        }
        let fd = port.fd();
        self.out.slots.push(Slot {
            number,
            opener,
            port: Some(port),
            link: Link::Up,
            retired: PortStats::default(),
            last_try: Instant::now(),
            dirty: false,
            finished: false,
            casts: Casts::default(),
        });
        // The wake-up descriptor stays last.
        let at = self.out.pfds.len() - 1;
        self.out.pfds.insert(at, libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        self.out.by_number[number as usize] = self.out.slots.len() - 1;
        self.out.shared.board.set(number, Link::Up);
        crate::log::report(format!("port {number}: {iface} via af_packet (added at run time)"));
        Ok(())
    }

    fn remove_port(&mut self, number: u32) -> Result<(), String> {
        let Some(k) = self.out.slots.iter().position(|s| s.number == number) else {
            return Err(format!("no port {number}"));
        };
        self.out.slots.remove(k);
        self.out.pfds.remove(k);
        self.out.by_number.fill(usize::MAX);
        self.out.catch_all = None;
        for (i, s) in self.out.slots.iter().enumerate() {
            if s.opener.spec.backend.carries_every_port() {
                self.out.catch_all = Some(i);
            } else {
                self.out.by_number[s.number as usize] = i;
            }
        }
        Ok(())
    }

    fn waker(&self) -> Option<Waker> {
        let fd = self.wake.clone();
        Some(Arc::new(move || {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd this closure keeps open.
            unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }))
    }

    fn set_profiling(&mut self, on: bool) {
        self.out.clock.set(on);
    }

    fn add_profile(&self, to: &mut Profile) {
        self.out.clock.add_to(to);
    }

    fn metrics(&self, worker: usize, to: &mut Metrics) {
        let w = worker.to_string();
        let s = &self.out.stats;
        let wl = [("worker", w.as_str())];
        to.counter("sluice_worker_received_packets_total", "Frames a worker received from its ports.", &wl, s.received);
        to.counter("sluice_worker_sent_packets_total", "Frames a worker sent to its ports.", &wl, s.sent);
        to.counter("sluice_worker_batches_total", "Batches a worker handed to the data plane.", &wl, s.batches);
        let drops = [
            ("data_plane", s.program_dropped),
            ("no_port", s.no_port),
            ("link_down", s.link_dropped),
            ("offload", s.gso_dropped),
            ("control_queue_full", s.up_dropped),
        ];
        for (reason, n) in drops {
            to.counter(
                "sluice_dropped_packets_total",
                "Frames dropped after they were received, by reason: the data plane dropped them, no port has \
                 their number, their port's link was down, a segment to a port without offload, or the queue \
                 toward the control plane was full.",
                &[("reason", reason)],
                n,
            );
        }
        to.counter("sluice_link_changes_total", "Times a port's link went down or came back.", &[], s.link_changes);
        for slot in &self.out.slots {
            let p = slot.stats();
            let (port, iface) = (slot.number.to_string(), slot.opener.spec.iface.as_str());
            let l = [("port", port.as_str()), ("interface", iface)];
            to.counter("sluice_port_received_packets_total", "Frames received on a port.", &l, p.rx_packets);
            to.counter("sluice_port_received_bytes_total", "Bytes received on a port.", &l, p.rx_bytes);
            to.counter("sluice_port_sent_packets_total", "Frames sent on a port.", &l, p.tx_packets);
            to.counter("sluice_port_sent_bytes_total", "Bytes sent on a port.", &l, p.tx_bytes);
            let c = &slot.casts;
            to.counter(
                "sluice_port_received_multicast_packets_total",
                "Frames received on a port to a multicast address (broadcast not included).",
                &l,
                c.rx_multicast,
            );
            to.counter(
                "sluice_port_received_broadcast_packets_total",
                "Frames received on a port to the broadcast address.",
                &l,
                c.rx_broadcast,
            );
            to.counter(
                "sluice_port_sent_multicast_packets_total",
                "Frames sent on a port to a multicast address (broadcast not included).",
                &l,
                c.tx_multicast,
            );
            to.counter(
                "sluice_port_sent_broadcast_packets_total",
                "Frames sent on a port to the broadcast address.",
                &l,
                c.tx_broadcast,
            );
            to.counter(
                "sluice_port_invalid_frames_total",
                "Messages a port carrying several ports' frames could not read as a frame.",
                &l,
                p.rx_invalid,
            );
            let drop_help = "Frames a port lost, by reason: the kernel dropped them before they were read \
                             (socket buffer or receive ring full), or they could not be sent.";
            let kernel = [("port", port.as_str()), ("interface", iface), ("reason", "kernel")];
            to.counter("sluice_port_dropped_packets_total", drop_help, &kernel, p.rx_dropped);
            let send = [("port", port.as_str()), ("interface", iface), ("reason", "send_failed")];
            to.counter("sluice_port_dropped_packets_total", drop_help, &send, p.tx_dropped);
            // Up when every worker has it up: a gauge per worker would sum.
            if worker == 0 {
                let up = if slot.link == Link::Up { 1.0 } else { 0.0 };
                to.gauge("sluice_port_up", "Whether a port's link is up (1) or down or gone (0).", &l, up);
            }
        }
    }

    fn run_batch(&mut self, dp: &mut D) -> bool {
        if self.out.shared.stop.is_set() {
            return false;
        }
        // Asked again every batch while wanted: a data plane the control
        // plane swapped in starts untraced.
        let want = self.out.taps.wanted();
        if want || self.out.traced {
            dp.set_tracing(want);
            self.out.traced = want;
        }
        if self.last_retry.elapsed() >= RETRY {
            self.last_retry = Instant::now();
            self.out.retry_down_ports(self.worker);
        }
        // Ticks: once at start, then as often as the data plane asks.
        let interval = dp.tick_interval();
        if self.last_tick.is_none_or(|t| interval.is_some_and(|d| t.elapsed() >= d)) {
            self.run_tick(dp);
            self.out.flush();
        }
        // Sleep until a frame, a control message (the pool writes the
        // eventfd) or the next thing due: a tick the data plane asked for,
        // a down port to try again, the periodic link watch.
        let mut wait = IDLE_WAIT;
        if let (Some(d), Some(t)) = (interval, self.last_tick) {
            wait = wait.min(d.saturating_sub(t.elapsed()));
        }
        if self.out.slots.iter().any(|s| s.link != Link::Up) {
            wait = wait.min(RETRY.saturating_sub(self.last_retry.elapsed()));
        }
        // To the microsecond (a paced queue's next departure may be sooner
        // than a millisecond away).
        let timeout = libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos().into() };
        // SAFETY: `pfds` is a live array of pollfd, `timeout` a live timespec, no signal mask.
        let r = unsafe {
            libc::ppoll(self.out.pfds.as_mut_ptr(), self.out.pfds.len() as libc::nfds_t, &timeout, std::ptr::null())
        };
        if r <= 0 {
            if r == 0 && wait == IDLE_WAIT && !self.rx_released {
                // A whole idle wait without input: the buffers' pages go back.
                self.rx.release_memory();
                dp.release_memory();
                for slot in &mut self.out.slots {
                    if let Some(p) = slot.port.as_mut() {
                        p.release_memory();
                    }
                }
                // And what the allocator keeps of freed blocks (glibc keeps
                // them resident in its arenas until asked).
                #[cfg(all(target_os = "linux", target_env = "gnu"))]
                // SAFETY: plain library call; it only returns free memory to the kernel.
                unsafe {
                    libc::malloc_trim(0);
                }
                self.rx_released = true;
            }
            return true;
        }
        self.rx_released = false;
        let nports = self.out.slots.len();
        if self.out.pfds[nports].revents != 0 {
            // The control plane woke us: reset the eventfd; its message is handled after this batch.
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from our eventfd.
            unsafe { libc::read(self.out.pfds[nports].fd, (&mut v as *mut u64).cast(), 8) };
        }
        for k in 0..nports {
            if self.out.pfds[k].revents == 0 || self.out.pfds[k].fd < 0 {
                continue;
            }
            for _ in 0..ROUNDS_PER_PORT {
                let t = self.out.clock.start();
                let Some(port) = self.out.slots[k].port.as_mut() else { break };
                self.rx.untag();
                let n = match port.recv(&mut self.rx) {
                    Ok(n) => n,
                    Err(e) => match link_event(&e) {
                        Some(ev) => {
                            self.out.link_lost(k, ev, &e.to_string());
                            break;
                        }
                        None => {
                            self.out.shared.fail(e.to_string());
                            return false;
                        }
                    },
                };
                self.out.clock.record(RECEIVE, t, n);
                if n == 0 {
                    if port.finished() {
                        self.out.slots[k].finished = true;
                        // poll skips negative descriptors.
                        self.out.pfds[k].fd = -1;
                        if !self.replayed && self.out.slots.iter().all(|s| s.finished) {
                            self.replayed = true;
                            crate::log::report("sluice: every input file has been replayed".into());
                        }
                    } else if self.out.pfds[k].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                        // An error condition that no receive reported: ask the link.
                        if let Err(e) = port.check_link() {
                            if let Some(ev) = link_event(&e) {
                                self.out.link_lost(k, ev, &e.to_string());
                            }
                        }
                    }
                    break;
                }
                self.out.stats.received += n as u64;
                let casts = &mut self.out.slots[k].casts;
                for i in 0..n {
                    match group_kind(self.rx.frame(i).0) {
                        Some(true) => casts.rx_broadcast += 1,
                        Some(false) => casts.rx_multicast += 1,
                        None => {}
                    }
                }
                self.run_frames(dp, k, n);
                // What the data plane holds that is due now (queued packets
                // whose rate lets them leave) goes out with this batch's
                // frames, before the next batch can find their queue full.
                if dp.tick_interval() == Some(Duration::ZERO) {
                    self.run_tick(dp);
                }
                if n < BATCH {
                    break;
                }
            }
        }
        self.out.flush();
        !self.out.shared.stop.is_set()
    }
}

/// One batch's trace on its way out: log lines with bmv2's prefix (time,
/// `bmv2`, level, thread) in one chunk for the logger, event messages in
/// one chunk for the publisher.
struct BatchTrace<'a> {
    taps: &'a TraceTaps,
    /// `[HH:MM:SS.mmm] [bmv2] `, local time, taken once for the batch.
    stamp: String,
    thread: i64,
    text: String,
    events: Vec<Vec<u8>>,
}

impl<'a> BatchTrace<'a> {
    fn new(taps: &'a TraceTaps) -> BatchTrace<'a> {
        // SAFETY: plain system call.
        let thread = unsafe { libc::gettid() } as i64;
        BatchTrace { taps, stamp: clock_stamp(), thread, text: String::new(), events: Vec::new() }
    }

    fn finish(self) {
        if !self.text.is_empty() {
            crate::log::log(self.text);
        }
        if let (Some(p), false) = (&self.taps.events, self.events.is_empty()) {
            p.publish(self.events.iter().map(|m| m.as_slice()));
        }
    }
}

impl TraceOut for BatchTrace<'_> {
    fn log_level(&self) -> Option<Level> {
        self.taps.log_level
    }

    fn log(&mut self, level: Level, line: &str) {
        use std::fmt::Write;
        let _ = writeln!(self.text, "{}[{}] [thread {}] {line}", self.stamp, level.letter(), self.thread);
    }

    fn events(&self) -> Option<u64> {
        self.taps.events.as_ref().filter(|p| p.has_subscribers()).map(|_| self.taps.device_id)
    }

    fn event(&mut self, message: &[u8]) {
        self.events.push(message.to_vec());
    }
}

/// `[HH:MM:SS.mmm] [bmv2] `: the start of bmv2's log lines, local time now.
fn clock_stamp() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r writes into the `tm` we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    format!("[{:02}:{:02}:{:02}.{:03}] [bmv2] ", tm.tm_hour, tm.tm_min, tm.tm_sec, now.subsec_millis())
}
