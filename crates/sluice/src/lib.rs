//! The `sluice` command as a library, one folder per data plane: `p4/`
//! (the P4 switch: replay, STF, bench, `simple_switch`), `lwaftr/`,
//! `openflow/` (the switch and its benchmarks), `controller/` (the
//! OpenFlow controller and the cbench-style generator); beside them the
//! soak of every data plane and `sluice top`. Shared by the binary and
//! the tests.

pub mod controller;
pub mod lwaftr;
pub mod openflow;
pub mod p4;
pub mod soak;
pub mod top;

pub use p4::{apply_command_text, apply_commands, load, load_with, run_inputs};

/// Raises this process's open-descriptor limit to the most the system
/// allows: each switch connection, control-plane client and port is a
/// descriptor, and the default soft limit (often 1024) is below the
/// servers' own connection bounds.
pub fn raise_descriptor_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
