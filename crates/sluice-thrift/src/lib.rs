//! bmv2's Thrift runtime API, served by Sluice so that the stock
//! `simple_switch_CLI` (and anything else written against bmv2's Thrift
//! services) drives it unchanged.
//!
//! Wire: plain TCP, buffered transport (no frame prefix), binary protocol,
//! calls named `<service>:<method>` by the multiplexed client. Four services:
//! `standard` ([`standard`]), `simple_pre_lag` ([`pre`]), `simple_switch`
//! and `psa_switch` ([`sswitch`]). Method names, argument ids and types are the protocol's facts
//! (see `docs/thrift-api-facts.md`); the code is ours.
//!
//! Each connection gets a thread (a small stack); every call takes the
//! device's lock, so the calls of all clients (and of P4Runtime) are
//! serialized. Bounds ([`Limits`]): at most [`MAX_CONNECTIONS`] connections
//! at once (one more is closed at once, counted and reported on standard
//! error at most once a second); a connection that sends nothing for
//! [`IDLE_TIMEOUT`] is closed; a string field is at most [`MAX_STRING`]
//! bytes and a container at most `wire::MAX_ELEMENTS` elements. A call that does
//! not have its method's shape is answered with a Thrift application error
//! (PROTOCOL_ERROR) naming the field; the connection stays usable when the
//! call could be read whole.

pub mod pre;
pub mod sswitch;
pub mod standard;
pub mod wire;

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_control::device::Device;
use sluice_engine::runtime::RtError;
use thrift::protocol::{
    TBinaryInputProtocol, TBinaryOutputProtocol, TInputProtocol, TMessageIdentifier, TMessageType, TOutputProtocol,
};
use thrift::{ApplicationError, ApplicationErrorKind};
use wire::{BadMessage, Fields, Val};

/// How a call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The method's declared exception (result field 1) with this error code.
    Code(i32),
    /// The call does not have its method's shape.
    Bad(String),
    /// No such method (or service).
    Unknown(String),
    /// Something the server cannot do, said in words.
    Internal(String),
}

impl From<BadMessage> for Fault {
    fn from(e: BadMessage) -> Fault {
        Fault::Bad(e.0)
    }
}

/// A call's answer: the return value (`None` for `void`) or a fault.
pub type Answer = Result<Option<Val>, Fault>;

/// Maps a runtime error to one service's error code.
pub(crate) fn code(map: fn(&RtError) -> i32) -> impl Fn(RtError) -> Fault {
    move |e| Fault::Code(map(&e))
}

/// Runs one call against the device.
pub fn call(dev: &Device, service: &str, method: &str, args: &Fields) -> Answer {
    match service {
        "standard" => standard::call(dev, method, args),
        "simple_pre_lag" => pre::call(dev, method, args),
        "simple_switch" => sswitch::call(dev, method, args),
        "psa_switch" => sswitch::call_psa(dev, method, args),
        _ => Err(Fault::Unknown(format!("unknown service \"{service}\" (method {method})"))),
    }
}

/// The Thrift server: a listening socket and its accept thread.
pub struct ThriftServer {
    pub port: u16,
    pub thread: JoinHandle<()>,
}

/// Connections served at once by default; one more is closed as soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 1024;

/// A connection that sends no call for this long is closed, by default (the
/// stock CLI then reports a closed connection on its next command).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Longest string or binary field a call may carry (16 MiB: ten times the
/// largest program JSON of p4c's corpora, the longest thing a client sends).
pub const MAX_STRING: usize = 16 << 20;

/// Stack of a connection's thread: calls are shallow (the device does the work).
const CONNECTION_STACK: usize = 256 * 1024;

/// The server's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_connections: MAX_CONNECTIONS, idle_timeout: IDLE_TIMEOUT }
    }
}

/// bmv2's Thrift runtime server as a server of the node: every
/// connection on a thread of its own (see [`serve_with`]).
pub struct Thrift {
    device: Arc<Device>,
    port: u16,
    limits: Limits,
}

