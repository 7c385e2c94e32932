#!/usr/bin/env bash
# Regenerates crates/streamexec/tests/conformance/generated/ (kernels.rs and kernels.manifest):
# the conformance suite's typed kernels (a module per kernel with `Args`, `Kernel`, `spec()`,
# `load`, `launch`), built by streamexec-build with clang-19 from kernels/conformance.cu and
# kernels/cl/conformance.cl (crates/streamexec-build/examples/conformance_kernels.rs). The output
# is committed so that streamexec and its tests build without clang.
# `--check` regenerates into a temporary folder and fails if the committed files differ.
set -euo pipefail
cd "$(dirname "$0")/.."
committed=crates/streamexec/tests/conformance/generated
clang=${STREAMEXEC_CLANG:-clang++-19}
if ! command -v "$clang" >/dev/null 2>&1; then
    echo "$clang is missing: scripts/install-deps.sh installs clang-19 (or set STREAMEXEC_CLANG)" >&2
    exit 1
fi
if [[ "${1:-}" != "--check" ]]; then
    cargo run -q -p streamexec-build --example conformance_kernels -- "$committed"
    exit 0
fi
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
cargo run -q -p streamexec-build --example conformance_kernels -- "$check"
for f in kernels.rs kernels.manifest; do
    if ! cmp -s "$check/$f" "$committed/$f"; then
        diff -u "$committed/$f" "$check/$f" | head -20 || true
        echo "$committed is stale: run scripts/gen-typed.sh and commit the result" >&2
        exit 1
    fi
done
echo "$committed is current"
