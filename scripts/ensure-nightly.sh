#!/usr/bin/env bash
# Makes sure a nightly toolchain with the given components exists (installs it with rustup
# when missing): `bash scripts/ensure-nightly.sh miri rust-src`. An existing nightly is kept
# as it is (not updated). Exits non-zero, saying why, when it cannot.
set -euo pipefail
if ! command -v rustup >/dev/null 2>&1; then
    echo "error: rustup is not installed; it is needed to install a nightly toolchain" >&2
    exit 1
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
if [[ $# -gt 0 ]]; then
    rustup component add --toolchain nightly "$@"
fi