impl Thrift {
    /// The server for `device` on TCP port `port` of every address.
    pub fn new(device: Arc<Device>, port: u16) -> Thrift {
        Thrift { device, port, limits: Limits::default() }
    }
}

impl sluice_node::Server<sluice_engine::Switch> for Thrift {
    fn name(&self) -> &'static str {
        "Thrift"
    }

    /// A port that cannot be bound leaves the switch running without
    /// Thrift, with a warning (the other control planes still serve).
    fn start(&mut self, _: &sluice_node::Control<sluice_engine::Switch>) -> Result<String, String> {
        Ok(match serve_with(self.device.clone(), ("0.0.0.0", self.port), self.limits) {
            Ok(s) => format!("sluice: Thrift runtime server listening on port {}", s.port),
            Err(e) => format!("sluice: warning: the Thrift server could not start on port {}: {e}", self.port),
        })
    }
}

/// Listens on `addr` and serves every connection on its own thread, within
/// the default [`Limits`].
pub fn serve(dev: Arc<Device>, addr: impl ToSocketAddrs) -> std::io::Result<ThriftServer> {
    serve_with(dev, addr, Limits::default())
}

/// [`serve`] within `limits`.
pub fn serve_with(dev: Arc<Device>, addr: impl ToSocketAddrs, limits: Limits) -> std::io::Result<ThriftServer> {
    let listener = TcpListener::bind(addr)?;
    let port = listener.local_addr()?.port();
    let live = Arc::new(AtomicUsize::new(0));
    let thread = std::thread::Builder::new().name("sluice-thrift".into()).spawn(move || {
        let (mut refused, mut reported, mut last_report) = (0u64, 0u64, None::<Instant>);
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            if live.load(Ordering::Acquire) >= limits.max_connections {
                drop(conn);
                refused += 1;
                if refused != reported && last_report.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    eprintln!(
                        "sluice: thrift: {refused} connection(s) refused so far ({} connections open)",
                        limits.max_connections
                    );
                    (reported, last_report) = (refused, Some(Instant::now()));
                }
                continue;
            }
            live.fetch_add(1, Ordering::AcqRel);
            let (dev, open) = (dev.clone(), live.clone());
            let spawned = std::thread::Builder::new()
                .name("sluice-thrift-conn".into())
                .stack_size(CONNECTION_STACK)
                .spawn(move || {
                    conn.set_read_timeout(Some(limits.idle_timeout)).ok();
                    match serve_connection(&dev, conn) {
                        Err(e) if is_timeout(&e) => eprintln!(
                            "sluice: thrift connection idle for {:.1} s: closed",
                            limits.idle_timeout.as_secs_f64()
                        ),
                        Err(e) => eprintln!("sluice: thrift connection closed: {e}"),
                        Ok(()) => {}
                    }
                    open.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                // No thread for it: the connection was dropped with the closure.
                live.fetch_sub(1, Ordering::AcqRel);
            }
        }
    })?;
    Ok(ThriftServer { port, thread })
}

/// A read that hit the idle timeout (a socket read timeout is EAGAIN on Linux).
fn is_timeout(e: &thrift::Error) -> bool {
    matches!(e, thrift::Error::Transport(t) if t.kind == thrift::TransportErrorKind::TimedOut
        || t.message.contains("temporarily unavailable"))
}

fn is_eof(e: &thrift::Error) -> bool {
    matches!(e, thrift::Error::Transport(t) if t.kind == thrift::TransportErrorKind::EndOfFile)
}

/// Answers calls on one connection until the client closes it.
pub fn serve_connection(dev: &Device, conn: TcpStream) -> thrift::Result<()> {
    conn.set_nodelay(true).ok();
    serve_stream(dev, BufReader::new(conn.try_clone()?), BufWriter::new(conn))
}

