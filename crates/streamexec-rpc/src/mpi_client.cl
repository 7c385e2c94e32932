/* MPI for OpenCL C kernels, as Emissary calls (API 3) to the host, which runs the real MPI
 * function (streamexec's MPI device ABI, issue 14). Needs client.cl and emissary_client.cl in
 * front of it: the loader puts all three there for MultiKernelLoaderSpec::with_mpi.
 *
 * The stubs take MPI's arguments after the executor's RPC block (`__global void *rpc`, passed
 * ExecutorRpc::block()), as the se_rpc_* calls do:
 *   MPI_Send(rpc, buf, count, MPI_INT, dest, tag, MPI_COMM_WORLD);
 * Buffers are __global pointers, sent as the kernel sees them: use unified (SVM) memory
 * (`allocate_unified`), whose kernel pointer is its host address. Out-parameters (status,
 * request, rank, size) are private pointers written by the stub. Collectives must be called by
 * one work-item per rank, in the same order on every rank. A call the host did not run (the
 * reply's status is not 0) returns MPI_ERR_OTHER and leaves the out-parameters alone. */

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef ulong MPI_Request;
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
#define MPI_IN_PLACE ((__global void *)1)
#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 16

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
static int se_mpi_call(__global void *rpc, uint function, uint argc, const se_emissary_arg *args,
                       ulong reply[8]) {
  if (se_emissary_call(rpc, SE_EMISSARY_API_MPI, function, argc, args, reply) != SE_EMISSARY_OK)
    return MPI_ERR_OTHER;
  return (int)(long)reply[1];
}

static void se_mpi_set_status(MPI_Status *status, const ulong reply[8]) {
  if (status) {
    status->MPI_SOURCE = (int)reply[2];
    status->MPI_TAG = (int)reply[3];
    status->MPI_ERROR = (int)reply[4];
    status->count_bytes = (int)reply[5];
  }
}

/* buf, count, datatype, peer, tag, comm: the records of Send, Recv, Isend and Irecv. */
static int se_mpi_p2p(__global void *rpc, uint function, const __global void *buf, int count,
                      MPI_Datatype datatype, int peer, int tag, MPI_Comm comm, ulong reply[8]) {
  se_emissary_arg a[6] = {se_emissary_dptr_global(buf), se_emissary_i32(count),
                          se_emissary_i32(datatype),    se_emissary_i32(peer),
                          se_emissary_i32(tag),         se_emissary_i32(comm)};
  return se_mpi_call(rpc, function, 6, a, reply);
}

int MPI_Send(__global void *rpc, const __global void *buf, int count, MPI_Datatype datatype,
             int dest, int tag, MPI_Comm comm) {
  ulong reply[8];
  return se_mpi_p2p(rpc, SE_MPI_SEND, buf, count, datatype, dest, tag, comm, reply);
}

int MPI_Recv(__global void *rpc, __global void *buf, int count, MPI_Datatype datatype,
             int source, int tag, MPI_Comm comm, MPI_Status *status) {
  ulong reply[8];
  int rc = se_mpi_p2p(rpc, SE_MPI_RECV, buf, count, datatype, source, tag, comm, reply);
  if (reply[0] == SE_EMISSARY_OK)
    se_mpi_set_status(status, reply);
  return rc;
}

int MPI_Isend(__global void *rpc, const __global void *buf, int count, MPI_Datatype datatype,
              int dest, int tag, MPI_Comm comm, MPI_Request *request) {
  ulong reply[8];
  int rc = se_mpi_p2p(rpc, SE_MPI_ISEND, buf, count, datatype, dest, tag, comm, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *request = (MPI_Request)reply[2];
  return rc;
}

int MPI_Irecv(__global void *rpc, __global void *buf, int count, MPI_Datatype datatype,
              int source, int tag, MPI_Comm comm, MPI_Request *request) {
  ulong reply[8];
  int rc = se_mpi_p2p(rpc, SE_MPI_IRECV, buf, count, datatype, source, tag, comm, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *request = (MPI_Request)reply[2];
  return rc;
}

/* The request becomes MPI_REQUEST_NULL when the wait succeeded. */
int MPI_Wait(__global void *rpc, MPI_Request *request, MPI_Status *status) {
  ulong reply[8];
  se_emissary_arg a[1] = {se_emissary_u64(*request)};
  int rc = se_mpi_call(rpc, SE_MPI_WAIT, 1, a, reply);
  if (reply[0] == SE_EMISSARY_OK) {
    se_mpi_set_status(status, reply);
    if (rc == MPI_SUCCESS)
      *request = MPI_REQUEST_NULL;
  }
  return rc;
}

int MPI_Allreduce(__global void *rpc, const __global void *sendbuf, __global void *recvbuf,
                  int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  ulong reply[8];
  se_emissary_arg a[6] = {se_emissary_dptr_global(sendbuf), se_emissary_dptr_global(recvbuf),
                          se_emissary_i32(count),            se_emissary_i32(datatype),
                          se_emissary_i32(op),               se_emissary_i32(comm)};
  return se_mpi_call(rpc, SE_MPI_ALLREDUCE, 6, a, reply);
}

int MPI_Reduce(__global void *rpc, const __global void *sendbuf, __global void *recvbuf,
               int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  ulong reply[8];
  se_emissary_arg a[7] = {se_emissary_dptr_global(sendbuf), se_emissary_dptr_global(recvbuf),
                          se_emissary_i32(count),            se_emissary_i32(datatype),
                          se_emissary_i32(op),               se_emissary_i32(root),
                          se_emissary_i32(comm)};
  return se_mpi_call(rpc, SE_MPI_REDUCE, 7, a, reply);
}

int MPI_Bcast(__global void *rpc, __global void *buffer, int count, MPI_Datatype datatype,
              int root, MPI_Comm comm) {
  ulong reply[8];
  se_emissary_arg a[5] = {se_emissary_dptr_global(buffer), se_emissary_i32(count),
                          se_emissary_i32(datatype),        se_emissary_i32(root),
                          se_emissary_i32(comm)};
  return se_mpi_call(rpc, SE_MPI_BCAST, 5, a, reply);
}

int MPI_Barrier(__global void *rpc, MPI_Comm comm) {
  ulong reply[8];
  se_emissary_arg a[1] = {se_emissary_i32(comm)};
  return se_mpi_call(rpc, SE_MPI_BARRIER, 1, a, reply);
}

int MPI_Comm_rank(__global void *rpc, MPI_Comm comm, int *rank) {
  ulong reply[8];
  se_emissary_arg a[1] = {se_emissary_i32(comm)};
  int rc = se_mpi_call(rpc, SE_MPI_COMM_RANK, 1, a, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *rank = (int)reply[2];
  return rc;
}

int MPI_Comm_size(__global void *rpc, MPI_Comm comm, int *size) {
  ulong reply[8];
  se_emissary_arg a[1] = {se_emissary_i32(comm)};
  int rc = se_mpi_call(rpc, SE_MPI_COMM_SIZE, 1, a, reply);
  if (reply[0] == SE_EMISSARY_OK)
    *size = (int)reply[2];
  return rc;
}
