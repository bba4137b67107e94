//! P4Runtime for Sluice: the gRPC service p4runtime-shell, finsy and ONOS
//! talk to, over the same device the Thrift API drives.
//!
//! - [`pipeline`]: P4Info ids resolved against the BMv2 JSON the engine runs.
//! - [`entities`]: Write and Read of every entity the engine supports.
//! - [`stream`]: StreamChannel: arbitration, PacketIn/PacketOut, digests.
//! - [`codec`]: prost's codec, with undecodable requests INVALID_ARGUMENT.
//! - [`connections`]: the TCP connections, bounded, handed to tonic.
//!
//! Requests take the server's state lock, then the device's pool lock (in
//! that order, always). Writes run on tokio's blocking threads: applying a
//! batch waits for the workers to acknowledge it.

pub mod codec;
pub mod connections;
pub mod dataplane;
pub mod entities;
pub mod pipeline;
pub mod stream;

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use prost::Message;
use sluice_control::device::Device;
use tokio_stream::Stream;
use tonic::{Code, Request, Response, Status};

use entities::{Fail, Handles, Op, Scratch};
use pipeline::{Ids, Pipeline};
use proto::p4::v1 as p4;

/// Generated message and service types (from `proto/`, our schema files).
#[allow(clippy::all, missing_docs)]
pub mod proto {
    pub mod p4 {
        pub mod v1 {
            tonic::include_proto!("p4.v1");
        }
        pub mod config {
            pub mod v1 {
                tonic::include_proto!("p4.config.v1");
            }
        }
        pub mod bm {
            tonic::include_proto!("p4.bm");
        }
    }
    pub mod google {
        pub mod rpc {
            tonic::include_proto!("google.rpc");
        }
    }
}

/// The refusal of a request that needs a forwarding pipeline before one is
/// set, in bmv2's words (controllers match them).
pub const NO_PIPELINE: &str = "No forwarding pipeline config set for this device";

/// The P4Runtime version Sluice implements (Capabilities answers it).
pub const API_VERSION: &str = "1.4.1";

/// Time between the server's HTTP/2 keepalive pings on a connection.
pub const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(60);
/// A connection whose peer does not answer a ping within this is closed.
pub const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Largest request accepted (bigger ones are refused by gRPC before decoding).
pub const MAX_MESSAGE: usize = 64 << 20;

/// Changes handed to the workers at a time during a non-atomic Write.
const EARLY_SEND: usize = 128;

/// What the server keeps between requests.
#[derive(Default)]
pub struct State {
    /// The installed pipeline and the controller's handles into it.
    pub pipeline: Option<Arc<Pipeline>>,
    pub handles: Handles,
    /// A pipeline verified and saved, waiting for COMMIT.
    saved: Option<(Arc<Pipeline>, sluice_engine::Switch)>,
    pub streams: stream::Streams,
}

/// The P4Runtime service.
pub struct Server {
    pub dev: Arc<Device>,
    state: Mutex<State>,
}

impl Server {
    /// A server for a device.
    pub fn new(dev: Arc<Device>) -> Arc<Server> {
        Arc::new(Server { dev, state: Mutex::new(State::default()) })
    }

