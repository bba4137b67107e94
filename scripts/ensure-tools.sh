# Sourced by run.sh/test.sh: makes sure a Rust toolchain (rustc >= 1.87, the
# workspace's rust-version) with rustfmt and clippy is present, installing
# what is missing where it can.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: trying Debian's Rust toolchain" >&2
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq cargo rustc rustfmt rust-clippy >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "error: no Rust toolchain could be installed (need rustc >= 1.87 with rustfmt and clippy)" >&2
    exit 1
fi
rust_minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if [ "${rust_minor:-0}" -lt 87 ]; then
    echo "error: $(rustc --version) is too old: Sluice needs rustc >= 1.87 (install it with rustup)" >&2
    exit 1
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
# Build dependency: libpcap's headers and library (the `pcap` crate links
# -lpcap and finds it with pkg-config; sluice-lwaftr compiles its pflang
# filters with libpcap's compiler). Installed with apt when missing.
if ! pkg-config --exists libpcap 2>/dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    echo "installing libpcap-dev pkg-config" >&2
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q libpcap-dev pkg-config >/dev/null 2>&1 ||
        { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q libpcap-dev pkg-config >/dev/null; } ||
        { echo "error: could not install libpcap-dev and pkg-config (needed to build sluice-lwaftr)" >&2; exit 1; }
fi
