//! StreamChannel: client arbitration, PacketOut into the CPU port, PacketIn
//! and digest lists out of it.
//!
//! Arbitration follows the specification: per role, the server remembers
//! the highest election id it has seen; the client holding it is the
//! primary. When the primary leaves there is no primary (the others are told
//! NOT_FOUND) until a client arbitrates again with an id at least as high.
//! Only the primary may write, set the pipeline or send packets.
//!
//! Roles (P4Runtime 1.4): a client names its role in its arbitration
//! update, with a role configuration in Stratum's format
//! (`stratum.P4RoleConfig`: exclusive and shared P4 ids, whether it
//! receives PacketIns and which ones by one metadata value, whether it may
//! push a pipeline); the role's primary's configuration is the role's. A
//! role with a configuration writes and reads only its entities (PRE
//! entries, which have no P4 id, are open to every role); an id exclusive
//! to a role is written by that role alone. The default role, and a role
//! without a configuration, write and read everything else. Each PacketIn
//! goes to the primary of every role that receives it (the default role,
//! roles without a configuration, roles whose configuration asks for them
//! and whose filter matches); digests and idle-timeout notifications go to
//! the default role's primary.
//!
//! Bounds (a slow or stalled client never slows forwarding or other
//! clients): each stream's outbound queue holds [`STREAM_QUEUE`] messages,
//! a message that does not fit is dropped; each digest keeps at most
//! [`DIGEST_SAMPLES`] samples pending or unacknowledged, a new sample past
//! that is dropped. Every drop is counted ([`StreamDrops`]) and reported on
//! standard error at most once a second.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_control::device::Event;
use tokio::sync::mpsc;
use tonic::{Code, Status};

use crate::entities::minimal;
use crate::pipeline::{pack_fields, unpack_fields};
use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4;
use crate::{Server, NO_PIPELINE};

/// The outbound side of one StreamChannel.
pub type Tx = mpsc::Sender<Result<p4::StreamMessageResponse, Status>>;

/// Outbound messages a stream may have queued before new ones are dropped.
pub const STREAM_QUEUE: usize = 1024;

/// Samples a digest keeps pending or waiting for their acknowledgement (its
/// de-duplication state, about 300 bytes each) before new ones are dropped.
pub const DIGEST_SAMPLES: usize = 16_384;

/// What the server dropped toward its clients since it started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StreamDrops {
    /// PacketIns that found no primary, or its stream's queue full.
    pub packet_ins: u64,
    /// Digest lists that found no primary, or its stream's queue full (their
    /// samples stay unacknowledged until the ack timeout, then are reported again).
    pub digest_lists: u64,
    /// Digest samples over [`DIGEST_SAMPLES`].
    pub digest_samples: u64,
    /// IdleTimeoutNotifications that found no primary, or its stream's
    /// queue full (their entries are notified again at the next check).
    pub idle_notifications: u64,
}

struct Client {
    id: u64,
    election: Option<u128>,
    tx: Tx,
    /// The role configuration this client sent.
    config: Option<Arc<RoleConfig>>,
}

#[derive(Default)]
struct Role {
    highest: Option<u128>,
    clients: Vec<Client>,
}

impl Role {
    fn primary(&self) -> Option<u64> {
        let h = self.highest?;
        self.clients.iter().find(|c| c.election == Some(h)).map(|c| c.id)
    }

    fn primary_client(&self) -> Option<&Client> {
        let p = self.primary()?;
        self.clients.iter().find(|c| c.id == p)
    }

    /// The role's configuration: its primary's.
    fn config(&self) -> Option<&RoleConfig> {
        self.primary_client().and_then(|c| c.config.as_deref())
    }
}

/// The type URL of the role configuration format Sluice reads (Stratum's).
pub const ROLE_CONFIG_TYPE: &str = "stratum.P4RoleConfig";

