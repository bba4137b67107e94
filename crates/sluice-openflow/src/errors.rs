//! OpenFlow 1.3 error types and codes (`ofp_error_type` and the per-type
//! code enums of OpenFlow 1.3.5, section 7.4.4) as constants, the
//! [`OfError`] value the decoder and the switch return, and
//! [`error_reply`], which writes an ERROR body quoting the offending
//! request.

use crate::types::ErrorMsg;

/// `ofp_error_type`.
pub mod error_type {
    pub const HELLO_FAILED: u16 = 0;
    pub const BAD_REQUEST: u16 = 1;
    pub const BAD_ACTION: u16 = 2;
    pub const BAD_INSTRUCTION: u16 = 3;
    pub const BAD_MATCH: u16 = 4;
    pub const FLOW_MOD_FAILED: u16 = 5;
    pub const GROUP_MOD_FAILED: u16 = 6;
    pub const PORT_MOD_FAILED: u16 = 7;
    pub const TABLE_MOD_FAILED: u16 = 8;
    pub const QUEUE_OP_FAILED: u16 = 9;
    pub const SWITCH_CONFIG_FAILED: u16 = 10;
    pub const ROLE_REQUEST_FAILED: u16 = 11;
    pub const METER_MOD_FAILED: u16 = 12;
    pub const TABLE_FEATURES_FAILED: u16 = 13;
    /// OpenFlow 1.4+.
    pub const BAD_PROPERTY: u16 = 14;
    pub const ASYNC_CONFIG_FAILED: u16 = 15;
    pub const FLOW_MONITOR_FAILED: u16 = 16;
    pub const BUNDLE_FAILED: u16 = 17;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `ofp_bad_property_code` (OpenFlow 1.4).
pub mod bad_property {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_VALUE: u16 = 2;
    pub const TOO_MANY: u16 = 3;
    pub const DUP_TYPE: u16 = 4;
    pub const BAD_EXPERIMENTER: u16 = 5;
    pub const BAD_EXP_TYPE: u16 = 6;
    pub const BAD_EXP_VALUE: u16 = 7;
    pub const EPERM: u16 = 8;
}

/// `ofp_async_config_failed_code` (OpenFlow 1.4).
pub mod async_config_failed {
    pub const INVALID: u16 = 0;
    pub const UNSUPPORTED: u16 = 1;
    pub const EPERM: u16 = 2;
}

/// `ofp_flow_monitor_failed_code` (OpenFlow 1.4).
pub mod flow_monitor_failed {
    pub const UNKNOWN: u16 = 0;
    pub const MONITOR_EXISTS: u16 = 1;
    pub const INVALID_MONITOR: u16 = 2;
    pub const UNKNOWN_MONITOR: u16 = 3;
    pub const BAD_COMMAND: u16 = 4;
    pub const BAD_FLAGS: u16 = 5;
    pub const BAD_TABLE_ID: u16 = 6;
    pub const BAD_OUT: u16 = 7;
}

/// `ofp_hello_failed_code`.
pub mod hello_failed {
    pub const INCOMPATIBLE: u16 = 0;
    pub const EPERM: u16 = 1;
}

/// `ofp_bad_request_code`.
pub mod bad_request {
    pub const BAD_VERSION: u16 = 0;
    pub const BAD_TYPE: u16 = 1;
    pub const BAD_MULTIPART: u16 = 2;
    pub const BAD_EXPERIMENTER: u16 = 3;
    pub const BAD_EXP_TYPE: u16 = 4;
    pub const EPERM: u16 = 5;
    pub const BAD_LEN: u16 = 6;
    pub const BUFFER_EMPTY: u16 = 7;
    pub const BUFFER_UNKNOWN: u16 = 8;
    pub const BAD_TABLE_ID: u16 = 9;
    pub const IS_SLAVE: u16 = 10;
    pub const BAD_PORT: u16 = 11;
    pub const BAD_PACKET: u16 = 12;
    pub const MULTIPART_BUFFER_OVERFLOW: u16 = 13;
}

/// `ofp_bad_action_code`.
pub mod bad_action {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_EXPERIMENTER: u16 = 2;
    pub const BAD_EXP_TYPE: u16 = 3;
    pub const BAD_OUT_PORT: u16 = 4;
    pub const BAD_ARGUMENT: u16 = 5;
    pub const EPERM: u16 = 6;
    pub const TOO_MANY: u16 = 7;
    pub const BAD_QUEUE: u16 = 8;
    pub const BAD_OUT_GROUP: u16 = 9;
    pub const MATCH_INCONSISTENT: u16 = 10;
    pub const UNSUPPORTED_ORDER: u16 = 11;
    pub const BAD_TAG: u16 = 12;
    pub const BAD_SET_TYPE: u16 = 13;
    pub const BAD_SET_LEN: u16 = 14;
    pub const BAD_SET_ARGUMENT: u16 = 15;
}

/// `ofp_bad_instruction_code`.
pub mod bad_instruction {
    pub const UNKNOWN_INST: u16 = 0;
    pub const UNSUP_INST: u16 = 1;
    pub const BAD_TABLE_ID: u16 = 2;
    pub const UNSUP_METADATA: u16 = 3;
    pub const UNSUP_METADATA_MASK: u16 = 4;
    pub const BAD_EXPERIMENTER: u16 = 5;
    pub const BAD_EXP_TYPE: u16 = 6;
    pub const BAD_LEN: u16 = 7;
    pub const EPERM: u16 = 8;
}

/// `ofp_bad_match_code`.
pub mod bad_match {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_TAG: u16 = 2;
    pub const BAD_DL_ADDR_MASK: u16 = 3;
    pub const BAD_NW_ADDR_MASK: u16 = 4;
    pub const BAD_WILDCARDS: u16 = 5;
    pub const BAD_FIELD: u16 = 6;
    pub const BAD_VALUE: u16 = 7;
    pub const BAD_MASK: u16 = 8;
    pub const BAD_PREREQ: u16 = 9;
    pub const DUP_FIELD: u16 = 10;
    pub const EPERM: u16 = 11;
}

/// `ofp_flow_mod_failed_code`.
pub mod flow_mod_failed {
    pub const UNKNOWN: u16 = 0;
    pub const TABLE_FULL: u16 = 1;
    pub const BAD_TABLE_ID: u16 = 2;
    pub const OVERLAP: u16 = 3;
    pub const EPERM: u16 = 4;
    pub const BAD_TIMEOUT: u16 = 5;
    pub const BAD_COMMAND: u16 = 6;
    pub const BAD_FLAGS: u16 = 7;
}

/// `ofp_group_mod_failed_code`.
pub mod group_mod_failed {
    pub const GROUP_EXISTS: u16 = 0;
    pub const INVALID_GROUP: u16 = 1;
    pub const WEIGHT_UNSUPPORTED: u16 = 2;
    pub const OUT_OF_GROUPS: u16 = 3;
    pub const OUT_OF_BUCKETS: u16 = 4;
    pub const CHAINING_UNSUPPORTED: u16 = 5;
    pub const WATCH_UNSUPPORTED: u16 = 6;
    pub const LOOP: u16 = 7;
    pub const UNKNOWN_GROUP: u16 = 8;
    pub const CHAINED_GROUP: u16 = 9;
    pub const BAD_TYPE: u16 = 10;
    pub const BAD_COMMAND: u16 = 11;
    pub const BAD_BUCKET: u16 = 12;
    pub const BAD_WATCH: u16 = 13;
    pub const EPERM: u16 = 14;
}

/// `ofp_port_mod_failed_code`.
pub mod port_mod_failed {
    pub const BAD_PORT: u16 = 0;
    pub const BAD_HW_ADDR: u16 = 1;
    pub const BAD_CONFIG: u16 = 2;
    pub const BAD_ADVERTISE: u16 = 3;
    pub const EPERM: u16 = 4;
}

/// `ofp_table_mod_failed_code`.
pub mod table_mod_failed {
    pub const BAD_TABLE: u16 = 0;
    pub const BAD_CONFIG: u16 = 1;
    pub const EPERM: u16 = 2;
}

/// `ofp_queue_op_failed_code`.
pub mod queue_op_failed {
    pub const BAD_PORT: u16 = 0;
    pub const BAD_QUEUE: u16 = 1;
    pub const EPERM: u16 = 2;
}

/// `ofp_switch_config_failed_code`.
pub mod switch_config_failed {
    pub const BAD_FLAGS: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const EPERM: u16 = 2;
}

/// `ofp_role_request_failed_code`.
pub mod role_request_failed {
    pub const STALE: u16 = 0;
    pub const UNSUP: u16 = 1;
    pub const BAD_ROLE: u16 = 2;
}

/// `ofp_meter_mod_failed_code`.
pub mod meter_mod_failed {
    pub const UNKNOWN: u16 = 0;
    pub const METER_EXISTS: u16 = 1;
    pub const INVALID_METER: u16 = 2;
    pub const UNKNOWN_METER: u16 = 3;
    pub const BAD_COMMAND: u16 = 4;
    pub const BAD_FLAGS: u16 = 5;
    pub const BAD_RATE: u16 = 6;
    pub const BAD_BURST: u16 = 7;
    pub const BAD_BAND: u16 = 8;
    pub const BAD_BAND_VALUE: u16 = 9;
    pub const OUT_OF_METERS: u16 = 10;
    pub const OUT_OF_BANDS: u16 = 11;
}

/// `ofp_table_features_failed_code`.
pub mod table_features_failed {
    pub const BAD_TABLE: u16 = 0;
    pub const BAD_METADATA: u16 = 1;
    pub const BAD_TYPE: u16 = 2;
    pub const BAD_LEN: u16 = 3;
    pub const BAD_ARGUMENT: u16 = 4;
    pub const EPERM: u16 = 5;
}

/// An OpenFlow error: the type and code to send back in an ERROR
/// message, and a human-readable reason (for logs; not sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfError {
    pub typ: u16,
    pub code: u16,
    pub reason: String,
}

