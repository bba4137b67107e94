//! Starts the P4Runtime server next to the live switch.

use std::sync::Arc;

use sluice_control::device::Device;

/// Serves P4Runtime on `addr` (`HOST:PORT`) from threads of its own.
pub fn start(device: Arc<Device>, addr: &str) -> Result<(), String> {
    let local = sluice_p4runtime::start(device, addr)?;
    eprintln!("sluice: P4Runtime server listening on {local}");
    Ok(())
}
