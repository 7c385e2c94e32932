// MPI from OpenCL C kernels through Emissary calls: the kernels of kernels/emissary_mpi.cu in
// OpenCL C, loaded with MultiKernelLoaderSpec::with_mpi (which puts the RPC client, the
// Emissary client and the MPI stubs in front of this text). Every kernel takes the executor's
// RPC block first (ExecutorRpc::block()); buffers handed to MPI are unified (SVM) memory.

// The seed example: rank 0's work-item i sends buf[i] = -i to rank 1 with tag i; rank 1's
// work-item i receives it into buf[i] and counts a wrong value or a failed call in *errors.
__kernel void mpi_send_recv(__global void *rpc, __global int *buf, __global int *errors, int n) {
    int rank = -1;
    int rc = MPI_Comm_rank(rpc, MPI_COMM_WORLD, &rank);
    int i = get_global_id(0);
    if (i >= n)
        return;
    if (rc != MPI_SUCCESS) {
        atomic_inc(errors);
        return;
    }
    if (rank == 0) {
        buf[i] = -i;
        if (MPI_Send(rpc, &buf[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD) != MPI_SUCCESS)
            atomic_inc(errors);
    } else if (rank == 1) {
        rc = MPI_Recv(rpc, &buf[i], 1, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || buf[i] != -i)
            atomic_inc(errors);
    }
}

// One work-group: data[i] = rank * 1000 + i, work-item 0 sums them over all ranks into sum[]
// (MPI_Allreduce, one caller per rank), then every work-item checks its elements against the
// sum over ranks and counts the wrong ones (and a failed call) in *errors.
__kernel void mpi_allreduce(__global void *rpc, __global int *data, __global int *sum,
                            __global int *errors, int n) {
    __local int rank, size, rc;
    int lid = get_local_id(0), threads = get_local_size(0);
    if (lid == 0) {
        /* The stubs' out-parameters are private pointers (OpenCL C 1.2 has no generic ones). */
        int r = -1, s = 0;
        rc = MPI_Comm_rank(rpc, MPI_COMM_WORLD, &r) | MPI_Comm_size(rpc, MPI_COMM_WORLD, &s);
        rank = r;
        size = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    for (int i = lid; i < n; i += threads)
        data[i] = rank * 1000 + i;
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (lid == 0)
        rc |= MPI_Allreduce(rpc, data, sum, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    int bad = lid == 0 && rc != MPI_SUCCESS;
    int base = 1000 * (size * (size - 1) / 2);
    for (int i = lid; i < n; i += threads)
        bad += sum[i] != base + size * i;
    if (bad)
        atomic_add(errors, bad);
}

// Every stub once per work-item t, as mpi_every_stub of kernels/emissary_mpi.cu.
#define SE_OUT_STRIDE 32
__kernel void mpi_every_stub(__global void *rpc, __global int *buf, __global int *out) {
    int t = get_global_id(0);
    __global int *o = out + SE_OUT_STRIDE * t;
    __global int *b = buf + t;
    int rank = -7, size = -7;
    MPI_Status st = {-7, -7, -7, -7};
    MPI_Request rq = 0x7700000077ul, rq2 = 0x7700000077ul;
    o[0] = MPI_Comm_rank(rpc, MPI_COMM_WORLD, &rank);
    o[1] = rank;
    o[2] = MPI_Comm_size(rpc, MPI_COMM_WORLD, &size);
    o[3] = size;
    o[4] = MPI_Send(rpc, b, t + 1, MPI_INT, t + 2, 100 + t, MPI_COMM_WORLD);
    o[5] = MPI_Recv(rpc, b, 2 * t + 1, MPI_FLOAT, MPI_ANY_SOURCE, 200 + t, MPI_COMM_WORLD, &st);
    o[6] = st.MPI_SOURCE;
    o[7] = st.MPI_TAG;
    o[8] = st.MPI_ERROR;
    o[9] = st.count_bytes;
    o[10] = MPI_Isend(rpc, b, 3, MPI_DOUBLE, 1, 300 + t, MPI_COMM_WORLD, &rq);
    o[11] = (int)rq;
    o[12] = (int)(rq >> 32);
    st.MPI_SOURCE = st.MPI_TAG = st.MPI_ERROR = st.count_bytes = -7;
    o[13] = MPI_Wait(rpc, &rq, &st);
    o[14] = (int)rq;
    o[15] = st.MPI_SOURCE;
    o[16] = st.MPI_TAG;
    o[17] = st.MPI_ERROR;
    o[18] = st.count_bytes;
    o[19] = MPI_Irecv(rpc, b, 4, MPI_LONG, MPI_ANY_SOURCE, 400 + t, MPI_COMM_WORLD, &rq2);
    o[20] = (int)rq2;
    o[21] = (int)(rq2 >> 32);
    o[22] = MPI_Wait(rpc, &rq2, MPI_STATUS_IGNORE);
    o[23] = (int)rq2;
    o[24] = MPI_Allreduce(rpc, MPI_IN_PLACE, b, 5, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    o[25] = MPI_Reduce(rpc, b, (t & 1) ? (__global int *)0 : b, 6, MPI_UNSIGNED, MPI_MIN, t % 3,
                       MPI_COMM_WORLD);
    o[26] = MPI_Bcast(rpc, b, 7, MPI_CHAR, t % 2, MPI_COMM_WORLD);
    o[27] = MPI_Barrier(rpc, MPI_COMM_WORLD);
}

// Only the odd work-items call.
__kernel void mpi_odd_lanes(__global void *rpc, __global int *buf, __global int *out) {
    int t = get_global_id(0);
    out[t] = -7;
    if (t & 1)
        out[t] = MPI_Send(rpc, buf + t, 1, MPI_INT, 0, t, MPI_COMM_WORLD);
}

// se_emissary_call directly, as emissary_generic of kernels/emissary_mpi.cu (a float's bits
// where the CUDA kernel sends a double: OpenCL devices need not have fp64).
__kernel void emissary_generic(__global void *rpc, __global const int *hbuf, __global ulong *out) {
    int t = get_global_id(0);
    uint argc = (uint)(t % 8);
    se_emissary_arg a[8];
    for (uint k = 0; k < argc; ++k) {
        switch (k % 4) {
        case 0: a[k] = se_emissary_i32(-(t * 8 + (int)k)); break;
        case 1: a[k] = se_emissary_f32(t + 0.25f * k); break;
        case 2: a[k] = se_emissary_hptr_global(hbuf + k); break;
        default: a[k] = se_emissary_value(2, (ulong)(0xBE00u + (uint)t)); break;
        }
    }
    ulong reply[8];
    se_emissary_call(rpc, 42u + (uint)(t % 2), (uint)t + 1u, argc, a, reply);
    for (int w = 0; w < 8; ++w)
        out[8 * t + w] = reply[w];
}