    /// A server whose forwarding pipeline is already `pipeline`, whose
    /// program the device must already run: the state after a
    /// SetForwardingPipelineConfig, without compiling the program again
    /// (for embedding and fuzzing).
    pub fn with_pipeline(dev: Arc<Device>, pipeline: Arc<Pipeline>) -> Result<Arc<Server>, String> {
        if *pipeline.json != *dev.program().json {
            return Err("the device does not run the pipeline's program".into());
        }
        let server = Server::new(dev);
        server.state().pipeline = Some(pipeline);
        Ok(server)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_device(&self, id: u64) -> Result<(), Status> {
        if id == self.dev.info.device_id {
            Ok(())
        } else {
            Err(Status::not_found(format!("no device {id} (this switch is device {})", self.dev.info.device_id)))
        }
    }

    /// The pipeline writes and reads use: installed, and still the program the device runs.
    fn pipeline(&self, st: &State) -> Result<Arc<Pipeline>, Status> {
        let pl = st.pipeline.clone().ok_or_else(|| Status::failed_precondition(NO_PIPELINE))?;
        if !Arc::ptr_eq(&pl.json, &self.dev.program().json) && *pl.json != *self.dev.program().json {
            return Err(Status::failed_precondition(
                "the program was replaced through the Thrift API: set the forwarding pipeline again",
            ));
        }
        Ok(pl)
    }

    /// Applies a Write request.
    pub fn write(&self, req: p4::WriteRequest) -> Result<(), Status> {
        self.check_device(req.device_id)?;
        let mut st = self.state();
        st.streams.check_primary(&req.role, req.election_id)?;
        let pl = self.pipeline(&st)?;
        let mut updates = Vec::with_capacity(req.updates.len());
        for u in &req.updates {
            let op = match p4::update::Type::try_from(u.r#type) {
                Ok(p4::update::Type::Insert) => Ok(Op::Insert),
                Ok(p4::update::Type::Modify) => Ok(Op::Modify),
                Ok(p4::update::Type::Delete) => Ok(Op::Delete),
                _ => Err(Fail {
                    code: Code::InvalidArgument,
                    message: format!("update type {} is not INSERT, MODIFY or DELETE", u.r#type),
                }),
            };
            let e = u.entity.as_ref().and_then(|e| e.entity.as_ref());
            updates.push(op.and_then(|op| {
                let e = e.ok_or_else(|| Fail {
                    code: Code::InvalidArgument,
                    message: "an update without an entity".into(),
                })?;
                st.streams
                    .may_access(&req.role, entities::p4_id(e))
                    .map_err(|message| Fail { code: Code::PermissionDenied, message })?;
                Ok((op, e))
            }));
        }
        let atomic = !matches!(
            p4::write_request::Atomicity::try_from(req.atomicity),
            Ok(p4::write_request::Atomicity::ContinueOnError)
        );
        if req.atomicity > 2 || req.atomicity < 0 {
            return Err(Status::invalid_argument(format!("unknown atomicity {}", req.atomicity)));
        }
        let st = &mut *st;
        let mut pool = self.dev.pool();
        let mut results: Vec<Result<(), Fail>> = Vec::with_capacity(updates.len());
        if atomic {
            // Tried whole on a scratch copy first; nothing changes unless every update succeeds.
            let mut scratch = Scratch(pool.view().scratch().map_err(|e| Status::internal(e.to_string()))?);
            let mut h = st.handles.clone();
            for u in &updates {
                results.push(u.clone().and_then(|(op, e)| entities::write(&pl, &mut h, &mut scratch, op, e)));
            }
            if results.iter().all(Result::is_ok) {
                for (op, e) in updates.iter().flatten() {
                    if let Err(f) = entities::write(&pl, &mut st.handles, &mut pool, *op, e) {
                        // The dry run succeeded, so this cannot happen; say so rather than hide it.
                        pool.flush();
                        return Err(Status::internal(format!(
                            "an update failed after its dry run succeeded: {}",
                            f.message
                        )));
                    }
                }
            } else {
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(Fail {
                        code: Code::Aborted,
                        message: "not applied: another update of the batch failed".into(),
                    });
                }
            }
        } else {
            for u in &updates {
                results.push(u.clone().and_then(|(op, e)| entities::write(&pl, &mut st.handles, &mut pool, op, e)));
                // No atomicity promised: the workers replay while the master goes on.
                if pool.pending() >= EARLY_SEND {
                    pool.send_pending();
                }
            }
        }
        pool.flush();
        drop(pool);
        if results.iter().all(Result::is_ok) {
            return Ok(());
        }
        Err(batch_error(&results))
    }

    /// Answers a Read request: the entities found, encoded as they are
    /// found into ReadResponse messages of at most [`READ_CHUNK`] bytes of
    /// entities each (a large answer is held in its compact wire form and
    /// sent response by response).
    pub fn read_parts(&self, req: p4::ReadRequest) -> Result<Vec<Vec<u8>>, Status> {
        self.check_device(req.device_id)?;
        let st = self.state();
        let pl = self.pipeline(&st)?;
        let mut pool = self.dev.pool();
        // A wildcard read gives a role only what it may see.
        let role = req.role.clone();
        let keep =
            |e: &p4::Entity| e.entity.as_ref().is_none_or(|e| st.streams.may_access(&role, entities::p4_id(e)).is_ok());
        let mut out = entities::ReadOut::new(READ_CHUNK, &keep);
        pool.read(|sw| {
            for e in &req.entities {
                let Some(e) = e.entity.as_ref() else {
                    return Err(Status::invalid_argument("a read entity is empty"));
                };
                let id = entities::p4_id(e).filter(|id| *id != 0);
                st.streams.may_access(&req.role, id).map_err(Status::permission_denied)?;
                entities::read(&pl, &st.handles, sw, e, &mut out).map_err(|f| Status::new(f.code, f.message))?;
            }
            Ok(())
        })?;
        Ok(out.finish())
    }

    /// Answers a Read request in one response (for callers in the process).
    pub fn read(&self, req: p4::ReadRequest) -> Result<p4::ReadResponse, Status> {
        let mut all = p4::ReadResponse::default();
        for part in self.read_parts(req)? {
            all.merge(part.as_slice()).map_err(|e| Status::internal(format!("a read part: {e}")))?;
        }
        Ok(all)
    }

    /// SetForwardingPipelineConfig.
    pub fn set_pipeline(&self, req: p4::SetForwardingPipelineConfigRequest) -> Result<(), Status> {
        use p4::set_forwarding_pipeline_config_request::Action as A;
        self.check_device(req.device_id)?;
        let mut st = self.state();
        st.streams.check_primary(&req.role, req.election_id)?;
        st.streams.may_push_pipeline(&req.role)?;
        let action =
            A::try_from(req.action).map_err(|_| Status::invalid_argument(format!("unknown action {}", req.action)))?;
        if action == A::Commit {
            let (pl, sw) = st
                .saved
                .take()
                .ok_or_else(|| Status::failed_precondition("COMMIT: no pipeline was saved (VERIFY_AND_SAVE)"))?;
            self.dev.check_swap(&pl.json).map_err(Status::failed_precondition)?;
            self.dev.install(sw, pl.json.clone()).map_err(Status::internal)?;
            st.pipeline = Some(pl);
            st.handles = Handles::default();
            st.streams.reset_digests();
            return Ok(());
        }
        if action == A::Unspecified {
            return Err(Status::invalid_argument("the action is UNSPECIFIED"));
        }
        let cfg = req.config.ok_or_else(|| Status::invalid_argument("no config"))?;
        let p4info = cfg.p4info.ok_or_else(|| Status::invalid_argument("no p4info in the config"))?;
        let json = std::str::from_utf8(&cfg.p4_device_config)
            .map_err(|_| Status::invalid_argument("p4_device_config must be BMv2 JSON text (UTF-8)"))?
            .to_string();
        let sw = self.dev.compile(&json).map_err(|e| Status::invalid_argument(format!("p4_device_config: {e}")))?;
        let ids = Ids::build(&p4info, &sw)
            .map_err(|e| Status::invalid_argument(format!("the P4Info does not fit the BMv2 JSON: {e}")))?;
        let json: Arc<str> = json.into();
        let pl = Arc::new(Pipeline { p4info, json: json.clone(), cookie: cfg.cookie.map(|c| c.cookie), ids });
        match action {
            A::Verify => Ok(()),
            A::VerifyAndSave => {
                st.saved = Some((pl, sw));
                Ok(())
            }
            A::ReconcileAndCommit if st.pipeline.as_ref().is_some_and(|old| *old.json == *json) => {
                // Same program: the forwarding state stays; only the P4Info and cookie change.
                st.pipeline = Some(pl);
                Ok(())
            }
            _ => {
                self.dev.check_swap(&json).map_err(Status::failed_precondition)?;
                self.dev.install(sw, json).map_err(Status::internal)?;
                st.pipeline = Some(pl);
                st.handles = Handles::default();
                st.streams.reset_digests();
                Ok(())
            }
        }
    }

    /// GetForwardingPipelineConfig.
    pub fn get_pipeline(
        &self,
        req: p4::GetForwardingPipelineConfigRequest,
    ) -> Result<p4::ForwardingPipelineConfig, Status> {
        use p4::get_forwarding_pipeline_config_request::ResponseType as T;
        self.check_device(req.device_id)?;
        let st = self.state();
        let Some(pl) = st.pipeline.as_ref() else {
            return Ok(p4::ForwardingPipelineConfig::default());
        };
        let ty = T::try_from(req.response_type)
            .map_err(|_| Status::invalid_argument(format!("unknown response type {}", req.response_type)))?;
        let cookie = pl.cookie.map(|c| p4::forwarding_pipeline_config::Cookie { cookie: c });
        let p4info = matches!(ty, T::All | T::P4infoAndCookie).then(|| pl.p4info.clone());
        let device =
            if matches!(ty, T::All | T::DeviceConfigAndCookie) { pl.json.as_bytes().to_vec() } else { Vec::new() };
        Ok(p4::ForwardingPipelineConfig { p4info, p4_device_config: device, cookie })
    }
}

/// Bytes of a failed batch's trailers that gRPC clients accept: the
/// `grpc-status-details-bin` (the encoded `google.rpc.Status`, in base64)
/// and `grpc-message` (percent-encoded) within grpc-python's soft limit of
/// 8 KiB for the whole header block (from 8 KiB some are refused, all from
/// 16 KiB), the other headers of the block (about 300 bytes) left room.
pub const TRAILER_BUDGET: usize = 7600;

/// Longest text of the status message.
const MESSAGE_BUDGET: usize = 512;

/// Bytes `text` takes as a `grpc-message` (percent-encoded).
fn grpc_message_len(text: &str) -> usize {
    text.bytes().map(|b| if (0x20..=0x7e).contains(&b) && b != b'%' { 1 } else { 3 }).sum()
}

/// Whether a status whose encoding is `status` bytes long, with message
/// `message`, fits [`TRAILER_BUDGET`].
fn fits_trailer(status: usize, message: &str) -> bool {
    4 * status.div_ceil(3) + grpc_message_len(message) <= TRAILER_BUDGET
}

/// Longest message of one update's `p4.v1.Error` when the details are cut.
const DETAIL_MESSAGE: usize = 100;

/// The note that ends a list of details cut short.
const NOTE_BUDGET: usize = 400;

/// A status code's canonical name (`NOT_FOUND`), as clients print it.
fn code_name(c: Code) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES.get(c as usize).copied().unwrap_or("UNKNOWN")
}

