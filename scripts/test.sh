#!/usr/bin/env bash
# Installs what the tests need, then runs every test: unit, integration (the conformance suite on
# every available platform), compile-fail, doc tests, examples, the MPI tests under mpirun, the
# HIP build, the PTX currency check, the PTX fuzz run and Miri on the pure-Rust parts (installing
# nightly, Miri and cargo-fuzz when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# hip-runtime-sys finds Debian's HIP headers and libamdhip64 under /usr.
export HIP_PATH="${HIP_PATH:-/usr}"

# The committed PTX must be what kernels/*.cu compile to.
bash scripts/gen-ptx.sh --check

# The CPU libcuda (crates/streamexec-libcuda: the CUDA driver API on the host platform's PTX
# engine) and the CPU NVRTC (crates/streamexec-libnvrtc: CUDA C++ to PTX with clang-19), first on
# the library path, so the CUDA backend, cudarc and the C client run in every test run.
libcuda_dir="$(bash scripts/build-libcuda.sh)"
export LD_LIBRARY_PATH="$libcuda_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STREAMEXEC_LIBCUDA_DIR="$libcuda_dir"

# The conformance suite must run on these platforms: a missing one fails instead of skipping.
export STREAMEXEC_REQUIRE="${STREAMEXEC_REQUIRE:-opencl,cuda}"
cargo test -p streamexec -p streamexec-ptx -p streamexec-rpc -p streamexec-test-support --all-targets
# PTX runs on the JIT by default; the engines must agree: the corpus, the one-instruction cells
# and the bench kernels on the JIT (forced) and on the interpreter, one seed, every downloaded
# output bit-identical. Then the hand-written engine tests on the interpreter too.
bash scripts/ptx-engines-agree.sh
STREAMEXEC_PTX_ENGINE=interpreter cargo test -p streamexec-ptx --test engine --test corpus
# The PTX crate alone without its JIT (interpreter only; `PtxEngine::Jit` is refused).
cargo test -p streamexec-ptx --no-default-features --lib --test engine --test corpus
# Two CPU CUDA devices: the multi-device paths (peer access, peer copies) of the CUDA backend.
STREAMEXEC_CUDA_DEVICES=2 cargo test -p streamexec --test conformance
# Doc tests: the crates' docs, the README and every guide of docs/ (the MPI guide with `mpi`).
cargo test -p streamexec -p streamexec-ptx -p streamexec-rpc --doc
cargo test -p streamexec --features mpi --doc
# The RPC stress test with spin-only clients (uniform 0..=64 KiB echoes) needs a release build.
cargo test -p streamexec-rpc --release --test rpc -- --ignored
cargo test -p streamexec --features noop --test conformance  # + the noop template backend (unsupported.rs)
# MPI (feature `mpi`): tests/mpi.rs under mpirun with 2, 3 and 4 ranks, and dead ranks.
bash scripts/test-mpi.sh
# The libraries' own tests (unit tests, no import cycle in src, and the clients: cudarc, a C
# program, error codes, graphs, NVRTC) on the release builds above: a cdylib is not built for
# its tests, and the tests fail if a debug build in target/debug shadows STREAMEXEC_LIBCUDA_DIR's.
# Then any debug build of the libraries goes (it would shadow the release ones).
cargo test -p streamexec-libcuda -p streamexec-libnvrtc
bash scripts/build-libcuda.sh >/dev/null
# streamexec-build against clang-19, then the typed-kernels example (its kernels built from CUDA C
# and OpenCL C at build time) on host, OpenCL and CUDA; its committed prebuilt outputs must be
# what the build generates, and must build and run without clang (STREAMEXEC_BUILD_PREBUILT=1).
cargo test -p streamexec-build
cargo build -q -p streamexec-typed-kernels
generated="$(ls -t target/debug/build/streamexec-typed-kernels-*/out/kernels.rs | head -1)"
if ! cmp -s "$generated" examples/typed-kernels/kernels/prebuilt/kernels.rs; then
    echo "examples/typed-kernels/kernels/prebuilt is stale: run" \
        "STREAMEXEC_BUILD_UPDATE_PREBUILT=1 cargo build -p streamexec-typed-kernels and commit it" >&2
    exit 1
fi
typed_expected=$'result = 165.5\nscale<float>, scale<double>, affine: 1000 elements each match plain Rust'
for platform in host opencl cuda; do
    out="$(cargo run -q -p streamexec-typed-kernels -- --platform "$platform")"
    if [[ "$out" != "$typed_expected" ]]; then
        echo "typed-kernels on $platform printed: $out" >&2
        exit 1
    fi
