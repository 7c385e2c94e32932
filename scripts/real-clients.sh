#!/usr/bin/env bash
# Real CUDA software, unmodified, on the CPU libcuda (crates/streamexec-libcuda):
#   (a) numba-cuda's own test suite (numba.cuda.tests: cudadrv, cudapy, nrt, doc_examples),
#       passed / failed / skipped per package and the failures grouped by cause;
#   (b) a cuda-core program: CUDA C++ compiled by NVIDIA's NVRTC, launched, checked; two PTX
#       modules linked with the driver's cuLink*.
#
#   scripts/real-clients.sh [--quick] [--jobs N] [PACKAGE...]
#
# --quick runs the subset listed in scripts/real-clients/quick.txt (a few minutes; the README's
# test command runs it); without it, every package above (see docs/libcuda.md for how long).
# Results and per-module logs: target/real-clients-results/.
#
# The clients come from PyPI into a venv kept outside the checkout, so clean clones share it
# (~750 MB; $STREAMEXEC_REAL_CLIENTS_VENV, default ~/.cache/streamexec/real-clients-venv):
# numba-cuda[cu12], cuda-core, NVIDIA's NVRTC. numba-cuda's default install also pulls NVIDIA's nvJitLink, which
# links to GPU machine code (SASS) a CPU cannot run: the script uninstalls it
# (`pip uninstall nvidia-nvjitlink-cu12`), and then numba and cuda-core hand PTX to the driver's
# own linker (cuLinkCreate/AddData/Complete), which the CPU libcuda implements.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
jobs=2
packages=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --quick) quick=1 ;;
    --jobs) jobs="$2"; shift ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) packages+=("$1") ;;
    esac
    shift
done
[[ ${#packages[@]} -eq 0 ]] && packages=(cudadrv cudapy nrt doc_examples)

venv="${STREAMEXEC_REAL_CLIENTS_VENV:-$HOME/.cache/streamexec/real-clients-venv}"
# Pinned: the versions the closing notes measured. NUMBA_CUDA_PIP overrides (e.g. a newer one).
pins="${NUMBA_CUDA_PIP:-numba-cuda[cu12]==0.30.4 cuda-core==1.2.2 cuda-bindings==12.9.10 nvidia-cuda-nvrtc-cu12==12.9.86}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import numba.cuda, cuda.core, cffi, pytest, ml_dtypes" 2>/dev/null; then
    echo "real-clients: creating $venv from PyPI ($pins)" >&2
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet $pins pytest filecheck psutil cffi ml_dtypes
fi
"$venv/bin/python" -m pip uninstall --quiet --yes nvidia-nvjitlink-cu12 2>/dev/null || true

# Only the CPU libcuda goes on the library path: the CPU NVRTC built next to it would shadow
# NVIDIA's, and the cuda-core program is about NVIDIA's NVRTC in a process with this driver.
built="$(bash scripts/build-libcuda.sh)"
lib="target/real-clients-lib"
mkdir -p "$lib"
cp -f "$built/libcuda.so" "$lib/libcuda.so"
ln -sf libcuda.so "$lib/libcuda.so.1"
# Only this folder: the test script's LD_LIBRARY_PATH also holds the CPU NVRTC.
export LD_LIBRARY_PATH="$PWD/$lib"
# numba's warnings about low occupancy are about a GPU's SMs; the suite checks its own warnings.
export PYTHONDONTWRITEBYTECODE=1

status=0
echo "== cuda-core + NVIDIA NVRTC"
"$venv/bin/python" scripts/real-clients/cuda_core_saxpy.py || status=1

out="target/real-clients-results"
rm -rf "$out"
mkdir -p "$out"
args=(--out "$out" --jobs "$jobs")
[[ $quick -eq 1 ]] && args+=(--only scripts/real-clients/quick.txt)
full=()
for p in "${packages[@]}"; do full+=("numba.cuda.tests.$p"); done
# The quick subset must pass entirely; the full suite at least 95% of the tests it runs.
if [[ $quick -eq 1 ]]; then
    args+=(--min-rate 100)
    echo "== numba-cuda's test suite, quick subset: ${full[*]}"
else
    args+=(--min-rate 95)
    echo "== numba-cuda's test suite: ${full[*]}"
fi
# The driver's log of failed calls (stderr) is what the suite groups failures by.
STREAMEXEC_CUDA_LOG=1 "$venv/bin/python" scripts/real-clients/numba_suite.py "${args[@]}" \
    "${full[@]}" || status=1
exit $status
