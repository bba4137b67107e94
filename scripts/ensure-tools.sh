# Sourced by run.sh/test.sh: makes sure a Rust toolchain with rustfmt and
# clippy is present, installing what is missing (Debian, as root or with sudo).
if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "cargo not found: installing Debian's rust toolchain" >&2
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
        $SUDO apt-get update -qq && $SUDO apt-get install -y -qq cargo rustc rustfmt rust-clippy
    fi
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
