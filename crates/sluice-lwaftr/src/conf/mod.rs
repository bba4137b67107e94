//! The `snabb-softwire-v3` configuration: the typed tree ([`Config`]), read
//! from Snabb's YANG text syntax with errors that name the line and the path
//! in the tree ([`Config::parse`], [`ConfError`]), validated, written back
//! ([`Config::to_text`]), and generated for tests and benchmarks
//! ([`generate_configuration`]).

pub mod data;
mod generate;
mod lexer;
mod parser;
mod schema;
mod writer;

pub use generate::{generate_configuration, MAX_GENERATED};
pub use parser::ConfError;
pub use schema::*;
