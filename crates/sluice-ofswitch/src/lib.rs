//! An OpenFlow 1.3 switch on Sluice's data-plane parts.
//!
//! - [`fields`]: packet fields as OpenFlow matches and sets them;
//! - [`table`]: one flow table on `sluice-lookup`'s classifier, keyed on
//!   the fields its entries use;
//! - [`prefix`]: the route-table template a table switches to: one
//!   longest-prefix match instead of the classifier;
//! - [`switch`]: the pipeline of tables, action sets and groups as a
//!   `DataPlane` ([`OfSwitch`]), run by Sluice's live loop and bench, one
//!   file per stage; its state is private, read and changed through a
//!   typed API whose every change keeps the derived state right;
//! - [`code`]: small tables compiled to native code;
//! - [`cache`]: the flow cache: walks through the tables recorded once
//!   and replayed for packets that look the same to every table;
//! - [`meter`]: meters, their bands' token buckets and statistics;
//! - [`normal`]: the NORMAL port's MAC learning;
//! - [`features`]: what the switch supports (action, instruction, group
//!   and meter band types, fields, link speeds), which its features
//!   replies and its checks both read;
//! - [`control`]: flow-mods, group-mods and meter-mods, validated and
//!   applied to every copy of the switch.
//!
//! The agent that speaks OpenFlow to controllers is `sluice-ofagent`.

pub mod cache;
pub mod code;
pub mod control;
pub mod features;
pub mod fields;
pub mod meter;
pub mod normal;
pub mod prefix;
pub mod switch;
pub mod table;

pub use switch::{Note, OfSwitch, PortInfo};
