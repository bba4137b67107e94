//! Memory helpers the lookup structures and the data planes share: short
//! copies without a `memcpy` call, and the huge-page hint for big tables.

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
    let start = v.as_ptr() as usize;
    let end = start + std::mem::size_of_val(v);
    let first = start.next_multiple_of(align);
    if end > first + align {
        let len = (end - first) / align * align;
        // SAFETY: the range lies inside `v`'s allocation; the advice only
        // changes how the kernel backs the pages, never their contents.
        unsafe { libc::madvise(first as *mut libc::c_void, len, advice) };
    }
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
