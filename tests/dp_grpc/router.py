#!/usr/bin/env python3
"""Drives bmv2's packet I/O over gRPC (simple_switch_grpc
--dp-grpc-server-addr; service p4.bm.DataplaneInterface) with grpcio, on a
switch running ../shared/examples/router.json with the routes
10.0.1.0/24 -> port 1 and 10.0.2.0/24 -> port 2 (switch MACs
02:00:00:00:0N:fe, hosts 02:00:00:00:0N:01).

  router.py HOST:PORT DEVICE_ID

The messages are built at run time from their descriptors (the service's
package, names and field numbers), so no generated code is needed.
Prints one line per check and exits non-zero at the first failure.
"""
import queue
import struct
import sys
import threading

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def messages():
    fd = descriptor_pb2.FileDescriptorProto(name="sluice_dp_test.proto", package="p4.bm", syntax="proto3")
    for name in ("PacketStreamRequest", "PacketStreamResponse"):
        m = fd.message_type.add(name=name)
        for n, (field, ty) in enumerate(
            [("id", F.TYPE_UINT64), ("device_id", F.TYPE_UINT64), ("port", F.TYPE_UINT32), ("packet", F.TYPE_BYTES)], 1
        ):
            m.field.add(name=field, number=n, type=ty, label=F.LABEL_OPTIONAL)
    e = fd.enum_type.add(name="PortOperStatus")
    for n, v in enumerate(["OPER_STATUS_UNKNOWN", "OPER_STATUS_DOWN", "OPER_STATUS_UP"]):
        e.value.add(name=v, number=n)
    m = fd.message_type.add(name="SetPortOperStatusRequest")
    m.field.add(name="device_id", number=1, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="port", number=2, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    m.field.add(name="oper_status", number=3, type=F.TYPE_ENUM, type_name=".p4.bm.PortOperStatus", label=F.LABEL_OPTIONAL)
    fd.message_type.add(name="SetPortOperStatusResponse")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    factory = message_factory.MessageFactory(pool)
    return {
        n: factory.GetPrototype(pool.FindMessageTypeByName("p4.bm." + n))
        for n in ("PacketStreamRequest", "PacketStreamResponse", "SetPortOperStatusRequest", "SetPortOperStatusResponse")
    }


M = messages()
SW = {1: bytes.fromhex("0200000001fe"), 2: bytes.fromhex("0200000002fe")}
HOST = {1: bytes.fromhex("020000000101"), 2: bytes.fromhex("020000000201")}


def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4(src_mac, dst_mac, dst, ttl, payload=b"sluice-dp-grpc"):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, ttl, 17, 0, bytes([10, 0, 9, 9]), bytes(dst))
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return dst_mac + src_mac + b"\x08\x00" + hdr + payload


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    addr, device = sys.argv[1], int(sys.argv[2])
    ch = grpc.insecure_channel(addr)
    grpc.channel_ready_future(ch).result(timeout=60)
    stream = ch.stream_stream(
        "/p4.bm.DataplaneInterface/PacketStream",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=M["PacketStreamResponse"].FromString,
    )
    set_status = ch.unary_unary(
        "/p4.bm.DataplaneInterface/SetPortOperStatus",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=M["SetPortOperStatusResponse"].FromString,
    )
    requests = queue.Queue()

    def gen():
        while True:
            r = requests.get()
            if r is None:
                return
            yield r

    responses = stream(gen())
    got = queue.Queue()

    def reader():
        try:
            for r in responses:
                got.put(r)
            got.put("end")
        except grpc.RpcError as e:
            got.put(e)

    threading.Thread(target=reader, daemon=True).start()

    def send(port, frame, rid):
        requests.put(M["PacketStreamRequest"](id=rid, device_id=device, port=port, packet=frame))

    def expect(port, frame, rid, what):
        try:
            r = got.get(timeout=120)
        except queue.Empty:
            fail(what + ": no frame came back")
        if isinstance(r, Exception) or r == "end":
            fail("%s: the stream ended: %r" % (what, r))
        if (r.port, r.id, r.device_id, bytes(r.packet)) != (port, rid, device, frame):
            fail("%s: got port %d id %d device %d %s" % (what, r.port, r.id, r.device_id, bytes(r.packet).hex()))
        print("ok: " + what, flush=True)

    # Routed both ways, each answer with its request's id.
    send(1, ipv4(HOST[1], SW[1], [10, 0, 2, 1], 64), 42)
    expect(2, ipv4(SW[2], HOST[2], [10, 0, 2, 1], 63), 42, "port 1 to port 2")
    send(2, ipv4(HOST[2], SW[2], [10, 0, 1, 1], 9), 43)
    expect(1, ipv4(SW[1], HOST[1], [10, 0, 1, 1], 8), 43, "port 2 to port 1")

    # A second client is refused while the first streams.
    try:
        for _ in stream(iter([M["PacketStreamRequest"](device_id=device, port=1, packet=b"x")])):
            pass
        fail("a second PacketStream was accepted")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or "only one client" not in e.details():
            fail("second client: %s %s" % (e.code(), e.details()))
    print("ok: a second client is refused", flush=True)

    # Port 2 down: its frame is dropped (the next one, to port 1, comes first); up again: it flows.
    set_status(M["SetPortOperStatusRequest"](device_id=device, port=2, oper_status=1), timeout=60)
    send(1, ipv4(HOST[1], SW[1], [10, 0, 2, 1], 64), 50)
    send(2, ipv4(HOST[2], SW[2], [10, 0, 1, 1], 64), 51)
    expect(1, ipv4(SW[1], HOST[1], [10, 0, 1, 1], 63), 51, "port 2 down: only the frame to port 1")
    set_status(M["SetPortOperStatusRequest"](device_id=device, port=2, oper_status=2), timeout=60)
    send(1, ipv4(HOST[1], SW[1], [10, 0, 2, 1], 64), 52)
    expect(2, ipv4(SW[2], HOST[2], [10, 0, 2, 1], 63), 52, "port 2 up again")

    for req, code, words in [
        (M["SetPortOperStatusRequest"](device_id=device + 1, port=2, oper_status=2), grpc.StatusCode.INVALID_ARGUMENT, "Invalid device id"),
        (M["SetPortOperStatusRequest"](device_id=device, port=2, oper_status=0), grpc.StatusCode.INVALID_ARGUMENT, "Invalid oper status"),
    ]:
        try:
            set_status(req, timeout=60)
            fail("SetPortOperStatus %s was accepted" % words)
        except grpc.RpcError as e:
            if e.code() != code or words not in e.details():
                fail("SetPortOperStatus: %s %s" % (e.code(), e.details()))
    print("ok: bad SetPortOperStatus requests refused", flush=True)

    # A frame for another device is skipped; the client ends its requests, the stream ends.
    requests.put(M["PacketStreamRequest"](id=60, device_id=device + 1, port=1, packet=ipv4(HOST[1], SW[1], [10, 0, 2, 1], 64)))
    requests.put(None)
    r = got.get(timeout=120)
    if r != "end":
        fail("after the requests ended: %r" % (r,))
    print("ok: the stream ends after the client's last request", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
