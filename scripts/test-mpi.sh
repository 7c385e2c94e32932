#!/usr/bin/env bash
# The stream-ordered MPI operations (feature `mpi`, tests/mpi.rs) under mpirun with 2, 3 and 4
# ranks, on the host platform and OpenCL (PoCL), then what a dead rank does to the others; then
# kernels calling MPI through the Emissary layer: tests/emissary_mpi (native host kernels,
# timeouts, refused calls) and examples/emissary_mpi.rs (the seed example and a device
# MPI_Allreduce: PTX on host and on cuda where the CPU libcuda is on the library path, with 2,
# 3 and 4 ranks; OpenCL C on opencl with 2).
# Loopback only (shared memory and self), --oversubscribe (more ranks than cores); as root,
# OpenMPI's run-as-root variables. Needs libopenmpi-dev and openmpi-bin (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# The path of test binary $1, from the one `--features mpi` build.
test_binary() {
    local path
    path="$(cargo test -p streamexec --features mpi --test "$1" --no-run --message-format=json 2>/dev/null |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)"
    if [[ -z "$path" || ! -x "$path" ]]; then
        cargo test -p streamexec --features mpi --test "$1" --no-run >&2  # shows the build error
        echo "error: could not find the tests/$1 binary" >&2
        exit 1
    fi
    echo "$path"
}
bin="$(test_binary mpi)"

if [[ "$(id -u)" -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Shared memory copies through a bounce buffer: the kernel's cross-process copy (CMA) is often
# denied in containers.
mpirun_=(mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
# A stuck wait fails its case after 20 s (rather than the 60 s default); the run is bounded too.
export STREAMEXEC_MPI_TIMEOUT_MS=20000
export STREAMEXEC_MPI_PLATFORMS="${STREAMEXEC_MPI_PLATFORMS:-host,opencl}"

for n in 2 3 4; do
    echo "== tests/mpi.rs with $n ranks ($STREAMEXEC_MPI_PLATFORMS)"
    timeout 600 "${mpirun_[@]}" -n "$n" "$bin"
done

# A rank that dies must never leave the others waiting forever. By default mpirun ends the job
# when a rank dies (SIGKILL here): the run must end promptly with a failure status.
echo "== a rank killed mid-run: mpirun ends the job"
set +e
STREAMEXEC_MPI_DEAD_PEER=kill timeout 120 "${mpirun_[@]}" -n 3 "$bin" >/dev/null 2>&1
rc=$?
set -e
if [[ $rc -eq 0 || $rc -eq 124 ]]; then
    echo "error: with a killed rank, mpirun returned $rc (0: the death went unnoticed; 124: hung)" >&2
    exit 1
fi
# With mpirun told not to end the job, the survivors' waits time out (3 s here): their streams
# fail with errors naming the operation and the rank, and finalize returns an Err instead of
# waiting for the dead rank forever.
echo "== a rank exits mid-run, job kept alive: the survivors time out"
set +e
out="$(STREAMEXEC_MPI_DEAD_PEER=exit STREAMEXEC_MPI_TIMEOUT_MS=3000 timeout 120 \
    "${mpirun_[@]}" -n 3 --tag-output --mca orte_abort_on_non_zero_status 0 "$bin" 2>&1)"
rc=$?
set -e
for want in "MPI rank 0: then_recv from rank 1 (tag 5)" "no message after 3.0 s" \
    "MPI rank 2: then_all_reduce (sum of 1024 f32)" "not every rank arrived after 3.0 s" \
    "rank 0: finalize: MPI rank 0: MPI_Finalize: skipped: not every rank reached finalize" \
    "rank 2: finalize: MPI rank 2: MPI_Finalize: skipped: an earlier collective timed out"; do
    if [[ $rc -eq 124 || "$out" != *"$want"* ]]; then
        echo "$out" >&2
        echo "error: the survivors of a dead rank did not report \"$want\" (mpirun status $rc)" >&2
        exit 1
    fi
done
echo "tests/mpi.rs passed with 2, 3 and 4 ranks; dead ranks end the job or time out"

# The emissary test and example, from the same `--features mpi` build.
emissary="$(test_binary emissary_mpi)"
cargo build -p streamexec-examples --features mpi --example emissary_mpi
example=target/debug/examples/emissary_mpi
for n in 2 3 4; do
    echo "== tests/emissary_mpi with $n ranks"
    timeout 600 "${mpirun_[@]}" -n "$n" "$emissary"
done
platforms=(host opencl)
if [[ -n "${STREAMEXEC_LIBCUDA_DIR:-}" ]]; then platforms+=(cuda); fi
# OpenCL work-items can only spin while they wait for the server, so on 2 cores the OpenCL runs
# are slow (tens of seconds with 2 ranks): OpenCL with 2 ranks, the PTX platforms with 2, 3, 4.
# A rank that finishes its send/receive part waits in MPI_Allreduce for the others: no short
# timeout here.
for n in 2 3 4; do
    for p in "${platforms[@]}"; do
        if [[ "$p" == opencl && $n -gt 2 ]]; then continue; fi
        echo "== examples/emissary_mpi --platform $p with $n ranks"
        out="$(STREAMEXEC_MPI_TIMEOUT_MS=300000 timeout 600 "${mpirun_[@]}" -n "$n" "$example" \
            --platform "$p" 2>&1)" || {
            echo "$out" >&2
            echo "error: emissary_mpi on $p with $n ranks failed" >&2
            exit 1
        }
        for ((r = 0; r < n; r++)); do
            for want in "R$r: Number of Ranks= $n " "R$r: MPI_Send/MPI_Recv kernel errors = 0" \
                "R$r: MPI_Allreduce of 1000 ints: errors = 0" \
                "R$r: === POST MPI_Finalize === rc = 0"; do
                if [[ "$out" != *"$want"* ]]; then
                    echo "$out" >&2
                    echo "error: emissary_mpi on $p with $n ranks did not print \"$want\"" >&2
                    exit 1
                fi
            done
        done
    done
done
echo "kernels calling MPI passed with 2, 3 and 4 ranks on ${platforms[*]} (opencl: 2 ranks)"