fn error_any(r: &Result<(), Fail>, limit: usize, note: &str) -> prost_types::Any {
    let e = match r {
        Ok(()) => p4::Error { canonical_code: 0, ..Default::default() },
        Err(f) => p4::Error {
            canonical_code: f.code as i32,
            message: if limit == 0 { note.to_string() } else { format!("{}{note}", cut(&f.message, limit)) },
            ..Default::default()
        },
    };
    prost_types::Any { type_url: "type.googleapis.com/p4.v1.Error".into(), value: e.encode_to_vec() }
}

/// The status of a batch with failed updates: UNKNOWN with one
/// `p4.v1.Error` per update in update order (the specification's format),
/// within [`TRAILER_BUDGET`]:
/// 1. every update, messages cut to [`DETAIL_MESSAGE`] bytes;
/// 2. else every update with its code and an empty message (the status
///    message then gives the first message of each code);
/// 3. else the first updates, as many as fit, the last one listed being a
///    failure whose message ends with a note on the rest: how many more
///    failed, by code, with the first index and message of each code.
///
/// A client thus reads, for any batch, the code of every listed update at
/// its index and the count of every failure. The status message says how
/// many failed and names the first ones by index.
fn batch_error(results: &[Result<(), Fail>]) -> Status {
    let n = results.len();
    let failed: Vec<(usize, &Fail)> =
        results.iter().enumerate().filter_map(|(i, r)| r.as_ref().err().map(|f| (i, f))).collect();
    let status = |message: String, details: Vec<prost_types::Any>| {
        let st = proto::google::rpc::Status { code: Code::Unknown as i32, message: message.clone(), details };
        let bytes = st.encode_to_vec();
        fits_trailer(bytes.len(), &message).then(|| Status::with_details(Code::Unknown, message, bytes.into()))
    };
    let name_failures = |mut message: String, from: usize| {
        for (i, f) in failed.iter().filter(|(i, _)| *i >= from) {
            let item = format!(" #{i} {}: {};", code_name(f.code), cut(&f.message, DETAIL_MESSAGE));
            if message.len() + item.len() > MESSAGE_BUDGET - 4 {
                message.push_str(" ...");
                break;
            }
            message.push_str(&item);
        }
        message
    };
    let head = format!("{} of {n} updates failed;", failed.len());
    // 1. Everything.
    let all = |limit| results.iter().map(|r| error_any(r, limit, "")).collect::<Vec<_>>();
    if let Some(s) = status(name_failures(head.clone(), 0), all(DETAIL_MESSAGE)) {
        return s;
    }
    // 2. Every code, no messages: the first message of each code in the status message.
    let (_, codes_text) = tally(&failed, DETAIL_MESSAGE);
    if let Some(s) = status(cut(&format!("{head}{codes_text}"), MESSAGE_BUDGET), all(0)) {
        return s;
    }
    // 3. The first updates, up to a failure, with a note on the rest.
    let sizes: Vec<usize> =
        results.iter().map(|r| prost::encoding::message::encoded_len(3, &error_any(r, DETAIL_MESSAGE, ""))).collect();
    // Raw bytes for the details: what base64 leaves of the budget, less the
    // message (twice: in the status and as grpc-message) and the note.
    let mut room = (TRAILER_BUDGET * 3 / 4).saturating_sub(3 * MESSAGE_BUDGET + NOTE_BUDGET + 16);
    for _ in 0..4 {
        let mut used = 0;
        let mut last = None;
        for (i, (r, size)) in results.iter().zip(&sizes).enumerate() {
            if used + size > room {
                break;
            }
            used += size;
            if r.is_err() {
                last = Some(i);
            }
        }
        let Some(k) = last else { break };
        let rest: Vec<(usize, &Fail)> = failed.iter().filter(|(i, _)| *i > k).copied().collect();
        let (more, rest_text) = tally(&rest, 60);
        let note = format!(
            " [updates #{} to #{} are not listed (gRPC clients refuse a larger status); {more} of them failed:{rest_text}",
            k + 1,
            n - 1
        );
        let note = format!("{}]", cut(&note, NOTE_BUDGET - 1));
        let mut details: Vec<prost_types::Any> =
            results[..k].iter().map(|r| error_any(r, DETAIL_MESSAGE, "")).collect();
        details.push(error_any(&results[k], DETAIL_MESSAGE, &note));
        let message = name_failures(format!("{head} the details list updates #0 to #{k};"), 0);
        if let Some(s) = status(message, details) {
            return s;
        }
        // Messages that percent-encode long: fewer details.
        room = room * 3 / 4;
    }
    // No failure fits among the first updates: the message alone names them.
    Status::new(
        Code::Unknown,
        name_failures(format!("{head} per-update details omitted (too large for a gRPC trailer);"), 0),
    )
}

