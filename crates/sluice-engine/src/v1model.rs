//! What the v1model architecture fixes, whichever path runs a packet: the
//! values of `standard_metadata.instance_type`, the drop port, and the
//! bound Sluice puts on parser loops.

/// Instance type values of `standard_metadata.instance_type`.
pub mod instance {
    pub const NORMAL: u128 = 0;
    pub const INGRESS_CLONE: u128 = 1;
    pub const EGRESS_CLONE: u128 = 2;
    pub const RECIRC: u128 = 4;
    pub const REPLICATION: u128 = 5;
    pub const RESUBMIT: u128 = 6;
}

/// Parser states one packet may visit before the parser gives up with `ParserTimeout`.
pub const MAX_PARSER_STATES: u32 = 10_000;

/// The drop port of simple_switch.
pub const DROP_PORT: u128 = 511;
