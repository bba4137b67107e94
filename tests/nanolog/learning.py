#!/usr/bin/env python3
"""A learning controller's view of bmv2's learning notifications, as the
P4 teaching material's learning-switch exercises read them: the
notifications address from the Thrift call bm_mgmt_get_info, a nanomsg
SUB socket (pynng) on it, `LEA|` messages decoded from bmv2's layout (a
packed 32-byte little-endian header: topic, switch id u64, context u32,
list id i32, buffer id u64, sample count u32; then the samples, each
field big-endian in (width + 7) / 8 bytes: here a MAC address and a
9-bit port), acknowledged with bm_learning_ack_buffer.

  learning.py THRIFT_PORT 'TRAFFIC COMMAND' [AGEING_TABLE]

Steps, printed as one JSON object: the address bm_mgmt_get_info gives;
the first notification after the traffic runs; how many notifications
repeated its samples while it was not acknowledged (traffic run again,
3 s of listening); the first notification after the acknowledgement
(the same facts, the next buffer id); the error code of an
acknowledgement for a list id the program does not have. With
AGEING_TABLE (a table of MAC addresses forwarding to a port, which the
program marks for idle timeouts): an entry added there with a TTL of
500 ms over Thrift, and the first `AGE|` message that follows (bmv2's
ageing notification: a packed 32-byte header, topic, switch id u64,
context i32, buffer id u64, table id i32, entry count u32; then the
entry handles, u32 each) with the handle of the entry added.
"""
import json
import shlex
import struct
import subprocess
import sys
import time

import pynng
from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from bm_runtime.standard import Standard
from bm_runtime.standard.ttypes import (BmAddEntryOptions, BmMatchParam, BmMatchParamExact,
                                       BmMatchParamType, InvalidLearnOperation)


def decode(msg):
    topic, switch_id, cxt, list_id, buffer_id, n = struct.unpack_from("<4sQIiQI", msg, 0)
    samples = []
    for i in range(n):
        mac, port = struct.unpack_from("!6sH", msg, 32 + 8 * i)
        samples.append({"mac": mac.hex(":"), "port": port})
    if len(msg) != 32 + 8 * n:
        raise SystemExit(f"LEA|: {len(msg)} bytes for {n} samples")
    return {"topic": topic.decode(), "switch_id": switch_id, "cxt_id": cxt, "list_id": list_id,
            "buffer_id": buffer_id, "samples": samples}


def decode_age(msg):
    topic, switch_id, cxt, buffer_id, table_id, n = struct.unpack_from("<4sQiQiI", msg, 0)
    if len(msg) != 32 + 4 * n:
        raise SystemExit(f"AGE|: {len(msg)} bytes for {n} entries")
    handles = list(struct.unpack_from(f"<{n}I", msg, 32))
    return {"topic": topic.decode(), "switch_id": switch_id, "cxt_id": cxt, "buffer_id": buffer_id,
            "table_id": table_id, "handles": handles}


def ageing(sub, client, table):
    key = BmMatchParam(type=BmMatchParamType.EXACT, exact=BmMatchParamExact(bytes.fromhex("020000000099")))
    handle = client.bm_mt_add_entry(0, table, [key], "L2Ingress.forward", [b"\x00\x02"], BmAddEntryOptions())
    client.bm_mt_set_entry_ttl(0, table, handle, 500)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            msg = sub.recv()
        except pynng.Timeout:
            continue
        if msg[:4] == b"AGE|":
            return {"handle": handle, "message": decode_age(msg)}
    return {"handle": handle, "message": None}


def next_notification(sub, deadline):
    while time.time() < deadline:
        try:
            return decode(sub.recv())
        except pynng.Timeout:
            continue
    return None


def main():
    port, traffic = int(sys.argv[1]), shlex.split(sys.argv[2])
    sock = TSocket.TSocket("127.0.0.1", port)
    transport = TTransport.TBufferedTransport(sock)
    proto = TMultiplexedProtocol.TMultiplexedProtocol(TBinaryProtocol.TBinaryProtocol(transport), "standard")
    client = Standard.Client(proto)
    transport.open()
    out = {}
    addr = client.bm_mgmt_get_info().notifications_socket
    out["address"] = addr
    sub = pynng.Sub0(recv_timeout=500)
    sub.subscribe(b"")
    sub.dial(addr, block=True)
    time.sleep(0.5)
    subprocess.run(traffic, capture_output=True)
    first = next_notification(sub, time.time() + 120)
    out["first"] = first
    if first is None:
        print(json.dumps(out))
        return 1
    subprocess.run(traffic, capture_output=True)
    repeats = 0
    end = time.time() + 3
    while time.time() < end:
        n = next_notification(sub, end)
        if n and any(s in first["samples"] for s in n["samples"]):
            repeats += 1
    out["repeats_before_ack"] = repeats
    client.bm_learning_ack_buffer(0, first["list_id"], first["buffer_id"])
    subprocess.run(traffic, capture_output=True)
    out["after_ack"] = next_notification(sub, time.time() + 120)
    try:
        client.bm_learning_ack_buffer(0, 77, 0)
        out["bad_list_error"] = None
    except InvalidLearnOperation as e:
        out["bad_list_error"] = e.code
    if len(sys.argv) > 3:
        out["ageing"] = ageing(sub, client, sys.argv[3])
    transport.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
