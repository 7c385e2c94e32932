/* streamexec RPC client for OpenCL C: the device half of the LLVM GPU libc RPC protocol
 * (Current layout, lane size 1: every work-item is its own client).
 *
 * The loader puts this file in front of a kernel's source when the spec asks for RPC
 * (MultiKernelLoaderSpec::with_rpc), after defining the block's geometry:
 *   SE_RPC_PORTS, SE_RPC_INBOX, SE_RPC_OUTBOX, SE_RPC_HEADERS, SE_RPC_PACKETS, SE_RPC_LOCKS,
 *   SE_RPC_DOORBELL_COUNTER
 * (byte offsets into the shared block; SE_RPC_LOCKS is this side's port lock bitmap, kept in
 * the same fine-grained SVM allocation after the protocol's bytes so that every kernel of the
 * executor shares it).
 *
 * A kernel takes the block as a `__global void *rpc` argument (pass `ExecutorRpc::block()`)
 * and calls se_rpc_puts / se_rpc_printf, or opens a port for its own opcode:
 *   se_rpc_port p = se_rpc_open(rpc, OPCODE);
 *   se_rpc_send_n_private(&p, &request, sizeof request);
 *   long got = se_rpc_recv_n_private(&p, &response, sizeof response);
 *   se_rpc_close(&p);
 *
 * Mailboxes use atomics at all-SVM-devices scope (relaxed loads and stores, acquire and release
 * fences), locks use device scope, and headers and packets plain accesses, as the protocol says.
 */

#if defined(__opencl_c_atomic_scope_all_devices)
#define SE_RPC_SYSTEM memory_scope_all_svm_devices
#else
/* PoCL reports all-devices atomics (CL_DEVICE_ATOMIC_MEMORY_CAPABILITIES) without defining the
 * OpenCL C feature macro, so the enum constant is missing; its value is Clang's predefine. */
#define SE_RPC_SYSTEM ((memory_scope)__OPENCL_MEMORY_SCOPE_ALL_SVM_DEVICES)
#endif

#define SE_RPC_NOOP 0x63000000u
#define SE_RPC_WRITE_TO_STDOUT 0x63000002u
#define SE_RPC_WRITE_TO_STDERR 0x63000003u
#define SE_RPC_WRITE_TO_STDOUT_NEWLINE 0x63000005u
#define SE_RPC_PRINTF_TO_STDOUT 0x63000015u
/* Word 7 of an error reply: "RPC_ERR!" little-endian (words 1..6 zero, word 0 the status). */
#define SE_RPC_ERROR_TAG 0x215252455f435052ul
/* Bytes of printf arguments a kernel can pass (se_rpc_args). */
#define SE_RPC_ARGS_BYTES 256

/* One open port, held in the work-item's private memory. */
typedef struct {
  __global uchar *base;
  uint index;
  uint out;     /* our last outbox value */
  int receive;  /* the last operation was a recv */
  int owns;     /* we own the packet */
} se_rpc_port;

static __global atomic_uint *se_rpc_word(__global uchar *base, uint offset) {
  return (__global atomic_uint *)(base + offset);
}

static __global ulong *se_rpc_packet(const se_rpc_port *p) {
  return (__global ulong *)(p->base + SE_RPC_PACKETS + (ulong)p->index * 64);
}

static uint se_rpc_load_inbox(const se_rpc_port *p) {
  return atomic_load_explicit(se_rpc_word(p->base, SE_RPC_INBOX + 4 * p->index),
                              memory_order_relaxed, SE_RPC_SYSTEM);
}

/* Waits until the client owns the port (inbox == outbox), then an acquire fence. The loop only
 * spins: OpenCL C cannot give the CPU away, and PoCL's CPU driver refuses a kernel that declares
 * a libc function such as sched_yield ("Cannot find symbol sched_yield in kernel library"). */
static void se_rpc_wait(se_rpc_port *p) {
  uint in = p->owns ? p->out : se_rpc_load_inbox(p);
  while (in != p->out)
    in = se_rpc_load_inbox(p);
  atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE, memory_order_acquire, SE_RPC_SYSTEM);
}

