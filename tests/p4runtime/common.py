"""Shared helpers for the P4Runtime client tests in this directory.

Kept free of protobuf imports at module level so that finsy_smoke.py (which runs
in the finsy venv, with its own P4Runtime bindings) can use it too.
"""
import argparse
import os
import queue
import socket
import struct
import sys
import threading
import time
import traceback

# Some p4runtime wheels (1.6.0) ship gencode that only the pure-Python protobuf
# runtime loads; with the pinned protobuf 3.20.3 it is the default anyway.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.basename(sys.argv[0])
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # sll_pkttype of frames this host sent
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1


# --------------------------------------------------------------------------
# Command line, running, failing


def arg_parser(doc):
    """The harness's contract: --addr --examples --if1 --if2 (see README.md)."""
    p = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default="127.0.0.1:9559",
                   help="P4Runtime server address HOST:PORT (default %(default)s)")
    p.add_argument("--examples", default=os.path.join(REPO, "examples"),
                   help="directory with NAME.p4info.txtpb and NAME.json (default %(default)s)")
    p.add_argument("--if1", default="h1",
                   help="host end of the veth whose switch end is port 1 (default %(default)s)")
    p.add_argument("--if2", default="h2",
                   help="host end of the veth whose switch end is port 2 (default %(default)s)")
    p.add_argument("--device-id", type=int, default=0, help="P4Runtime device id (default 0)")
    p.add_argument("--timeout", type=float, default=2.0,
                   help="seconds to wait for each expected packet or stream message (default 2)")
    p.add_argument("--deadline", type=float, default=120.0,
                   help="the whole script fails after this many seconds (default 120)")
    p.add_argument("--dry-run", action="store_true",
                   help="no server and no interfaces: load the P4Info, build every request "
                        "the test would send, print them and exit")
    return p


_cleanups = []


def at_exit(fn):
    """Registers fn to run (last registered first) before the script exits."""
    _cleanups.append(fn)


