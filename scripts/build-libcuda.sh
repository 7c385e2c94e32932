#!/usr/bin/env bash
# Builds the CPU libcuda (libcuda/, a cdylib) in release mode and lays it out as NVIDIA's driver
# is: target/libcuda/libcuda.so and libcuda.so.1. Point a driver-API program at it with
#   LD_LIBRARY_PATH=$PWD/target/libcuda
# Prints that directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p streamexec-libcuda >&2
target_dir="${CARGO_TARGET_DIR:-target}"
out="$target_dir/libcuda"
mkdir -p "$out"
cp -f "$target_dir/release/libcuda.so" "$out/libcuda.so"
ln -sf libcuda.so "$out/libcuda.so.1"
# `cargo test` puts target/debug (and deps/) first on the test's library path, so a debug build
# of the library left there would shadow this one: remove it.
rm -f "$target_dir/debug/libcuda.so" "$target_dir/debug/deps/libcuda.so"
cd "$out" && pwd
