//! Memory helpers the lookup structures, the ports and the data planes
//! share: short copies without a `memcpy` call, the page-size hints for big
//! arrays, and giving an idle buffer's pages back.

/// Copies `src` into `dst` (same length). Short copies (1 to 64 bytes:
/// headers, a small frame's payload, a key or hash input field) are done
/// as two overlapping fixed-size moves, which the compiler turns into a few
/// instructions; `copy_from_slice` of a length unknown at compile time
/// calls `memcpy`.
#[inline(always)]
pub fn copy_short(dst: &mut [u8], src: &[u8]) {
    fn two<const K: usize>(dst: &mut [u8], src: &[u8]) {
        let n = src.len();
        let head: [u8; K] = src[..K].try_into().expect("K bytes");
        let tail: [u8; K] = src[n - K..].try_into().expect("K bytes");
        dst[..K].copy_from_slice(&head);
        dst[n - K..].copy_from_slice(&tail);
    }
    assert_eq!(dst.len(), src.len(), "copy_short needs equal lengths");
    match src.len() {
        32..=64 => two::<32>(dst, src),
        16..=31 => two::<16>(dst, src),
        8..=15 => two::<8>(dst, src),
        4..=7 => two::<4>(dst, src),
        2..=3 => two::<2>(dst, src),
        1 => dst[0] = src[0],
        _ => dst.copy_from_slice(src),
    }
}

/// Asks the kernel to back a big, not yet touched array with 2 MiB pages
/// (transparent huge pages in `madvise` mode). Why: a 64 MiB top level read
/// at random misses the TLB on almost every lookup with 4 KiB pages; with
/// huge pages its 32 translations stay cached. A hint: where the kernel
/// declines, nothing changes but speed.
pub fn advise_huge_pages<T>(v: &[T]) {
    advise_whole(v, 2 << 20, libc::MADV_HUGEPAGE);
}

/// `madvise(advice)` on the whole `align`-aligned blocks inside `v`.
fn advise_whole<T>(v: &[T], align: usize, advice: libc::c_int) {
    // SAFETY: `v`'s own memory; the advice only changes how the kernel
    // backs the pages, never their contents.
    unsafe { advise_range(v.as_ptr() as usize, std::mem::size_of_val(v), align, advice) }
}

/// `madvise(advice)` on the whole `align`-aligned blocks inside
/// `[start, start + len)`.
///
/// # Safety
/// The range must be memory the caller owns, and the advice must suit its
/// contents (`MADV_DONTNEED` makes them zero).
unsafe fn advise_range(start: usize, len: usize, align: usize, advice: libc::c_int) {
    let end = start + len;
    let first = start.next_multiple_of(align);
    if end > first + align {
        let len = (end - first) / align * align;
        // SAFETY: inside the caller's range (its word).
        unsafe { libc::madvise(first as *mut libc::c_void, len, advice) };
    }
}

/// Gives the whole 4 KiB pages inside `v` back to the kernel
/// (`MADV_DONTNEED`): they cost nothing until written again and read as
/// zeros meanwhile. For a buffer whose contents are no longer wanted (an
/// idle worker's receive buffer).
pub fn release_pages(v: &mut [u8]) {
    // SAFETY: `v` is borrowed exclusively, and zero is a valid byte.
    unsafe { advise_range(v.as_mut_ptr() as usize, v.len(), 4096, libc::MADV_DONTNEED) }
}

/// The same for the unused capacity of `v` past its length (an empty
/// send buffer kept for the next batch).
pub fn release_spare_capacity(v: &mut Vec<u8>) {
    let spare = v.spare_capacity_mut();
    // SAFETY: the spare capacity is `v`'s own, borrowed exclusively, and
    // holds no value (uninitialized bytes; zeros after the advice).
    unsafe { advise_range(spare.as_mut_ptr() as usize, spare.len(), 4096, libc::MADV_DONTNEED) }
}

/// Asks the kernel to keep a big, sparsely used array on 4 KiB pages,
/// whatever a huge-page-advising allocator asked (`MADV_NOHUGEPAGE`):
/// a few slots written then cost a few pages, not 2 MiB each.
pub fn advise_small_pages<T>(v: &[T]) {
    advise_whole(v, 4096, libc::MADV_NOHUGEPAGE);
}

/// Elements from which [`push_advised`] and [`clone_advised`] ask for
/// huge pages (below, a vector fits a few 4 KiB pages anyway).
const ADVISED_FROM: usize = 1 << 14;

/// Pushes `x` onto `v`; when `v` is full and big, it moves into a new
/// allocation twice the size advised into huge pages before any of it is
/// touched (growing in place would keep the 4 KiB pages it already has).
/// For big arrays read at random on the packet path, one slot per entry.
pub fn push_advised<T>(v: &mut Vec<T>, x: T) {
    if v.len() == v.capacity() && v.len() >= ADVISED_FROM {
        let mut bigger = Vec::with_capacity(v.capacity() * 2);
        advise_huge_pages(bigger.spare_capacity_mut());
        bigger.append(v);
        *v = bigger;
    }
    v.push(x);
}

