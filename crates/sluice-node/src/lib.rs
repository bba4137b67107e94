//! A Sluice node: one running data plane with its worker pool, its stop
//! signal, its control servers and its telemetry, the same shape for the
//! P4 switch, the lwAFTR and the OpenFlow switch.
//!
//! - [`Node`] (`node.rs`): starts a data plane on live ports, runs the
//!   command's control servers, waits for the end (signal, duration,
//!   failure) and stops everything in order;
//! - [`Control`] (`control.rs`): the one way a server reads and changes
//!   the data plane; every change reaches the workers through the pool's
//!   change queue, and is counted;
//! - [`Server`] (`server.rs`): what a control server is to the node
//!   (start, run on its own thread, finish);
//! - [`socket`]: the control socket every instance serves
//!   (`<run dir>/<pid>.sock`): metrics and info for `sluice top`, and the
//!   verbs a data plane adds ([`socket::Handler`]);
//! - [`metrics`]: `--metrics ADDR`, Prometheus' text format over HTTP;
//! - [`signals`]: SIGINT and SIGTERM as a stop, for every command;
//! - [`trim`]: once running, the code pages start-up touched are given
//!   back (an idle node's resident set is what it uses).

pub mod control;
pub mod metrics;
pub mod node;
pub mod server;
pub mod signals;
pub mod socket;
pub mod trim;

pub use control::{Control, Session};
pub use node::{Finished, Node, NodeOptions};
pub use server::Server;
pub use sluice_dataplane::Stop;
