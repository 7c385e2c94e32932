#!/usr/bin/env bash
# Builds the CPU libcuda (crates/streamexec-libcuda, a cdylib) and the CPU NVRTC
# (crates/streamexec-libnvrtc, CUDA C++ to PTX with clang) in release mode and lays them out as
# NVIDIA's driver and toolkit do: target/libcuda/libcuda.so, libcuda.so.1, libnvrtc.so and
# libnvrtc.so.12. Point a driver-API or NVRTC program at them with
#   LD_LIBRARY_PATH=$PWD/target/libcuda
# Prints that directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p streamexec-libcuda -p streamexec-libnvrtc >&2
target_dir="${CARGO_TARGET_DIR:-target}"
out="$target_dir/libcuda"
mkdir -p "$out"
cp -f "$target_dir/release/libcuda.so" "$out/libcuda.so"
ln -sf libcuda.so "$out/libcuda.so.1"
cp -f "$target_dir/release/libnvrtc.so" "$out/libnvrtc.so"
ln -sf libnvrtc.so "$out/libnvrtc.so.12"
# `cargo test` puts target/debug (and deps/) first on the test's library path, so a debug build
# of a library left there (`cargo build` of these packages makes one) would shadow this one:
# remove them. The libraries' tests check which one they loaded (tests/support/mod.rs).
rm -f "$target_dir/debug/libcuda.so" "$target_dir/debug/deps/libcuda.so" \
    "$target_dir/debug/libnvrtc.so" "$target_dir/debug/deps/libnvrtc.so"
cd "$out" && pwd
