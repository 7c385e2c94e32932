#!/usr/bin/env bash
# Installs the Debian packages the build and tests use, if missing:
# PoCL (the OpenCL platform on the CPU), libamdhip64-dev (links the `hip` feature; it reports
# "no device" without an AMD GPU), clang-19 (compiles kernels/*.cu to the committed PTX) and
# OpenMPI (the `mpi` feature links libmpi; scripts/test-mpi.sh runs its tests under mpirun),
# CLBlast (the OpenCL BLAS vendor plugin, loaded at run time) and VkFFT (header-only FFT).
set -euo pipefail
APT_PACKAGES=(pocl-opencl-icd ocl-icd-opencl-dev libamdhip64-dev clang-19 libopenmpi-dev openmpi-bin
    libclblast-dev libvkfft-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
