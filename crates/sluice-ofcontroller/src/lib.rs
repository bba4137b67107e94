//! An OpenFlow controller library: switches connect, the library speaks
//! the protocol, applications see typed events and send typed requests.
//!
//! - [`Controller`] listens for switch connections (TCP, or TLS through
//!   rustls with [`Config::tls`], see [`tls_config`]) and spreads them
//!   over worker threads (one `mio` poll each). Per connection it sends HELLO,
//!   negotiates OpenFlow 1.0 or 1.3 (those in [`Config::versions`]),
//!   asks the switch's features (and, in 1.3, its port descriptions),
//!   answers echo requests, sends its own after [`Config::echo_interval`]
//!   of silence and closes a connection silent for three intervals or
//!   stuck in the handshake for [`Config::handshake_timeout`]. A second
//!   connection from a datapath id already connected replaces the first.
//!   With [`Config::role`], every 1.3 switch is asked for that role as it
//!   comes up.
//! - An application is an [`App`]: one instance per worker thread (made
//!   by the factory given to [`Controller::start`]), called on that
//!   thread for the switches it owns with [`Event`]s, sending through the
//!   [`Switch`] it is handed. Requests are written in OpenFlow 1.3 terms
//!   ([`sluice_openflow::FlowMod`], [`sluice_openflow::PacketOut`]) and
//!   translated for a 1.0 switch where 1.0 can say the same (an error for
//!   what it cannot); [`Switch::send10`] and [`Switch::send13`] send any
//!   message as is. Several applications run in one controller as a
//!   [`Chain`].
//! - Packet-ins read together from one switch reach the application as
//!   one batch ([`App::packet_ins`]), each parsed into a reused
//!   [`PacketIn`]; flow-mods and packet-outs are encoded (translated for
//!   1.0 into reused messages) straight into the connection's buffer: no
//!   allocation per message on that path.
//! - Outgoing messages are appended to the connection's buffer and
//!   written once per round of events (batched). A switch that stops
//!   reading fills its buffer up to [`Config::max_pending`] bytes; what
//!   does not fit is dropped and counted, and the other switches are
//!   served as before.
//!
//! Concurrency invariants: a connection lives on one worker thread for
//! its whole life, and so does the application state about it (no lock
//! on the message path). Threads share only [`Counters`] (atomics) and
//! the table of connected datapath ids (a mutex taken once per switch
//! connecting or leaving). A worker learns of a new connection, or of a
//! connection to close, through its channel and a `mio::Waker`.

mod apps;
pub mod mac_table;
mod server;
mod translate;

pub use apps::{
    app_by_name, Chain, FastReply, Hub, LearningSwitch, MakeApp, Route, Router, APPS, LEARNED_IDLE_TIMEOUT, ROUTES,
};
pub use server::{tls_config, Config, Controller, Counters, Event, Log, PacketIn, Switch};
pub use translate::{
    flow_mod_to_10, flow_mod_to_10_into, packet_in_from_10, packet_in_from_13, packet_out_to_10, packet_out_to_10_into,
    port10_to_32, port32_to_10,
};

/// An application: called for every event of the switches on its thread.
pub trait App: Send {
    fn event(&mut self, sw: &mut Switch<'_>, ev: &Event<'_>);

    /// Packet-ins that arrived together from one switch, in order (up to
    /// a few dozen, all read in one go). By default each is an
    /// [`Event::PacketIn`]; an application that looks something up per
    /// packet can start every lookup's memory load before the first one
    /// is needed. Any other message from the switch comes after them.
    fn packet_ins(&mut self, sw: &mut Switch<'_>, batch: &[PacketIn]) {
        for p in batch {
            self.event(sw, &Event::PacketIn(p));
        }
    }
}