/* Release fence, then flip our outbox: the server owns the port. */
static void se_rpc_flip(se_rpc_port *p) {
  atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE, memory_order_release, SE_RPC_SYSTEM);
  p->out = !p->out;
  atomic_store_explicit(se_rpc_word(p->base, SE_RPC_OUTBOX + 4 * p->index), p->out,
                        memory_order_relaxed, SE_RPC_SYSTEM);
  p->owns = 0;
}

static void se_rpc_unlock(__global uchar *base, uint index) {
  atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE, memory_order_release, memory_scope_device);
  atomic_fetch_and_explicit(se_rpc_word(base, SE_RPC_LOCKS + 4 * (index / 32)),
                            ~(1u << (index % 32)), memory_order_relaxed, memory_scope_device);
}

/* Opens a port for `opcode`: waits for a free one (locked by no other work-item, not still
 * held by the server) and writes the header. */
se_rpc_port se_rpc_open(__global void *rpc, uint opcode) {
  se_rpc_port p;
  p.base = (__global uchar *)rpc;
  p.receive = 0;
  p.owns = 1;
  for (uint i = (uint)(get_global_linear_id() % SE_RPC_PORTS);; i = (i + 1) % SE_RPC_PORTS) {
    uint bit = 1u << (i % 32);
    uint old = atomic_fetch_or_explicit(se_rpc_word(p.base, SE_RPC_LOCKS + 4 * (i / 32)), bit,
                                        memory_order_relaxed, memory_scope_device);
    if (old & bit)
      continue;
    atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE, memory_order_acquire, memory_scope_device);
    uint in = atomic_load_explicit(se_rpc_word(p.base, SE_RPC_INBOX + 4 * i),
                                   memory_order_relaxed, SE_RPC_SYSTEM);
    uint out = atomic_load_explicit(se_rpc_word(p.base, SE_RPC_OUTBOX + 4 * i),
                                    memory_order_relaxed, SE_RPC_SYSTEM);
    if (in != out) { /* the server still serves an earlier asynchronous call here */
      se_rpc_unlock(p.base, i);
      continue;
    }
    __global ulong *header = (__global ulong *)(p.base + SE_RPC_HEADERS + (ulong)i * 16);
    header[0] = 1ul; /* lane mask: one lane */
    *(__global uint *)(header + 1) = opcode;
    /* Doorbell (Current layout): when the server filled it in (its `value` pointer is not
       null), ring its counter with a relaxed increment. The counter is reached at its offset in
       the block, not through `value`: that pointer is a device address of the executor's
       address space, which need not be this kernel's pointer to the block. */
#if defined(cl_khr_int64_base_atomics)
    if (*(__global ulong *)p.base != 0)
      atomic_fetch_add_explicit((__global atomic_ulong *)(p.base + SE_RPC_DOORBELL_COUNTER), 1ul,
                                memory_order_relaxed, SE_RPC_SYSTEM);
#endif
    p.index = i;
    p.out = out;
    return p;
  }
}

/* Sends one packet. */
void se_rpc_send(se_rpc_port *p, const ulong data[8]) {
  se_rpc_wait(p);
  __global ulong *slot = se_rpc_packet(p);
  for (int w = 0; w < 8; w++)
    slot[w] = data[w];
  se_rpc_flip(p);
  p->receive = 0;
}

/* Receives one packet. */
void se_rpc_recv(se_rpc_port *p, ulong data[8]) {
  if (p->receive)
    se_rpc_flip(p); /* hand back the packet the previous recv consumed */
  se_rpc_wait(p);
  __global ulong *slot = se_rpc_packet(p);
  for (int w = 0; w < 8; w++)
    data[w] = slot[w];
  p->receive = 1;
  p->owns = 1;
}

/* Closes the port: the client never flips here, it only unlocks. */
void se_rpc_close(se_rpc_port *p) { se_rpc_unlock(p->base, p->index); }

/* Is `data` an error reply of the server? */
int se_rpc_is_error(const ulong data[8]) {
  if (data[7] != SE_RPC_ERROR_TAG)
    return 0;
  for (int w = 1; w < 7; w++)
    if (data[w] != 0)
      return 0;
  return 1;
}

