//! [`Server`]: what a control server is to the node that runs it.
//!
//! Contract: a server binds what it listens on in [`Server::start`], on
//! the node's thread (a failure there stops the node before it serves
//! anything); serves from [`Server::run`], on a thread of its own, until
//! the node's stop is set; says what it did in [`Server::finish`] once
//! its thread has ended. It reads and changes the data plane only through
//! the [`Control`] it is handed (see `control.rs`), so every server of a
//! node sees one state, and every change reaches the workers the same way.

use sluice_dataplane::{DataPlane, Stop};

use crate::Control;

/// A control server of a node (see the module documentation).
pub trait Server<D: DataPlane>: Send + 'static {
    /// What reports call it ("Thrift", "P4Runtime", "OpenFlow agent").
    fn name(&self) -> &'static str;

    /// Binds what it listens on; returns a line for the start-up report
    /// (where it listens), or why it cannot serve.
    fn start(&mut self, control: &Control<D>) -> Result<String, String>;

    /// Serves until `stop` is set, on a thread of its own. A server whose
    /// own threads serve (started in [`Server::start`]) just waits; that
    /// is the default.
    fn run(&mut self, _control: &Control<D>, stop: &Stop) {
        stop.wait(None);
    }

    /// Stops what still serves and returns lines for the exit report.
    fn finish(&mut self, _control: &Control<D>) -> Vec<String> {
        Vec::new()
    }
}
