//! The system call the harness makes: pinning a thread to a CPU, a hint:
//! where the kernel declines, nothing changes but speed.

/// Pins the calling thread to one CPU, so that a worker keeps its caches
/// and two workers never share a core; failure only costs speed.
pub(crate) fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays in bounds for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}
