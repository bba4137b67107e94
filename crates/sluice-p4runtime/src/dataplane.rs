//! bmv2's packet I/O over gRPC (`simple_switch_grpc -- --dp-grpc-server-addr
//! ADDR`): the `p4.bm.DataplaneInterface` service on a server of its own.
//! Frames a client streams in enter the switch on the port each names, and
//! every frame the switch sends comes back on the same stream, with the id
//! of the request it was made of (`sluice_ports::channel`).
//!
//! As bmv2's service: one client at a time (another gets
//! RESOURCE_EXHAUSTED "only one client authorized at a time"); requests
//! for another device id, or with an empty frame, are skipped; a port is up
//! until `SetPortOperStatus` sets it down (frames to a down port are
//! dropped); when the client ends its requests, the stream ends once the
//! switch has taken every frame in. Requests naming a port past 510 are
//! skipped too (Sluice's ports are 0 to 510).
//!
//! Concurrency invariants (this file owns them):
//! - frames out go into a bounded queue of [`QUEUE`] responses toward the
//!   client; a frame that finds it full is dropped and counted as the
//!   port's `tx dropped` (a slow client loses frames, the switch never
//!   waits for it);
//! - frames in wait for room when the switch's inbox is full (the stream
//!   is read no further meanwhile, so gRPC's flow control slows the
//!   client): nothing a client sends is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_ports::channel::ChannelPorts;
use tokio::sync::{mpsc, Notify};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::proto::p4::bm::{
    dataplane_interface_server::{DataplaneInterface, DataplaneInterfaceServer},
    PacketStreamRequest, PacketStreamResponse, PortOperStatus, SetPortOperStatusRequest, SetPortOperStatusResponse,
};

/// Responses waiting for the client, at most.
pub const QUEUE: usize = 4096;

struct Service {
    device_id: u64,
    ports: ChannelPorts,
    active: Arc<AtomicBool>,
}

#[tonic::async_trait]
impl DataplaneInterface for Service {
    type PacketStreamStream = ReceiverStream<Result<PacketStreamResponse, Status>>;

    async fn packet_stream(
        &self,
        request: Request<Streaming<PacketStreamRequest>>,
    ) -> Result<Response<Self::PacketStreamStream>, Status> {
        if self.active.swap(true, Ordering::AcqRel) {
            return Err(Status::resource_exhausted("only one client authorized at a time"));
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let device_id = self.device_id;
        let out = tx.clone();
        self.ports.set_consumer(Some(Box::new(move |port, id, frame| {
            out.try_send(Ok(PacketStreamResponse { id, device_id, port, packet: frame.to_vec() })).is_ok()
        })));
        let room = Arc::new(Notify::new());
        let r = room.clone();
        self.ports.room(Some(Box::new(move || r.notify_one())));
        let (ports, active) = (self.ports.clone(), self.active.clone());
        let mut stream = request.into_inner();
        tokio::spawn(async move {
            while let Ok(Some(req)) = stream.message().await {
                if req.device_id != device_id || req.packet.is_empty() || req.port >= 511 {
                    continue;
                }
                let mut packet = req.packet;
                loop {
                    // Made before trying: a wake-up between the refusal and the wait is kept.
                    let wait = room.notified();
                    match ports.push(req.port, req.id, packet) {
                        Ok(()) => break,
                        Err(back) => packet = back,
                    }
                    wait.await;
                }
            }
            // The client is done sending: its last frames go through, then the stream ends.
            while !ports.inbox_is_empty() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            ports.set_consumer(None);
            ports.room(None);
            drop(tx);
            active.store(false, Ordering::Release);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn set_port_oper_status(
        &self,
        request: Request<SetPortOperStatusRequest>,
    ) -> Result<Response<SetPortOperStatusResponse>, Status> {
        let req = request.into_inner();
        if req.device_id != self.device_id {
            return Err(Status::invalid_argument("Invalid device id"));
        }
        match PortOperStatus::try_from(req.oper_status) {
            Ok(PortOperStatus::OperStatusDown) => self.ports.set_port_up(req.port, false),
            Ok(PortOperStatus::OperStatusUp) => self.ports.set_port_up(req.port, true),
            _ => return Err(Status::invalid_argument("Invalid oper status")),
        }
        Ok(Response::new(SetPortOperStatusResponse {}))
    }
}

/// Serves the packet I/O service on `addr` from threads of its own, for
/// the switch of device id `device_id` whose `grpc` port takes its frames
/// from `ports`; returns once the socket listens.
pub fn start(addr: &str, device_id: u64, ports: ChannelPorts) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| format!("--dp-grpc-server-addr {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("--dp-grpc-server-addr {addr}: no address"))?;
    let listener = std::net::TcpListener::bind(sa).map_err(|e| format!("packet I/O server on {sa}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sluice-dp-grpc")
        .enable_all()
        .build()
        .map_err(|e| format!("packet I/O server runtime: {e}"))?;
    let svc = Service { device_id, ports, active: Arc::new(AtomicBool::new(false)) };
    std::thread::Builder::new()
        .name("sluice-dp-grpc-main".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => return eprintln!("sluice: packet I/O server: {e}"),
                };
                let r = tonic::transport::Server::builder()
                    .add_service(DataplaneInterfaceServer::new(svc))
                    .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                    .await;
                if let Err(e) = r {
                    eprintln!("sluice: packet I/O server stopped: {e}");
                }
            })
        })
        .map_err(|e| e.to_string())?;
    Ok(local)
}
