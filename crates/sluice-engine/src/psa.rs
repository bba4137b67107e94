//! What the Portable Switch Architecture fixes: the names `p4c-bm2-psa`
//! gives its blocks and metadata, the packet path values, the recirculation
//! port, and where a program's PSA metadata fields are (see
//! `crate::switch::psa` for the packet path itself and `docs/psa.md`).

use crate::phv::Layout;
use crate::CompileError;

/// The egress parser and deparser (the ingress ones are the others).
pub const EGRESS_PARSER: &str = "egress_parser";
pub const EGRESS_DEPARSER: &str = "egress_deparser";

/// The metadata instances `p4c-bm2-psa` emits (type name without `_t`).
pub const INGRESS_PARSER_INPUT: &str = "psa_ingress_parser_input_metadata";
pub const INGRESS_INPUT: &str = "psa_ingress_input_metadata";
pub const INGRESS_OUTPUT: &str = "psa_ingress_output_metadata";
pub const EGRESS_PARSER_INPUT: &str = "psa_egress_parser_input_metadata";
pub const EGRESS_INPUT: &str = "psa_egress_input_metadata";
pub const EGRESS_OUTPUT: &str = "psa_egress_output_metadata";
pub const EGRESS_DEPARSER_INPUT: &str = "psa_egress_deparser_input_metadata";

/// `PSA_PacketPath_t` values.
pub mod path {
    pub const NORMAL: u128 = 0;
    pub const NORMAL_UNICAST: u128 = 1;
    pub const NORMAL_MULTICAST: u128 = 2;
    pub const CLONE_I2E: u128 = 3;
    pub const CLONE_E2E: u128 = 4;
    pub const RESUBMIT: u128 = 5;
    pub const RECIRCULATE: u128 = 6;
}

/// `PSA_PORT_RECIRCULATE` of bmv2's `psa.p4`: a packet sent there goes
/// back to ingress.
pub const PORT_RECIRCULATE: u32 = 0xffff_fffa;

/// A program's PSA metadata fields (field ids; `None` where the program's
/// JSON has no such field).
#[derive(Debug, Clone, Default)]
pub struct PsaFields {
    pub ig_parser_port: Option<u32>,
    pub ig_parser_path: Option<u32>,
    pub ig_port: Option<u32>,
    pub ig_path: Option<u32>,
    pub ig_timestamp: Option<u32>,
    pub ig_parser_error: Option<u32>,
    pub ig_cos: Option<u32>,
    pub ig_clone: Option<u32>,
    pub ig_clone_session: Option<u32>,
    pub ig_drop: Option<u32>,
    pub ig_resubmit: Option<u32>,
    pub ig_multicast_group: Option<u32>,
    pub ig_egress_port: Option<u32>,
    pub eg_parser_port: Option<u32>,
    pub eg_parser_path: Option<u32>,
    pub eg_cos: Option<u32>,
    pub eg_port: Option<u32>,
    pub eg_path: Option<u32>,
    pub eg_instance: Option<u32>,
    pub eg_timestamp: Option<u32>,
    pub eg_parser_error: Option<u32>,
    pub eg_clone: Option<u32>,
    pub eg_clone_session: Option<u32>,
    pub eg_drop: Option<u32>,
    pub eg_deparser_port: Option<u32>,
}

impl PsaFields {
    /// The PSA fields of a program laid out as `layout`; the ingress
    /// output's `drop` must be there (what decides every packet's fate).
    pub fn of(layout: &Layout) -> Result<PsaFields, CompileError> {
        let f = |h: &str, n: &str| layout.field(h, n);
        let fields = PsaFields {
            ig_parser_port: f(INGRESS_PARSER_INPUT, "ingress_port"),
            ig_parser_path: f(INGRESS_PARSER_INPUT, "packet_path"),
            ig_port: f(INGRESS_INPUT, "ingress_port"),
            ig_path: f(INGRESS_INPUT, "packet_path"),
            ig_timestamp: f(INGRESS_INPUT, "ingress_timestamp"),
            ig_parser_error: f(INGRESS_INPUT, "parser_error"),
            ig_cos: f(INGRESS_OUTPUT, "class_of_service"),
            ig_clone: f(INGRESS_OUTPUT, "clone"),
            ig_clone_session: f(INGRESS_OUTPUT, "clone_session_id"),
            ig_drop: f(INGRESS_OUTPUT, "drop"),
            ig_resubmit: f(INGRESS_OUTPUT, "resubmit"),
            ig_multicast_group: f(INGRESS_OUTPUT, "multicast_group"),
            ig_egress_port: f(INGRESS_OUTPUT, "egress_port"),
            eg_parser_port: f(EGRESS_PARSER_INPUT, "egress_port"),
            eg_parser_path: f(EGRESS_PARSER_INPUT, "packet_path"),
            eg_cos: f(EGRESS_INPUT, "class_of_service"),
            eg_port: f(EGRESS_INPUT, "egress_port"),
            eg_path: f(EGRESS_INPUT, "packet_path"),
            eg_instance: f(EGRESS_INPUT, "instance"),
            eg_timestamp: f(EGRESS_INPUT, "egress_timestamp"),
            eg_parser_error: f(EGRESS_INPUT, "parser_error"),
            eg_clone: f(EGRESS_OUTPUT, "clone"),
            eg_clone_session: f(EGRESS_OUTPUT, "clone_session_id"),
            eg_drop: f(EGRESS_OUTPUT, "drop"),
            eg_deparser_port: f(EGRESS_DEPARSER_INPUT, "egress_port"),
        };
        if fields.ig_drop.is_none() {
            return Err(CompileError::at(
                "headers",
                format!("a PSA program needs the field \"{INGRESS_OUTPUT}.drop\" (psa_ingress_output_metadata_t)"),
            ));
        }
        Ok(fields)
    }
}