/// Failures (update index, failure) counted by code, in the order of each
/// code's first failure: how many, and " N CODE (first #I: message);" per
/// code, messages cut to `message_len` bytes.
fn tally(failures: &[(usize, &Fail)], message_len: usize) -> (usize, String) {
    let mut by_code: Vec<(Code, usize, usize, &str)> = Vec::new(); // code, count, first index, first message
    for (i, f) in failures {
        match by_code.iter_mut().find(|(c, ..)| *c == f.code) {
            Some(e) => e.1 += 1,
            None => by_code.push((f.code, 1, *i, f.message.as_str())),
        }
    }
    let mut text = String::new();
    for (code, count, first, msg) in &by_code {
        text.push_str(&format!(" {count} {} (first #{first}: {});", code_name(*code), cut(msg, message_len)));
    }
    (failures.len(), text)
}

/// `text` cut to at most `max` bytes, at a character boundary, marked with "...".
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The gRPC face of [`Server`].
#[derive(Clone)]
pub struct Service(pub Arc<Server>);

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Status> + Send + 'static) -> Result<T, Status> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Status::internal(format!("request task failed: {e}")))?
}

#[tonic::async_trait]
impl p4::p4_runtime_server::P4Runtime for Service {
    async fn write(&self, request: Request<p4::WriteRequest>) -> Result<Response<p4::WriteResponse>, Status> {
        let s = self.0.clone();
        let req = request.into_inner();
        blocking(move || s.write(req)).await?;
        Ok(Response::new(p4::WriteResponse {}))
    }

