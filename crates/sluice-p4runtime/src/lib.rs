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
                e.map(|e| (op, e))
                    .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "an update without an entity".into() })
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

    /// Answers a Read request.
    pub fn read(&self, req: p4::ReadRequest) -> Result<p4::ReadResponse, Status> {
        self.check_device(req.device_id)?;
        let st = self.state();
        let pl = self.pipeline(&st)?;
        let mut pool = self.dev.pool();
        let mut out = Vec::new();
        pool.read(|sw| {
            for e in &req.entities {
                let Some(e) = e.entity.as_ref() else {
                    return Err(Status::invalid_argument("a read entity is empty"));
                };
                entities::read(&pl, &st.handles, sw, e, &mut out).map_err(|f| Status::new(f.code, f.message))?;
            }
            Ok(())
        })?;
        Ok(p4::ReadResponse { entities: out })
    }

    /// SetForwardingPipelineConfig.
    pub fn set_pipeline(&self, req: p4::SetForwardingPipelineConfigRequest) -> Result<(), Status> {
        use p4::set_forwarding_pipeline_config_request::Action as A;
        self.check_device(req.device_id)?;
        let mut st = self.state();
        st.streams.check_primary(&req.role, req.election_id)?;
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

/// Bytes of the encoded `google.rpc.Status` a failed batch's trailer may
/// carry. gRPC clients refuse trailers over 8-16 KiB (grpc-python's default
/// soft limit is 8 KiB, after base64: 4 KiB of status is about 5.5 KiB).
pub const DETAILS_BUDGET: usize = 4096;

/// Longest text of the status message (also a trailer).
const MESSAGE_BUDGET: usize = 1024;

/// The status of a batch with failed updates: UNKNOWN, with one
/// `p4.v1.Error` per update in update order (the specification's format),
/// failed updates' messages cut to 100 bytes if that is what fits
/// [`DETAILS_BUDGET`]. A batch whose details cannot fit (about 110 updates
/// or more) gets no details: its message says so and names the first
/// failed updates by index, code and message.
fn batch_error(results: &[Result<(), Fail>]) -> Status {
    let failed = results.iter().filter(|r| r.is_err()).count();
    let first = results.iter().find_map(|r| r.as_ref().err()).map_or(String::new(), |f| f.message.clone());
    let summary = cut(&format!("{failed} of {} updates failed; first: {first}", results.len()), MESSAGE_BUDGET);
    for limit in [usize::MAX, 100] {
        let details: Vec<prost_types::Any> = results
            .iter()
            .map(|r| {
                let e = match r {
                    Ok(()) => p4::Error { canonical_code: 0, ..Default::default() },
                    Err(f) => p4::Error {
                        canonical_code: f.code as i32,
                        message: cut(&f.message, limit),
                        ..Default::default()
                    },
                };
                prost_types::Any { type_url: "type.googleapis.com/p4.v1.Error".into(), value: e.encode_to_vec() }
            })
            .collect();
        let status = proto::google::rpc::Status { code: Code::Unknown as i32, message: summary.clone(), details };
        let bytes = status.encode_to_vec();
        if bytes.len() <= DETAILS_BUDGET {
            return Status::with_details(Code::Unknown, summary, bytes.into());
        }
    }
    let mut message = format!(
        "{failed} of {} updates failed; per-update details omitted (more than the {DETAILS_BUDGET} bytes gRPC \
         clients accept in a trailer: send smaller batches to get them); failed:",
        results.len()
    );
    for (i, r) in results.iter().enumerate() {
        let Err(f) = r else { continue };
        let item = format!(" #{i} {:?}: {};", f.code, cut(&f.message, 100));
        if message.len() + item.len() > MESSAGE_BUDGET - 16 {
            message.push_str(" ...");
            break;
        }
        message.push_str(&item);
    }
    Status::new(Code::Unknown, message)
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
        let resp = blocking(move || s.read(req)).await?;
        Ok(Response::new(Box::pin(tokio_stream::iter(split_read(resp).into_iter().map(Ok)))))
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

/// Splits a Read's answer into responses of at most [`READ_CHUNK`] bytes of
/// entities each (an entity larger than that goes alone); an empty answer
/// is one empty response.
pub fn split_read(resp: p4::ReadResponse) -> Vec<p4::ReadResponse> {
    let mut out = Vec::new();
    let (mut cur, mut size) = (Vec::new(), 0usize);
    for e in resp.entities {
        // The entity, its field tag and its length prefix.
        let n = e.encoded_len() + 1 + prost::length_delimiter_len(e.encoded_len());
        if size + n > READ_CHUNK && !cur.is_empty() {
            out.push(p4::ReadResponse { entities: std::mem::take(&mut cur) });
            size = 0;
        }
        size += n;
        cur.push(e);
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(p4::ReadResponse { entities: cur });
    }
    out
}

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
    fn a_large_read_is_split_into_responses_under_the_chunk_size_in_order() {
        let entity = |i: u32| p4::Entity {
            entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
                table_id: 1,
                priority: i as i32,
                metadata: vec![0; 100],
                ..Default::default()
            })),
        };
        let all: Vec<p4::Entity> = (0..50_000).map(entity).collect();
        let parts = split_read(p4::ReadResponse { entities: all.clone() });
        assert!(parts.len() > 1, "{} parts", parts.len());
        assert!(parts.iter().all(|p| p.encoded_len() <= READ_CHUNK), "a part past the chunk size");
        let back: Vec<p4::Entity> = parts.into_iter().flat_map(|p| p.entities).collect();
        assert_eq!(back, all, "entities lost or reordered");
        assert_eq!(split_read(p4::ReadResponse::default()), vec![p4::ReadResponse::default()]);
    }
}