/// A role's configuration, as Stratum's `P4RoleConfig` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoleConfig {
    pub exclusive: HashSet<u32>,
    pub shared: HashSet<u32>,
    /// Deliver only PacketIns whose metadata `id` equals `value`.
    pub packet_in_filter: Option<(u32, Vec<u8>)>,
    pub receives_packet_ins: bool,
    pub can_push_pipeline: bool,
}

/// `stratum.P4RoleConfig`'s wire form (our own message with its field numbers).
#[derive(Clone, PartialEq, prost::Message)]
struct P4RoleConfig {
    #[prost(uint32, repeated, tag = "1")]
    exclusive_p4_ids: Vec<u32>,
    #[prost(uint32, repeated, tag = "2")]
    shared_p4_ids: Vec<u32>,
    #[prost(message, optional, tag = "3")]
    packet_in_filter: Option<PacketFilter>,
    #[prost(bool, tag = "4")]
    receives_packet_ins: bool,
    #[prost(bool, tag = "5")]
    can_push_pipeline: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PacketFilter {
    #[prost(uint32, tag = "1")]
    metadata_id: u32,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// A role configuration from an arbitration update's `Role.config`; the
/// error says why it is refused.
pub fn role_config(any: &prost_types::Any) -> Result<RoleConfig, String> {
    let name = any.type_url.rsplit('/').next().unwrap_or_default();
    if name != ROLE_CONFIG_TYPE {
        return Err(format!("role config of type '{}' is not supported ({ROLE_CONFIG_TYPE} is)", any.type_url));
    }
    let c = <P4RoleConfig as prost::Message>::decode(any.value.as_slice())
        .map_err(|e| format!("the role config does not decode as {ROLE_CONFIG_TYPE}: {e}"))?;
    Ok(RoleConfig {
        exclusive: c.exclusive_p4_ids.into_iter().collect(),
        shared: c.shared_p4_ids.into_iter().collect(),
        packet_in_filter: c.packet_in_filter.map(|f| (f.metadata_id, minimal(&f.value))),
        receives_packet_ins: c.receives_packet_ins,
        can_push_pipeline: c.can_push_pipeline,
    })
}

/// Open streams by role, and the digest queues.
#[derive(Default)]
pub struct Streams {
    roles: HashMap<String, Role>,
    next_id: u64,
    digests: HashMap<u32, DigestQueue>,
    next_list: u64,
    drops: StreamDrops,
    /// The drops last reported, and when.
    reported: (StreamDrops, Option<Instant>),
}

fn u128_of(e: Option<p4::Uint128>) -> Option<u128> {
    e.map(|e| (u128::from(e.high) << 64) | u128::from(e.low))
}

fn uint128(v: u128) -> p4::Uint128 {
    p4::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

impl Streams {
    /// Refuses a Write or SetForwardingPipelineConfig that does not come from the role's primary.
    pub fn check_primary(&self, role: &str, election: Option<p4::Uint128>) -> Result<(), Status> {
        let Some(e) = u128_of(election) else {
            return Err(Status::permission_denied("no election_id: only the primary client may write"));
        };
        let r = self.roles.get(role);
        match r.and_then(|r| r.highest) {
            Some(h) if h == e && r.is_some_and(|r| r.primary().is_some()) => Ok(()),
            Some(h) => Err(Status::permission_denied(format!(
                "election_id {e} is not the primary's (the primary holds {h}{})",
                if r.is_some_and(|r| r.primary().is_some()) { "" } else { ", and it is disconnected" }
            ))),
            None => Err(Status::permission_denied("no client has arbitrated on a stream: there is no primary")),
        }
    }

    /// Whether role `role` may write (and read) the entity of P4 id `id`
    /// (`None`: an entity without one, a PRE entry); the error is the
    /// PERMISSION_DENIED message.
    pub fn may_access(&self, role: &str, id: Option<u32>) -> Result<(), String> {
        let Some(id) = id else { return Ok(()) };
        if let Some(c) = self.roles.get(role).and_then(Role::config) {
            if c.exclusive.contains(&id) || c.shared.contains(&id) {
                return Ok(());
            }
            return Err(format!("P4 id {id:#x} is not in role '{role}''s configuration"));
        }
        for (name, r) in &self.roles {
            if name != role && r.config().is_some_and(|c| c.exclusive.contains(&id)) {
                return Err(format!("P4 id {id:#x} is exclusive to role '{name}'"));
            }
        }
        Ok(())
    }

    /// Whether role `role` may set the forwarding pipeline.
    pub fn may_push_pipeline(&self, role: &str) -> Result<(), Status> {
        match self.roles.get(role).and_then(Role::config) {
            Some(c) if !c.can_push_pipeline => Err(Status::permission_denied(format!(
                "role '{role}' may not push a pipeline (its role config says can_push_pipeline false)"
            ))),
            _ => Ok(()),
        }
    }

    /// Sends a PacketIn to the primary of every role that receives it;
    /// false when none took it (no such primary, or their queues full).
    fn packet_in_to_roles(&self, msg: &p4::StreamMessageResponse, metadata: &[p4::PacketMetadata]) -> bool {
        let mut sent = false;
        for r in self.roles.values() {
            let Some(c) = r.primary_client() else { continue };
            if let Some(cfg) = c.config.as_deref() {
                if !cfg.receives_packet_ins {
                    continue;
                }
                if let Some((id, value)) = &cfg.packet_in_filter {
                    if !metadata.iter().any(|m| m.metadata_id == *id && minimal(&m.value) == *value) {
                        continue;
                    }
                }
            }
            sent |= c.tx.try_send(Ok(msg.clone())).is_ok();
        }
        sent
    }

    /// What was dropped toward clients so far.
    pub fn drops(&self) -> StreamDrops {
        self.drops
    }

    /// Sends to the default role's primary; false (counted by the caller)
    /// when there is none or its queue is full.
    fn to_primary(&self, msg: p4::StreamMessageResponse) -> bool {
        self.primary_tx().is_some_and(|tx| tx.try_send(Ok(msg)).is_ok())
    }

    /// Reports new drops on standard error, at most once a second.
    fn report_drops(&mut self) {
        let (last, at) = self.reported;
        if self.drops == last || at.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        let d = self.drops;
        eprintln!(
            "sluice: P4Runtime: dropped so far {} PacketIn and {} digest lists (no primary, or its stream's queue \
             of {STREAM_QUEUE} full), {} digest samples (over {DIGEST_SAMPLES} unacknowledged), {} idle-timeout \
             notifications (no primary, or its queue full)",
            d.packet_ins, d.digest_lists, d.digest_samples, d.idle_notifications
        );
        self.reported = (d, Some(Instant::now()));
    }

    /// Forgets digest queues (a new pipeline).
    pub fn reset_digests(&mut self) {
        self.digests.clear();
    }

    fn update_for(&self, device_id: u64, role: &str, client: u64) -> p4::StreamMessageResponse {
        let r = &self.roles[role];
        let primary = r.primary();
        let (code, message) = match primary {
            Some(p) if p == client => (Code::Ok, "you are the primary"),
            Some(_) => (Code::AlreadyExists, "another client is the primary"),
            None => (Code::NotFound, "there is no primary"),
        };
        p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Arbitration(p4::MasterArbitrationUpdate {
                device_id,
                role: (!role.is_empty()).then(|| p4::Role { name: role.to_string(), ..Default::default() }),
                election_id: r.highest.map(uint128),
                status: Some(rpc::Status { code: code as i32, message: message.into(), details: Vec::new() }),
            })),
        }
    }

    /// The sender of the default role's primary.
    fn primary_tx(&self) -> Option<&Tx> {
        let r = self.roles.get("")?;
        let p = r.primary()?;
        r.clients.iter().find(|c| c.id == p).map(|c| &c.tx)
    }

    fn remove(&mut self, id: u64) -> Option<String> {
        for (name, r) in self.roles.iter_mut() {
            if let Some(i) = r.clients.iter().position(|c| c.id == id) {
                r.clients.remove(i);
                return Some(name.clone());
            }
        }
        None
    }

    /// Tells every client of a role where mastership stands.
    fn notify_all(&self, device_id: u64, role: &str) {
        if let Some(r) = self.roles.get(role) {
            for c in r.clients.iter().filter(|c| c.election.is_some()) {
                let _ = c.tx.try_send(Ok(self.update_for(device_id, role, c.id)));
            }
        }
    }
}

/// Starts serving one StreamChannel; returns the outbound side.
pub fn open(
    server: Arc<Server>,
    mut inbound: tonic::Streaming<p4::StreamMessageRequest>,
) -> mpsc::Receiver<Result<p4::StreamMessageResponse, Status>> {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    let id = new_stream(&server);
    tokio::spawn(async move {
        loop {
            let msg = match inbound.message().await {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(_) => break,
            };
            let srv = server.clone();
            let tx2 = tx.clone();
            let keep = tokio::task::spawn_blocking(move || handle(&srv, id, &tx2, msg)).await.unwrap_or(false);
            if !keep {
                break;
            }
        }
        close(&server, id);
    });
    rx
}

/// A new stream's id, for [`handle`] and [`close`] (which [`open`] calls
/// for a gRPC stream; a caller without gRPC, such as a fuzz target, calls
/// them itself).
pub fn new_stream(server: &Server) -> u64 {
    let mut st = server.state();
    st.streams.next_id += 1;
    st.streams.next_id
}

/// Forgets stream `id`; when it was its role's primary, the role's other
/// clients are told who is primary now.
pub fn close(server: &Server, id: u64) {
    let mut st = server.state();
    let was_primary = st.streams.roles.values().any(|r| r.primary() == Some(id));
    if let Some(role) = st.streams.remove(id) {
        if was_primary {
            st.streams.notify_all(server.dev.info.device_id, &role);
        }
    }
}

fn stream_error(code: Code, message: String, packet: Option<p4::PacketOut>) -> p4::StreamMessageResponse {
    p4::StreamMessageResponse {
        update: Some(p4::stream_message_response::Update::Error(p4::StreamError {
            canonical_code: code as i32,
            message,
            details: packet.map(|p| p4::stream_error::Details::PacketOut(p4::PacketOutError { packet_out: Some(p) })),
            ..Default::default()
        })),
    }
}

/// Handles one inbound message of stream `id`, answering on `tx`; false
/// ends the stream.
pub fn handle(server: &Server, id: u64, tx: &Tx, msg: p4::StreamMessageRequest) -> bool {
    use p4::stream_message_request::Update as U;
    let device_id = server.dev.info.device_id;
    match msg.update {
        Some(U::Arbitration(a)) => {
            if a.device_id != device_id {
                let _ = tx.try_send(Err(Status::not_found(format!(
                    "no device {} (this switch is device {device_id})",
                    a.device_id
                ))));
                return false;
            }
            let role = a.role.as_ref().map(|r| r.name.clone()).unwrap_or_default();
            let Some(e) = u128_of(a.election_id) else {
                let _ = tx.try_send(Err(Status::invalid_argument("an arbitration update needs an election_id")));
                return false;
            };
            let config = match a.role.as_ref().and_then(|r| r.config.as_ref()) {
                Some(any) => match role_config(any) {
                    Ok(c) => Some(Arc::new(c)),
                    Err(m) => {
                        let _ = tx.try_send(Err(Status::invalid_argument(m)));
                        return false;
                    }
                },
                None => None,
            };
            let mut st = server.state();
            let s = &mut st.streams;
            let clash = config.as_ref().and_then(|c| {
                s.roles.iter().find_map(|(name, r)| {
                    let other = r.config().filter(|_| *name != role)?;
                    let id = c.exclusive.iter().find(|i| other.exclusive.contains(i) || other.shared.contains(i))?;
                    Some(format!("role '{role}' claims P4 id {id:#x} exclusively, but role '{name}' has it too"))
                })
            });
            if let Some(m) = clash {
                drop(st);
                let _ = tx.try_send(Err(Status::invalid_argument(m)));
                return false;
            }
            let r = s.roles.entry(role.clone()).or_default();
            if r.clients.iter().any(|c| c.id != id && c.election == Some(e)) {
                drop(st);
                // bmv2's words, which controllers match to pick another id.
                let _ = tx.try_send(Err(Status::invalid_argument(format!(
                    "Election id already exists (election_id {e} is held by another client of this role)"
                ))));
                return false;
            }
            let old_primary = s.roles.get(&role).and_then(Role::primary);
            if let Some(prev) = s.remove(id) {
                if prev != role {
                    s.notify_all(device_id, &prev);
                }
            }
            let r = s.roles.entry(role.clone()).or_default();
            r.clients.push(Client { id, election: Some(e), tx: tx.clone(), config });
            if r.highest.is_none_or(|h| e >= h) {
                r.highest = Some(e);
            }
            let new_primary = r.primary();
            if new_primary != old_primary {
                s.notify_all(device_id, &role);
            } else {
                let _ = tx.try_send(Ok(s.update_for(device_id, &role, id)));
            }
            true
        }
        Some(U::Packet(p)) => {
            let st = server.state();
            let is_primary = st.streams.roles.values().any(|r| r.primary() == Some(id));
            let pl = st.pipeline.clone();
            drop(st);
            let refuse = |code: Code, m: String| {
                let _ = tx.try_send(Ok(stream_error(code, m, Some(p.clone()))));
                true
            };
            if !is_primary {
                return refuse(Code::PermissionDenied, "only the primary client may send packets".into());
            }
            let Some(cpu) = server.dev.info.cpu_port else {
                return refuse(Code::FailedPrecondition, "the switch runs without --cpu-port: no packet-out".into());
            };
            let Some(pl) = pl else {
                return refuse(Code::FailedPrecondition, NO_PIPELINE.into());
            };
            let mut frame = match &pl.ids.packet_out {
                Some(fields) => {
                    let mut vals = Vec::new();
                    for (mid, w) in fields {
                        let v = p
                            .metadata
                            .iter()
                            .find(|m| m.metadata_id == *mid)
                            .map(|m| m.value.clone())
                            .unwrap_or_default();
                        if sluice_engine::runtime::fit_value(&v, *w).is_none() {
                            return refuse(
                                Code::InvalidArgument,
                                format!("packet_out metadata {mid} does not fit {w} bits"),
                            );
                        }
                        vals.push((v, *w));
                    }
                    if let Some(m) = p.metadata.iter().find(|m| !fields.iter().any(|(id, _)| *id == m.metadata_id)) {
                        return refuse(
                            Code::InvalidArgument,
                            format!("unknown packet_out metadata id {}", m.metadata_id),
                        );
                    }
                    pack_fields(&vals)
                }
                None => Vec::new(),
            };
            frame.extend_from_slice(&p.payload);
            if !server.dev.pool().inject(cpu, frame) {
                return refuse(Code::Unavailable, "no worker runs the data plane".into());
            }
            true
        }
        Some(U::DigestAck(a)) => {
            let mut st = server.state();
            if let Some(q) = st.streams.digests.get_mut(&a.digest_id) {
                if let Some((samples, _)) = q.outstanding.remove(&a.list_id) {
                    for s in samples {
                        q.seen.remove(&s);
                    }
                }
            }
            true
        }
        Some(U::Other(_)) | None => {
            let _ = tx.try_send(Ok(stream_error(Code::Unimplemented, "unsupported stream message".into(), None)));
            true
        }
    }
}

/// One digest sample: its field values, big-endian.
type Sample = Vec<Vec<u8>>;

/// One digest's samples: waiting to be sent, and sent but not acknowledged.
#[derive(Default)]
struct DigestQueue {
    pending: Vec<Sample>,
    first: Option<Instant>,
    /// List id -> its samples and when it was sent.
    outstanding: HashMap<u64, (Vec<Sample>, Instant)>,
    /// Samples pending or outstanding: a repeat is not reported again until acknowledged.
    seen: HashSet<Sample>,
}

/// Starts the thread that carries data-plane events (PacketIn, digests) to the primary.
pub fn start_event_thread(server: Arc<Server>) {
    let Some(events) = server.dev.take_events() else { return };
    // Digest samples wait in the queues: only then must an idle wake-up look at them.
    let mut waiting = false;
    // Drops not yet reported (the report waits out its second).
    let mut unreported = false;
    let mut last_aging = Instant::now();
    // Entries with idle timeouts exist: they are checked every AGING_PERIOD.
    let mut aging = false;
    let _ = std::thread::Builder::new().name("sluice-p4rt-events".into()).spawn(move || loop {
        if last_aging.elapsed() >= AGING_PERIOD {
            last_aging = Instant::now();
            aging = check_idle_entries(&server);
        }
        // Idle with nothing due, the thread sleeps up to IDLE_WAIT (an
        // entry with an idle timeout written meanwhile is checked from then on).
        let wait = if waiting || unreported {
            Duration::from_millis(5)
        } else if aging {
            AGING_PERIOD.saturating_sub(last_aging.elapsed())
        } else {
            IDLE_WAIT
        };
        let ev = match events.recv_timeout(wait) {
            Ok(e) => Some(e),
            Err(RecvTimeoutError::Timeout) if !waiting && !unreported => continue,
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut st = server.state();
        let st = &mut *st;
        let Some(pl) = st.pipeline.clone() else { continue };
        match ev {
            Some(Event::PacketIn(frame)) => {
                let (metadata, payload) = match &pl.ids.packet_in {
                    Some(fields) => {
                        let widths: Vec<u32> = fields.iter().map(|(_, w)| *w).collect();
                        let hdr_len = (widths.iter().sum::<u32>() as usize).div_ceil(8);
                        match unpack_fields(&frame, &widths) {
                            Some(vals) => (
                                fields
                                    .iter()
                                    .zip(vals)
                                    .map(|((id, _), v)| p4::PacketMetadata { metadata_id: *id, value: minimal(&v) })
                                    .collect(),
                                frame[hdr_len..].to_vec(),
                            ),
                            None => continue,
                        }
                    }
                    None => (Vec::new(), frame),
                };
                let meta = metadata.clone();
                let msg = p4::StreamMessageResponse {
                    update: Some(p4::stream_message_response::Update::Packet(p4::PacketIn { payload, metadata })),
                };
                if !st.streams.packet_in_to_roles(&msg, &meta) {
                    st.streams.drops.packet_ins += 1;
                }
            }
            Some(Event::Digest(d)) => {
                let Some(&did) = pl.ids.digest_by_name.get(&d.list) else { continue };
                if !st.handles.digests.contains_key(&did) {
                    continue;
                }
                let q = st.streams.digests.entry(did).or_default();
                if q.seen.len() >= DIGEST_SAMPLES && !q.seen.contains(&d.values) {
                    st.streams.drops.digest_samples += 1;
                } else if q.seen.insert(d.values.clone()) {
                    q.pending.push(d.values);
                    q.first.get_or_insert_with(Instant::now);
                }
            }
            None => {}
        }
        // Send the lists that are full or old enough; forget unacknowledged ones that timed out.
        let now = Instant::now();
        waiting = false;
        let ids: Vec<u32> = st.streams.digests.keys().copied().collect();
        for did in ids {
            let Some(cfg) = st.handles.digests.get(&did).copied() else { continue };
            let timeout = Duration::from_nanos(cfg.max_timeout_ns.max(0) as u64);
            let ack_timeout = Duration::from_nanos(cfg.ack_timeout_ns.max(0) as u64);
            let max = if cfg.max_list_size <= 0 { usize::MAX } else { cfg.max_list_size as usize };
            loop {
                let q = st.streams.digests.get_mut(&did).expect("listed above");
                let due = q.pending.len() >= max || q.first.is_some_and(|f| now.duration_since(f) >= timeout);
                if q.pending.is_empty() || !due {
                    break;
                }
                let n = q.pending.len().min(max);
                let samples: Vec<Sample> = q.pending.drain(..n).collect();
                q.first = (!q.pending.is_empty()).then_some(now);
                st.streams.next_list += 1;
                let list_id = st.streams.next_list;
                let data = samples
                    .iter()
                    .map(|s| p4::P4Data {
                        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
                            members: s
                                .iter()
                                .map(|v| p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(minimal(v))) })
                                .collect(),
                        })),
                    })
                    .collect();
                let msg = p4::StreamMessageResponse {
                    update: Some(p4::stream_message_response::Update::Digest(p4::DigestList {
                        digest_id: did,
                        list_id,
                        data,
                        timestamp: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_nanos() as i64),
                    })),
                };
                if !st.streams.to_primary(msg) {
                    st.streams.drops.digest_lists += 1;
                }
                let q = st.streams.digests.get_mut(&did).expect("listed above");
                q.outstanding.insert(list_id, (samples, now));
            }
            let q = st.streams.digests.get_mut(&did).expect("listed above");
            waiting |= !q.pending.is_empty() || !q.outstanding.is_empty();
            let expired: Vec<u64> = q
                .outstanding
                .iter()
                .filter(|(_, (_, t))| now.duration_since(*t) >= ack_timeout)
                .map(|(k, _)| *k)
                .collect();
            for l in expired {
                if let Some((samples, _)) = q.outstanding.remove(&l) {
                    for s in samples {
                        q.seen.remove(&s);
                    }
                }
            }
        }
        st.streams.report_drops();
        unreported = st.streams.drops != st.streams.reported.0;
    });
}

