//! [`Node`]: one running data plane with everything around it, the same
//! for every data plane.
//!
//! Contract. A node is started on live ports ([`Node::start`]): its
//! workers forward from then on, its control socket serves (and, with
//! `--metrics`, its HTTP metrics). The command adds its own control
//! servers ([`Node::serve`]), then [`Node::run`] waits for the end and
//! reports. The end comes from a signal (SIGINT, SIGTERM), the duration
//! asked, a worker's fatal error or a server that stops the node; then,
//! in this order: the servers stop (their threads end, their reports are
//! printed), the stage times are asked of the workers (with profiling),
//! the workers stop and their counters are summed into the master, the
//! live loop's report is printed. The command gets the [`Control`] back,
//! for what it reports of its own data plane.
//!
//! Concurrency invariants (this file owns them):
//! - two stops: the node's (signals, the deadline, servers, and any
//!   worker's failure through [`Stop::under`]) and the workers' (set by
//!   the node only, last), so the workers still answer while the node
//!   winds down;
//! - each server runs on a thread of its own and touches the data plane
//!   only through its [`Control`]; the node's own thread only waits.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_dataplane::{DataPlane, Stop};
use sluice_live::{Live, LiveConfig, LiveStats, UpSink};

use crate::metrics::MetricsServer;
use crate::socket::{ControlSocket, Handler};
use crate::{Control, Server};

/// What a node is started with, besides its data plane and ports.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// The data plane's kind: "p4", "lwaftr", "openflow".
    pub kind: &'static str,
    /// The instance's name (its control socket answers to it too).
    pub name: Option<String>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// `--metrics ADDR`: serve the metrics over HTTP there.
    pub metrics: Option<String>,
}

struct Running<D: DataPlane> {
    name: &'static str,
    thread: JoinHandle<Box<dyn Server<D>>>,
}

/// A running data plane (see the module documentation).
pub struct Node<D: DataPlane> {
    control: Control<D>,
    live: Live,
    stop: Stop,
    workers: Stop,
    servers: Vec<Running<D>>,
    deadline: Option<Instant>,
    profile: bool,
}

/// What a node leaves when it has stopped.
pub struct Finished<D: DataPlane> {
    /// The data plane, its workers stopped and their counters summed in.
    pub control: Control<D>,
    /// The live loop's counters, every worker summed.
    pub totals: LiveStats,
    /// The failure that ended the node, if one did.
    pub error: Option<String>,
}

impl<D: DataPlane> Finished<D> {
    /// The totals, or the failure.
    pub fn result(&self) -> Result<LiveStats, String> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(self.totals),
        }
    }
}

impl<D: DataPlane> Node<D> {
    /// Starts `dp` on the live ports of `live` (events for the control
    /// plane to `up`), its control socket (answering `handlers`' verbs
    /// too), and its metrics server when asked; stops on SIGINT or SIGTERM
    /// from now on.
    pub fn start(
        dp: D,
        live: &LiveConfig,
        up: Option<UpSink<D::Notification>>,
        opts: &NodeOptions,
        handlers: Vec<Box<dyn Handler<D>>>,
    ) -> Result<Node<D>, String> {
        let stop = Stop::new();
        crate::signals::stop_on_signals(&stop);
        let workers = Stop::under(&stop);
        let mut socket = ControlSocket::new(opts.name.as_deref())?;
        for h in handlers {
            socket = socket.with_boxed(h);
        }
        let (pool, live_loop) = sluice_live::start(dp, live, up, workers.clone())?;
        let control = Control::new(pool, opts.kind, opts.name.clone());
        if live.profile {
            control.lock().set_profiling(true);
        }
        let mut node = Node {
            control,
            live: live_loop,
            stop,
            workers,
            servers: Vec::new(),
            deadline: opts.duration.map(|d| Instant::now() + d),
            profile: live.profile,
        };
        let started = node.serve(socket).and_then(|_| match &opts.metrics {
            Some(addr) => node.serve(MetricsServer::new(addr)),
            None => Ok(()),
        });
        if let Err(e) = started {
            return Err(node.fail(e));
        }
        Ok(node)
    }

    /// Ends the node because of `why` (a server that could not start):
    /// everything stops and reports as at any end; returns `why`.
    pub fn fail(self, why: String) -> String {
        self.stop.fail(why.clone());
        self.run();
        why
    }

    /// The data plane, for the command's control servers.
    pub fn control(&self) -> &Control<D> {
        &self.control
    }

    /// The node's stop: set it to end the node.
    pub fn stop(&self) -> &Stop {
        &self.stop
    }

    /// Starts `server` (its start-up line goes to standard error) and runs
    /// it on a thread of its own until the node stops.
    pub fn serve(&mut self, mut server: impl Server<D>) -> Result<(), String> {
        let line = server.start(&self.control)?;
        if !line.is_empty() {
            eprintln!("{line}");
        }
        let name = server.name();
        let (control, stop) = (self.control.clone(), self.stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("sluice-{}", name.replace(' ', "-")))
            .spawn(move || {
                server.run(&control, &stop);
                Box::new(server) as Box<dyn Server<D>>
            })
            .map_err(|e| format!("cannot start the {name} thread: {e}"))?;
        self.servers.push(Running { name, thread });
        Ok(())
    }

    /// Waits for the end, then stops everything and reports (see the
    /// module documentation).
    pub fn run(self) -> Finished<D> {
        // Started: the code only start-up ran leaves the resident set.
        crate::trim::release_start_up_pages();
        self.stop.wait(self.deadline);
        self.stop.set();
        for r in self.servers {
            match r.thread.join() {
                Ok(mut server) => {
                    for line in server.finish(&self.control) {
                        eprintln!("{line}");
                    }
                }
                Err(_) => eprintln!("sluice: the {} server panicked", r.name),
            }
        }
        let mut s = self.control.lock();
        let times = self.profile.then(|| s.profile());
        self.workers.set();
        s.stop_workers();
        drop(s);
        eprint!("{}", self.live.summary());
        if let Some(p) = times {
            eprint!("where the time went, per stage:\n{}", p.report());
        }
        let error = self.stop.error();
        Finished { control: self.control, totals: self.live.totals(), error }
    }
}
