/* streamexec_rpc.h: a device-side client of the LLVM GPU libc RPC protocol for CUDA (NVPTX)
 * and HIP (AMDGPU, 64-lane wavefronts) device code, talking to a streamexec RPC server. Current layout (doorbell, 16384-port lock
 * bitmap, 2096-byte client struct) unless STREAMEXEC_RPC_PRE_DOORBELL is defined (552 bytes).
 * The host copies `rpc::Server::client_image()` into `__llvm_rpc_client`; the server's lane size
 * is the warp size: 32 on NVPTX, 64 on AMDGPU (streamexec picks the device's warp size). Every function is called by all active lanes of a warp together; each lane
 * passes its own data. Memory order follows the protocol: relaxed mailbox loads, an acquire
 * fence after seeing ownership, a release fence before flipping the outbox (clang 19's NVPTX
 * backend selects no acquire/release fence, so these are full `membar.sys` / `membar.gl`; on
 * AMDGPU they are `__builtin_amdgcn_fence` at system / agent scope). */
#ifndef STREAMEXEC_RPC_H
#define STREAMEXEC_RPC_H

#include <stdint.h>

#ifdef STREAMEXEC_RPC_PRE_DOORBELL
#define SE_RPC_MAX_PORTS 4096
#else
#define SE_RPC_MAX_PORTS 16384
#endif

typedef struct { uint64_t mask; uint32_t opcode; uint32_t pad; } se_rpc_header;
typedef struct { uint64_t data[8]; } se_rpc_buffer;

typedef struct {
  uint32_t port_count;
#ifndef STREAMEXEC_RPC_PRE_DOORBELL
  void *doorbell;
#endif
  uint32_t *inbox;
  uint32_t *outbox;
  se_rpc_header *header;
  se_rpc_buffer *packet;
  uint32_t lock[SE_RPC_MAX_PORTS / 32];
} se_rpc_client;

/* The client the host fills in (weak, so a libc that defines it wins). */
extern __device__ se_rpc_client se_rpc_client_storage __asm__("__llvm_rpc_client");
__device__ __attribute__((weak)) se_rpc_client se_rpc_client_storage;

#define SE_RPC_OPCODE(n) (((uint32_t)'c' << 24) | (n))
#define SE_RPC_WRITE_TO_STDOUT_NEWLINE SE_RPC_OPCODE(5)
#define SE_RPC_PRINTF_TO_STDOUT SE_RPC_OPCODE(21)

/* The lane primitives, per target. A mask has one bit per lane of a warp / wavefront. */
#if defined(__AMDGPU__)
#define SE_RPC_LANES 64u
typedef uint64_t se_rpc_mask;
static __device__ inline uint32_t se_rpc_lane(void) {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
static __device__ inline se_rpc_mask se_rpc_active(void) { return __builtin_amdgcn_read_exec(); }
static __device__ inline uint32_t se_rpc_first(se_rpc_mask mask) { return __builtin_ctzll(mask); }
static __device__ inline se_rpc_mask se_rpc_ballot(se_rpc_mask mask, int p) {
  return __builtin_amdgcn_ballot_w64(p) & mask;
}
/* Every lane of `mask` is active here, so the first active lane is the mask's first lane. */
static __device__ inline uint32_t se_rpc_bcast(se_rpc_mask mask, uint32_t v) {
  (void)mask;
  return __builtin_amdgcn_readfirstlane(v);
}
static __device__ inline void se_rpc_sync(se_rpc_mask mask) {
  (void)mask;
  __builtin_amdgcn_wave_barrier();
}
static __device__ inline void se_rpc_fence_sys(void) { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, ""); }
static __device__ inline void se_rpc_fence_dev(void) {
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent");
}
static __device__ inline void se_rpc_sleep(void) { __builtin_amdgcn_s_sleep(2); }
#else
#define SE_RPC_LANES 32u
typedef uint32_t se_rpc_mask;
static __device__ inline uint32_t se_rpc_lane(void) { return __nvvm_read_ptx_sreg_laneid(); }
static __device__ inline se_rpc_mask se_rpc_active(void) { return __nvvm_activemask(); }
static __device__ inline uint32_t se_rpc_first(se_rpc_mask mask) { return __builtin_ctz(mask); }
/* vote.sync and shfl.sync wait for every lane of `mask` on the hardware; the warp barrier in
 * front makes lanes that diverged before them (the first lane's mailbox store, a rotated loop)
 * meet there also where the collective only takes the lanes that arrived together, as
 * streamexec's PTX engine does: without it, a warp whose lanes stream different lengths
 * (se_rpc_send_n) voted without its first lane and deadlocked. */