/// How often entries with idle timeouts are checked.
const AGING_PERIOD: Duration = Duration::from_millis(100);

/// The longest the event thread sleeps with no event, digest or idle
/// timeout due.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// Tells the primary about entries idle for longer than their timeout
/// (IdleTimeoutNotification), once per idle period: an entry hit again is
/// re-armed. Entries are not removed (the controller decides). False when
/// no entry has an idle timeout.
fn check_idle_entries(server: &Server) -> bool {
    let mut st = server.state();
    if st.handles.aging.is_empty() {
        return false;
    }
    let Some(pl) = st.pipeline.clone() else { return true };
    let st = &mut *st;
    let mut pool = server.dev.pool();
    let hits = sluice_control::last_hits(&mut pool);
    let now = Instant::now();
    let mut idle = Vec::new();
    for (key, a) in st.handles.aging.iter_mut() {
        let last = hits.get(key).map_or(a.since, |h| (*h).max(a.since));
        if now.duration_since(last) >= a.timeout {
            if !a.notified {
                a.notified = true;
                idle.push(*key);
            }
        } else {
            a.notified = false;
        }
    }
    if idle.is_empty() {
        return true;
    }
    idle.sort();
    let sw = pool.view();
    let entries: Vec<p4::TableEntry> = idle
        .iter()
        .filter_map(|(t, hd)| {
            let tid = pl.ids.table_by_index.get(t)?;
            crate::entities::table_entry_out(&pl, &st.handles, sw, &pl.ids.tables[tid], *hd, false)
        })
        .collect();
    drop(pool);
    let msg = p4::StreamMessageResponse {
        update: Some(p4::stream_message_response::Update::IdleTimeoutNotification(p4::IdleTimeoutNotification {
            table_entry: entries,
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64),
        })),
    };
    if !st.streams.to_primary(msg) {
        // Counted, and the entries are notified again at the next check.
        st.streams.drops.idle_notifications += 1;
        for key in &idle {
            if let Some(a) = st.handles.aging.get_mut(key) {
                a.notified = false;
            }
        }
        st.streams.report_drops();
    }
    true
}