    type ReadStream = BoxStream<p4::ReadResponse>;

    async fn read(&self, request: Request<p4::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let s = self.0.clone();
        let req = request.into_inner();
        let parts = blocking(move || s.read_parts(req)).await?;
        // Each part is decoded only when its turn to be sent comes.
        let responses = parts
            .into_iter()
            .map(|p| p4::ReadResponse::decode(p.as_slice()).map_err(|e| Status::internal(format!("a read part: {e}"))));
        Ok(Response::new(Box::pin(tokio_stream::iter(responses))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        let s = self.0.clone();
        let req = request.into_inner();
        blocking(move || s.set_pipeline(req)).await?;
        Ok(Response::new(p4::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::GetForwardingPipelineConfigResponse>, Status> {
        let config = self.0.get_pipeline(request.into_inner())?;
        Ok(Response::new(p4::GetForwardingPipelineConfigResponse { config: Some(config) }))
    }

    type StreamChannelStream = BoxStream<p4::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<tonic::Streaming<p4::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let rx = stream::open(self.0.clone(), request.into_inner());
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        _: Request<p4::CapabilitiesRequest>,
    ) -> Result<Response<p4::CapabilitiesResponse>, Status> {
        Ok(Response::new(p4::CapabilitiesResponse { p4runtime_api_version: API_VERSION.into(), experimental: None }))
    }
}

/// Encoded bytes of entities one ReadResponse carries at most: a large
/// Read is streamed as several responses, each far under the 4 MiB gRPC
/// clients accept by default.
pub const READ_CHUNK: usize = 1 << 20;

/// gRPC's status table names RESOURCE_EXHAUSTED for a request above the
/// receive limit; tonic answers OUT_OF_RANGE. Clients (and the P4Runtime
/// test suite) expect the former, so the status is rewritten.
fn too_large_is_resource_exhausted<B>(mut r: http::Response<B>) -> http::Response<B> {
    let h = r.headers();
    let too_large = h.get("grpc-status").is_some_and(|v| v == "11")
        && h.get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .is_some_and(|m| m.contains("too%20large") || m.contains("too large"));
    if too_large {
        r.headers_mut().insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    r
}

/// P4Runtime as a server of the node (see [`start`]).
pub struct P4Runtime {
    device: Arc<Device>,
    addr: String,
    tls: Option<Tls>,
}

impl P4Runtime {
    /// The server for `device` on `addr` (`HOST:PORT`), over TLS when `tls` says so.
    pub fn new(device: Arc<Device>, addr: &str, tls: Option<Tls>) -> P4Runtime {
        P4Runtime { device, addr: addr.to_string(), tls }
    }
}

/// TLS on the gRPC server, with bmv2's options: `--grpc-server-ssl`,
/// `--grpc-server-cert`, `--grpc-server-key`, and for mutual TLS
/// `--grpc-server-with-client-auth` with `--grpc-server-cacert` (the CA a
/// client's certificate must be signed by; a client without one is refused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// The server's certificate chain (PEM file).
    pub cert: std::path::PathBuf,
    /// Its private key (PEM file).
    pub key: std::path::PathBuf,
    /// The CA that signs clients' certificates (PEM file).
    pub ca: Option<std::path::PathBuf>,
    /// Require a client certificate signed by `ca`.
    pub client_auth: bool,
}

impl Tls {
    /// The server's TLS configuration, its files read; the error names the file.
    fn config(&self) -> Result<tonic::transport::ServerTlsConfig, String> {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let read =
            |p: &std::path::Path, what: &str| std::fs::read(p).map_err(|e| format!("{what} {}: {e}", p.display()));
        let cert = read(&self.cert, "--grpc-server-cert")?;
        let key = read(&self.key, "--grpc-server-key")?;
        let mut cfg = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if self.client_auth {
            let ca = self.ca.as_deref().ok_or("--grpc-server-with-client-auth needs --grpc-server-cacert")?;
            cfg = cfg
                .client_ca_root(Certificate::from_pem(read(ca, "--grpc-server-cacert")?))
                .client_auth_optional(false);
        }
        Ok(cfg)
    }
}

impl sluice_node::Server<sluice_engine::Switch> for P4Runtime {
    fn name(&self) -> &'static str {
        "P4Runtime"
    }

    fn start(&mut self, _: &sluice_node::Control<sluice_engine::Switch>) -> Result<String, String> {
        let local = start_with(self.device.clone(), &self.addr, connections::Limits::default(), self.tls.clone())?;
        let tls = match &self.tls {
            Some(t) if t.client_auth => " (TLS, client certificates required)",
            Some(_) => " (TLS)",
            None => "",
        };
        Ok(format!("sluice: P4Runtime server listening on {local}{tls}"))
    }
}

/// Serves P4Runtime on `addr` from threads of its own; returns once the socket listens.
pub fn start(dev: Arc<Device>, addr: &str) -> Result<std::net::SocketAddr, String> {
    start_with(dev, addr, connections::Limits::default(), None)
}

/// [`start`] with bounds on the connections other than the defaults, and
/// over TLS when `tls` says so.
pub fn start_with(
    dev: Arc<Device>,
    addr: &str,
    limits: connections::Limits,
    tls: Option<Tls>,
) -> Result<std::net::SocketAddr, String> {
    let tls = tls.as_ref().map(Tls::config).transpose()?;
    use std::net::ToSocketAddrs;
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| format!("--grpc-server-addr {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("--grpc-server-addr {addr}: no address"))?;
    let listener = std::net::TcpListener::bind(sa).map_err(|e| format!("P4Runtime server on {sa}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    // gNMI beside P4Runtime, as Stratum serves it: the node's ports.
    let control = dev.control().clone();
    let gnmi = sluice_gnmi::service(Arc::new(sluice_gnmi::NodePorts::new(move || control.io_metrics())));
    let server = Server::new(dev);
    stream::start_event_thread(server.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sluice-p4rt")
        .enable_all()
        .build()
        .map_err(|e| format!("P4Runtime runtime: {e}"))?;
    std::thread::Builder::new()
        .name("sluice-p4rt-main".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => return eprintln!("sluice: P4Runtime server: {e}"),
                };
                let svc = p4::p4_runtime_server::P4RuntimeServer::new(Service(server))
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE);
                let (incoming, _) = connections::accept(listener, limits);
                // Large flow-control windows: batched Writes are tens of kilobytes to megabytes.
                // Keepalive pings find dead peers (a quiet live client is never closed).
                let mut builder = tonic::transport::Server::builder();
                if let Some(cfg) = tls {
                    builder = match builder.tls_config(cfg) {
                        Ok(b) => b,
                        Err(e) => return eprintln!("sluice: P4Runtime server: TLS: {e}"),
                    };
                }
                let r = builder
                    .initial_stream_window_size(Some(8 << 20))
                    .initial_connection_window_size(Some(16 << 20))
                    .http2_keepalive_interval(Some(KEEPALIVE))
                    .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
                    .layer(tower::util::MapResponseLayer::new(too_large_is_resource_exhausted))
                    .add_service(svc)
                    .add_service(gnmi)
                    .serve_with_incoming(tokio_stream::wrappers::ReceiverStream::new(incoming))
                    .await;
                if let Err(e) = r {
                    eprintln!("sluice: P4Runtime server stopped: {e}");
                }
            })
        })
        .map_err(|e| e.to_string())?;
    Ok(local)
}

#[cfg(test)]
mod read_tests {
    use super::*;

    #[test]
    fn a_large_read_is_encoded_into_responses_under_the_chunk_size_in_order() {
        let entity = |i: u32| p4::Entity {
            entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
                table_id: 1,
                priority: i as i32,
                metadata: vec![0; 100],
                ..Default::default()
            })),
        };
        let all: Vec<p4::Entity> = (0..50_000).map(entity).collect();
        let keep_all = |_: &p4::Entity| true;
        let mut out = entities::ReadOut::new(READ_CHUNK, &keep_all);
        for e in &all {
            out.push(e.clone());
        }
        let parts = out.finish();
        assert!(parts.len() > 1, "{} parts", parts.len());
        assert!(parts.iter().all(|p| p.len() <= READ_CHUNK), "a part past the chunk size");
        let back: Vec<p4::Entity> =
            parts.iter().flat_map(|p| p4::ReadResponse::decode(p.as_slice()).unwrap().entities).collect();
        assert_eq!(back, all, "entities lost or reordered");
        let none = entities::ReadOut::new(READ_CHUNK, &keep_all).finish();
        assert_eq!(none, vec![Vec::<u8>::new()], "an empty answer is one empty response");
        let odd = |e: &p4::Entity| matches!(&e.entity, Some(p4::entity::Entity::TableEntry(t)) if t.priority % 2 == 1);
        let mut out = entities::ReadOut::new(READ_CHUNK, &odd);
        for e in &all[..10] {
            out.push(e.clone());
        }
        assert_eq!(p4::ReadResponse::decode(out.finish()[0].as_slice()).unwrap().entities.len(), 5);
    }
}

