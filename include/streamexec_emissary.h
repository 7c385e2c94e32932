/* streamexec_emissary.h: device side of Emissary calls (LLVM offload's design) for CUDA (NVPTX)
 * and HIP (AMDGPU) device code, on top of streamexec_rpc.h. A call packs its arguments into one
 * buffer and sends it with the one opcode OFFLOAD_EMISSARY (0x6F000001); the host's dispatcher
 * unpacks it and calls the real function (api, function). Wire format (little-endian, per lane):
 *   u32 api, u32 function, u32 argc, u32 flags (0), then argc 16-byte records
 *   { u32 kind (0 value, 1 device pointer, 2 host pointer), u32 size, u64 value }
 * and one 64-byte reply packet per lane: data[0] status (0 OK, 1 UNKNOWN_API, 2 UNKNOWN_FUNCTION,
 * 3 BAD_ARGUMENTS, 4 BAD_POINTER, 5 HOST_ERROR), data[1] the return value, data[2..8] out values.
 *
 * Every active lane of a warp may call with its own arguments (and its own argc); the lanes
 * that call together share one port round trip (open, send_n, recv, close), as every
 * streamexec_rpc.h function does: the active mask at the call is the set of callers. */
#ifndef STREAMEXEC_EMISSARY_H
#define STREAMEXEC_EMISSARY_H

#include "streamexec_rpc.h"

#define SE_EMISSARY_OPCODE 0x6F000001u

/* API ids (LLVM's EmissaryIds); user APIs pick others. */
#define SE_EMISSARY_API_FORTRT 1u
#define SE_EMISSARY_API_PRINT 2u
#define SE_EMISSARY_API_MPI 3u
#define SE_EMISSARY_API_HDF5 4u

/* Record kinds. */
#define SE_EMISSARY_VALUE 0u
#define SE_EMISSARY_DEVICE_PTR 1u
#define SE_EMISSARY_HOST_PTR 2u

/* Reply statuses (data[0]). */
#define SE_EMISSARY_OK 0u
#define SE_EMISSARY_UNKNOWN_API 1u
#define SE_EMISSARY_UNKNOWN_FUNCTION 2u
#define SE_EMISSARY_BAD_ARGUMENTS 3u
#define SE_EMISSARY_BAD_POINTER 4u
#define SE_EMISSARY_HOST_ERROR 5u

/* Most records one call carries (the buffer lives in the caller's local memory). A call with
 * more sends nothing and gets SE_EMISSARY_BAD_ARGUMENTS. */
#define SE_EMISSARY_MAX_ARGS 16u

/* Word 7 of the server's error reply ("RPC_ERR!" little-endian, words 1..6 zero): the handler
 * failed or nobody handles the opcode. A call reports it as SE_EMISSARY_HOST_ERROR. */
#define SE_EMISSARY_RPC_ERROR_TAG 0x215252455f435052ull

/* One argument record, laid out as on the wire (16 bytes). */
typedef struct {
  uint32_t kind;
  uint32_t size;
  uint64_t value;
} se_emissary_arg;

/* A value of `size` bytes (1, 2, 4 or 8), already extended to 64 bits. */
static __device__ inline se_emissary_arg se_emissary_value(uint32_t size, uint64_t value) {
  se_emissary_arg a = {SE_EMISSARY_VALUE, size, value};
  return a;
}
static __device__ inline se_emissary_arg se_emissary_i32(int32_t v) {
  return se_emissary_value(4, (uint64_t)(int64_t)v);
}
static __device__ inline se_emissary_arg se_emissary_u32(uint32_t v) {
  return se_emissary_value(4, (uint64_t)v);
}
static __device__ inline se_emissary_arg se_emissary_i64(int64_t v) {
  return se_emissary_value(8, (uint64_t)v);
}
static __device__ inline se_emissary_arg se_emissary_u64(uint64_t v) { return se_emissary_value(8, v); }
/* A float or double, by its bits (zero-extended). */
static __device__ inline se_emissary_arg se_emissary_f32(float v) {
  return se_emissary_value(4, (uint64_t)__builtin_bit_cast(uint32_t, v));
}
static __device__ inline se_emissary_arg se_emissary_f64(double v) {
  return se_emissary_value(8, __builtin_bit_cast(uint64_t, v));
}
/* A device pointer: an address in the executor's device memory, as the kernel sees it (null is
 * sent as a device pointer with value 0). */
static __device__ inline se_emissary_arg se_emissary_dptr(const void *p) {
  se_emissary_arg a = {SE_EMISSARY_DEVICE_PTR, 8, (uint64_t)(uintptr_t)p};
  return a;
}
/* A host pointer: an address in host memory the executor allocated (`allocate_host`). */
static __device__ inline se_emissary_arg se_emissary_hptr(const void *p) {
  se_emissary_arg a = {SE_EMISSARY_HOST_PTR, 8, (uint64_t)(uintptr_t)p};
  return a;
}

/* Calls function `function` of API `api` on the host with `argc` records. Fills `reply` with the
 * lane's reply packet and returns its status (reply[0]); an error reply of the server (no
 * handler, or the handler failed) is returned as SE_EMISSARY_HOST_ERROR with reply[1..8] zero. */
static __device__ inline uint32_t se_emissary_call(uint32_t api, uint32_t function, uint32_t argc,
                                                   const se_emissary_arg *args, uint64_t reply[8]) {
  if (argc > SE_EMISSARY_MAX_ARGS) {
    for (int w = 0; w < 8; ++w)
      reply[w] = 0;
    reply[0] = SE_EMISSARY_BAD_ARGUMENTS;
    return SE_EMISSARY_BAD_ARGUMENTS;
  }
  uint64_t buf[2 + 2 * SE_EMISSARY_MAX_ARGS];
  buf[0] = (uint64_t)api | ((uint64_t)function << 32);
  buf[1] = (uint64_t)argc; /* flags 0 */
  for (uint32_t k = 0; k < argc; ++k) {
    buf[2 + 2 * k] = (uint64_t)args[k].kind | ((uint64_t)args[k].size << 32);
    buf[3 + 2 * k] = args[k].value;
  }
  se_rpc_port p = se_rpc_open(SE_EMISSARY_OPCODE);
  se_rpc_send_n(&p, buf, 16 + 16 * (uint64_t)argc);
  se_rpc_recv(&p, reply);
  se_rpc_close(&p);
  int error = reply[7] == SE_EMISSARY_RPC_ERROR_TAG;
  for (int w = 1; w < 7; ++w)
    error = error && reply[w] == 0;
  if (error) {
    for (int w = 0; w < 8; ++w)
      reply[w] = 0;
    reply[0] = SE_EMISSARY_HOST_ERROR;
  }
  return (uint32_t)reply[0];
}

#endif /* STREAMEXEC_EMISSARY_H */
