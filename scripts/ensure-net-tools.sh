# Sourced: makes sure the tools the live-port tests and the network benchmark
# need are installed (iproute2, iperf3, ethtool, ping, nftables, python3, ovs-ofctl, ovs-vswitchd, openssl,
# tmux, curl, mininet, prometheus), installing them with
# apt when missing; fails with a clear message otherwise. Then installs Sluice's
# Mininet switch classes (mininet/sluice_mininet.py) where Debian's python3 imports them.
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v iperf3 >/dev/null || need+=(iperf3)
command -v ethtool >/dev/null || need+=(ethtool)
command -v ping >/dev/null || need+=(iputils-ping)
# The lwAFTR live test: the B4's NAT (nft) and its out-of-port-set probe (python3).
command -v nft >/dev/null || need+=(nftables)
command -v python3 >/dev/null || need+=(python3)
# The OpenFlow switch's tests drive it with Open vSwitch's stock ovs-ofctl.
command -v ovs-ofctl >/dev/null || need+=(openvswitch-common)
# os-ken's switch test suite uses an Open vSwitch bridge (user-space datapath) as its tester.
command -v ovs-vswitchd >/dev/null || need+=(openvswitch-switch)
# The controller's TLS test makes its certificates with openssl.
command -v openssl >/dev/null || need+=(openssl)
# The telemetry tests: `sluice top` in a terminal multiplexer, Prometheus queried with curl.
command -v tmux >/dev/null || need+=(tmux)
command -v curl >/dev/null || need+=(curl)
# The Mininet topology tests run Debian's Mininet with Debian's python3.
/usr/bin/python3 -c 'import mininet.net' 2>/dev/null || need+=(mininet)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "error: ${need[*]} missing and not root: install them (apt-get install ${need[*]})" >&2
        exit 1
    fi
    echo "installing ${need[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; } ||
        { echo "error: could not install ${need[*]} with apt-get" >&2; exit 1; }
fi
# The telemetry test scrapes --metrics with a real Prometheus server (Debian's
# package, without its recommended exporters; its service is never started).
if ! command -v prometheus >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "error: prometheus missing and not root: install it (apt-get install --no-install-recommends prometheus)" >&2
        exit 1
    fi
    echo "installing prometheus" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null; } ||
        { echo "error: could not install prometheus with apt-get" >&2; exit 1; }
fi

# Sluice's switch classes for Mininet, importable by Debian's python3 (`from sluice_mininet import ...`,
# `mn --custom`): copied from this checkout at every run, so they match the binary built from it.
_nt_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_nt_site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$_nt_site" && cp -f "$_nt_repo/mininet/sluice_mininet.py" "$_nt_site/sluice_mininet.py" ||
        { echo "error: could not install sluice_mininet.py into $_nt_site" >&2; exit 1; }
fi