done
out="$(STREAMEXEC_BUILD_PREBUILT=1 cargo run -q -p streamexec-typed-kernels)"
[[ "$out" == "$typed_expected" ]] || { echo "typed-kernels from prebuilt outputs: $out" >&2; exit 1; }

# Real CUDA software on the CPU libcuda: a cuda-core program with NVIDIA's NVRTC, and the quick
# subset of numba-cuda's own test suite (scripts/real-clients/quick.txt; the whole suite is
# `bash scripts/real-clients.sh`, on demand). The clients come from PyPI into a venv outside the
# checkout, made on the first run.
bash scripts/real-clients.sh --quick
# The HIP backend (opt-in feature): builds, links libamdhip64, and fails cleanly without a GPU.
cargo test -p streamexec --features hip --test hip_platform --test examples

# The CUDA/HIP device-side RPC client header compiles for NVPTX (PTX) and AMDGPU, and its
# `__llvm_rpc_client` has 2096 bytes (current layout) or 552 (STREAMEXEC_RPC_PRE_DOORBELL).
if command -v clang++-19 >/dev/null 2>&1; then
    out="$(mktemp -d)"
    for define in "" -DSTREAMEXEC_RPC_PRE_DOORBELL; do
        bytes=2096
        [[ -n "$define" ]] && bytes=552
        clang++-19 -x cuda --cuda-device-only --cuda-gpu-arch=sm_70 -nocudainc -nocudalib \
            -Xclang -target-feature -Xclang +ptx70 -Iinclude $define -S \
            crates/streamexec/tests/c/rpc_header_check.cu -o "$out/nvptx.ptx"
        grep -q "__llvm_rpc_client\[$bytes\]" "$out/nvptx.ptx"
        # se_rpc_sync is a warp barrier (it once called itself: recursion at -O0, nothing at -O3).
        grep -q "bar.warp.sync" "$out/nvptx.ptx"
        clang++-19 -x hip --offload-arch=gfx90a -nogpulib -nogpuinc --cuda-device-only \
            -Iinclude $define -S crates/streamexec/tests/c/rpc_header_check_amdgpu.hip -o "$out/amdgpu.s"
        grep -Eq "\.size[[:space:]]+__llvm_rpc_client, $bytes\$" "$out/amdgpu.s"
    done
    # The Emissary and MPI stubs (streamexec_emissary.h, streamexec_mpi.h), warnings as errors:
    # every stub once, sending the OFFLOAD_EMISSARY opcode (0x6F000001; the PTX writes it in decimal).
    clang++-19 -x cuda --cuda-device-only --cuda-gpu-arch=sm_70 -nocudainc -nocudalib \
        -Xclang -target-feature -Xclang +ptx70 -Iinclude -Wall -Wextra -Werror -S \
        crates/streamexec/tests/c/mpi_header_check.cu -o "$out/mpi.ptx"
    grep -q "1862270977" "$out/mpi.ptx"
    clang++-19 -x hip --offload-arch=gfx90a -nogpulib -nogpuinc --cuda-device-only \
        -Iinclude -Wall -Wextra -Werror -S crates/streamexec/tests/c/mpi_header_check.cu -o "$out/mpi_amdgpu.s"
    grep -qi "0x6f000001" "$out/mpi_amdgpu.s"
    rm -rf "$out"
    echo "include/streamexec_rpc.h compiles for NVPTX and AMDGPU in both layouts"
    echo "include/streamexec_mpi.h compiles for NVPTX and AMDGPU"
else
    echo "note: clang++-19 not installed; skipping the RPC header compile checks"
fi

# The PTX parser under a coverage-guided fuzzer for a few seconds: malformed input is an Err.
bash scripts/fuzz.sh

# Miri on the pure-Rust parts, on every checkout: the nightly toolchain and its Miri are installed
# when missing, and a run that cannot start fails the script like a failing test.
bash scripts/ensure-nightly.sh miri rust-src
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "error: Miri is not usable after installing it (cargo +nightly miri --version fails)" >&2
    exit 1
fi
# Weak-memory emulation is off: it cannot model the mixed-size atomics that device memory
# uses (see ARCHITECTURE.md); leaks are expected from the mem::forget soundness tests.
MIRIFLAGS="-Zmiri-disable-weak-memory-emulation -Zmiri-ignore-leaks" \
    cargo +nightly miri test -p streamexec -p streamexec-ptx -p streamexec-rpc --lib
