"""Sluice switches for Mininet.

Three switch classes, each taking the constructor arguments of the class
users already run, so that a topology written for bmv2 or Open vSwitch
runs Sluice by changing the class:

  SluiceP4Switch          bmv2's P4Switch (mininet/p4_mininet.py) and the P4
                          tutorials' P4Switch: sw_path, json_path,
                          thrift_port, pcap_dump, log_console, log_file,
                          verbose, device_id, enable_debugger
  SluiceP4RuntimeSwitch   the P4 tutorials' P4RuntimeSwitch: the same plus
                          grpc_port, cpu_port, priority_queues (no JSON:
                          --no-p4, the program comes over P4Runtime)
  SluiceOFSwitch          an OpenFlow 1.3 switch as Mininet's UserSwitch or
                          OVSSwitch: controllers from Mininet, dpid, and
                          ovs-ofctl through dpctl(); offload headers on
                          (Mininet's hosts keep their offloads)

With `mn`: `mn --custom sluice_mininet.py --switch sluice,json_path=...`
(the names in `switches` below); `--controller none` for the P4 ones.

The P4 switches start `sluice simple_switch` (or the binary sw_path names,
e.g. a `simple_switch` symlink to sluice) with the command line bmv2's
classes build: `-i PORT@INTF` per data interface, `--pcap`, the Thrift
port, `--nanolog ipc:///tmp/bm-<device id>-log.ipc`, `--device-id`, the
program, `--log-console` or `--log-file`; the switch's output goes to
/tmp/p4s.<name>.log. A switch has started when its Thrift (or gRPC) port
accepts a connection; one whose process ends first is reported with the
end of its log.

The binary: sw_path, else $SLUICE, else `sluice` on PATH.
"""
import os
import shutil
import socket
import tempfile
import time

from mininet.log import error, info
from mininet.node import Switch

START_TIMEOUT = 120  # seconds: a loaded machine starts a hundred switches slowly


def _binary(sw_path):
    path = sw_path or os.environ.get("SLUICE") or shutil.which("sluice")
    if not path:
        raise RuntimeError("no Sluice binary: give sw_path, set SLUICE, or put sluice on PATH")
    return path


def _command(path, form):
    """The argv start for `form` (simple_switch, simple_switch_grpc): the
    binary itself when it is a symlink of that name, else `sluice FORM`."""
    name = os.path.basename(path)
    if name in ("simple_switch", "simple_switch_grpc", "psa_switch"):
        return [path]
    return [path, form]