/// A copy of `v` whose allocation is advised into huge pages before the
/// copy touches it, when `v` is big (see [`push_advised`]).
pub fn clone_advised<T: Clone>(v: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    if v.len() >= ADVISED_FROM {
        advise_huge_pages(out.spare_capacity_mut());
    }
    out.extend_from_slice(v);
    out
}

/// Private anonymous memory mapped for one owner and unmapped when it is
/// dropped: zeros until written. With `populate` every page is backed at
/// once (`MAP_POPULATE`: a buffer the kernel or a NIC is about to fill);
/// without it a page takes memory only when first written, and reads of
/// untouched pages see the kernel's shared zero page.
pub struct AnonMapping {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned like a `Box<[u8]>`; its users synchronize
// their own accesses through the raw pointer.
unsafe impl Send for AnonMapping {}
// SAFETY: as above.
unsafe impl Sync for AnonMapping {}

impl AnonMapping {
    /// `len` bytes (at least one page is mapped), page-aligned.
    pub fn new(len: usize, populate: bool) -> std::io::Result<AnonMapping> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | if populate { libc::MAP_POPULATE } else { 0 };
        // SAFETY: a fresh private anonymous mapping, no file; checked below.
        let p =
            unsafe { libc::mmap(std::ptr::null_mut(), len.max(1), libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(AnonMapping { ptr: std::ptr::NonNull::new(p.cast()).expect("mmap gives no null"), len })
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AnonMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, of this size, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len.max(1)) };
    }
}

/// An array of `len` values of `T`, all zero bytes at first, in an
/// [`AnonMapping`] of its own, not populated: pages never written take no
/// memory, so a big array that is written in a few places costs those
/// places' pages. Why: a direct array of 64-byte records, one for every
/// 16-bit key, is 4 MiB, of which a table of a few entries writes a few
/// pages (an allocator's zeroed allocation may clear, and so commit, all
/// of it).
pub struct ZeroedArray<T> {
    map: AnonMapping,
    len: usize,
    _values: std::marker::PhantomData<T>,
}

impl<T: Copy> ZeroedArray<T> {
    /// `len` zeroed values.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T`.
    ///
    /// # Panics
    /// When the kernel refuses the mapping (out of address space).
    pub unsafe fn new(len: usize) -> ZeroedArray<T> {
        let bytes = std::mem::size_of::<T>().checked_mul(len).expect("array size");
        assert!(std::mem::align_of::<T>() <= 4096, "pages align to 4096");
        let map = AnonMapping::new(bytes, false).unwrap_or_else(|e| panic!("mapping {bytes} bytes: {e}"));
        ZeroedArray { map, len, _values: std::marker::PhantomData }
    }

    /// The first value, for readers that index the array themselves.
    pub fn as_ptr(&self) -> *const T {
        self.map.as_ptr().cast()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Value `i` (`i < len`).
    pub fn get(&self, i: usize) -> T {
        assert!(i < self.len, "index {i} of {}", self.len);
        // SAFETY: inside the mapping, whose bytes are valid `T`s (zeros or written).
        unsafe { *self.as_ptr().add(i) }
    }

    /// Writes value `i` (`i < len`).
    pub fn set(&mut self, i: usize, v: T) {
        assert!(i < self.len, "index {i} of {}", self.len);
        // SAFETY: inside the mapping, borrowed exclusively.
        unsafe { *self.map.as_ptr().cast::<T>().add(i) = v }
    }
}

impl<T> std::fmt::Debug for ZeroedArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZeroedArray({} x {} bytes)", self.len, std::mem::size_of::<T>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_as_zeros_and_the_rest_is_kept() {
        let mut v = vec![7u8; 64 << 10];
        release_pages(&mut v);
        // Whole pages inside went back (zeros); the bytes of the partial
        // pages at the ends, if any, keep their value.
        let first = v.as_ptr().align_offset(4096);
        assert!(v[first..first + 4096].iter().all(|b| *b == 0));
        assert!(v[..first].iter().all(|b| *b == 7));
        let mut w: Vec<u8> = Vec::with_capacity(64 << 10);
        w.extend_from_slice(&[1, 2, 3]);
        release_spare_capacity(&mut w);
        assert_eq!(w, [1, 2, 3], "the values held stay");
    }

    #[test]
    fn a_zeroed_array_reads_zeros_until_written() {
        // SAFETY: zero is a valid `[u64; 8]`.
        let mut a = unsafe { ZeroedArray::<[u64; 8]>::new(1 << 16) };
        assert_eq!(a.len(), 1 << 16);
        assert_eq!(a.get(12345), [0; 8]);
        a.set(12345, [3; 8]);
        a.set(0, [1; 8]);
        assert_eq!((a.get(12345), a.get(0), a.get(12346)), ([3; 8], [1; 8], [0; 8]));
        assert_eq!(a.as_ptr() as usize % 4096, 0, "a mapping starts a page");
    }
}