/* send_n: `size` in word 0 and the first 56 bytes, then 64 bytes per packet. One body per
 * address space (OpenCL C has no generic pointers on every device). */
#define SE_RPC_SEND_N(SPACE)                                                                  \
  void se_rpc_send_n_##SPACE(se_rpc_port *p, const __##SPACE void *src, ulong size) {        \
    const __##SPACE uchar *s = (const __##SPACE uchar *)src;                                  \
    ulong data[8];                                                                            \
    uchar *bytes = (uchar *)data;                                                             \
    data[0] = size;                                                                           \
    ulong n = size < 56 ? size : 56;                                                          \
    for (ulong i = 0; i < n; i++)                                                             \
      bytes[8 + i] = s[i];                                                                    \
    se_rpc_send(p, data);                                                                     \
    for (ulong at = n; at < size; at += 64) {                                                 \
      ulong m = size - at < 64 ? size - at : 64;                                              \
      for (ulong i = 0; i < m; i++)                                                           \
        bytes[i] = s[at + i];                                                                 \
      se_rpc_send(p, data);                                                                   \
    }                                                                                         \
  }

/* recv_n into at most `capacity` bytes (the rest is received and dropped). Returns the size the
 * server sent, or -1 for an error reply (then nothing more comes). */
#define SE_RPC_RECV_N(SPACE)                                                                  \
  long se_rpc_recv_n_##SPACE(se_rpc_port *p, __##SPACE void *dst, ulong capacity) {          \
    __##SPACE uchar *d = (__##SPACE uchar *)dst;                                              \
    ulong data[8];                                                                            \
    uchar *bytes = (uchar *)data;                                                             \
    se_rpc_recv(p, data);                                                                     \
    if (se_rpc_is_error(data))                                                                \
      return -1;                                                                              \
    ulong size = data[0];                                                                     \
    ulong n = size < 56 ? size : 56;                                                          \
    for (ulong i = 0; i < n; i++)                                                             \
      if (i < capacity)                                                                       \
        d[i] = bytes[8 + i];                                                                  \
    for (ulong at = n; at < size; at += 64) {                                                 \
      se_rpc_recv(p, data);                                                                   \
      ulong m = size - at < 64 ? size - at : 64;                                              \
      for (ulong i = 0; i < m; i++)                                                           \
        if (at + i < capacity)                                                                \
          d[at + i] = bytes[i];                                                               \
    }                                                                                         \
    return (long)size;                                                                        \
  }

SE_RPC_SEND_N(private)
SE_RPC_SEND_N(global)
SE_RPC_SEND_N(constant)
SE_RPC_RECV_N(private)
SE_RPC_RECV_N(global)

static ulong se_rpc_strlen(__constant char *s) {
  ulong n = 0;
  while (s[n])
    n++;
  return n;
}

/* send_n of `bytes`, then the count reply; -1 on an error reply. */
static long se_rpc_write(__global void *rpc, uint opcode, __constant char *s, ulong size) {
  se_rpc_port p = se_rpc_open(rpc, opcode);
  se_rpc_send_n_constant(&p, s, size);
  ulong data[8];
  se_rpc_recv(&p, data);
  se_rpc_close(&p);
  return se_rpc_is_error(data) ? -1 : (long)data[0];
}

/* C `puts`: the string and a newline to the executor's stdout. Returns the count or -1. */
long se_rpc_puts(__global void *rpc, __constant char *s) {
  return se_rpc_write(rpc, SE_RPC_WRITE_TO_STDOUT_NEWLINE, s, se_rpc_strlen(s));
}

/* The string to the executor's stdout (no newline). Returns the count or -1. */
long se_rpc_write_stdout(__global void *rpc, __constant char *s) {
  return se_rpc_write(rpc, SE_RPC_WRITE_TO_STDOUT, s, se_rpc_strlen(s));
}

/* printf arguments laid out as an NVPTX `va_list` would hold them (each aligned to its size).
 * Start with `se_rpc_args a = se_rpc_args_new();`, then add in format order. */
typedef struct {
  uchar bytes[SE_RPC_ARGS_BYTES];
  uint size;
} se_rpc_args;

