//! Registers: the program's register arrays, one copy for every worker's
//! replica of a switch, as bmv2 keeps one copy however many threads touch
//! it (a register written by one packet is read by the next, whatever core
//! it lands on).
//!
//! What it stores: per array, its bit width (1 to 128, checked by the
//! compiler) and its cells, each a value of up to 128 bits as two 64-bit
//! words ([`RegCell`]).
//!
//! Who writes it and when: packets, from whichever worker runs them
//! (`register_write`, interpreted or inline in generated code); the control
//! plane through the runtime API (`Switch::register_write`,
//! `register_reset`: shared writes, made once through the master replica).
//! Every written value is cut to the register's width: by
//! [`Registers::write`], or in generated code by [`width_mask`].
//!
//! Concurrency invariant: clones of [`Registers`] share their cells (an
//! `Arc`), which are read and written without a lock, as two relaxed
//! atomic words each. Values of up to 64 bits are exact; a wider value
//! written concurrently with a read may be seen half-updated, as bmv2
//! allows without `@atomic`. [`Registers::deep_copy`] makes an unshared
//! copy (a scratch switch). Arrays never grow or shrink after load, so the
//! cell pointers generated code holds ([`Registers::cells`]) stay valid as
//! long as the `Registers`.
//!
//! How packets use it: `register_read` of an index outside the array gives
//! 0 and `register_write` to one changes nothing, interpreted
//! ([`Registers::read_or_zero`], [`Registers::write`]) as in generated
//! code, which checks the index against the array's length itself and, for
//! registers of at most 64 bits ([`in_low_word`]), reads and writes a
//! cell's `lo` word in place (`hi` stays 0).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One register cell: a 128-bit value as two relaxed atomic words (bmv2
/// registers are shared by all packets; tearing between the words of a
/// value wider than 64 bits is accepted, as between bmv2's threads).
/// `#[repr(C)]`: generated code reads and writes `lo` at a fixed offset.
#[repr(C)]
pub struct RegCell {
    pub(crate) lo: AtomicU64,
    pub(crate) hi: AtomicU64,
}

impl RegCell {
    fn zero() -> RegCell {
        RegCell { lo: AtomicU64::new(0), hi: AtomicU64::new(0) }
    }

    #[inline]
    fn load(&self) -> u128 {
        u128::from(self.lo.load(Ordering::Relaxed)) | (u128::from(self.hi.load(Ordering::Relaxed)) << 64)
    }

    #[inline]
    fn store(&self, v: u128) {
        self.lo.store(v as u64, Ordering::Relaxed);
        self.hi.store((v >> 64) as u64, Ordering::Relaxed);
    }
}

/// The mask of a register of `width` bits: what a written value keeps.
#[inline]
pub fn width_mask(width: u32) -> u128 {
    crate::value::mask128(width)
}

/// Whether a register of `width` bits holds its values in its cells' `lo`
/// word alone (`hi` stays 0), where generated code reads and writes them.
#[inline]
pub fn in_low_word(width: u32) -> bool {
    width <= 64
}

/// One register array.
struct Array {
    width: u32,
    cells: Box<[RegCell]>,
}

/// Register arrays, shared by clones (`Clone` shares, it does not copy).
#[derive(Clone)]
pub struct Registers(Arc<Vec<Array>>);

impl Registers {
    /// Zeroed arrays of the given `(cells, bit width)`.
    pub fn new(arrays: impl IntoIterator<Item = (usize, u32)>) -> Registers {
        Registers(Arc::new(
            arrays
                .into_iter()
                .map(|(n, width)| Array { width, cells: (0..n).map(|_| RegCell::zero()).collect() })
                .collect(),
        ))
    }

    /// Cell `i` of array `arr`, `None` when out of range.
    #[inline]
    fn cell(&self, arr: usize, i: usize) -> Option<&RegCell> {
        self.0.get(arr)?.cells.get(i)
    }

    /// Cell `i` of array `arr`, `None` when out of range.
    #[inline]
    pub fn read(&self, arr: usize, i: usize) -> Option<u128> {
        self.cell(arr, i).map(RegCell::load)
    }

