//! `--metrics ADDR`: the node's metrics over HTTP, for Prometheus.
//!
//! Contract: `GET /metrics` (or `/`) is answered with
//! [`Control::metrics`] in the text exposition format (version 0.0.4),
//! the same text the control socket's `metrics` request gives `sluice
//! top`; any other path gets 404, any other method 405. One request per
//! connection (`Connection: close`).
//!
//! Bounds: one client at a time; a request head of more than
//! [`MAX_HEAD`] bytes gets 431, a client that sends nothing for
//! [`CLIENT_TIMEOUT`] is closed: a scraper that stalls holds the server
//! that long at most. Requests served and refused are counted for the
//! exit report.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use sluice_dataplane::telemetry::CONTENT_TYPE;
use sluice_dataplane::{DataPlane, Stop};

use crate::{Control, Server};

/// The longest request head read.
pub const MAX_HEAD: usize = 16 << 10;

/// How long a client may take to send its request.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTP server of `--metrics` (see the module documentation).
pub struct MetricsServer {
    addr: String,
    listener: Option<TcpListener>,
    served: u64,
    refused: u64,
}

impl MetricsServer {
    /// A server for `addr`: `HOST:PORT`, or `:PORT` for every address.
    pub fn new(addr: &str) -> MetricsServer {
        MetricsServer { addr: addr.to_string(), listener: None, served: 0, refused: 0 }
    }

    /// The address it listens on, once started.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    fn serve<D: DataPlane>(&mut self, control: &Control<D>, conn: TcpStream) {
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(CLIENT_TIMEOUT));
        let _ = conn.set_write_timeout(Some(CLIENT_TIMEOUT));
        let mut reader = BufReader::new(&conn);
        let mut head = String::new();
        let mut first = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return self.refused += 1,
                Ok(_) => {}
            }
            if head.len() + line.len() > MAX_HEAD {
                self.refused += 1;
                return respond(
                    &conn,
                    "431 Request Header Fields Too Large",
                    "text/plain",
                    b"request head too large\n",
                );
            }
            if first.is_empty() {
                first = line.trim_end().to_string();
            }
            head.push_str(&line);
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        let mut parts = first.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = path.split('?').next().unwrap_or("");
        if method != "GET" && method != "HEAD" {
            self.refused += 1;
            return respond(&conn, "405 Method Not Allowed", "text/plain", b"only GET\n");
        }
        if path != "/metrics" && path != "/" {
            self.refused += 1;
            return respond(&conn, "404 Not Found", "text/plain", b"the metrics are at /metrics\n");
        }
        let text = control.metrics().to_text();
        self.served += 1;
        let body = if method == "HEAD" { &b""[..] } else { text.as_bytes() };
        respond(&conn, "200 OK", CONTENT_TYPE, body);
    }
}

fn respond(mut conn: &TcpStream, status: &str, content_type: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
}

impl<D: DataPlane> Server<D> for MetricsServer {
    fn name(&self) -> &'static str {
        "metrics"
    }

    fn start(&mut self, _control: &Control<D>) -> Result<String, String> {
        let addr = match self.addr.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => self.addr.clone(),
        };
        let l = TcpListener::bind(&addr).map_err(|e| format!("--metrics {}: {e}", self.addr))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let at = l.local_addr().map_err(|e| e.to_string())?;
        self.listener = Some(l);
        Ok(format!("sluice: metrics at http://{at}/metrics"))
    }

    fn run(&mut self, control: &Control<D>, stop: &Stop) {
        let Some(fd) = self.listener.as_ref().map(|l| l.as_raw_fd()) else { return };
        while !stop.is_set() {
            let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one live pollfd. A second's timeout: the stop is seen within it.
            if unsafe { libc::poll(&mut pfd, 1, 1000) } <= 0 {
                continue;
            }
            while let Some(Ok((conn, _))) = self.listener.as_ref().map(|l| l.accept()) {
                self.serve(control, conn);
            }
        }
    }

    fn finish(&mut self, _control: &Control<D>) -> Vec<String> {
        self.listener = None;
        vec![format!("metrics: {} scrape(s) answered, {} request(s) refused", self.served, self.refused)]
    }
}
