//! OpenFlow 1.3 on the wire (OpenFlow 1.3.5): every message, structure,
//! OXM field, action and instruction as Rust values ([`types`]), decoded
//! from and encoded to bytes, with the specification's error type and
//! code for anything malformed and never a panic. OpenFlow 1.0 is known
//! only as far as HELLO and ERROR go (version negotiation manners).

pub mod types;

pub use types::*;