def _listening(port, host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _claim_port(name, port, cls, counter):
    """`port`, or when None the next of the class counter `cls.counter`;
    exits, as the tutorials' classes do, when another process listens on it."""
    if port is None:
        port = getattr(cls, counter)
        setattr(cls, counter, port + 1)
    port = int(port)
    if _listening(port):
        error("%s cannot bind port %d because it is bound by another process\n" % (name, port))
        raise SystemExit(1)
    return port


def _alive(pid):
    return pid is not None and os.path.exists("/proc/%d" % pid)


class _SluiceProcess(Switch):
    """What every Sluice switch class shares: its process, started in the
    background with its output in `self.output`, ready when `_ready()` says
    so, and stopped with SIGTERM."""

    sw_pid = None
    output = None

    def _data_ports(self):
        return ["%d@%s" % (port, intf.name) for port, intf in self.intfs.items()
                if not intf.IP() and intf.name != "lo"]

    def _ready(self):
        raise NotImplementedError

    def _launch(self, args, what):
        info(" ".join(args) + "\n")
        with tempfile.NamedTemporaryFile() as f:
            self.cmd(" ".join(args) + " >" + self.output + " 2>&1 & echo $! >> " + f.name)
            self.sw_pid = int(open(f.name).read().strip())
        deadline = time.time() + START_TIMEOUT
        while time.time() < deadline and _alive(self.sw_pid):
            if self._ready():
                info("%s %s has been started.\n" % (what, self.name))
                return
            time.sleep(0.2)
        tail = open(self.output).read()[-2000:] if os.path.exists(self.output) else ""
        error("%s %s did not start correctly.\n%s\n" % (what, self.name, tail))
        raise SystemExit(1)

    def stop(self, deleteIntfs=True):
        if _alive(self.sw_pid):
            self.cmd("kill %d" % self.sw_pid)
            deadline = time.time() + 30
            while _alive(self.sw_pid) and time.time() < deadline:
                time.sleep(0.05)
        self.sw_pid = None
        Switch.stop(self, deleteIntfs)


class SluiceP4Switch(_SluiceProcess):
    """A P4 switch run by Sluice, with bmv2's P4Switch's arguments."""

    device_id = 0
    next_thrift_port = 9090

    def __init__(self, name, sw_path=None, json_path=None, thrift_port=None, pcap_dump=False,
                 log_console=False, log_file=None, verbose=False, device_id=None,
                 enable_debugger=False, **kwargs):
        # Keyword arguments of the tutorials' classes that Mininet's Node does not take.
        self.cpu_port = kwargs.pop("cpu_port", None)
        self.priority_queues = kwargs.pop("priority_queues", None)
        Switch.__init__(self, name, **kwargs)
        self.sw_path = _binary(sw_path)
        if json_path is not None and not os.path.isfile(json_path):
            error("Invalid JSON file: %s\n" % json_path)
            raise SystemExit(1)
        self.json_path = json_path
        self.thrift_port = _claim_port(name, thrift_port, SluiceP4Switch, "next_thrift_port")
        self.pcap_dump = pcap_dump
        self.log_console = log_console
        self.log_file = log_file
        self.verbose = verbose
        if enable_debugger:
            error("%s: Sluice has no bmv2 debugger (enable_debugger)\n" % name)
            raise SystemExit(1)
        if device_id is not None:
            self.device_id = int(device_id)
            SluiceP4Switch.device_id = max(SluiceP4Switch.device_id, self.device_id)
        else:
            self.device_id = SluiceP4Switch.device_id
            SluiceP4Switch.device_id += 1
        self.nanomsg = "ipc:///tmp/bm-%d-log.ipc" % self.device_id
        self.output = "/tmp/p4s.%s.log" % name

    @classmethod
    def setup(cls):
        pass

    def _form(self):
        return "simple_switch"

    def _args(self):
        args = _command(self.sw_path, self._form())
        for p in self._data_ports():
            args += ["-i", p]
        if self.pcap_dump:
            args += ["--pcap"] if self.pcap_dump is True else ["--pcap", str(self.pcap_dump)]
        args += ["--thrift-port", str(self.thrift_port)]
        args += ["--nanolog", self.nanomsg, "--device-id", str(self.device_id)]
        args += [self.json_path] if self.json_path else ["--no-p4"]
        if self.log_file and not self.log_console:
            args += ["--log-file", self.log_file]
        elif self.log_console:
            args += ["--log-console"]
        return args

    def _ready(self):
        return _listening(self.thrift_port)

    def start(self, controllers):
        info("Starting Sluice P4 switch %s.\n" % self.name)
        self._launch(self._args(), "P4 switch")

    def describe(self):
        print("%s -> Thrift port: %d" % (self.name, self.thrift_port))

    def attach(self, intf):
        assert 0, "ports are added to a running Sluice switch with the CLI's port_add"

    def detach(self, intf):
        assert 0, "ports are removed from a running Sluice switch with the CLI's port_remove"


class SluiceP4RuntimeSwitch(SluiceP4Switch):
    """A P4 switch run by Sluice with P4Runtime, with the P4 tutorials'
    P4RuntimeSwitch's arguments."""

    next_grpc_port = 50051

    def __init__(self, name, sw_path=None, json_path=None, grpc_port=None, thrift_port=None,
                 pcap_dump=False, log_console=False, verbose=False, device_id=None,
                 enable_debugger=False, log_file=None, **kwargs):
        self.grpc_port = _claim_port(name, grpc_port, SluiceP4RuntimeSwitch, "next_grpc_port")
        SluiceP4Switch.__init__(self, name, sw_path=sw_path, json_path=json_path, thrift_port=thrift_port,
                                pcap_dump=pcap_dump, log_console=log_console, log_file=log_file,
                                verbose=verbose, device_id=device_id, enable_debugger=enable_debugger,
                                **kwargs)

    def _form(self):
        return "simple_switch_grpc"

    def _args(self):
        args = SluiceP4Switch._args(self)
        args += ["--", "--grpc-server-addr", "0.0.0.0:%d" % self.grpc_port]
        if self.cpu_port is not None:
            args += ["--cpu-port", str(self.cpu_port)]
        if self.priority_queues is not None:
            args += ["--priority-queues", str(self.priority_queues)]
        return args

    def _ready(self):
        return _listening(self.grpc_port)

    def describe(self):
        print("%s -> gRPC port: %d" % (self.name, self.grpc_port))


class SluiceOFSwitch(_SluiceProcess):
    """An OpenFlow 1.3 switch run by Sluice (`sluice openflow`), connected to
    Mininet's controllers, as Mininet's UserSwitch and OVSSwitch are. dpctl()
    runs ovs-ofctl against the switch's own listening port."""

    next_listen_port = 6634

    def __init__(self, name, sw_path=None, fail_mode="secure", listen_port=None, **kwargs):
        Switch.__init__(self, name, **kwargs)
        self.sw_path = _binary(sw_path)
        self.fail_mode = fail_mode
        if listen_port is None:
            listen_port = SluiceOFSwitch.next_listen_port
            SluiceOFSwitch.next_listen_port += 1
        self.listen_port = int(listen_port)
        self.output = "/tmp/sluice-of.%s.log" % name

    @classmethod
    def setup(cls):
        pass

    def start(self, controllers):
        # --offload: Mininet's hosts keep their checksum and segmentation
        # offloads on (as under Open vSwitch), so their frames carry partial
        # checksums and 64 KB segments that only virtio-net headers describe.
        args = [self.sw_path, "openflow", "--offload"]
        for p in self._data_ports():
            args += ["-i", p]
        for c in controllers:
            args += ["--controller", "tcp:%s:%d" % (c.IP(), c.port)]
        args += ["--listen", "ptcp:%d:127.0.0.1" % self.listen_port]
        args += ["--datapath-id", "0x" + self.dpid, "--fail-mode", self.fail_mode, "--name", self.name]
        self._launch(args, "OpenFlow switch")

    def _ready(self):
        return _listening(self.listen_port)

    def dpctl(self, *args):
        """ovs-ofctl COMMAND [ARGS] against this switch (OpenFlow 1.3)."""
        return self.cmd("ovs-ofctl -O OpenFlow13 %s tcp:127.0.0.1:%d %s"
                        % (args[0], self.listen_port, " ".join(args[1:])))

    def connected(self):
        return _alive(self.sw_pid)


# `mn --custom sluice_mininet.py --switch NAME,...`
switches = {
    "sluice": SluiceP4Switch,
    "sluicegrpc": SluiceP4RuntimeSwitch,
    "sluiceof": SluiceOFSwitch,
}
