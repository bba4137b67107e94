//! Ports fed by another part of the program instead of an interface: a
//! producer (bmv2's packet I/O over gRPC, `--dp-grpc-server-addr`) hands
//! in frames naming their port, and frames the pipeline sends go to the
//! consumer it set. Like [`crate::packet_in`], one port object carries
//! every port number: [`Port::recv`] tags each frame with its port, and
//! [`Port::send_to`] sends with one.
//!
//! Each frame in carries an origin (a non-zero number the producer chose,
//! such as a request id) and the frames the pipeline makes of it go out
//! with the same origin ([`crate::RxBatch::origin_of`]), so a producer can
//! tell which of its frames an output answers.
//!
//! Concurrency invariants (this file owns them):
//! - the inbox holds at most [`INBOX`] frames; [`ChannelPorts::push`]
//!   refuses past that and the producer waits for room
//!   ([`ChannelPorts::room`], notified by the worker as it takes frames
//!   out of a full inbox), so nothing handed in is dropped;
//! - the inbox's readiness is an eventfd, readable exactly while it holds a
//!   frame (set by `push` when it puts the first, reset by the worker when
//!   it takes the last, both under the inbox's lock);
//! - the consumer is called on the worker's thread and must not block: it
//!   queues or refuses (false), and a refused frame is counted as
//!   `tx_dropped`, as is a frame sent while no consumer is set or to a port
//!   set down.

use std::collections::{BTreeSet, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use crate::{Port, PortStats, RxBatch, VnetHdr, BATCH};

/// Frames waiting for the worker, at most.
pub const INBOX: usize = 4096;

/// Where frames the pipeline sends go: `(port, origin, frame)`; false when
/// the consumer refused it (its queue is full).
pub type Consumer = Box<dyn Fn(u32, u64, &[u8]) -> bool + Send + Sync>;

/// Something that waits for room in the inbox (the producer's waker).
pub type RoomWaker = Box<dyn Fn() + Send + Sync>;

struct Inner {
    name: String,
    inbox: Mutex<VecDeque<(u32, u64, Vec<u8>)>>,
    ready: OwnedFd,
    consumer: Mutex<Option<Consumer>>,
    room: Mutex<Option<RoomWaker>>,
    /// Ports set down: frames to them are dropped.
    down: Mutex<BTreeSet<u32>>,
}

/// The producer's and consumer's handle on the ports (cheap to clone).
#[derive(Clone)]
pub struct ChannelPorts {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ChannelPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelPorts").field("name", &self.inner.name).finish()
    }
}

