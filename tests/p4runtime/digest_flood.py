#!/usr/bin/env python3
"""A MAC flood against l2_learning's digests with a primary that never acknowledges.

Proves, against a live server with ports 1 and 2 wired to --if1 / --if2:
  * With a DigestEntry whose ack_timeout_ns is an hour, 40000 frames with
    new source MACs on port 1 raise digest lists the primary reads but never
    acknowledges; the server keeps at most 16384 unacknowledged samples per
    digest (its de-duplication state), drops the others, counts them, and
    reports them in its log.
  * The switch's resident memory grows by less than 32 MiB over the flood.
  * The switch keeps flooding the frames to port 2 (forwarding does not wait
    for the control plane).
"""
import time

import common as c
from stalled_stream import rss_kib, switch_pid

FLOOD = 40_000
SAMPLES_BOUND = 16_384


def main(args):
    import grpc
    from p4.v1 import p4runtime_pb2_grpc
    p4info_path, bmv2 = c.example(args, "l2_learning")
    p4info = c.p4info_from_file(p4info_path)
    dev, t = args.device_id, args.timeout
    election = c.election_base()
    digest_id = c.p4_id(p4info, "digests", "learn_t")

    digest_up = c.digest_insert(digest_id, 10_000_000, 1000, 3600 * 10**9)
    flood_up = c.multicast_group_insert(1, (1, 2))

    h1, h2 = c.open_ports(args)
    channel = grpc.insecure_channel(args.addr)
    c.at_exit(channel.close)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    stream = c.Stream(stub, "the primary's stream")
    stream.arbitrate(dev, election)
    stream.expect("arbitration", t, "arbitration response")
    c.step("push l2_learning, a digest acknowledged after an hour, the flood group")
    stub.SetForwardingPipelineConfig(c.pipeline_request(dev, election, p4info, bmv2), timeout=t)
    stub.Write(c.write_request(dev, election, [digest_up, flood_up]), timeout=t)

    pid = switch_pid()
    rss0 = rss_kib(pid)
    c.step(f"{FLOOD} new source MACs on port 1 (switch pid {pid}, RSS {rss0} KiB)")
    for i in range(FLOOD):
        src = bytes([0x02, 0xfe, 0, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff])
        h1.send(b"\xff" * 6 + src + b"\x88\xb5" + b"~" * 46)
    mark = c.tag("after")
    # The flood's copies reach port 2 first: read them until the port is quiet,
    # or the marked frame would be lost to a full socket buffer behind them.
    end = time.monotonic() + 20
    while time.monotonic() < end and h2.receive(b"", 0.3) is not None:
        pass
    last = b"\xff" * 6 + bytes([0x02, 0xfd, 0, 0, 0, 1]) + b"\x88\xb5" + mark + b"~" * 40
    h1.send(last)
    h2.expect(last, mark, t, "a frame flooded to port 2 after the MAC flood")
    received = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        dl = stream.recv("digest", 0.5)
        if dl is None:
            break
        received += len(dl.digest.data)  # read, never acknowledged
    rss1 = rss_kib(pid)
    c.step(f"{received} digests received (none acknowledged); RSS {rss1} KiB")
    c.check(0 < received <= SAMPLES_BOUND, f"{received} digests delivered, want 1..{SAMPLES_BOUND}")
    c.check(rss1 - rss0 < 32 * 1024, f"the switch grew by {rss1 - rss0} KiB during the flood")
    # Reports come at most once a second: wait for the one that counts the whole flood.
    want = FLOOD - SAMPLES_BOUND - 1000  # a few frames may be lost on the way in
    dropped = c.wait_for_drop_report(args.switch_log, "digest samples", lambda n: n >= want)
    c.check(dropped >= want, f"the switch's log reports {dropped} digest samples dropped, want at least {want}")
    c.step(f"the switch reports {dropped} digest samples dropped over the bound")


if __name__ == "__main__":
    _p = c.arg_parser(__doc__)
    _p.add_argument("--switch-log", required=True, help="the switch's standard error, as a file")
    _args = _p.parse_args()
    c.reexec_with("p4runtime_sh", "SLUICE_PY", ".venv")
    c.run(main, _args)