#[cfg(test)]
mod batch_error_tests {
    use super::*;

    fn details(s: &Status) -> Vec<p4::Error> {
        let st = proto::google::rpc::Status::decode(s.details()).expect("a google.rpc.Status in the details");
        st.details.iter().map(|a| p4::Error::decode(a.value.as_slice()).unwrap()).collect()
    }

    fn fail(i: usize) -> Result<(), Fail> {
        let code = if i.is_multiple_of(3) { Code::AlreadyExists } else { Code::NotFound };
        Err(Fail { code, message: format!("update {i}: the entry is where it should not be, or not where it should") })
    }

    #[test]
    fn every_update_is_listed_while_the_status_fits_the_trailer_budget() {
        let results: Vec<_> = (0..60).map(|i| if i == 5 || i == 59 { fail(i) } else { Ok(()) }).collect();
        let s = batch_error(&results);
        let d = details(&s);
        assert_eq!(d.len(), 60);
        assert_eq!(
            d.iter().enumerate().filter(|(_, e)| e.canonical_code != 0).map(|(i, _)| i).collect::<Vec<_>>(),
            [5, 59]
        );
        assert!(d[5].message.starts_with("update 5:"), "{:?}", d[5]);
        assert!(s.message().starts_with("2 of 60 updates failed; #5 NOT_FOUND"), "{}", s.message());
    }