    /// A packet's `register_read`: cell `i` of array `arr`, 0 when out of range.
    #[inline]
    pub fn read_or_zero(&self, arr: usize, i: usize) -> u128 {
        self.read(arr, i).unwrap_or(0)
    }

    /// Writes `v`, cut to the array's width, to cell `i` of array `arr`;
    /// false (nothing written) when out of range.
    #[inline]
    pub fn write(&self, arr: usize, i: usize, v: u128) -> bool {
        let Some(a) = self.0.get(arr) else { return false };
        match a.cells.get(i) {
            Some(c) => {
                c.store(v & width_mask(a.width));
                true
            }
            None => false,
        }
    }

    /// Cells of array `arr`.
    pub fn len(&self, arr: usize) -> usize {
        self.0.get(arr).map_or(0, |a| a.cells.len())
    }

    /// Whether there are no register arrays.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of register arrays.
    pub fn arrays(&self) -> usize {
        self.0.len()
    }

    /// The cells of array `arr`, for generated code (which writes `lo`
    /// only for registers of at most 64 bits, so `hi` stays 0 there).
    pub fn cells(&self, arr: usize) -> &[RegCell] {
        &self.0[arr].cells
    }

    /// Every value of array `arr`.
    pub fn values(&self, arr: usize) -> Vec<u128> {
        self.0.get(arr).map_or_else(Vec::new, |a| a.cells.iter().map(RegCell::load).collect())
    }

    /// Zeroes array `arr`.
    pub fn reset(&self, arr: usize) {
        if let Some(a) = self.0.get(arr) {
            for c in a.cells.iter() {
                c.store(0);
            }
        }
    }

    /// A new, unshared copy (for a switch that must not see this one's writes).
    pub fn deep_copy(&self) -> Registers {
        Registers(Arc::new(
            self.0
                .iter()
                .map(|a| Array {
                    width: a.width,
                    cells: a
                        .cells
                        .iter()
                        .map(|c| {
                            let copy = RegCell::zero();
                            copy.store(c.load());
                            copy
                        })
                        .collect(),
                })
                .collect(),
        ))
    }
}

impl std::fmt::Debug for Registers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries((0..self.0.len()).map(|a| self.values(a))).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_registers_and_deep_copies_do_not() {
        let a = Registers::new([(4, 128), (2, 8)]);
        let b = a.clone();
        assert!(b.write(0, 3, (7u128 << 64) | 9));
        assert_eq!(a.read(0, 3), Some((7u128 << 64) | 9));
        assert!(!a.write(1, 2, 1), "out of range");
        assert_eq!(a.read(1, 2), None);
        assert_eq!(a.read_or_zero(1, 2), 0);
        let c = a.deep_copy();
        c.write(0, 3, 1);
        assert_eq!(a.read(0, 3), Some((7u128 << 64) | 9));
        assert_eq!(c.read(0, 3), Some(1));
        a.reset(0);
        assert_eq!(a.values(0), vec![0, 0, 0, 0]);
    }

    #[test]
    fn writes_are_cut_to_the_register_width() {
        let r = Registers::new([(1, 9), (1, 64), (1, 128)]);
        r.write(0, 0, 0x1_2345);
        r.write(1, 0, u128::MAX);
        r.write(2, 0, u128::MAX);
        assert_eq!(r.values(0), vec![0x145]);
        assert_eq!(r.values(1), vec![u128::from(u64::MAX)]);
        assert_eq!(r.values(2), vec![u128::MAX]);
        // A register of at most 64 bits keeps `hi` at 0, for generated code.
        assert_eq!(r.cells(1)[0].hi.load(Ordering::Relaxed), 0);
        assert!(in_low_word(64) && !in_low_word(65));
        assert_eq!(width_mask(64), u128::from(u64::MAX));
        assert_eq!(width_mask(9), 0x1ff);
        // Out of range: nothing written, nothing to read.
        assert!(!r.write(3, 0, 1) && !r.write(0, 1, 1));
        assert_eq!(r.values(3), Vec::<u128>::new());
        r.reset(3);
    }
}
