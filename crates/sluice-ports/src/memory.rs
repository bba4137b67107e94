//! Ports over frames in memory, which never touch the kernel: for the
//! tests of what drives ports (the live loop) and of port wrappers, and
//! for the traffic the bench replays through a faulty port.
//!
//! Two kinds, one type ([`MemoryPort`]):
//! - a port of its own ([`MemoryPort::new`]): what [`MemoryPort::push`]
//!   queued is received, in batches of at most [`crate::BATCH`], and the
//!   port is finished once it is drained, as a replayed file is;
//! - the port end of a [`MemoryWire`] ([`MemoryWire::port`]): the test
//!   holds the wire's other end, pushes frames in and takes what the port
//!   sent, at any time from any thread, and sets the link up, down or
//!   gone; the port is never finished, and its descriptor (an eventfd) is
//!   readable while frames wait, so it is polled as a socket is.
//!
//! Concurrency invariants (this file owns them): a wire's queues and link
//! state sit behind one mutex; the eventfd is written and reset under it,
//! so a frame pushed while a port drains the queue is never left without
//! its wake-up. Several port ends of one wire (one per worker) share the
//! queue: each frame is received by one of them.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{link_error, LinkEvent, Port, PortStats, RxBatch, VnetHdr};

/// A wire's link, as its port ends see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireLink {
    Up,
    /// Down: receives and sends fail with a link error (`LinkEvent::Down`).
    Down,
    /// Gone: as an interface deleted (`LinkEvent::Gone`); a port end made
    /// after it is up again works.
    Gone,
}

struct WireState {
    queued: VecDeque<Vec<u8>>,
    sent: Vec<Vec<u8>>,
    link: WireLink,
}

struct Wire {
    name: String,
    state: Mutex<WireState>,
    /// Readable while frames wait (a wire's: nobody polls a port of its own).
    efd: OwnedFd,
    signals: bool,
}

/// The far end of an in-memory link (see the module documentation).
#[derive(Clone)]
pub struct MemoryWire(Arc<Wire>);

impl std::fmt::Debug for MemoryWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryWire").field("name", &self.0.name).finish()
    }
}

impl MemoryWire {
    /// A wire named `name` (the name its port ends report), link up.
    pub fn new(name: &str) -> io::Result<MemoryWire> {
        MemoryWire::make(name, true)
    }

    fn make(name: &str, signals: bool) -> io::Result<MemoryWire> {
        // SAFETY: plain system call; the descriptor is owned at once.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let efd = unsafe { OwnedFd::from_raw_fd(fd) };
        let state = WireState { queued: VecDeque::new(), sent: Vec::new(), link: WireLink::Up };
        Ok(MemoryWire(Arc::new(Wire { name: name.to_string(), state: Mutex::new(state), efd, signals })))
    }