    #[test]
    fn a_larger_batch_keeps_every_code_and_then_the_first_updates_with_a_note_on_the_rest() {
        // Every code, messages dropped: 100 failures fit as codes alone.
        let mid: Vec<_> = (0..100).map(fail).collect();
        let s = batch_error(&mid);
        let d = details(&s);
        assert_eq!(d.len(), 100);
        assert!(d.iter().all(|e| e.canonical_code != 0 && e.message.is_empty()));
        assert!(
            s.message().contains("34 ALREADY_EXISTS (first #0:") && s.message().contains("66 NOT_FOUND (first #1:")
        );
        assert!(fits_trailer(s.details().len(), s.message()));

        // 1000 failures: the first ones with their messages, the last listed one with the note.
        let big: Vec<_> = (0..1000).map(fail).collect();
        let s = batch_error(&big);
        let d = details(&s);
        let k = d.len() - 1;
        assert!((20..1000).contains(&k), "{} listed", d.len());
        for (i, e) in d.iter().enumerate() {
            assert_eq!(e.canonical_code, big[i].as_ref().unwrap_err().code as i32, "update {i}");
            assert!(e.message.starts_with(&format!("update {i}:")), "{i}: {}", e.message);
        }
        let more = 999 - k;
        assert!(d[k].message.contains(&format!("updates #{} to #999 are not listed", k + 1)), "{}", d[k].message);
        assert!(d[k].message.contains(&format!("{more} of them failed")), "{}", d[k].message);
        assert!(s.message().starts_with(&format!("1000 of 1000 updates failed; the details list updates #0 to #{k};")));
        assert!(fits_trailer(s.details().len(), s.message()));

        // Failures only after the budget: the message alone.
        let late: Vec<_> = (0..1000).map(|i| if i == 999 { fail(i) } else { Ok(()) }).collect();
        let s = batch_error(&late);
        assert!(s.details().is_empty());
        assert!(s.message().contains("#999 "), "{}", s.message());
    }
}