impl ChannelPorts {
    /// Ports named `name` in reports (the producer's address).
    pub fn new(name: &str) -> io::Result<ChannelPorts> {
        // SAFETY: plain system call; the descriptor is owned right away.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ChannelPorts {
            inner: Arc::new(Inner {
                name: name.to_string(),
                inbox: Mutex::new(VecDeque::new()),
                // SAFETY: `efd` is a fresh descriptor nobody else owns.
                ready: unsafe { OwnedFd::from_raw_fd(efd) },
                consumer: Mutex::new(None),
                room: Mutex::new(None),
                down: Mutex::new(BTreeSet::new()),
            }),
        })
    }

    /// Hands in a frame entering on `port` (0 to 510) with `origin`; gives
    /// the frame back when the inbox is full (wait for
    /// [`ChannelPorts::room`] and try again).
    pub fn push(&self, port: u32, origin: u64, frame: Vec<u8>) -> Result<(), Vec<u8>> {
        let mut inbox = self.inner.inbox.lock().unwrap_or_else(|e| e.into_inner());
        if inbox.len() >= INBOX {
            return Err(frame);
        }
        if inbox.is_empty() {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our eventfd.
            unsafe { libc::write(self.inner.ready.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
        inbox.push_back((port, origin, frame));
        Ok(())
    }

    /// Whether every frame handed in was taken by the worker.
    pub fn inbox_is_empty(&self) -> bool {
        self.inner.inbox.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// Sets what is called when a full inbox has room again.
    pub fn room(&self, waker: Option<RoomWaker>) {
        *self.inner.room.lock().unwrap_or_else(|e| e.into_inner()) = waker;
    }

    /// Sets (or, `None`, removes) the consumer of the frames sent.
    pub fn set_consumer(&self, consumer: Option<Consumer>) {
        *self.inner.consumer.lock().unwrap_or_else(|e| e.into_inner()) = consumer;
    }

    /// Sets port `port` up or down (a down port's frames are dropped).
    pub fn set_port_up(&self, port: u32, up: bool) {
        let mut down = self.inner.down.lock().unwrap_or_else(|e| e.into_inner());
        if up {
            down.remove(&port);
        } else {
            down.insert(port);
        }
    }

    /// The port object a worker polls.
    pub fn port(&self) -> ChannelPort {
        ChannelPort { ports: self.clone(), stats: PortStats::default() }
    }
}

/// The worker's side of [`ChannelPorts`].
pub struct ChannelPort {
    ports: ChannelPorts,
    stats: PortStats,
}

impl Port for ChannelPort {
    fn name(&self) -> &str {
        &self.ports.inner.name
    }

    fn backend(&self) -> &'static str {
        "grpc"
    }

    fn offload(&self) -> bool {
        false
    }

    fn fd(&self) -> RawFd {
        self.ports.inner.ready.as_raw_fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        let inner = &self.ports.inner;
        let mut inbox = inner.inbox.lock().unwrap_or_else(|e| e.into_inner());
        let was_full = inbox.len() >= INBOX;
        let mut n = 0;
        while n < BATCH {
            let Some((port, origin, frame)) = inbox.pop_front() else { break };
            batch.put(n, &frame, &VnetHdr::default());
            batch.tag(n, port);
            batch.set_origin(n, origin);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += frame.len() as u64;
            n += 1;
        }
        if inbox.is_empty() {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
            unsafe { libc::read(inner.ready.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        }
        drop(inbox);
        if was_full && n > 0 {
            if let Some(w) = inner.room.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                w();
            }
        }
        batch.set_len(n);
        Ok(n)
    }

    fn send(&mut self, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        let _ = (frame, vnet);
        Err(io::Error::new(io::ErrorKind::InvalidInput, "channel ports send frames with their port (send_to)"))
    }

    fn send_to(&mut self, port: u32, origin: u64, frame: &[u8], _vnet: &VnetHdr) -> io::Result<()> {
        let inner = &self.ports.inner;
        let up = !inner.down.lock().unwrap_or_else(|e| e.into_inner()).contains(&port);
        let sent = up
            && inner
                .consumer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|c| c(port, origin, frame));
        if sent {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += frame.len() as u64;
        } else {
            self.stats.tx_dropped += 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn frames_go_through_tagged_with_port_and_origin_and_the_bounds_hold() {
        let ports = ChannelPorts::new("test").unwrap();
        let mut port = ports.port();
        let mut batch = RxBatch::new(2048);
        assert_eq!(port.recv(&mut batch).unwrap(), 0);
        for i in 0..INBOX {
            assert!(ports.push(3, i as u64 + 1, vec![i as u8; 60]).is_ok(), "frame {i} refused below the bound");
        }
        assert_eq!(ports.push(3, 0, vec![9; 60]), Err(vec![9; 60]), "a frame past the bound was taken");
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        ports.room(Some(Box::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        })));
        batch.untag();
        let n = port.recv(&mut batch).unwrap();
        assert_eq!(n, BATCH);
        assert_eq!((batch.port_of(1), batch.origin_of(1), batch.frame(1).0[0]), (Some(3), 2, 1));
        assert_eq!(woken.load(Ordering::Relaxed), 1, "room was not signalled");
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        port.send_to(2, 7, b"x", &VnetHdr::default()).unwrap();
        ports.set_consumer(Some(Box::new(move |p, o, f| {
            g.lock().unwrap().push((p, o, f.to_vec()));
            true
        })));
        port.send_to(2, 7, b"y", &VnetHdr::default()).unwrap();
        ports.set_port_up(2, false);
        port.send_to(2, 8, b"z", &VnetHdr::default()).unwrap();
        assert_eq!(*got.lock().unwrap(), vec![(2, 7, b"y".to_vec())]);
        assert_eq!((port.stats().tx_packets, port.stats().tx_dropped), (1, 2));
    }
}
