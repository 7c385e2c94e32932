#!/usr/bin/env bash
# A bounded cargo-fuzz run of the PTX front end and JIT
# (crates/streamexec-ptx/fuzz/fuzz_targets/ptx_parse.rs), seeded with the committed kernel
# corpus. FUZZ_SECONDS (default 20) bounds the run; a crash fails it and leaves the input under
# crates/streamexec-ptx/fuzz/artifacts/. Installs a nightly toolchain and cargo-fuzz when
# missing; fails when it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-nightly.sh
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
seeds=crates/streamexec-ptx/fuzz/corpus/ptx_parse
mkdir -p "$seeds"
cp kernels/ptx/*.ptx crates/streamexec/kernels/ptx/*.ptx "$seeds/"
cd crates/streamexec-ptx/fuzz
log="$(mktemp)"
status=0
cargo +nightly fuzz run ptx_parse -- -max_total_time="${FUZZ_SECONDS:-20}" -max_len=65536 \
    > "$log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    tail -60 "$log"
    echo "the PTX fuzz run failed (exit $status); the input is under crates/streamexec-ptx/fuzz/artifacts/ptx_parse/" >&2
else
    grep -E '^Done' "$log" || true
fi
rm -f "$log"
exit "$status"
