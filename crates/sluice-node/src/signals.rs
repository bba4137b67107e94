//! SIGINT and SIGTERM, turned into a [`Stop`]: the one way every command
//! ends on a signal.
//!
//! Concurrency invariants (this file owns them):
//! - the signal handler only writes one byte to a pipe (async-signal-safe);
//!   a watcher thread reads it and sets every stop registered so far, so a
//!   stop's waiters are woken through its condition variable;
//! - the handler and the watcher are installed once per process; stops
//!   registered later join the same list; a signal that came before a stop
//!   was registered stops it as soon as it registers.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

use sluice_dataplane::Stop;

/// The pipe's write end, for the handler.
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// A signal came.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = 1u8;
        // SAFETY: write(2) is async-signal-safe; one byte from a live local.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

fn stops() -> &'static Mutex<Vec<Stop>> {
    static STOPS: OnceLock<Mutex<Vec<Stop>>> = OnceLock::new();
    STOPS.get_or_init(|| {
        let mut fds: [RawFd; 2] = [-1; 2];
        // SAFETY: plain system calls; the handler only writes to the pipe.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) == 0 {
                PIPE.store(fds[1], Ordering::Relaxed);
                let watcher = fds[0];
                let _ = std::thread::Builder::new().name("sluice-signals".into()).spawn(move || loop {
                    let mut b = 0u8;
                    let n = libc::read(watcher, (&mut b as *mut u8).cast(), 1);
                    if n == 1 {
                        SIGNALLED.store(true, Ordering::Relaxed);
                        for s in stops().lock().unwrap_or_else(|e| e.into_inner()).iter() {
                            s.set();
                        }
                    } else if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                        return;
                    }
                });
            }
            libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
            libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        }
        Mutex::new(Vec::new())
    })
}

/// Sets `stop` when the process gets SIGINT or SIGTERM.
pub fn stop_on_signals(stop: &Stop) {
    let mut list = stops().lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|s| !s.is_set());
    list.push(stop.clone());
    if SIGNALLED.load(Ordering::Relaxed) {
        stop.set();
    }
}