    /// The wire's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    fn lock(&self) -> MutexGuard<'_, WireState> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `frame` to be received by a port end.
    pub fn push(&self, frame: &[u8]) {
        let mut s = self.lock();
        s.queued.push_back(frame.to_vec());
        if self.0.signals {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to the wire's eventfd.
            unsafe { libc::write(self.0.efd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// Frames still waiting to be received.
    pub fn queued(&self) -> usize {
        self.lock().queued.len()
    }

    /// Takes the frames the port ends sent so far.
    pub fn take_sent(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.lock().sent)
    }

    /// Sets the link its port ends see.
    pub fn set_link(&self, link: WireLink) {
        self.lock().link = link;
    }

    /// The link its port ends see.
    pub fn link(&self) -> WireLink {
        self.lock().link
    }

    /// A port end of this wire.
    pub fn port(&self) -> MemoryPort {
        MemoryPort { name: self.0.name.clone(), wire: self.clone(), stats: PortStats::default(), wired: true }
    }
}

/// A port over frames in memory (see the module documentation).
pub struct MemoryPort {
    name: String,
    wire: MemoryWire,
    stats: PortStats,
    /// The port end of a wire (never finished), rather than a port of its own.
    wired: bool,
}

impl MemoryPort {
    /// A port of its own, finished once what was pushed is received.
    pub fn new(name: &str) -> MemoryPort {
        let wire = MemoryWire::make(name, false).expect("an eventfd for an in-memory port");
        MemoryPort { name: name.to_string(), wire, stats: PortStats::default(), wired: false }
    }

    /// Queues a frame to be received.
    pub fn push(&mut self, frame: &[u8]) {
        self.wire.push(frame);
    }

    /// Whether every pushed frame was received.
    pub fn is_drained(&self) -> bool {
        self.wire.queued() == 0
    }

    /// Frames sent so far (a copy).
    pub fn sent(&self) -> Vec<Vec<u8>> {
        self.wire.lock().sent.clone()
    }

    /// The link error of a link that is not up.
    fn link_error(&self, link: WireLink) -> Option<io::Error> {
        match link {
            WireLink::Up => None,
            WireLink::Down => Some(link_error(&self.name, LinkEvent::Down, None)),
            WireLink::Gone => Some(link_error(&self.name, LinkEvent::Gone, None)),
        }
    }
}

impl Port for MemoryPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "memory"
    }

    fn offload(&self) -> bool {
        false
    }

    fn fd(&self) -> RawFd {
        self.wire.0.efd.as_raw_fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let mut s = self.wire.lock();
        if let Some(e) = self.link_error(s.link) {
            return Err(e);
        }
        let n = s.queued.len().min(batch.capacity());
        for i in 0..n {
            let f = s.queued.pop_front().expect("counted above");
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += f.len() as u64;
            batch.put(i, &f, &VnetHdr::default());
        }
        batch.set_len(n);
        if s.queued.is_empty() && self.wire.0.signals {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from the wire's eventfd (resets it).
            unsafe { libc::read(self.wire.0.efd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8], _vnet: &VnetHdr) -> io::Result<()> {
        let mut s = self.wire.lock();
        if let Some(e) = self.link_error(s.link) {
            return Err(e);
        }
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame.len() as u64;
        s.sent.push(frame.to_vec());
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn finished(&self) -> bool {
        !self.wired && self.is_drained()
    }

    fn check_link(&self) -> io::Result<()> {
        match self.link_error(self.wire.link()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wire_carries_frames_both_ways_and_its_link_state() {
        let wire = MemoryWire::new("mem0").unwrap();
        let mut port = wire.port();
        let mut batch = RxBatch::new(2048);
        let readable = |p: &MemoryPort| {
            let mut pfd = libc::pollfd { fd: p.fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one live pollfd, no wait.
            unsafe { libc::poll(&mut pfd, 1, 0) == 1 }
        };
        assert!(!readable(&port));
        for i in 0..200u8 {
            wire.push(&[i; 60]);
        }
        assert!(readable(&port), "frames wait: the descriptor says so");
        assert_eq!(port.recv(&mut batch).unwrap(), crate::BATCH);
        assert_eq!(port.recv(&mut batch).unwrap(), 200 - crate::BATCH);
        assert!(!readable(&port) && !port.finished(), "drained, but a wire's port never ends");
        port.send(&[9; 60], &VnetHdr::default()).unwrap();
        assert_eq!(wire.take_sent(), vec![vec![9; 60]]);
        wire.set_link(WireLink::Down);
        assert_eq!(crate::link_event(&port.check_link().unwrap_err()), Some(LinkEvent::Down));
        assert!(port.send(&[1; 60], &VnetHdr::default()).is_err());
        wire.set_link(WireLink::Gone);
        assert_eq!(crate::link_event(&port.recv(&mut batch).unwrap_err()), Some(LinkEvent::Gone));
        wire.set_link(WireLink::Up);
        assert!(port.check_link().is_ok());
        let mut own = MemoryPort::new("own");
        own.push(&[1; 60]);
        assert!(!own.finished());
        assert_eq!(own.recv(&mut batch).unwrap(), 1);
        assert!(own.finished(), "a port of its own ends once drained");
    }
}
