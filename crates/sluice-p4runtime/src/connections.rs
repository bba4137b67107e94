//! The P4Runtime server's TCP connections: accepted here, bounded, and
//! handed to tonic.
//!
//! Invariants:
//! - at most [`Limits::max_connections`] connections are open at once; a
//!   connection past the bound is closed as soon as it is accepted,
//!   counted, and reported on standard error at most once a second;
//! - a connection's slot is freed when tonic drops the connection (its
//!   [`Counted`] wrapper), whichever side closed it;
//! - a connection that sends nothing within [`Limits::first_bytes`] of
//!   being accepted is closed (a silent peer cannot hold a slot);
//!   after that, dead peers are found by HTTP/2 keepalive pings (set on
//!   the server), while a live client that stays quiet (a primary waiting
//!   for PacketIns) keeps its connection as long as it likes;
//! - the accept loop hands connections to tonic through a bounded channel,
//!   so a server that stops taking them stops the accepting too.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Bounds on the server's connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Time a new connection has to send its first bytes.
    pub first_bytes: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_connections: 1024, first_bytes: Duration::from_secs(10) }
    }
}

/// Connections open, and refused so far.
#[derive(Debug, Default)]
pub struct Gauge {
    pub open: AtomicUsize,
    pub refused: AtomicU64,
}

/// One accepted connection: its slot is given back when it is dropped.
pub struct Counted {
    io: TcpStream,
    gauge: Arc<Gauge>,
    /// Until the first bytes arrive: when the connection is closed if none do.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.gauge.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if self.deadline.is_some() {
            if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                self.deadline = None;
            } else if r.is_pending() && self.deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready()) {
                // Nothing within the time allowed: end of stream, and tonic closes it.
                return Poll::Ready(Ok(()));
            }
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl Connected for Counted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

/// Accepts connections on `listener` for as long as the receiver lives,
/// within `limits`; returns the stream tonic serves and the gauge.
pub fn accept(listener: TcpListener, limits: Limits) -> (mpsc::Receiver<io::Result<Counted>>, Arc<Gauge>) {
    let (tx, rx) = mpsc::channel(64);
    let gauge = Arc::new(Gauge::default());
    let g = gauge.clone();
    tokio::spawn(async move {
        let (mut reported, mut last_report) = (0u64, None::<Instant>);
        loop {
            let io = match listener.accept().await {
                Ok((io, _)) => io,
                Err(e) => {
                    // Out of descriptors and the like: wait, then go on accepting.
                    eprintln!("sluice: P4Runtime server: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            if g.open.load(Ordering::Acquire) >= limits.max_connections {
                drop(io);
                let refused = g.refused.fetch_add(1, Ordering::AcqRel) + 1;
                if refused != reported && last_report.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(1)) {
                    eprintln!(
                        "sluice: P4Runtime: {refused} connection(s) refused so far ({} connections open, the bound)",
                        limits.max_connections
                    );
                    (reported, last_report) = (refused, Some(Instant::now()));
                }
                continue;
            }
            let _ = io.set_nodelay(true);
            g.open.fetch_add(1, Ordering::AcqRel);
            let deadline = Some(Box::pin(tokio::time::sleep(limits.first_bytes)));
            if tx.send(Ok(Counted { io, gauge: g.clone(), deadline })).await.is_err() {
                return;
            }
        }
    });
    (rx, gauge)
}
