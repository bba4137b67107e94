//! The `snabb-softwire-v3` configuration: the typed tree ([`Config`]), read
//! from Snabb's YANG text syntax with errors that name the line and the path
//! in the tree, validated, and written back.

mod schema;

pub use schema::*;
