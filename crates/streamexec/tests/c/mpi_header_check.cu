// Compile check of include/streamexec_mpi.h (and streamexec_emissary.h under it) for NVPTX and,
// with -x hip, AMDGPU (scripts/test.sh runs both with clang-19): every stub called once.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#if !defined(__AMDGPU__)
#include <__clang_cuda_builtin_vars.h>
#endif
#include "streamexec_mpi.h"

__global__ void every_stub(int *buf, float *data, int *out) {
  MPI_Status st;
  MPI_Request rq = MPI_REQUEST_NULL;
  int rank = -1, size = -1;
  int rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank) | MPI_Comm_size(MPI_COMM_WORLD, &size);
  rc |= MPI_Send(buf, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
  rc |= MPI_Recv(buf, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  rc |= MPI_Isend(buf, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &rq);
  rc |= MPI_Wait(&rq, MPI_STATUS_IGNORE);
  rc |= MPI_Irecv(buf, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &rq);
  rc |= MPI_Wait(&rq, &st);
  rc |= MPI_Allreduce(MPI_IN_PLACE, data, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  rc |= MPI_Reduce(data, rank == 0 ? data : 0, 4, MPI_FLOAT, MPI_MAX, 0, MPI_COMM_WORLD);
  rc |= MPI_Bcast(data, 4, MPI_FLOAT, 0, MPI_COMM_WORLD);
  rc |= MPI_Barrier(MPI_COMM_WORLD);
  uint64_t reply[8];
  se_emissary_arg a[3] = {se_emissary_f64(2.5), se_emissary_hptr(out), se_emissary_i64(-1)};
  rc |= (int)se_emissary_call(42, 1, 3, a, reply);
  out[0] = rc + rank + size + st.MPI_SOURCE + (int)rq;
}
