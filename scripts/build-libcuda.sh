#!/usr/bin/env bash
# Builds the CPU libcuda (crates/streamexec-libcuda, a cdylib) and the CPU NVRTC
# (crates/streamexec-libnvrtc, CUDA C++ to PTX with clang) in release mode and lays them out as
# NVIDIA's driver and toolkit do: target/libcuda/libcuda.so, libcuda.so.1, libnvrtc.so and
# libnvrtc.so.12. Point a driver-API or NVRTC program at them with
#   LD_LIBRARY_PATH=$PWD/target/libcuda
# Prints that directory.
#
# Cargo builds them as libstreamexec_cuda.so and libstreamexec_nvrtc.so: `cargo run`, `test` and
# `bench` put target/<profile> and target/<profile>/deps on the library path of everything they
# run, so a libcuda.so there would answer in place of NVIDIA's driver on a GPU machine. Only
# target/libcuda holds the driver's names, and only programs pointed at it load them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p streamexec-libcuda -p streamexec-libnvrtc >&2
target_dir="${CARGO_TARGET_DIR:-target}"
out="$target_dir/libcuda"
mkdir -p "$out"
cp -f "$target_dir/release/libstreamexec_cuda.so" "$out/libcuda.so"
ln -sf libcuda.so "$out/libcuda.so.1"
cp -f "$target_dir/release/libstreamexec_nvrtc.so" "$out/libnvrtc.so"
ln -sf libnvrtc.so "$out/libnvrtc.so.12"
# Builds from before the rename were libcuda.so / libnvrtc.so in cargo's folders, which cargo
# puts on the library path: remove any left there.
for dir in "$target_dir"/{debug,release}{,/deps}; do
    rm -f "$dir"/libcuda.so "$dir"/libcuda.so.1 "$dir"/libnvrtc.so "$dir"/libnvrtc.so.12
done
cd "$out" && pwd
