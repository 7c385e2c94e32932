// MPI from CUDA C kernels through Emissary calls (include/streamexec_mpi.h, issue 14): each MPI
// call is one OFFLOAD_EMISSARY port round trip per warp to the executor's RPC server, whose
// dispatcher runs the real MPI function on the host (tests/emissary_stubs/ serves them with a
// mock instead). The module defines `__llvm_rpc_client`, so its launches are RPC launches.
#include "prelude.h"
#include "../include/streamexec_mpi.h"

// The seed example: rank 0's thread i sends buf[i] = -i to rank 1 with tag i; rank 1's thread i
// receives it into buf[i] and counts a wrong value or a failed call in *errors.
extern "C" __global__ void mpi_send_recv(int *buf, int *errors, int n) {
    int rank = -1;
    int rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (rc != MPI_SUCCESS) {
        atomicAdd(errors, 1);
        return;
    }
    if (rank == 0) {
        buf[i] = -i;
        if (MPI_Send(&buf[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD) != MPI_SUCCESS)
            atomicAdd(errors, 1);
    } else if (rank == 1) {
        rc = MPI_Recv(&buf[i], 1, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || buf[i] != -i)
            atomicAdd(errors, 1);
    }
}

// One block: every rank fills data[i] = rank * 1000 + i, thread 0 sums them over all ranks into
// sum[] (MPI_Allreduce; a collective is called by one thread, in the same order on every rank),
// then every thread checks its elements against the sum over ranks and counts the wrong ones
// (and a failed call) in *errors.
extern "C" __global__ void mpi_allreduce(int *data, int *sum, int *errors, int n) {
    __shared__ int rank, size, rc;
    if (threadIdx.x == 0) {
        rank = -1;
        size = 0;
        rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank) | MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        data[i] = rank * 1000 + i;
    __syncthreads();
    if (threadIdx.x == 0)
        rc |= MPI_Allreduce(data, sum, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    __syncthreads();
    int bad = threadIdx.x == 0 && rc != MPI_SUCCESS;
    // sum over r < size of (r * 1000 + i)
    int base = 1000 * (size * (size - 1) / 2);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        bad += sum[i] != base + size * i;
    if (bad)
        atomicAdd(errors, bad);
}

// Every stub once per thread t (lane t % 32), with arguments that name t, and what each returned
// in out[32 t ...]: return codes, out-parameters (which start at -7 / 0x77 so that an unwritten
// one shows), status fields. See tests/emissary_stubs/ for the layout.
#define SE_OUT_STRIDE 32
extern "C" __global__ void mpi_every_stub(int *buf, int *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int *o = out + SE_OUT_STRIDE * t;
    int *b = buf + t;
    int rank = -7, size = -7;
    MPI_Status st = {-7, -7, -7, -7};
    MPI_Request rq = 0x7700000077ull, rq2 = 0x7700000077ull;
    o[0] = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    o[1] = rank;
    o[2] = MPI_Comm_size(MPI_COMM_WORLD, &size);
    o[3] = size;
    o[4] = MPI_Send(b, t + 1, MPI_INT, t + 2, 100 + t, MPI_COMM_WORLD);
    o[5] = MPI_Recv(b, 2 * t + 1, MPI_FLOAT, MPI_ANY_SOURCE, 200 + t, MPI_COMM_WORLD, &st);
    o[6] = st.MPI_SOURCE;
    o[7] = st.MPI_TAG;
    o[8] = st.MPI_ERROR;
    o[9] = st.count_bytes;
    o[10] = MPI_Isend(b, 3, MPI_DOUBLE, 1, 300 + t, MPI_COMM_WORLD, &rq);
    o[11] = (int)rq;
    o[12] = (int)(rq >> 32);
    st.MPI_SOURCE = st.MPI_TAG = st.MPI_ERROR = st.count_bytes = -7;
    o[13] = MPI_Wait(&rq, &st);
    o[14] = (int)rq;
    o[15] = st.MPI_SOURCE;
    o[16] = st.MPI_TAG;
    o[17] = st.MPI_ERROR;
    o[18] = st.count_bytes;
    o[19] = MPI_Irecv(b, 4, MPI_LONG, MPI_ANY_SOURCE, 400 + t, MPI_COMM_WORLD, &rq2);
    o[20] = (int)rq2;
    o[21] = (int)(rq2 >> 32);
    o[22] = MPI_Wait(&rq2, MPI_STATUS_IGNORE);
    o[23] = (int)rq2;
    o[24] = MPI_Allreduce(MPI_IN_PLACE, b, 5, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    o[25] = MPI_Reduce(b, (t & 1) ? 0 : b, 6, MPI_UNSIGNED, MPI_MIN, t % 3, MPI_COMM_WORLD);
    o[26] = MPI_Bcast(b, 7, MPI_CHAR, t % 2, MPI_COMM_WORLD);
    o[27] = MPI_Barrier(MPI_COMM_WORLD);
}

// Only the odd lanes of each warp call (divergent): one round trip per warp with just them.
extern "C" __global__ void mpi_odd_lanes(int *buf, int *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = -7;
    if (threadIdx.x & 1)
        out[t] = MPI_Send(buf + t, 1, MPI_INT, 0, t, MPI_COMM_WORLD);
}

// se_emissary_call directly, for user API 42 + t % 2, function t + 1, with t % 8 records
// (buffers of 16..128 bytes: 1 to 3 packets, different per lane): record k is, by k % 4, a
// negative i32, a double, a host pointer (hbuf + k) or a 2-byte value. The reply's 8 words land
// in out[8 t ...].
extern "C" __global__ void emissary_generic(const int *hbuf, unsigned long long *out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t argc = (uint32_t)(t % 8);
    se_emissary_arg a[8];
    for (uint32_t k = 0; k < argc; ++k) {
        switch (k % 4) {
        case 0: a[k] = se_emissary_i32(-(t * 8 + (int)k)); break;
        case 1: a[k] = se_emissary_f64(t + 0.25 * k); break;
        case 2: a[k] = se_emissary_hptr(hbuf + k); break;
        default: a[k] = se_emissary_value(2, (uint64_t)(0xBE00u + (uint32_t)t)); break;
        }
    }
    uint64_t reply[8];
    se_emissary_call(42u + (uint32_t)(t % 2), (uint32_t)t + 1u, argc, a, reply);
    for (int w = 0; w < 8; ++w)
        out[8 * t + w] = reply[w];
}
