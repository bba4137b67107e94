//! Where a data plane's frames go: [`Emit`].
//!
//! Contract: a data plane sends every frame through [`Emit::emit`] (one
//! slice) or [`Emit::emit_parts`] (a head it built, then a tail of a frame
//! it received, unchanged): an encapsulation or a decapsulation sends its
//! new headers and the packet it carries without copying the packet first.
//! The driver joins the parts as it copies the frame out (a port writes
//! them one after the other into its transmit buffer) or counts them
//! without joining (the bench's sink). Any closure
//! `FnMut(input, port, &[u8])` is an [`Emit`]: it gets the parts joined in
//! a buffer of its thread (kept for the next frame, so no allocation per
//! frame once it is big enough).

use std::cell::RefCell;

/// A receiver of the frames a data plane sends (see the module documentation).
pub trait Emit {
    /// Frame `frame`, caused by input frame `input`, leaves on `port`.
    fn emit(&mut self, input: usize, port: u32, frame: &[u8]);

    /// The frame `head` followed by `tail` leaves on `port`.
    fn emit_parts(&mut self, input: usize, port: u32, head: &[u8], tail: &[u8]);
}

thread_local! {
    /// Where a closure's parts are joined.
    static JOINED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl<F: FnMut(usize, u32, &[u8]) + ?Sized> Emit for F {
    #[inline]
    fn emit(&mut self, input: usize, port: u32, frame: &[u8]) {
        self(input, port, frame)
    }

    fn emit_parts(&mut self, input: usize, port: u32, head: &[u8], tail: &[u8]) {
        joined(head, tail, |f| self(input, port, f))
    }
}

/// Runs `f` on `head` followed by `tail`: on `head` itself when `tail` is
/// empty, else on the two joined in a buffer of this thread (kept for the
/// next call: no allocation once it is big enough).
pub fn joined<R>(head: &[u8], tail: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    if tail.is_empty() {
        return f(head);
    }
    // Taken out of the cell while `f` runs: an `f` that joins parts
    // itself (a driver of a driver) gets a fresh buffer.
    let mut buf = JOINED.with(|j| std::mem::take(&mut *j.borrow_mut()));
    buf.clear();
    buf.extend_from_slice(head);
    buf.extend_from_slice(tail);
    let r = f(&buf);
    JOINED.with(|j| *j.borrow_mut() = buf);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closure_gets_the_parts_joined() {
        let mut out: Vec<(usize, u32, Vec<u8>)> = Vec::new();
        let mut f = |i: usize, p: u32, b: &[u8]| out.push((i, p, b.to_vec()));
        f.emit(0, 1, b"abc");
        f.emit_parts(1, 2, b"head", b"tail");
        f.emit_parts(2, 3, b"only", b"");
        f.emit_parts(3, 4, b"", b"rest");
        assert_eq!(
            out,
            vec![
                (0, 1, b"abc".to_vec()),
                (1, 2, b"headtail".to_vec()),
                (2, 3, b"only".to_vec()),
                (3, 4, b"rest".to_vec())
            ]
        );
    }
}
