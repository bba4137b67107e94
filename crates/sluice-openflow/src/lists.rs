//! Action lists on their own, outside a message: what a switch needs to
//! carry a packet-out's actions to the data plane.

use crate::action::{get_actions, put_actions};
use crate::{Action, OfError};

/// The OpenFlow encoding of `actions` (as in a packet-out or a bucket).
pub fn encode_actions(actions: &[Action]) -> Vec<u8> {
    let mut v = Vec::new();
    put_actions(&mut v, actions);
    v
}

/// Decodes an action list encoded as [`encode_actions`] writes it.
pub fn decode_actions(buf: &[u8]) -> Result<Vec<Action>, OfError> {
    get_actions(buf)
}
