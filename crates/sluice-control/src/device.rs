//! The device the P4 control planes drive: the node's control of the
//! switch, the program text it runs, facts about the switch, and the
//! events the data plane sends up.
//!
//! Why one object: the Thrift and P4Runtime servers may run at the same
//! time and must see one state. Every request takes the node's lock
//! ([`Device::pool`], a `sluice_node::Session`), so requests from both
//! servers are serialized; the packet path never takes it (see
//! `sluice_dataplane::workers`).

use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_engine::runtime::Digest;
use sluice_engine::{ExecMode, Switch};
use sluice_node::{Control, Session};

use crate::learning::Learning;

/// Something the data plane reports to the control plane.
#[derive(Debug, Clone)]
pub enum Event {
    /// A frame the pipeline sent to the CPU port.
    PacketIn(Vec<u8>),
    /// A `digest()` call's values.
    Digest(Digest),
}

/// How many events may wait for the control plane; more are dropped (and counted).
pub const EVENT_QUEUE: usize = 4096;

/// A port as the control plane lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub number: u32,
    pub iface: String,
}

/// Fixed facts about the running switch.
#[derive(Debug, Clone, Default)]
pub struct DeviceInfo {
    pub device_id: u64,
    pub thrift_port: Option<u16>,
    /// Frames sent here go to the P4Runtime client as PacketIn; PacketOut frames enter here.
    pub cpu_port: Option<u32>,
    pub ports: Vec<PortInfo>,
    /// Whether an interface is up with a carrier, asked when a control
    /// plane lists the ports (`None`: every port is reported up, as for
    /// pcap-file ports).
    pub link_up: Option<fn(&str) -> bool>,
    /// `--disable-swap`: once a program runs, another may not replace it
    /// ([`Device::check_swap`]).
    pub swap_disabled: bool,
    /// Started without a program (`--no-p4`): the first one is always taken.
    pub started_without_program: bool,
}

/// The program a device runs.
#[derive(Debug, Clone)]
pub struct Program {
    /// The BMv2 JSON text, as the Thrift API hands it out.
    pub json: Arc<str>,
}

/// The switch as the control planes see it.
pub struct Device {
    control: Control<Switch>,
    program: Mutex<Program>,
    /// A program loaded with Thrift's `bm_load_new_config`, waiting for `bm_swap_configs`.
    staged: Mutex<Option<(Switch, Program)>>,
    events: Mutex<Option<Receiver<Event>>>,
    /// The ports attached now (`port_add` / `port_remove` change them).
    ports: Mutex<Vec<PortInfo>>,
    mode: ExecMode,
    /// Learning notifications for the Thrift control plane (`--notifications-addr`).
    learning: Mutex<Option<Arc<Learning>>>,
    /// Where they are published (`bm_mgmt_get_info`).
    notifications: Mutex<Option<String>>,
    /// A program was installed (or given at start).
    has_program: std::sync::atomic::AtomicBool,
    pub info: DeviceInfo,
    pub started: Instant,
}

impl Device {
    /// A device over a running switch. `events` is the receiving end of the
    /// channel the workers report to (`None` when nothing reports).
    pub fn new(control: Control<Switch>, json: Arc<str>, info: DeviceInfo, events: Option<Receiver<Event>>) -> Device {
        let mode = control.view(|sw| sw.mode());
        Device {
            control,
            program: Mutex::new(Program { json }),
            staged: Mutex::new(None),
            events: Mutex::new(events),
            ports: Mutex::new(info.ports.clone()),
            mode,
            learning: Mutex::new(None),
            notifications: Mutex::new(None),
            has_program: std::sync::atomic::AtomicBool::new(!info.started_without_program),
            info,
            started: Instant::now(),
        }
    }

    /// A device with no workers: the master switch is the only copy (tests,
    /// benchmarks of the control path).
    pub fn standalone(sw: Switch, json: Arc<str>) -> Device {
        Device::new(Control::standalone(sw, "p4"), json, DeviceInfo::default(), None)
    }

