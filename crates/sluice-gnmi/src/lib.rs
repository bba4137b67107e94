//! gNMI for Sluice's switches: the OpenConfig interfaces model of a
//! node's ports (names, P4Runtime port ids, admin and oper status,
//! counters), served with Capabilities, Get, Set and Subscribe (ONCE,
//! POLL, STREAM with SAMPLE, ON_CHANGE and TARGET_DEFINED), in JSON,
//! JSON_IETF and PROTO (typed values), as Stratum serves it beside
//! P4Runtime on one gRPC server.
//!
//! The crate knows nothing of any data plane: it is handed a [`Ports`]
//! (a snapshot of the ports and a way to enable or disable one);
//! [`NodePorts`] makes one from the node's port metrics and the kernel's
//! view of each interface. The service ([`service`]) is added to a tonic
//! server by its owner (the P4Runtime server adds it to its own); the data
//! planes without one serve it alone ([`GnmiServer`], `--gnmi ADDR`).

use std::sync::Arc;

pub mod node_ports;
mod service;
mod tree;

pub use node_ports::NodePorts;

/// The generated gNMI messages and service (from `proto/gnmi/gnmi.proto`).
#[allow(clippy::all, missing_docs)]
pub mod proto {
    tonic::include_proto!("gnmi");
}

/// The gNMI version [`service`] implements, as Capabilities reports it.
pub const GNMI_VERSION: &str = "0.7.0";

/// The counters of one interface, as OpenConfig names them
/// (`state/counters/...`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub in_octets: u64,
    pub in_pkts: u64,
    pub in_unicast_pkts: u64,
    pub in_multicast_pkts: u64,
    pub in_broadcast_pkts: u64,
    pub in_discards: u64,
    pub in_errors: u64,
    pub out_octets: u64,
    pub out_pkts: u64,
    pub out_unicast_pkts: u64,
    pub out_multicast_pkts: u64,
    pub out_broadcast_pkts: u64,
    pub out_discards: u64,
    pub out_errors: u64,
}

impl Counters {
    /// The values in the order of `tree::COUNTERS`.
    fn values(&self) -> [u64; 14] {
        [
            self.in_octets,
            self.in_pkts,
            self.in_unicast_pkts,
            self.in_multicast_pkts,
            self.in_broadcast_pkts,
            self.in_discards,
            self.in_errors,
            self.out_octets,
            self.out_pkts,
            self.out_unicast_pkts,
            self.out_multicast_pkts,
            self.out_broadcast_pkts,
            self.out_discards,
            self.out_errors,
        ]
    }
}

/// One port as gNMI shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortState {
    /// The interface's name (the list key).
    pub name: String,
    /// The data plane's port number (P4Runtime's port id).
    pub id: u32,
    /// The interface's MAC address, when it has one.
    pub mac: Option<[u8; 6]>,
    /// Enabled (`config/enabled`, `admin-status`).
    pub admin_up: bool,
    /// Link up and forwarding (`oper-status`).
    pub oper_up: bool,
    /// When `oper-status` last changed (ns since the Unix epoch).
    pub last_change: u64,
    pub counters: Counters,
}

/// What the gNMI service serves: the ports of one node.
pub trait Ports: Send + Sync + 'static {
    /// Every port now, in port number order. Called from a blocking
    /// thread (it may wait for the node's workers).
    fn snapshot(&self) -> Vec<PortState>;

    /// Enables (`up`) or disables interface `name`; the error says why not.
    fn set_enabled(&self, name: &str, up: bool) -> Result<(), String>;
}

/// The gNMI service over `ports`, to add to a tonic server.
pub fn service(ports: Arc<dyn Ports>) -> proto::g_nmi_server::GNmiServer<service::Gnmi> {
    proto::g_nmi_server::GNmiServer::new(service::Gnmi::new(ports))
        .max_decoding_message_size(4 << 20)
        .max_encoding_message_size(64 << 20)
}

/// Serves gNMI alone on `addr` (`HOST:PORT`) from threads of its own, for
/// a data plane without a P4Runtime server; returns once the socket
/// listens.
pub fn start(addr: &str, ports: Arc<dyn Ports>) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| format!("--gnmi {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("--gnmi {addr}: no address"))?;
    let listener = std::net::TcpListener::bind(sa).map_err(|e| format!("gNMI server on {sa}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sluice-gnmi")
        .enable_all()
        .build()
        .map_err(|e| format!("gNMI runtime: {e}"))?;
    std::thread::Builder::new()
        .name("sluice-gnmi-main".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => return eprintln!("sluice: gNMI server: {e}"),
                };
                let r = tonic::transport::Server::builder()
                    .add_service(service(ports))
                    .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                    .await;
                if let Err(e) = r {
                    eprintln!("sluice: gNMI server stopped: {e}");
                }
            })
        })
        .map_err(|e| e.to_string())?;
    Ok(local)
}

/// gNMI as a server of a node (`--gnmi ADDR` of the data planes without
/// P4Runtime): the node's ports, read from its I/O metrics.
pub struct GnmiServer {
    addr: String,
}

impl GnmiServer {
    pub fn new(addr: &str) -> GnmiServer {
        GnmiServer { addr: addr.to_string() }
    }
}

impl<D: sluice_dataplane::DataPlane> sluice_node::Server<D> for GnmiServer {
    fn name(&self) -> &'static str {
        "gNMI"
    }

    fn start(&mut self, control: &sluice_node::Control<D>) -> Result<String, String> {
        let c = control.clone();
        let local = start(&self.addr, Arc::new(NodePorts::new(move || c.io_metrics())))?;
        Ok(format!("sluice: gNMI server listening on {local}"))
    }
}
