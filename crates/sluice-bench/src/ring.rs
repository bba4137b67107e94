//! A receive ring for the bench: traffic handed to the data plane in a
//! ring of [`BATCH`] buffers, the way a NIC writes frames into the buffers
//! of its receive ring, rather than straight from where the traffic is
//! stored.
//!
//! Why: a capture of a million distinct 550-byte frames is half a gigabyte
//! per port. Replayed from where it is stored, every frame comes from DRAM
//! and the bench measures the memory bandwidth of reading stored frames as
//! much as the data plane. A NIC writes each frame into one of a few
//! hundred ring buffers that stay in the caches (DDIO). The ring does the
//! same work on the CPU: before a batch runs, each of its frames is written
//! into its buffer, and only the bytes where it differs from the frame the
//! buffer held before are written (a delta computed once, at setup). For
//! generated traffic over many flows the deltas are a few dozen bytes per
//! frame (addresses, ports and checksums), so the stored traffic the bench
//! reads per frame is that small; the writes are counted in the measured
//! time.
//!
//! The data plane sees exactly the bytes of the capture's frame `j` when it
//! runs frame `j`: frame `j` goes into buffer `j % BATCH` (batches start at
//! multiples of [`BATCH`] and the replay starts again at frame 0 after the
//! last, possibly short, batch), and its delta is taken against the frame
//! that buffer held before it in that cyclic order.

use sluice_dataplane::BATCH;
use sluice_lookup::mem::copy_short;

/// Merge two changed runs of a delta when fewer than this many equal bytes
/// separate them (a run's header is 8 bytes).
const MERGE_GAP: usize = 8;

/// The ring of one port's traffic (see the module documentation).
pub(crate) struct Ring {
    bufs: Vec<Box<[u8]>>,
    lens: Vec<usize>,
    /// Per frame, in order: its length and its run count (u32 LE each),
    /// then per run its offset and length (u32 LE each) and its bytes.
    deltas: Vec<u8>,
    /// Where the next frame's delta starts in `deltas`.
    cursor: usize,
    /// The frame whose delta is at `cursor`.
    next: usize,
    frames: usize,
}

impl Ring {
    /// A ring for `traffic`, replayed from frame 0 in batches of [`BATCH`].
    pub fn new(traffic: &[Vec<u8>]) -> Ring {
        let t = traffic.len();
        let r = BATCH.min(t);
        let cap = traffic.iter().map(Vec::len).max().unwrap_or(0).next_multiple_of(64);
        // The frame that used frame j's buffer before it, cyclically.
        let pred = |j: usize| if j >= BATCH { j - BATCH } else { j + BATCH * ((t - 1 - j) / BATCH) };
        let mut bufs: Vec<Box<[u8]>> = Vec::with_capacity(r);
        let mut lens = Vec::with_capacity(r);
        for s in 0..r {
            let mut b = vec![0u8; cap].into_boxed_slice();
            let f = &traffic[pred(s)];
            b[..f.len()].copy_from_slice(f);
            bufs.push(b);
            lens.push(f.len());
        }
        let mut deltas = Vec::new();
        for (j, f) in traffic.iter().enumerate() {
            encode(&traffic[pred(j)], f, &mut deltas);
        }
        deltas.shrink_to_fit();
        Ring { bufs, lens, deltas, cursor: 0, next: 0, frames: t }
    }

    /// Bytes of stored deltas (what the replay reads besides the ring).
    #[cfg(test)]
    pub fn delta_bytes(&self) -> usize {
        self.deltas.len()
    }

    /// Writes frames `start..end` (one batch: `start` is where the last
    /// batch ended, or 0) into their buffers and hands them to `run`.
    pub fn batch<R>(&mut self, start: usize, end: usize, run: impl FnOnce(&[&[u8]]) -> R) -> R {
        debug_assert!(end - start <= BATCH && start.is_multiple_of(BATCH) && end <= self.frames);
        if start == 0 {
            self.cursor = 0;
            self.next = 0;
        }
        assert_eq!(start, self.next, "ring batches run in order");
        let d = &self.deltas;
        let word = |c: usize| u32::from_le_bytes([d[c], d[c + 1], d[c + 2], d[c + 3]]) as usize;
        let mut c = self.cursor;
        for j in start..end {
            let s = j % BATCH;
            let (len, runs) = (word(c), word(c + 4));
            c += 8;
            let buf = &mut self.bufs[s];
            for _ in 0..runs {
                let (off, n) = (word(c), word(c + 4));
                c += 8;
                copy_short(&mut buf[off..off + n], &d[c..c + n]);
                c += n;
            }
            self.lens[s] = len;
        }
        self.cursor = c;
        self.next = if end == self.frames { 0 } else { end };
        let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
        for (k, j) in (start..end).enumerate() {
            let s = j % BATCH;
            frames[k] = &self.bufs[s][..self.lens[s]];
        }
        run(&frames[..end - start])
    }
}

/// Appends the delta that turns `old` into `new` to `out`.
fn encode(old: &[u8], new: &[u8], out: &mut Vec<u8>) {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < new.len() {
        if i < old.len() && old[i] == new[i] {
            i += 1;
            continue;
        }
        let from = i;
        let mut to = i + 1;
        // Extend over changes separated by fewer than MERGE_GAP equal bytes.
        let mut j = to;
        while j < new.len() && j - to < MERGE_GAP {
            if j >= old.len() || old[j] != new[j] {
                to = j + 1;
            }
            j += 1;
        }
        runs.push((from, to - from));
        i = to;
    }
    out.extend_from_slice(&(new.len() as u32).to_le_bytes());
    out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for (off, n) in runs {
        out.extend_from_slice(&(off as u32).to_le_bytes());
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.extend_from_slice(&new[off..off + n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(j: usize, len: usize) -> Vec<u8> {
        let mut f = vec![0xab; len];
        f[30..34].copy_from_slice(&(j as u32).to_be_bytes());
        f[len - 1] = j as u8;
        f
    }

    /// Replays `traffic` twice through a ring and checks every frame.
    fn replays_exactly(traffic: &[Vec<u8>]) {
        let mut ring = Ring::new(traffic);
        for _ in 0..2 {
            let mut start = 0;
            while start < traffic.len() {
                let end = (start + BATCH).min(traffic.len());
                ring.batch(start, end, |frames| {
                    assert_eq!(frames.len(), end - start);
                    for (k, f) in frames.iter().enumerate() {
                        assert!(*f == &traffic[start + k][..], "frame {} differs", start + k);
                    }
                });
                start = end;
            }
        }
    }

    #[test]
    fn frames_come_out_as_stored() {
        for n in [1, 5, BATCH, BATCH + 1, 3 * BATCH - 7, 1000] {
            let t: Vec<Vec<u8>> = (0..n).map(|j| frame(j, 60 + j % 300)).collect();
            replays_exactly(&t);
        }
        let jumbo: Vec<Vec<u8>> = (0..3 * BATCH).map(|j| frame(j, 70_000 + j % 7)).collect();
        replays_exactly(&jumbo);
    }

    #[test]
    fn deltas_of_address_changes_are_small() {
        let t: Vec<Vec<u8>> = (0..10 * BATCH).map(|j| frame(j, 550)).collect();
        let ring = Ring::new(&t);
        // Per frame: 8 bytes of header, two runs of 8 + 4 and 8 + 1 bytes.
        assert!(ring.delta_bytes() <= t.len() * 29, "{} bytes", ring.delta_bytes());
    }
}
