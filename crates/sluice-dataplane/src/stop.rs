//! One stop signal for everything a running data plane starts: its
//! workers, its control servers, and whoever waits for the end (a signal,
//! a duration, or a worker that failed).
//!
//! Concurrency invariants (this file owns them):
//! - [`Stop::is_set`] is one relaxed load: the packet path may ask it
//!   every batch;
//! - a stop is never undone: once set, every clone sees it set;
//! - the first error given to [`Stop::fail`] is kept, later ones are not
//!   (the first failure is the cause, the others its consequences);
//! - [`Stop::wait`] sleeps on a condition variable, woken by
//!   [`Stop::set`]: a process waiting for its end takes no CPU;
//! - a stop made with [`Stop::under`] passes its failures up to its
//!   parent (a worker that fails ends the whole node) but not a plain
//!   [`Stop::set`] (the node stops its workers last, after asking them
//!   for their last counts).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// A stop signal shared by clones (see the module documentation).
#[derive(Clone, Default)]
pub struct Stop(Arc<Inner>);

#[derive(Default)]
struct Inner {
    flag: AtomicBool,
    /// Told of this stop's failures.
    parent: Option<Stop>,
    /// The first failure, and a place for the waiters' condition variable.
    error: Mutex<Option<String>>,
    woken: Condvar,
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop").field("set", &self.is_set()).field("error", &self.error()).finish()
    }
}

impl Stop {
    /// A signal not set yet.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// A signal whose failures ([`Stop::fail`]) also fail `parent`.
    pub fn under(parent: &Stop) -> Stop {
        Stop(Arc::new(Inner { parent: Some(parent.clone()), ..Inner::default() }))
    }

    /// Whether the stop was asked.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.flag.load(Ordering::Relaxed)
    }

    /// Asks everything to stop, and wakes whoever waits.
    pub fn set(&self) {
        let guard = self.0.error.lock().unwrap_or_else(|e| e.into_inner());
        self.0.flag.store(true, Ordering::Relaxed);
        drop(guard);
        self.0.woken.notify_all();
    }

    /// Stops because of a failure; the first one is what [`Stop::error`] says.
    pub fn fail(&self, why: String) {
        if let Some(p) = &self.0.parent {
            p.fail(why.clone());
        }
        self.0.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(why);
        self.set();
    }

    /// The failure that stopped it, if one did.
    pub fn error(&self) -> Option<String> {
        self.0.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until the stop is set (true) or `deadline` passes (false, the
    /// stop not set); without a deadline, until the stop.
    pub fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut guard = self.0.error.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.is_set() {
                return true;
            }
            match deadline {
                None => guard = self.0.woken.wait(guard).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    guard = self.0.woken.wait_timeout(guard, d - now).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_stop_wakes_its_waiter_and_keeps_the_first_failure() {
        let stop = Stop::new();
        assert!(!stop.wait(Some(Instant::now() + Duration::from_millis(5))), "not set: the deadline ends the wait");
        let s = stop.clone();
        let waiter = std::thread::spawn(move || s.wait(None));
        stop.fail("port 1: gone".into());
        stop.fail("port 2: a consequence".into());
        assert!(waiter.join().unwrap());
        assert!(stop.is_set());
        assert_eq!(stop.error().as_deref(), Some("port 1: gone"));
    }

    #[test]
    fn a_child_passes_its_failures_up_and_nothing_else() {
        let node = Stop::new();
        let workers = Stop::under(&node);
        workers.set();
        assert!(!node.is_set(), "stopping the workers leaves the node running");
        let (node, workers) = (Stop::new(), Stop::under(&Stop::new()));
        drop(workers);
        let workers = Stop::under(&node);
        workers.fail("port 3: no such device".into());
        assert!(node.is_set() && workers.is_set());
        assert_eq!(node.error().as_deref(), Some("port 3: no such device"));
    }
}
