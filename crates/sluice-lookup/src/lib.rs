//! Lookup structures for Sluice's data planes, independent of any one of
//! them (the v1model engine uses them for its match tables; other data
//! planes can use them for binding tables, flow tables or routes).
//!
//! - [`exact`]: an open-addressing map from keys of up to 64 bits to
//!   `u32` values, laid out so that generated code can probe it inline;
//! - [`inline`]: an open-addressing map from `u64` keys to small records
//!   kept in the slots (one cache line per hit, for very large tables);
//! - [`lpm`]: DIR-24-8 longest-prefix match for keys of up to 32 bits,
//!   plus the prefetch hint the packet path uses;
//! - [`classifier`]: priority classification of byte keys by value/mask
//!   and range rules (tuple-space search with a lookup cache);
//! - [`selector`]: a group's members and the member a hash picks;
//! - [`mem`]: short copies without a `memcpy` call and the huge-page hint
//!   for big tables.
//!
//! Common contract: every structure is mutated through `&mut self` only
//! and looked up through `&self` (the classifier's cached lookup excepted,
//! which takes `&mut self`). None synchronizes internally: a data plane
//! either changes a structure between its packet batches on the thread
//! that looks it up, or gives each thread its own copy (all are `Clone`).
//! Values are `u32` indexes into the caller's own storage: what a hit
//! means (an action, a next hop, a softwire) is the caller's business.

pub mod classifier;
pub mod exact;
pub mod inline;
pub mod lpm;
pub mod mem;
pub mod selector;

/// A deterministic xorshift32 sequence from `seed` (non-zero), for tests
/// that need many varied but repeatable keys.
#[cfg(test)]
pub(crate) fn test_rng(seed: u32) -> impl FnMut() -> u32 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    }
}
