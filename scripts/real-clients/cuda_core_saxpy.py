"""cuda-core on the CPU libcuda: CUDA C++ compiled by NVIDIA's NVRTC (nvidia-cuda-nvrtc-cu12),
loaded as a library, launched (cuLaunchKernelEx) and checked; then two PTX inputs linked with
the driver's cuLink* (one calls a function and reads a variable the other defines).

Run by scripts/real-clients.sh; prints one line per check and exits non-zero on a failure."""

import sys

import numpy as np
from cuda.bindings import driver as drv
from cuda.bindings import nvrtc
from cuda.core import (
    Device,
    LaunchConfig,
    Linker,
    LinkerOptions,
    ObjectCode,
    Program,
    ProgramOptions,
    launch,
)


def check(result):
    err = result[0]
    if err != 0:
        raise RuntimeError(f"driver call failed: {err}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def loaded(name):
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if f"/{name}" in line})


dev = Device()
dev.set_current()
stream = dev.create_stream()

# CUDA C++ through NVIDIA's NVRTC, to PTX for the device's compute capability.
code = r"""
template <typename T>
__device__ T twice(T v) { return v + v; }

extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + twice(y[i]);
}
"""
cc = dev.compute_capability
arch = f"compute_{cc.major}{cc.minor}"
prog = Program(code, code_type="c++", options=ProgramOptions(arch=arch, std="c++17"))
ptx = prog.compile("ptx")
kernel = ptx.get_kernel("saxpy")

n = 1000
x = np.arange(n, dtype=np.float32)
y = np.full(n, 0.5, dtype=np.float32)
bx = dev.allocate(x.nbytes, stream=stream)
by = dev.allocate(y.nbytes, stream=stream)
stream.sync()
check(drv.cuMemcpyHtoD(int(bx.handle), x.ctypes.data, x.nbytes))
check(drv.cuMemcpyHtoD(int(by.handle), y.ctypes.data, y.nbytes))
launch(stream, LaunchConfig(grid=(n + 127) // 128, block=128), kernel,
       np.float32(3.0), bx, by, np.uint32(n))
stream.sync()
out = np.empty_like(y)
check(drv.cuMemcpyDtoH(out.ctypes.data, int(by.handle), out.nbytes))
want = 3.0 * x + 2 * y
if not np.array_equal(out, want):
    sys.exit(f"saxpy: wrong result {out[:6]} (want {want[:6]})")
major, minor = check(nvrtc.nvrtcVersion())
print(f"cuda-core: NVRTC {major}.{minor} compiled saxpy to PTX; launched on the CPU libcuda: OK")

# Two PTX inputs linked by the driver (cuLink*: cuda-core uses it when nvJitLink is absent).
lib_ptx = f"""
.version 7.0
.target sm_{cc.major}{cc.minor}
.address_size 64
.visible .global .align 4 .u32 bias = 22;
.visible .func (.param .b32 r) helper (.param .b32 x)
{{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    add.u32 %r2, %r1, 100;
    st.param.b32 [r], %r2;
    ret;
}}
"""
main_ptx = f"""
.version 7.0
.target sm_{cc.major}{cc.minor}
.address_size 64
.extern .func (.param .b32 r) helper (.param .b32 x);
.extern .global .align 4 .u32 bias;
.visible .entry use_helper(.param .u64 out)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    {{
    .param .b32 p0;
    .param .b32 r0;
    st.param.b32 [p0], %r1;
    call.uni (r0), helper, (p0);
    ld.param.b32 %r2, [r0];
    }}
    ld.global.u32 %r3, [bias];
    add.u32 %r2, %r2, %r3;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}}
"""
linker = Linker(
    ObjectCode.from_ptx(main_ptx.encode(), name="main.ptx"),
    ObjectCode.from_ptx(lib_ptx.encode(), name="lib.ptx"),
    options=LinkerOptions(arch=f"sm_{cc.major}{cc.minor}"),
)
image = linker.link("cubin")
use_helper = image.get_kernel("use_helper")
bo = dev.allocate(32 * 4, stream=stream)
launch(stream, LaunchConfig(grid=1, block=32), use_helper, bo)
stream.sync()
res = np.empty(32, dtype=np.uint32)
check(drv.cuMemcpyDtoH(res.ctypes.data, int(bo.handle), res.nbytes))
if not np.array_equal(res, np.arange(32, dtype=np.uint32) + 122):
    sys.exit(f"linked kernel: wrong result {res[:6]}")
print("cuda-core: Linker (driver cuLink*) linked two PTX inputs; the kernel ran: OK")

libcuda = loaded("libcuda.so")
libnvrtc = loaded("libnvrtc")
print(f"loaded: {', '.join(libcuda)}; {', '.join(libnvrtc)}")
if not libnvrtc or any("nvidia/cuda_nvrtc" not in p for p in libnvrtc):
    sys.exit("the CPU NVRTC was loaded, not NVIDIA's")
if not libcuda or any("real-clients-lib" not in p for p in libcuda):
    sys.exit("a libcuda other than the CPU one was loaded")
