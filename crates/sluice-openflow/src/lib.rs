//! OpenFlow 1.3 on the wire (OpenFlow 1.3.5): every message, structure,
//! OXM field, action and instruction as Rust values ([`types`]), decoded
//! from and encoded to bytes, with the specification's error type and
//! code for anything malformed and never a panic. The [`of10`] module has
//! the OpenFlow 1.0 messages a controller needs (its own values, decoder
//! and encoder beside the 1.3 ones).
//!
//! The API:
//! - [`peek_header`] reads the 8-byte header (stream framing: a whole
//!   message is `length` bytes); [`decode`] turns exactly one whole
//!   message into `(Header, Message)` or an [`OfError`] carrying the
//!   spec's error type and code; [`encode`] / [`encode_into`] write a
//!   [`Message`] with all the spec's padding.
//! - [`error_reply`] builds the ERROR body for an [`OfError`], quoting the
//!   first 64 bytes of the request; [`errors`] holds every error type and
//!   code as constants.
//! - [`prerequisite_ok`] validates a decoded [`Match`] (field lengths,
//!   masks, duplicates, OXM prerequisites); decoding itself stays
//!   permissive so that anything well-framed round-trips.
//! - [`negotiate`] and [`version_bitmap_supports`] implement HELLO
//!   version negotiation.

pub mod action;
pub mod codec;
pub mod connection;
pub mod errors;
mod lists;
pub mod monitor;
pub mod multipart;
pub mod of10;
pub mod oxm;
pub mod translate10;
pub mod types;
mod wire;

pub use codec::*;
pub use errors::{error_reply, OfError};
pub use lists::{decode_actions, encode_actions};
pub use oxm::{prerequisite_ok, OFPVID_PRESENT};
pub use types::*;