static __device__ inline se_rpc_mask se_rpc_ballot(se_rpc_mask mask, int p) {
  __nvvm_bar_warp_sync(mask);
  return __nvvm_vote_ballot_sync(mask, p);
}
static __device__ inline uint32_t se_rpc_bcast(se_rpc_mask mask, uint32_t v) {
  __nvvm_bar_warp_sync(mask);
  return (uint32_t)__nvvm_shfl_sync_idx_i32(mask, (int)v, (int)se_rpc_first(mask), 31);
}
static __device__ inline void se_rpc_sync(se_rpc_mask mask) { __nvvm_bar_warp_sync(mask); }
static __device__ inline void se_rpc_fence_sys(void) { __nvvm_membar_sys(); }
static __device__ inline void se_rpc_fence_dev(void) { __nvvm_membar_gl(); }
static __device__ inline void se_rpc_sleep(void) { __nvvm_nanosleep(64); }
#endif

typedef struct {
  uint32_t index;
  uint32_t out;
  se_rpc_mask mask;
  int receive;
  int owns;
} se_rpc_port;

static __device__ inline uint32_t se_rpc_load(uint32_t *p) {
  return __scoped_atomic_load_n(p, __ATOMIC_RELAXED, __MEMORY_SCOPE_SYSTEM);
}
static __device__ inline void se_rpc_wait(se_rpc_port *p, uint32_t in) {
  se_rpc_client *c = &se_rpc_client_storage;
  while (in != p->out) {
    se_rpc_sleep();
    in = se_rpc_load(&c->inbox[p->index]);
  }
  se_rpc_fence_sys();
}
static __device__ inline void se_rpc_flip(se_rpc_port *p) {
  se_rpc_client *c = &se_rpc_client_storage;
  se_rpc_sync(p->mask);
  se_rpc_fence_sys();
  p->out ^= 1u;
  if (se_rpc_lane() == se_rpc_first(p->mask))
    __scoped_atomic_store_n(&c->outbox[p->index], p->out, __ATOMIC_RELAXED, __MEMORY_SCOPE_SYSTEM);
  p->owns = 0;
}

/* Opens a free port for `opcode` (waits while all are busy). */
static __device__ inline se_rpc_port se_rpc_open(uint32_t opcode) {
  se_rpc_client *c = &se_rpc_client_storage;
  se_rpc_mask mask = se_rpc_active();
  uint32_t first = se_rpc_first(mask);
  for (uint32_t index = 0;; index = (index + 1) % c->port_count) {
    uint32_t bit = 1u << (index % 32);
    uint32_t before = 0;
    if (se_rpc_lane() == first)
      before = __scoped_atomic_fetch_or(&c->lock[index / 32], bit, __ATOMIC_RELAXED, __MEMORY_SCOPE_DEVICE);
    if (se_rpc_bcast(mask, before) & bit)
      continue;
    se_rpc_fence_dev();
    uint32_t in = se_rpc_bcast(mask, se_rpc_load(&c->inbox[index]));
    uint32_t out = se_rpc_bcast(mask, se_rpc_load(&c->outbox[index]));
    if (in != out) {
      se_rpc_fence_dev();
      if (se_rpc_lane() == first)
        __scoped_atomic_fetch_and(&c->lock[index / 32], ~bit, __ATOMIC_RELAXED, __MEMORY_SCOPE_DEVICE);
      continue;
    }
    se_rpc_fence_sys();
    if (se_rpc_lane() == first) {
      c->header[index].opcode = opcode;
      c->header[index].mask = mask;
    }
    se_rpc_sync(mask);
    se_rpc_port p = {index, out, mask, 0, 1};
    return p;
  }
}

static __device__ inline void se_rpc_send(se_rpc_port *p, const uint64_t data[8]) {
  se_rpc_client *c = &se_rpc_client_storage;
  se_rpc_wait(p, p->owns ? p->out : se_rpc_load(&c->inbox[p->index]));
  se_rpc_buffer *b = &c->packet[p->index * SE_RPC_LANES + se_rpc_lane()];
  for (int w = 0; w < 8; ++w)
    b->data[w] = data[w];
  se_rpc_flip(p);
  p->receive = 0;
}

