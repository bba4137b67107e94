//! Gives back the code pages start-up touched.
//!
//! Contract. Reads: `/proc/self/smaps`. Writes: nothing but the process's
//! page tables (`madvise(MADV_DONTNEED)`). Leaves: every private,
//! file-backed, non-writable mapping that holds no page of its own
//! (`Anonymous: 0 kB`: the executable's and the libraries' code and
//! read-only data) unmapped from this process; the pages stay in the page
//! cache, shared with every other process running the same binary, and
//! whatever runs next maps them again with a minor fault. Mappings with
//! private copies (relocated read-only data, written pages) are never
//! touched: dropping them would lose their contents.
//!
//! Why: loading a program (JSON, JIT compile), parsing the command line
//! and starting the servers run megabytes of code once; a node that then
//! idles would keep it all counted as resident. A hundred switches on one
//! machine share those pages in the page cache anyway; each one's resident
//! set is then what it uses.

/// Releases the clean file-backed pages (see the module documentation);
/// returns the bytes that were resident in them.
pub fn release_start_up_pages() -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return 0 };
    let mut released = 0;
    for m in mappings(&smaps) {
        if !m.droppable() {
            continue;
        }
        // SAFETY: the range is a whole mapping of this process whose pages
        // all equal their file's contents (no anonymous page in it), so
        // dropping them loses nothing: the next access reads the file again.
        let r = unsafe { libc::madvise(m.start as *mut libc::c_void, m.end - m.start, libc::MADV_DONTNEED) };
        if r == 0 {
            released += m.rss_kb * 1024;
        }
    }
    released
}

/// One mapping of `/proc/self/smaps`.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    perms: String,
    path: String,
    rss_kb: u64,
    anonymous_kb: u64,
    locked_kb: u64,
}

impl Mapping {
    fn droppable(&self) -> bool {
        let p = self.perms.as_bytes();
        p.len() == 4
            && p[1] == b'-'
            && p[3] == b'p'
            && self.path.starts_with('/')
            && self.anonymous_kb == 0
            && self.locked_kb == 0
            && self.rss_kb > 0
    }
}

fn mappings(smaps: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let Some(first) = f.next() else { continue };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                let perms = f.next().unwrap_or("").to_string();
                let path = f.nth(3).unwrap_or("").to_string();
                out.push(Mapping { start, end, perms, path, rss_kb: 0, anonymous_kb: 0, locked_kb: 0 });
                continue;
            }
        }
        let (Some(m), Some(v)) = (out.last_mut(), f.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
        match first {
            "Rss:" => m.rss_kb = v,
            "Anonymous:" => m.anonymous_kb = v,
            "Locked:" => m.locked_kb = v,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
555dbbd69000-555dbc02d000 r--p 00000000 fe:00 5318488                    /usr/bin/sluice
Size:               2832 kB
Rss:                1052 kB
Anonymous:             0 kB
Locked:                0 kB
555dbc02d000-555dbcc34000 r-xp 002c3000 fe:00 5318488                    /usr/bin/sluice
Rss:                7248 kB
Anonymous:             0 kB
Locked:                0 kB
555dbcc34000-555dbcc7c000 r--p 00ec9000 fe:00 5318488                    /usr/bin/sluice
Rss:                 288 kB
Anonymous:           288 kB
Locked:                0 kB
555dbcc7c000-555dbcc80000 rw-p 00f11000 fe:00 5318488                    /usr/bin/sluice
Rss:                  16 kB
Anonymous:            16 kB
555df638e000-555df6516000 rw-p 00000000 00:00 0                          [heap]
Rss:                1420 kB
Anonymous:          1420 kB
7fff0000000-7fff0001000 r-xp 00000000 00:00 0                            [vdso]
Rss:                   4 kB
Anonymous:             0 kB
7fdaa89b7000-7fdaa8b0d000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 996 kB
Anonymous:             0 kB
Locked:                4 kB
";

    #[test]
    fn only_clean_private_file_mappings_are_released() {
        let m = mappings(SMAPS);
        assert_eq!(m.len(), 7);
        assert_eq!((m[1].start, m[1].end, m[1].rss_kb), (0x555dbc02d000, 0x555dbcc34000, 7248));
        let kept: Vec<bool> = m.iter().map(Mapping::droppable).collect();
        // Read-only data and code: yes; relocated read-only data (private
        // copies), data, heap, the vDSO and a locked mapping: no.
        assert_eq!(kept, [true, true, false, false, false, false, false]);
    }

    #[test]
    fn releasing_keeps_the_process_running_and_lowers_its_resident_set() {
        let released = release_start_up_pages();
        assert!(released > 0, "a test binary has resident code pages");
        // Code runs on after the release (its pages come back on use).
        let v: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        assert_eq!(v.iter().sum::<u64>(), 1_498_500);
    }
}
