// The device side of examples/rpc_hello.rs on `--platform cuda`: CUDA C calling the executor's
// RPC server through include/streamexec_rpc.h (the module defines `__llvm_rpc_client`, which the
// executor fills in at load). Lane 0 alone prints the greeting (one-lane ports), then all 32
// lanes of the warp print one line each through one port: a format longer than one packet
// (streamed in chunks) and a `%s` whose string the server fetches from the device.
// gen-ptx-variant: pre_doorbell -DSTREAMEXEC_RPC_PRE_DOORBELL
#include "prelude.h"
#include "../include/streamexec_rpc.h"

extern "C" __global__ void hello(float x) {
    unsigned lane = threadIdx.x;
    if (lane == 0) {
        se_rpc_puts("Hello world!");
        // NVPTX varargs: each argument aligned to its size, floats promoted to double.
        struct { int answer; int pad; double x; } a = {42, 0, x};
        se_rpc_printf("answer=%d x=%.2f\n", &a, sizeof(a));
    }
    // Independent thread scheduling lets lanes 1..31 run ahead while lane 0 waits for the server;
    // the whole warp meets here so that the next call opens one port for all 32 lanes.
    __syncwarp();
    struct { int lane; int pad; const char *parity; double y; } l = {
        (int)lane, 0, (lane & 1) ? "odd" : "even", (double)(x * (float)lane)};
    se_rpc_printf("lane %2d of the warp, one RPC port for all 32: %s, x*lane=%.2f\n", &l,
                  sizeof(l));
}