static __device__ inline void se_rpc_recv(se_rpc_port *p, uint64_t data[8]) {
  se_rpc_client *c = &se_rpc_client_storage;
  if (p->receive)
    se_rpc_flip(p);
  se_rpc_wait(p, se_rpc_load(&c->inbox[p->index]));
  se_rpc_buffer *b = &c->packet[p->index * SE_RPC_LANES + se_rpc_lane()];
  for (int w = 0; w < 8; ++w)
    data[w] = b->data[w];
  p->receive = 1;
  p->owns = 1;
}

/* The client never flips on close; it only releases its lock. */
static __device__ inline void se_rpc_close(se_rpc_port *p) {
  se_rpc_client *c = &se_rpc_client_storage;
  se_rpc_sync(p->mask);
  se_rpc_fence_dev();
  if (se_rpc_lane() == se_rpc_first(p->mask))
    __scoped_atomic_fetch_and(&c->lock[p->index / 32], ~(1u << (p->index % 32)), __ATOMIC_RELAXED,
                              __MEMORY_SCOPE_DEVICE);
}

/* Streams `size` bytes of each lane: the length and 56 bytes, then 64-byte chunks. */
static __device__ inline void se_rpc_send_n(se_rpc_port *p, const void *src, uint64_t size) {
  const unsigned char *s = (const unsigned char *)src;
  uint64_t d[8];
  unsigned char *bytes = (unsigned char *)d;
  d[0] = size;
  for (uint64_t i = 0; i < 56; ++i)
    bytes[8 + i] = i < size ? s[i] : 0;
  se_rpc_send(p, d);
  for (uint64_t at = 56; se_rpc_ballot(p->mask, at < size); at += 64) {
    for (uint64_t i = 0; i < 64; ++i)
      bytes[i] = at + i < size ? s[at + i] : 0;
    se_rpc_send(p, d);
  }
}

/* Receives a stream into `dst` (at most `cap` bytes kept); returns the sent length. */
static __device__ inline uint64_t se_rpc_recv_n(se_rpc_port *p, void *dst, uint64_t cap) {
  unsigned char *o = (unsigned char *)dst;
  uint64_t d[8];
  const unsigned char *bytes = (const unsigned char *)d;
  se_rpc_recv(p, d);
  uint64_t size = d[0];
  for (uint64_t i = 0; i < 56 && i < size; ++i)
    if (i < cap) o[i] = bytes[8 + i];
  for (uint64_t at = 56; se_rpc_ballot(p->mask, at < size); at += 64) {
    se_rpc_recv(p, d);
    for (uint64_t i = 0; i < 64 && at + i < size; ++i)
      if (at + i < cap) o[at + i] = bytes[i];
  }
  return size;
}

static __device__ inline uint64_t se_rpc_strlen(const char *s) {
  uint64_t n = 0;
  while (s && s[n])
    ++n;
  return n;
}

/* puts(): `s` and a newline on the executor's stdout; returns the bytes written. */
static __device__ inline uint64_t se_rpc_puts(const char *s) {
  se_rpc_port p = se_rpc_open(SE_RPC_WRITE_TO_STDOUT_NEWLINE);
  uint64_t d[8];
  se_rpc_send_n(&p, s, se_rpc_strlen(s));
  se_rpc_recv(&p, d);
  se_rpc_close(&p);
  return d[0];
}

/* printf with an argument buffer laid out as NVPTX varargs (each argument aligned to its size;
 * %s takes a device pointer). Returns the printf result. */
static __device__ inline int se_rpc_printf(const char *fmt, const void *args, uint64_t args_size) {
  se_rpc_port p = se_rpc_open(SE_RPC_PRINTF_TO_STDOUT);
  uint64_t d[8];
  se_rpc_send_n(&p, fmt, se_rpc_strlen(fmt) + 1);
  se_rpc_recv(&p, d);
  se_rpc_send_n(&p, args, d[0] < args_size ? d[0] : args_size);
  for (;;) {
    se_rpc_recv(&p, d);
    if (!se_rpc_ballot(p.mask, d[1] != 0))
      break;
    const char *s = (const char *)d[1];
    se_rpc_send_n(&p, s, s ? se_rpc_strlen(s) + 1 : 0);
  }
  se_rpc_close(&p);
  return (int)d[0];
}

#endif /* STREAMEXEC_RPC_H */