    /// The switch, locked for one request (see `sluice_node::control`).
    pub fn pool(&self) -> Session<'_, Switch> {
        self.control.lock()
    }

    /// The node's control of the switch.
    pub fn control(&self) -> &Control<Switch> {
        &self.control
    }

    /// The program the device runs.
    pub fn program(&self) -> Program {
        self.program.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Compiles a program without installing it.
    pub fn compile(&self, json: &str) -> Result<Switch, String> {
        let mut sw = sluice_engine::load_switch(json).map_err(|e| e.to_string())?;
        if sw.mode() != self.mode {
            sw.set_mode(self.mode).map_err(|e| e.to_string())?;
        }
        Ok(sw)
    }

    /// Whether program `json` may replace the running one: always, unless
    /// swapping is disabled (`--disable-swap`), a program already runs and
    /// `json` is another one; the error says why.
    pub fn check_swap(&self, json: &str) -> Result<(), String> {
        if self.info.swap_disabled
            && self.has_program.load(std::sync::atomic::Ordering::Acquire)
            && *self.program().json != *json
        {
            return Err("config swap is disabled (--disable-swap): the switch keeps its program".into());
        }
        Ok(())
    }

    /// [`Device::check_swap`] for the program staged by [`Device::stage`];
    /// with swapping disabled and a program running, a swap with nothing
    /// staged is refused too (as bmv2 refuses every swap then).
    pub fn check_swap_staged(&self) -> Result<(), String> {
        let staged = self.staged.lock().unwrap_or_else(|e| e.into_inner());
        match staged.as_ref() {
            Some((_, p)) => self.check_swap(&p.json),
            None => self.check_swap(""),
        }
    }

    /// Replaces the running program with a compiled one (all its state
    /// starts fresh; the egress queues' settings, the switch's, stay);
    /// refused as [`Device::check_swap`] says.
    pub fn install(&self, mut sw: Switch, json: Arc<str>) -> Result<(), String> {
        self.check_swap(&json)?;
        self.has_program.store(true, std::sync::atomic::Ordering::Release);
        let lists = learn_list_ids(&sw);
        let mut pool = self.pool();
        sw.keep_queue_settings(pool.view());
        pool.replace(sw)?;
        *self.program.lock().unwrap_or_else(|e| e.into_inner()) = Program { json };
        if let Some(l) = self.learning() {
            l.set_program(&lists);
        }
        Ok(())
    }

    /// Starts the learning engine (see [`Learning`]): digests become
    /// learning notifications sent to `sink`, by a thread that takes the
    /// device's events (so no other consumer, e.g. P4Runtime, may take
    /// them). False when the events were already taken.
    pub fn start_learning(&self, sink: crate::learning::Sink) -> bool {
        let Some(events) = self.take_events() else { return false };
        let lists = learn_list_ids(self.pool().view());
        let l = Arc::new(Learning::new(self.info.device_id, &lists, sink));
        *self.learning.lock().unwrap_or_else(|e| e.into_inner()) = Some(l.clone());
        std::thread::Builder::new().name("sluice-learning".into()).spawn(move || l.run(events)).is_ok()
    }

    /// Starts bmv2's ageing monitor ([`crate::ageing`]): idle-timeout
    /// notifications to `sink`, one sweep a second, until the device is
    /// dropped. False when its thread could not start.
    pub fn start_ageing(self: &Arc<Self>, sink: crate::learning::Sink) -> bool {
        let ageing = crate::ageing::Ageing::new(self.info.device_id, sink);
        let device = Arc::downgrade(self);
        std::thread::Builder::new().name("sluice-ageing".into()).spawn(move || ageing.run(device)).is_ok()
    }

    /// Records where learning notifications are published.
    pub fn set_notifications_address(&self, addr: &str) {
        *self.notifications.lock().unwrap_or_else(|e| e.into_inner()) = Some(addr.to_string());
    }

    /// Where learning notifications are published: the address given, or
    /// bmv2's default for this device id.
    pub fn notifications_address(&self) -> String {
        self.notifications
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| format!("ipc:///tmp/bmv2-{}-notifications.ipc", self.info.device_id))
    }

    /// The learning engine, when started.
    pub fn learning(&self) -> Option<Arc<Learning>> {
        self.learning.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Compiles a program and keeps it for [`Device::swap_staged`].
    pub fn stage(&self, json: &str) -> Result<(), String> {
        let sw = self.compile(json)?;
        *self.staged.lock().unwrap_or_else(|e| e.into_inner()) = Some((sw, Program { json: json.into() }));
        Ok(())
    }

    /// Whether a staged program waits.
    pub fn has_staged(&self) -> bool {
        self.staged.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Installs the staged program; false when none is staged.
    pub fn swap_staged(&self) -> Result<bool, String> {
        let staged = self.staged.lock().unwrap_or_else(|e| e.into_inner()).take();
        match staged {
            Some((sw, p)) => self.install(sw, p.json).map(|_| true),
            None => Ok(false),
        }
    }

    /// Stops the workers (see `Pool::stop_workers`) and returns the
    /// master's state with every counter merged.
    pub fn stop(&self) -> Session<'_, Switch> {
        let mut pool = self.pool();
        pool.stop_workers();
        pool
    }

    /// The ports attached now.
    pub fn ports(&self) -> Vec<PortInfo> {
        self.ports.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Attaches interface `iface` as port `number` on every worker.
    pub fn add_port(&self, number: u32, iface: &str) -> Result<(), String> {
        // Lock order everywhere: pool, then ports.
        let mut pool = self.pool();
        let mut ports = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        if ports.iter().any(|p| p.number == number) {
            return Err(format!("port {number} exists"));
        }
        // One interface, one port: two ports on one interface would each
        // receive every frame (duplicates) and race on its send ring.
        if let Some(p) = ports.iter().find(|p| p.iface == iface) {
            return Err(format!("interface {iface} is already port {}", p.number));
        }
        pool.set_port(number, Some(iface))?;
        ports.push(PortInfo { number, iface: iface.to_string() });
        ports.sort_by_key(|p| p.number);
        Ok(())
    }

    /// Detaches port `number`.
    pub fn remove_port(&self, number: u32) -> Result<(), String> {
        let mut pool = self.pool();
        let mut ports = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        if !ports.iter().any(|p| p.number == number) {
            return Err(format!("no port {number}"));
        }
        pool.set_port(number, None)?;
        ports.retain(|p| p.number != number);
        Ok(())
    }

    /// Takes the event receiver (one consumer: the P4Runtime server).
    pub fn take_events(&self) -> Option<Receiver<Event>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The learn list ids of a program.
fn learn_list_ids(sw: &Switch) -> Vec<u64> {
    let mut ids: Vec<u64> = sw.program().learn_lists.keys().copied().collect();
    ids.sort_unstable();
    ids
}

/// Where the data plane sends events: bounded, never blocks a worker.
#[derive(Clone)]
pub struct EventSink(pub SyncSender<Event>);

impl EventSink {
    /// A sink and the receiver for [`Device::new`].
    pub fn channel() -> (EventSink, Receiver<Event>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(EVENT_QUEUE);
        (EventSink(tx), rx)
    }

    /// Sends an event; false when the queue is full or nobody listens (the event is dropped).
    pub fn send(&self, e: Event) -> bool {
        self.0.try_send(e).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_queue_holds_its_bound_and_refuses_past_it_without_blocking() {
        let (sink, rx) = EventSink::channel();
        for i in 0..EVENT_QUEUE {
            assert!(sink.send(Event::PacketIn(vec![i as u8])), "event {i} of {EVENT_QUEUE} refused");
        }
        assert!(!sink.send(Event::PacketIn(vec![0xff])), "an event past the bound was taken");
        assert!(matches!(rx.try_recv(), Ok(Event::PacketIn(f)) if f == [0]));
        assert!(sink.send(Event::PacketIn(vec![1])), "a freed place is taken again");
        drop(rx);
        assert!(!sink.send(Event::PacketIn(vec![2])), "an event with nobody listening was taken");
    }
}