impl OfError {
    pub fn new(typ: u16, code: u16, reason: impl Into<String>) -> OfError {
        OfError { typ, code, reason: reason.into() }
    }

    /// Whether `typ` is one of the specification's error types (up to
    /// OpenFlow 1.4's).
    pub fn is_spec_type(typ: u16) -> bool {
        typ <= error_type::BUNDLE_FAILED || typ == error_type::EXPERIMENTER
    }
}

/// The specification's name of an error type, for messages.
fn type_name(typ: u16) -> &'static str {
    match typ {
        error_type::HELLO_FAILED => "HELLO_FAILED",
        error_type::BAD_REQUEST => "BAD_REQUEST",
        error_type::BAD_ACTION => "BAD_ACTION",
        error_type::BAD_INSTRUCTION => "BAD_INSTRUCTION",
        error_type::BAD_MATCH => "BAD_MATCH",
        error_type::FLOW_MOD_FAILED => "FLOW_MOD_FAILED",
        error_type::GROUP_MOD_FAILED => "GROUP_MOD_FAILED",
        error_type::PORT_MOD_FAILED => "PORT_MOD_FAILED",
        error_type::TABLE_MOD_FAILED => "TABLE_MOD_FAILED",
        error_type::QUEUE_OP_FAILED => "QUEUE_OP_FAILED",
        error_type::SWITCH_CONFIG_FAILED => "SWITCH_CONFIG_FAILED",
        error_type::ROLE_REQUEST_FAILED => "ROLE_REQUEST_FAILED",
        error_type::METER_MOD_FAILED => "METER_MOD_FAILED",
        error_type::TABLE_FEATURES_FAILED => "TABLE_FEATURES_FAILED",
        error_type::BAD_PROPERTY => "BAD_PROPERTY",
        error_type::ASYNC_CONFIG_FAILED => "ASYNC_CONFIG_FAILED",
        error_type::FLOW_MONITOR_FAILED => "FLOW_MONITOR_FAILED",
        error_type::BUNDLE_FAILED => "BUNDLE_FAILED",
        error_type::EXPERIMENTER => "EXPERIMENTER",
        _ => "UNKNOWN",
    }
}

impl std::fmt::Display for OfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpenFlow error {} ({}) code {}: {}", type_name(self.typ), self.typ, self.code, self.reason)
    }
}

impl std::error::Error for OfError {}

/// How many bytes of the failed request an ERROR quotes.
pub const ERROR_DATA_LEN: usize = 64;

/// The ERROR body for `e` in answer to `request` (the whole offending
/// message as received): its type and code, and the request's first 64
/// bytes (all of it when shorter).
pub fn error_reply(request: &[u8], e: &OfError) -> ErrorMsg {
    let n = request.len().min(ERROR_DATA_LEN);
    ErrorMsg { typ: e.typ, code: e.code, data: request[..n].to_vec() }
}
