#!/usr/bin/env python3
"""Subscribes to a bmv2 event stream (--nanolog ADDR) with pynng and prints
the events of one packet, decoded from bmv2's message layout: a packed
40-byte little-endian header (type i32, switch id u64, context u32,
signature u64, packet id u64, copy id u64) and 0 to 2 i32 fields.

  one_packet.py ADDR

Prints "subscribed" once dialled, then waits (up to 120 s) for the first
packet seen from its PACKET_IN to a PACKET_OUT and prints its events, one
JSON object a line (a packet that is dropped never ends and is skipped).
"""
import json
import struct
import sys
import time

import pynng

NAMES = {
    0: ("PACKET_IN", ["port_in"]),
    1: ("PACKET_OUT", ["port_out"]),
    2: ("PARSER_START", ["parser_id"]),
    3: ("PARSER_DONE", ["parser_id"]),
    4: ("PARSER_EXTRACT", ["header_id"]),
    5: ("DEPARSER_START", ["deparser_id"]),
    6: ("DEPARSER_DONE", ["deparser_id"]),
    7: ("DEPARSER_EMIT", ["header_id"]),
    8: ("CHECKSUM_UPDATE", ["cksum_id"]),
    9: ("PIPELINE_START", ["pipeline_id"]),
    10: ("PIPELINE_DONE", ["pipeline_id"]),
    11: ("CONDITION_EVAL", ["condition_id", "result"]),
    12: ("TABLE_HIT", ["table_id", "entry_hdl"]),
    13: ("TABLE_MISS", ["table_id"]),
    14: ("ACTION_EXECUTE", ["action_id"]),
    999: ("CONFIG_CHANGE", []),
}


def decode(msg):
    kind, switch_id, cxt, sig, pid, copy = struct.unpack_from("<iQIQQQ", msg, 0)
    name, fields = NAMES[kind]
    values = struct.unpack_from("<" + "i" * len(fields), msg, 40) if fields else ()
    if len(msg) != 40 + 4 * len(fields):
        raise SystemExit(f"{name}: {len(msg)} bytes, expected {40 + 4 * len(fields)}")
    out = {"type": name, "switch_id": switch_id, "cxt_id": cxt, "id": pid, "copy_id": copy}
    out.update(zip(fields, values))
    return out


def main():
    addr = sys.argv[1]
    with pynng.Sub0(dial=addr, recv_timeout=5000) as sub:
        sub.subscribe(b"")
        print("subscribed", flush=True)
        deadline = time.monotonic() + 120
        by_id = {}
        while time.monotonic() < deadline:
            try:
                e = decode(sub.recv())
            except pynng.Timeout:
                continue
            if e["type"] == "PACKET_IN":
                by_id[(e["switch_id"], e["id"])] = []
            events = by_id.get((e["switch_id"], e["id"]))
            if events is None:
                continue
            events.append(e)
            if e["type"] == "PACKET_OUT":
                for x in events:
                    print(json.dumps(x), flush=True)
                return 0
        print("no packet went through", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
