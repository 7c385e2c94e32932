/* streamexec Emissary client for OpenCL C (issue 14): a call packs its arguments into one buffer
 * and sends it with the one opcode OFFLOAD_EMISSARY (0x6F000001); the host's dispatcher unpacks
 * it and calls the real function (api, function). Needs client.cl in front of it (the loader
 * puts both there for MultiKernelLoaderSpec::with_mpi). Lane size 1: every work-item makes its
 * own port round trip.
 *
 * Wire format (little-endian): u32 api, u32 function, u32 argc, u32 flags (0), then argc 16-byte
 * records { u32 kind (0 value, 1 device pointer, 2 host pointer), u32 size, u64 value }. The
 * reply is one packet: data[0] status (0 OK, 1 UNKNOWN_API, 2 UNKNOWN_FUNCTION, 3 BAD_ARGUMENTS,
 * 4 BAD_POINTER, 5 HOST_ERROR), data[1] the return value, data[2..8] out values.
 *
 *   se_emissary_arg a[2] = { se_emissary_i32(7), se_emissary_dptr_global(buf) };
 *   ulong reply[8];
 *   uint status = se_emissary_call(rpc, api, function, 2, a, reply);
 *
 * Pointers are sent as the kernel sees them. For the host to use a buffer in place, pass
 * unified (SVM) memory (`allocate_unified`), whose kernel pointer is its host address. */

#define SE_EMISSARY_OPCODE 0x6F000001u

#define SE_EMISSARY_API_FORTRT 1u
#define SE_EMISSARY_API_PRINT 2u
#define SE_EMISSARY_API_MPI 3u
#define SE_EMISSARY_API_HDF5 4u

#define SE_EMISSARY_VALUE 0u
#define SE_EMISSARY_DEVICE_PTR 1u
#define SE_EMISSARY_HOST_PTR 2u

#define SE_EMISSARY_OK 0u
#define SE_EMISSARY_UNKNOWN_API 1u
#define SE_EMISSARY_UNKNOWN_FUNCTION 2u
#define SE_EMISSARY_BAD_ARGUMENTS 3u
#define SE_EMISSARY_BAD_POINTER 4u
#define SE_EMISSARY_HOST_ERROR 5u

/* Most records one call carries; a call with more sends nothing and gets BAD_ARGUMENTS. */
#define SE_EMISSARY_MAX_ARGS 16u

/* One argument record, as on the wire. */
typedef struct {
  uint kind;
  uint size;
  ulong value;
} se_emissary_arg;

/* A value of `size` bytes (1, 2, 4 or 8), already extended to 64 bits. */
se_emissary_arg se_emissary_value(uint size, ulong value) {
  se_emissary_arg a;
  a.kind = SE_EMISSARY_VALUE;
  a.size = size;
  a.value = value;
  return a;
}
se_emissary_arg se_emissary_i32(int v) { return se_emissary_value(4, (ulong)(long)v); }
se_emissary_arg se_emissary_u32(uint v) { return se_emissary_value(4, (ulong)v); }
se_emissary_arg se_emissary_i64(long v) { return se_emissary_value(8, (ulong)v); }
se_emissary_arg se_emissary_u64(ulong v) { return se_emissary_value(8, v); }
/* A float by its bits (zero-extended). */
se_emissary_arg se_emissary_f32(float v) { return se_emissary_value(4, (ulong)as_uint(v)); }

#if defined(cl_khr_fp64) || defined(__opencl_c_fp64)
/* A double by its bits. */
se_emissary_arg se_emissary_f64(double v) { return se_emissary_value(8, as_ulong(v)); }
#endif

static se_emissary_arg se_emissary_pointer(uint kind, ulong address) {
  se_emissary_arg a;
  a.kind = kind;
  a.size = 8;
  a.value = address;
  return a;
}
/* A device pointer (null is a device pointer with value 0). */
se_emissary_arg se_emissary_dptr_global(const __global void *p) {
  return se_emissary_pointer(SE_EMISSARY_DEVICE_PTR, (ulong)(uintptr_t)p);
}
/* A host pointer: host memory the executor allocated (`allocate_host`). */
se_emissary_arg se_emissary_hptr_global(const __global void *p) {
  return se_emissary_pointer(SE_EMISSARY_HOST_PTR, (ulong)(uintptr_t)p);
}

/* Calls `function` of `api` on the host with `argc` records from `args`. Fills `reply` and
 * returns its status (reply[0]); an error reply of the server (no handler, or the handler
 * failed) comes back as SE_EMISSARY_HOST_ERROR with reply[1..8] zero. */
uint se_emissary_call(__global void *rpc, uint api, uint function, uint argc,
                      const se_emissary_arg *args, ulong reply[8]) {
  if (argc > SE_EMISSARY_MAX_ARGS) {
    for (int w = 0; w < 8; w++)
      reply[w] = 0;
    reply[0] = SE_EMISSARY_BAD_ARGUMENTS;
    return SE_EMISSARY_BAD_ARGUMENTS;
  }
  ulong buf[2 + 2 * SE_EMISSARY_MAX_ARGS];
  buf[0] = (ulong)api | ((ulong)function << 32);
  buf[1] = (ulong)argc; /* flags 0 */
  for (uint k = 0; k < argc; k++) {
    buf[2 + 2 * k] = (ulong)args[k].kind | ((ulong)args[k].size << 32);
    buf[3 + 2 * k] = args[k].value;
  }
  se_rpc_port p = se_rpc_open(rpc, SE_EMISSARY_OPCODE);
  se_rpc_send_n_private(&p, buf, 16 + 16 * (ulong)argc);
  se_rpc_recv(&p, reply);
  se_rpc_close(&p);
  if (se_rpc_is_error(reply)) {
    for (int w = 0; w < 8; w++)
      reply[w] = 0;
    reply[0] = SE_EMISSARY_HOST_ERROR;
  }
  return (uint)reply[0];
}