def run(main, args):
    """Runs main(args); exit 0 and 'PASS' on success, 1 and the reason on stderr otherwise.

    Exits with os._exit so that client threads blocked on gRPC streams can
    never keep a failed test alive; cleanups get 5 s.
    """
    def watchdog():
        print(f"FAIL {SCRIPT}: still running after --deadline {args.deadline:g} s",
              file=sys.stderr, flush=True)
        os._exit(1)
    if not args.dry_run:
        wait_for_server(args.addr, 10.0)
    timer = threading.Timer(args.deadline, watchdog)
    timer.daemon = True
    timer.start()
    code = 0
    try:
        main(args)
        print(f"{'DRY-RUN OK' if args.dry_run else 'PASS'} {SCRIPT}", flush=True)
    except AssertionError as exc:
        traceback.print_exc()
        print(f"FAIL {SCRIPT}: {exc}", file=sys.stderr)
        code = 1
    except SystemExit as exc:  # p4runtime-shell's setup() exits on errors
        print(f"FAIL {SCRIPT}: exited with {exc.code} (client error, see the log above)",
              file=sys.stderr)
        code = 1
    except BaseException as exc:  # noqa: BLE001 - any error fails the test
        traceback.print_exc()
        print(f"FAIL {SCRIPT}: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    t = threading.Thread(target=_run_cleanups, daemon=True)
    t.start()
    t.join(5.0)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def wait_for_server(addr, timeout):
    """Waits until something accepts TCP connections at addr (the server may still be starting)."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1.0).close()
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                print(f"FAIL {SCRIPT}: nothing listens on {addr} after {timeout:g} s ({exc})",
                      file=sys.stderr, flush=True)
                os._exit(1)
            time.sleep(0.1)


def _run_cleanups():
    while _cleanups:
        try:
            _cleanups.pop()()
        except BaseException:  # noqa: BLE001 - best effort
            pass


def reexec_with(module, env_var, venv):
    """Re-executes this script with the venv's python when `module` is not importable here.

    The harness may start the scripts with any python; the clients live in
    $REPO/.venv (env SLUICE_PY) and $REPO/.venv/finsy (SLUICE_FINSY_PY).
    """
    import importlib.util
    if importlib.util.find_spec(module) is not None:
        return
    py = os.environ.get(env_var) or os.path.join(REPO, venv, "bin", "python")
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(py)))
    if not os.access(py, os.X_OK) or os.path.realpath(prefix) == os.path.realpath(sys.prefix):
        print(f"FAIL {SCRIPT}: Python module {module} is not installed here and there is no "
              f"venv python at {py} (source scripts/ensure-python.sh)", file=sys.stderr)
        sys.exit(1)
    os.execv(py, [py, os.path.abspath(sys.argv[0]), *sys.argv[1:]])


def step(msg):
    print(f"[{SCRIPT}] {msg}", flush=True)


def check(cond, msg):
    """assert that survives python -O."""
    if not cond:
        raise AssertionError(msg)


def example(args, name):
    """(p4info path, BMv2 JSON path) of examples/NAME."""
    p4info = os.path.join(args.examples, f"{name}.p4info.txtpb")
    bmv2 = os.path.join(args.examples, f"{name}.json")
    for f in (p4info, bmv2):
        check(os.path.isfile(f), f"missing example file {f}")
    return p4info, bmv2


def election_base():
    """A fresh election id: the clock in ns.

    The spec (section 5.3, 'Rules for Handling MasterArbitrationUpdate') makes
    the primary the client with the highest election id the server has *ever*
    seen for (device, role), so scripts run one after another against one
    long-lived server must keep increasing their ids.
    """
    return time.time_ns()


# --------------------------------------------------------------------------
# Frames on the host interfaces (raw AF_PACKET sockets, root)


def mac(text):
    return bytes.fromhex(text.replace(":", ""))


def mac_str(raw):
    return ":".join(f"{b:02x}" for b in raw)


def iface_mac(ifname):
    with open(f"/sys/class/net/{ifname}/address") as f:
        return mac(f.read().strip())


def quiet(ifname):
    """Stops the host kernel from sending IPv6 ND/MLD noise on ifname (best effort)."""
    try:
        with open(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6", "w") as f:
            f.write("1")
    except OSError:
        pass


def tag(label):
    """A payload marker unique to this run, to pick our frames out of any noise."""
    return f"SLUICE-{label}-{os.getpid()}-{time.monotonic_ns() % 10**9}".encode()


def checksum16(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4_header(src, dst, proto, payload_len, ttl=64, ident=0x1234):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + payload_len, ident, 0, ttl, proto, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    return hdr[:10] + struct.pack("!H", checksum16(hdr)) + hdr[12:]


def udp_ipv4_frame(dst_mac, src_mac, src_ip, dst_ip, sport, dport, payload, ttl=64):
    """Ethernet + IPv4 (valid header checksum) + UDP (checksum 0) + payload."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    return dst_mac + src_mac + b"\x08\x00" + ipv4_header(src_ip, dst_ip, 17, len(udp), ttl) + udp


def udp_ipv6_frame(dst_mac, src_mac, src_ip, dst_ip, sport, dport, payload, hop_limit=64):
    """Ethernet + IPv6 + UDP (checksum left 0: nothing on the path checks it) + payload."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip6 = struct.pack("!IHBB16s16s", 6 << 28, len(udp), 17, hop_limit,
                      socket.inet_pton(socket.AF_INET6, src_ip),
                      socket.inet_pton(socket.AF_INET6, dst_ip))
    return dst_mac + src_mac + b"\x86\xdd" + ip6 + udp


def routed_ipv4(frame, new_dst, new_src):
    """What a router makes of frame: new MACs, TTL - 1, header checksum recomputed."""
    ip = bytearray(frame[14:34])
    ip[8] -= 1
    ip[10:12] = b"\0\0"
    ip[10:12] = struct.pack("!H", checksum16(bytes(ip)))
    return new_dst + new_src + frame[12:14] + bytes(ip) + frame[34:]


def routed_ipv6(frame, new_dst, new_src):
    """New MACs and hop limit - 1 (byte 7 of the IPv6 header)."""
    out = bytearray(new_dst + new_src + frame[12:])
    out[14 + 7] -= 1
    return bytes(out)


def diff_frames(want, got):
    """A short human description of how two frames differ."""
    if got is None:
        return "no frame"
    n = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    return (f"lengths {len(want)} (want) / {len(got)} (got); first difference at byte {n}: "
            f"want {want[n:n + 8].hex()} got {got[n:n + 8].hex()}")


class Port:
    """A raw socket on a host interface: sends frames, receives what arrives."""

    def __init__(self, ifname):
        self.ifname = ifname
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((ifname, 0))
        ifindex = socket.if_nametoindex(ifname)
        mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
        self.sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        self.mac = iface_mac(ifname)
        at_exit(self.sock.close)

    def drain(self):
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recv(65535)
        except BlockingIOError:
            pass
        finally:
            self.sock.setblocking(True)

    def send(self, frame):
        self.sock.send(frame)

    def receive(self, marker, timeout):
        """The first incoming frame containing marker, or None after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                return None
            if addr[2] == PACKET_OUTGOING:
                continue  # our own transmission, seen by the tap
            if marker in data:
                return data

    def expect(self, want, marker, timeout, what):
        """Asserts that exactly the bytes want arrive (the frame carrying marker)."""
        got = self.receive(marker, timeout)
        check(got is not None, f"{what}: nothing arrived on {self.ifname} within {timeout:g} s")
        check(got == want, f"{what}: wrong frame on {self.ifname}: {diff_frames(want, got)}\n"
                           f"  want {want.hex()}\n  got  {got.hex()}")
        return got

    def expect_nothing(self, marker, timeout, what):
        got = self.receive(marker, timeout)
        check(got is None, f"{what}: a frame arrived on {self.ifname} but none should: {got and got.hex()}")


def open_ports(args):
    """(Port for --if1 / switch port 1, Port for --if2 / switch port 2)."""
    for ifname in (args.if1, args.if2):
        check(os.path.isdir(f"/sys/class/net/{ifname}"),
              f"interface {ifname} not found (run inside the harness's network namespace)")
        quiet(ifname)
    return Port(args.if1), Port(args.if2)


# --------------------------------------------------------------------------
# Plain P4Runtime bindings (the `p4runtime` package) and grpc


def counter_cell(sh, name, index):
    """(packets, bytes) of cell index of counter name, read with p4runtime-shell (sh)."""
    ce = sh.CounterEntry(name)
    ce.index = index
    got = list(ce.read())
    check(len(got) == 1, f"counter {name}[{index}]: read returned {len(got)} entries, want 1")
    return got[0].packet_count, got[0].byte_count


def wait_for_drop_report(log_path, kind, enough, tries=40):
    """The count of `kind` ("PacketIn", "digest lists", "digest samples",
    "idle-timeout") in
    the switch's last "dropped so far" report, polled every 0.1 s until
    enough(count) holds or `tries` polls are done."""
    count = 0
    for _ in range(tries):
        with open(log_path) as f:
            lines = [ln for ln in f if "dropped so far" in ln]
        if lines:
            count = int(lines[-1].split(f" {kind}")[0].rsplit(" ", 1)[1])
        if enough(count):
            break
        time.sleep(0.1)
    return count


def p4info_from_file(path):
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
    info = p4info_pb2.P4Info()
    with open(path) as f:
        text_format.Merge(f.read(), info)
    return info


def p4_id(p4info, kind, name):
    """Id of the P4Info object of kind ('tables', 'actions', 'digests', ...) named or aliased name."""
    for obj in getattr(p4info, kind):
        if name in (obj.preamble.name, obj.preamble.alias):
            return obj.preamble.id
    raise AssertionError(f"no {kind} named {name} in the P4Info")


def set_uint128(msg, value):
    msg.high = value >> 64
    msg.low = value & ((1 << 64) - 1)


def uint128(msg):
    return (msg.high << 64) | msg.low


def pipeline_request(device_id, election_id, p4info, bmv2_path):
    from p4.v1 import p4runtime_pb2
    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=device_id,
        action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    set_uint128(req.election_id, election_id)
    req.config.p4info.CopyFrom(p4info)
    with open(bmv2_path, "rb") as f:
        req.config.p4_device_config = f.read()
    return req


def digest_insert(digest_id, max_timeout_ns, max_list_size, ack_timeout_ns):
    """An INSERT Update of a DigestEntry with that configuration."""
    from p4.v1 import p4runtime_pb2
    up = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    cfg = up.entity.digest_entry
    cfg.digest_id = digest_id
    cfg.config.max_timeout_ns = max_timeout_ns
    cfg.config.max_list_size = max_list_size
    cfg.config.ack_timeout_ns = ack_timeout_ns
    return up


def multicast_group_insert(group_id, ports):
    """An INSERT Update of a multicast group with one replica (instance 0) per port."""
    from p4.v1 import p4runtime_pb2
    up = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    group = up.entity.packet_replication_engine_entry.multicast_group_entry
    group.multicast_group_id = group_id
    for p in ports:
        group.replicas.add(egress_port=p, instance=0)
    return up


def write_request(device_id, election_id, updates):
    from p4.v1 import p4runtime_pb2
    req = p4runtime_pb2.WriteRequest(device_id=device_id)
    set_uint128(req.election_id, election_id)
    req.updates.extend(updates)
    return req


_BYTESTRING_FIELDS = {"value", "mask", "low", "high"}


def canonical_bytes(raw):
    """Shortest big-endian form of an unsigned value (spec 'Bytestrings'): no leading zero bytes."""
    stripped = raw.lstrip(b"\0")
    return stripped or raw[:1]


def canonicalize(msg):
    """Canonicalizes, in place, every match value/mask/low/high and action param value in msg.

    p4runtime-shell writes padded bytestrings when verbose=False (its
    'verbose' option is an Enum alias of 'canonical_bytestrings'); the server
    must accept them but reply with canonical ones (spec 'Bytestrings').
    """
    for field, value in msg.ListFields():
        if field.type == field.TYPE_MESSAGE:
            for sub in (value if field.label == field.LABEL_REPEATED else [value]):
                if not hasattr(sub, "ListFields"):  # map entries of scalars
                    continue
                canonicalize(sub)
        elif field.type == field.TYPE_BYTES and field.name in _BYTESTRING_FIELDS \
                and field.label != field.LABEL_REPEATED:
            setattr(msg, field.name, canonical_bytes(value))
    return msg


def rpc_code_name(exc):
    return exc.code().name if hasattr(exc, "code") else type(exc).__name__


def expect_rpc_error(fn, codes, what):
    """Calls fn(); asserts it fails with a grpc status in codes; returns the RpcError."""
    import grpc
    try:
        fn()
    except grpc.RpcError as exc:
        check(exc.code() in codes,
              f"{what}: got {exc.code().name} ({exc.details()}), want one of "
              f"{', '.join(c.name for c in codes)}")
        return exc
    raise AssertionError(f"{what}: succeeded, want one of {', '.join(c.name for c in codes)}")


def status_details(exc):
    """google.rpc.Status carried in the grpc-status-details-bin trailer, or None."""
    from google.rpc import status_pb2
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            st = status_pb2.Status()
            st.ParseFromString(value)
            return st
    return None


class Stream:
    """One StreamChannel: a client session (arbitration, packets, digests).

    Received messages are sorted by kind ('arbitration', 'packet', 'digest',
    'error', ...) into queues; recv(kind) takes the next one of that kind.
    """

    def __init__(self, stub, name="stream"):
        self.name = name
        self._out = queue.Queue()
        self._in = {}
        self._lock = threading.Lock()
        self.error = None  # the grpc.RpcError that ended the stream, if any
        self.ended = threading.Event()
        self._call = stub.StreamChannel(iter(self._out.get, None))
        threading.Thread(target=self._reader, daemon=True).start()
        at_exit(self.close)

    def _q(self, kind):
        with self._lock:
            return self._in.setdefault(kind, queue.Queue())

    def _reader(self):
        try:
            for msg in self._call:
                self._q(msg.WhichOneof("update")).put(msg)
        except Exception as exc:  # noqa: BLE001 - grpc.RpcError on cancel or server error
            self.error = exc
        finally:
            self.ended.set()

    def send(self, msg):
        self._out.put(msg)

    def arbitrate(self, device_id, election_id):
        from p4.v1 import p4runtime_pb2
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        set_uint128(req.arbitration.election_id, election_id)
        self.send(req)

    def recv(self, kind, timeout):
        try:
            return self._q(kind).get(timeout=timeout)
        except queue.Empty:
            return None

    def expect(self, kind, timeout, what):
        msg = self.recv(kind, timeout)
        if msg is None and self.error is not None:
            raise AssertionError(f"{what}: {self.name} ended with {rpc_code_name(self.error)}: "
                                 f"{getattr(self.error, 'details', lambda: '')()}")
        check(msg is not None, f"{what}: no '{kind}' message on {self.name} within {timeout:g} s")
        return msg

    def expect_none(self, kind, timeout, what):
        msg = self.recv(kind, timeout)
        check(msg is None, f"{what}: unexpected '{kind}' message on {self.name}: {msg}")

    def close(self):
        """Ends the stream from the client side (the server sees the client go away)."""
        self._out.put(None)
        self._call.cancel()
