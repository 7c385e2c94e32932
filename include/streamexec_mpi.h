/* streamexec_mpi.h: MPI for CUDA (NVPTX) and HIP (AMDGPU) kernels, as Emissary calls (API 3) to
 * the host, which runs the real MPI function (streamexec's MPI device ABI, issue 14). The handles
 * are streamexec's own small integers; the host maps them to its MPI's.
 *
 * Every lane may call with its own arguments; the lanes that call together share one port round
 * trip, and the host runs their calls in lane order. Point-to-point calls may come from many
 * lanes (each lane its own message); collectives must be called by one thread per rank, in the
 * same order on every rank. Buffers are device pointers (kernel argument memory); out-parameters
 * (status, request, rank, size) are written by the stub, so they may be local variables.
 * A call the host did not run (the reply's status is not 0) returns MPI_ERR_OTHER and leaves the
 * out-parameters alone. */
#ifndef STREAMEXEC_MPI_H
#define STREAMEXEC_MPI_H

#include "streamexec_emissary.h"

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef uint64_t MPI_Request;
typedef struct {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int count_bytes; /* bytes received */
} MPI_Status;

#define MPI_COMM_WORLD 0

#define MPI_BYTE 1
#define MPI_CHAR 2
#define MPI_INT 3
#define MPI_UNSIGNED 4
#define MPI_LONG 5 /* 8 bytes */
#define MPI_UNSIGNED_LONG 6
#define MPI_LONG_LONG 7
#define MPI_FLOAT 8
#define MPI_DOUBLE 9

#define MPI_SUM 1
#define MPI_PROD 2
#define MPI_MIN 3
#define MPI_MAX 4

#define MPI_REQUEST_NULL ((MPI_Request)0)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_ANY_SOURCE (-1)
#define MPI_ANY_TAG (-1)
#define MPI_IN_PLACE ((void *)1)
#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 16

/* Function indices within API 3. */
#define SE_MPI_SEND 1u
#define SE_MPI_RECV 2u
#define SE_MPI_ISEND 3u
#define SE_MPI_IRECV 4u
#define SE_MPI_WAIT 5u
#define SE_MPI_ALLREDUCE 6u
#define SE_MPI_REDUCE 7u
#define SE_MPI_BCAST 8u
#define SE_MPI_BARRIER 9u
#define SE_MPI_COMM_RANK 10u
#define SE_MPI_COMM_SIZE 11u

/* One MPI call: its MPI return code, or MPI_ERR_OTHER when the host did not run it. */
static __device__ inline int se_mpi_call(uint32_t function, uint32_t argc, const se_emissary_arg *args,
                                         uint64_t reply[8]) {
  if (se_emissary_call(SE_EMISSARY_API_MPI, function, argc, args, reply) != SE_EMISSARY_OK)
    return MPI_ERR_OTHER;
  return (int)(int64_t)reply[1];
}

/* Writes out values [2..5] (source, tag, error, bytes) into a status that is not ignored. */
static __device__ inline void se_mpi_set_status(MPI_Status *status, const uint64_t reply[8]) {
  if (status) {
    status->MPI_SOURCE = (int)reply[2];
    status->MPI_TAG = (int)reply[3];
    status->MPI_ERROR = (int)reply[4];
    status->count_bytes = (int)reply[5];
  }
}

/* buf, count, datatype, peer, tag, comm: the records of Send, Recv, Isend and Irecv. */
static __device__ inline int se_mpi_p2p(uint32_t function, const void *buf, int count,
                                        MPI_Datatype datatype, int peer, int tag, MPI_Comm comm,
                                        uint64_t reply[8]) {
  se_emissary_arg a[6] = {se_emissary_dptr(buf),     se_emissary_i32(count),
                          se_emissary_i32(datatype), se_emissary_i32(peer),
                          se_emissary_i32(tag),      se_emissary_i32(comm)};
  return se_mpi_call(function, 6, a, reply);
}