se_rpc_args se_rpc_args_new(void) {
  se_rpc_args a;
  a.size = 0;
  return a;
}

static void se_rpc_args_put(se_rpc_args *a, ulong bits, uint width) {
  uint at = (a->size + width - 1) / width * width;
  if (at + width > SE_RPC_ARGS_BYTES)
    return; /* too many arguments: the server prints zeros for the rest */
  for (uint i = 0; i < at - a->size; i++)
    a->bytes[a->size + i] = 0;
  for (uint i = 0; i < width; i++)
    a->bytes[at + i] = (uchar)(bits >> (8 * i));
  a->size = at + width;
}

/* `%d`, `%c`, `%x`, ... without a length modifier. */
void se_rpc_arg_int(se_rpc_args *a, int v) { se_rpc_args_put(a, (uint)v, 4); }
/* Conversions with `l`, `ll`, `z`, ... */
void se_rpc_arg_long(se_rpc_args *a, long v) { se_rpc_args_put(a, (ulong)v, 8); }

/* The bits of `f` as a double (exact: every float is a double), without needing fp64. */
static ulong se_rpc_float_to_double_bits(float f) {
  uint u = as_uint(f);
  ulong sign = (ulong)(u >> 31) << 63;
  int exp = (int)((u >> 23) & 0xff);
  ulong mant = u & 0x7fffff;
  if (exp == 0xff) /* inf, nan */
    return sign | (0x7fful << 52) | (mant << 29);
  if (exp == 0) {
    if (mant == 0)
      return sign;
    exp = 1; /* subnormal: normalize */
    while (!(mant & 0x800000)) {
      mant <<= 1;
      exp--;
    }
    mant &= 0x7fffff;
  }
  return sign | ((ulong)(exp - 127 + 1023) << 52) | (mant << 29);
}

/* `%f`, `%e`, `%g`, `%a` of a float (passed as the double it converts to). */
void se_rpc_arg_float(se_rpc_args *a, float v) {
  se_rpc_args_put(a, se_rpc_float_to_double_bits(v), 8);
}

#if defined(cl_khr_fp64) || defined(__opencl_c_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
/* `%f`, `%e`, `%g`, `%a` of a double. */
void se_rpc_arg_double(se_rpc_args *a, double v) { se_rpc_args_put(a, as_ulong(v), 8); }
#endif

/* `%s` of a string in constant memory (string literals are). */
void se_rpc_arg_str(se_rpc_args *a, __constant char *s) {
  se_rpc_args_put(a, (ulong)(uintptr_t)s, 8);
}

/* C `printf`, formatted on the host from `fmt` and the arguments. Returns printf's result, or
 * -1 when the server replied with an error. */
int se_rpc_printf(__global void *rpc, __constant char *fmt, const se_rpc_args *args) {
  se_rpc_port p = se_rpc_open(rpc, SE_RPC_PRINTF_TO_STDOUT);
  se_rpc_send_n_constant(&p, fmt, se_rpc_strlen(fmt) + 1);
  ulong data[8];
  se_rpc_recv(&p, data);
  if (se_rpc_is_error(data)) {
    se_rpc_close(&p);
    return -1;
  }
  /* The server computed the argument buffer's size from the format. */
  ulong size = data[0];
  se_rpc_args blob = *args;
  for (uint i = blob.size; i < SE_RPC_ARGS_BYTES; i++)
    blob.bytes[i] = 0;
  se_rpc_send_n_private(&p, blob.bytes, size < SE_RPC_ARGS_BYTES ? size : SE_RPC_ARGS_BYTES);
  /* The server asks for each %s string by the pointer the arguments carry (data[1]). */
  for (;;) {
    se_rpc_recv(&p, data);
    if (se_rpc_is_error(data)) {
      se_rpc_close(&p);
      return -1;
    }
    if (data[1] == 0)
      break;
    __constant char *s = (__constant char *)(uintptr_t)data[1];
    se_rpc_send_n_constant(&p, s, se_rpc_strlen(s) + 1);
  }
  se_rpc_close(&p);
  return (int)data[0];
}
