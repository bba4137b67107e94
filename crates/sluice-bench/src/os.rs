//! The two system calls the harness makes: pinning a thread to a CPU and
//! the huge-page hint. Both are hints: where the kernel declines, nothing
//! changes but speed.

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

/// Asks the kernel to back a big, not yet touched array with 2 MiB pages
/// (transparent huge pages in `madvise` mode): a 64 MiB table read at
/// random misses the TLB on almost every lookup with 4 KiB pages, and
/// keeps its 32 translations cached with huge pages.
pub(crate) fn advise_huge_pages<T>(v: &[T]) {
    const HUGE: usize = 2 << 20;
    let start = v.as_ptr() as usize;
    let end = start + std::mem::size_of_val(v);
    let first = start.next_multiple_of(HUGE);
    if end > first + HUGE {
        let len = (end - first) / HUGE * HUGE;
        // SAFETY: the range lies inside `v`'s allocation; MADV_HUGEPAGE only
        // changes how the kernel backs the pages, never their contents.
        unsafe { libc::madvise(first as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    }
}