static __device__ inline int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
                                      int tag, MPI_Comm comm) {
  uint64_t reply[8];
  return se_mpi_p2p(SE_MPI_SEND, buf, count, datatype, dest, tag, comm, reply);
}

static __device__ inline int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source,
                                      int tag, MPI_Comm comm, MPI_Status *status) {
  uint64_t reply[8];
  int rc = se_mpi_p2p(SE_MPI_RECV, buf, count, datatype, source, tag, comm, reply);
  if (reply[0] == SE_EMISSARY_OK)
    se_mpi_set_status(status, reply);
  return rc;
}

static __device__ inline int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
                                       int tag, MPI_Comm comm, MPI_Request *request) {
  uint64_t reply[8];
  int rc = se_mpi_p2p(SE_MPI_ISEND, buf, count, datatype, dest, tag, comm, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *request = (MPI_Request)reply[2];
  return rc;
}

static __device__ inline int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source,
                                       int tag, MPI_Comm comm, MPI_Request *request) {
  uint64_t reply[8];
  int rc = se_mpi_p2p(SE_MPI_IRECV, buf, count, datatype, source, tag, comm, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *request = (MPI_Request)reply[2];
  return rc;
}

/* The request becomes MPI_REQUEST_NULL when the wait succeeded. */
static __device__ inline int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  uint64_t reply[8];
  se_emissary_arg a[1] = {se_emissary_u64(*request)};
  int rc = se_mpi_call(SE_MPI_WAIT, 1, a, reply);
  if (reply[0] == SE_EMISSARY_OK) {
    se_mpi_set_status(status, reply);
    if (rc == MPI_SUCCESS)
      *request = MPI_REQUEST_NULL;
  }
  return rc;
}

static __device__ inline int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  uint64_t reply[8];
  se_emissary_arg a[6] = {se_emissary_dptr(sendbuf),  se_emissary_dptr(recvbuf),
                          se_emissary_i32(count),     se_emissary_i32(datatype),
                          se_emissary_i32(op),        se_emissary_i32(comm)};
  return se_mpi_call(SE_MPI_ALLREDUCE, 6, a, reply);
}

static __device__ inline int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
                                        MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  uint64_t reply[8];
  se_emissary_arg a[7] = {se_emissary_dptr(sendbuf), se_emissary_dptr(recvbuf),
                          se_emissary_i32(count),    se_emissary_i32(datatype),
                          se_emissary_i32(op),       se_emissary_i32(root),
                          se_emissary_i32(comm)};
  return se_mpi_call(SE_MPI_REDUCE, 7, a, reply);
}

static __device__ inline int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
                                       MPI_Comm comm) {
  uint64_t reply[8];
  se_emissary_arg a[5] = {se_emissary_dptr(buffer), se_emissary_i32(count),
                          se_emissary_i32(datatype), se_emissary_i32(root),
                          se_emissary_i32(comm)};
  return se_mpi_call(SE_MPI_BCAST, 5, a, reply);
}

static __device__ inline int MPI_Barrier(MPI_Comm comm) {
  uint64_t reply[8];
  se_emissary_arg a[1] = {se_emissary_i32(comm)};
  return se_mpi_call(SE_MPI_BARRIER, 1, a, reply);
}

static __device__ inline int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  uint64_t reply[8];
  se_emissary_arg a[1] = {se_emissary_i32(comm)};
  int rc = se_mpi_call(SE_MPI_COMM_RANK, 1, a, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *rank = (int)reply[2];
  return rc;
}

static __device__ inline int MPI_Comm_size(MPI_Comm comm, int *size) {
  uint64_t reply[8];
  se_emissary_arg a[1] = {se_emissary_i32(comm)};
  int rc = se_mpi_call(SE_MPI_COMM_SIZE, 1, a, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *size = (int)reply[2];
  return rc;
}

#endif /* STREAMEXEC_MPI_H */