/// Answers the calls read from `reader` on `writer` until the input ends
/// (the connection loop, apart from sockets: the fuzz target feeds it bytes).
pub fn serve_stream(dev: &Device, reader: impl Read, writer: impl Write) -> thrift::Result<()> {
    // A string (a program's JSON is the longest a client sends) is read
    // whole into memory: at most MAX_STRING bytes.
    let config = thrift::TConfiguration::builder()
        .max_string_size(Some(MAX_STRING))
        .build()
        .expect("a positive string limit is a valid configuration");
    let mut input = TBinaryInputProtocol::with_config(reader, false, config);
    let mut output = TBinaryOutputProtocol::new(writer, true);
    loop {
        let msg = match input.read_message_begin() {
            Ok(m) => m,
            Err(e) if is_eof(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        let (service, method) = msg.name.split_once(':').unwrap_or(("", msg.name.as_str()));
        let (service, method) = (service.to_string(), method.to_string());
        let args = match wire::read_struct(&mut input, 0).and_then(|a| input.read_message_end().map(|_| a)) {
            Ok(a) => a,
            Err(e) => {
                // The stream position is unknown now: answer and close.
                let why = match &e {
                    thrift::Error::Protocol(p) => p.message.clone(),
                    e => e.to_string(),
                };
                let reply = Err(Fault::Bad(format!("cannot read the arguments of {}: {why}", msg.name)));
                write_reply(&mut output, &method, msg.sequence_number, reply)?;
                return Ok(());
            }
        };
        let answer = if msg.message_type != TMessageType::Call && msg.message_type != TMessageType::OneWay {
            Err(Fault::Bad(format!("message type {:?} is not a call", msg.message_type)))
        } else {
            call(dev, &service, &method, &args)
        };
        if msg.message_type == TMessageType::OneWay {
            continue;
        }
        write_reply(&mut output, &method, msg.sequence_number, answer)?;
    }
}

fn write_reply(o: &mut dyn TOutputProtocol, method: &str, seq: i32, answer: Answer) -> thrift::Result<()> {
    let app = |kind, message: String| ApplicationError { kind, message };
    let result = match answer {
        Ok(v) => Ok(Fields(v.map(|v| vec![(0, v)]).unwrap_or_default())),
        Err(Fault::Code(c)) => Ok(Fields(vec![(1, wire::st(vec![(1, Val::I32(c))]))])),
        Err(Fault::Bad(m)) => Err(app(ApplicationErrorKind::ProtocolError, m)),
        Err(Fault::Unknown(m)) => Err(app(ApplicationErrorKind::UnknownMethod, m)),
        Err(Fault::Internal(m)) => Err(app(ApplicationErrorKind::InternalError, m)),
    };
    match result {
        Ok(fields) => {
            o.write_message_begin(&TMessageIdentifier::new(method, TMessageType::Reply, seq))?;
            wire::write_struct(o, &fields)?;
        }
        Err(e) => {
            o.write_message_begin(&TMessageIdentifier::new(method, TMessageType::Exception, seq))?;
            thrift::Error::write_application_error_to_out_protocol(&e, o)?;
        }
    }
    o.write_message_end()?;
    o.flush()
}

/// A `0`/`1` string with the rightmost character standing for bit 0 (the
/// PRE's port and LAG maps) as the set of its one bits.
pub fn bits_of_map(map: &[u8]) -> Result<std::collections::BTreeSet<u32>, BadMessage> {
    let mut out = std::collections::BTreeSet::new();
    for (i, c) in map.iter().rev().enumerate() {
        match c {
            b'1' => {
                out.insert(i as u32);
            }
            b'0' => {}
            _ => return Err(BadMessage(format!("a port map holds only '0' and '1', not {:?}", *c as char))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_maps_read_from_the_right() {
        assert_eq!(bits_of_map(b"110").unwrap().into_iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(bits_of_map(b"").unwrap().len(), 0);
        assert!(bits_of_map(b"12").is_err());
    }
}
