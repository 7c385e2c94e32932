/* A C program on the CUDA driver API, as an application written against NVIDIA's cuda.h would
 * be: built by tests/c_client.rs with the system C compiler, linked with -lcuda, run on
 * the CPU libcuda (LD_LIBRARY_PATH). There is no cuda.h here, so the few declarations it needs
 * follow, with CUDA 12's ABI and its `_v2` names (cuda.h maps the plain names the same way).
 *
 * It queries the device, loads the PTX below, runs saxpy twice (parameters through
 * kernelParams, then packed into one `extra` buffer) across the legacy stream and a
 * non-blocking stream ordered by an event, times the second launch, runs a host function, and
 * checks every element against a double-precision reference. Exit status 0 and the line
 * `driver_api: OK` mean success; anything else prints what failed. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- The declarations this program uses (cuda.h, CUDA 12) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef void (*CUhostFn)(void *userData);

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_READY 600
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define CU_DEVICE_ATTRIBUTE_WARP_SIZE 10
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DEFAULT 0x0
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

#define cuDeviceTotalMem cuDeviceTotalMem_v2
#define cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease_v2
#define cuMemAlloc cuMemAlloc_v2
#define cuMemFree cuMemFree_v2
#define cuMemcpyHtoD cuMemcpyHtoD_v2
#define cuMemcpyDtoH cuMemcpyDtoH_v2
#define cuMemsetD32 cuMemsetD32_v2
#define cuStreamDestroy cuStreamDestroy_v2
#define cuEventDestroy cuEventDestroy_v2

CUresult cuInit(unsigned int Flags);
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxGetDevice(CUdevice *device);
CUresult cuCtxSynchronize(void);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUresult cuFuncGetAttribute(int *pi, int attrib, CUfunction hfunc);
CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree(CUdeviceptr dptr);
CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
CUresult cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N);
CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
CUresult cuStreamDestroy(CUstream hStream);
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
CUresult cuEventDestroy(CUevent hEvent);
CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
CUresult cuEventSynchronize(CUevent hEvent);
CUresult cuEventQuery(CUevent hEvent);
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra);
CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData);
CUresult cuGetErrorName(CUresult error, const char **pStr);
CUresult cuGetErrorString(CUresult error, const char **pStr);

/* ---- The kernel: out[i] = a * x[i] + y[i], i < n. Parameters (a, x, y, out, n) sit at
 * offsets 0, 8, 16, 24, 32: 36 bytes, 4 of padding after `a` and none at the end. ---- */
static const char PTX[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry saxpy(\n"
    "\t.param .f32 saxpy_param_0,\n"
    "\t.param .u64 saxpy_param_1,\n"
    "\t.param .u64 saxpy_param_2,\n"
    "\t.param .u64 saxpy_param_3,\n"
    "\t.param .u32 saxpy_param_4\n"
    ")\n"
    "{\n"
    "\t.reg .pred %p<2>;\n"
    "\t.reg .f32 %f<5>;\n"
    "\t.reg .b32 %r<6>;\n"
    "\t.reg .b64 %rd<11>;\n"
    "\n"
    "\tld.param.f32 %f1, [saxpy_param_0];\n"
    "\tld.param.u64 %rd1, [saxpy_param_1];\n"
    "\tld.param.u64 %rd2, [saxpy_param_2];\n"
    "\tld.param.u64 %rd3, [saxpy_param_3];\n"
    "\tld.param.u32 %r2, [saxpy_param_4];\n"
    "\tmov.u32 %r3, %ctaid.x;\n"
    "\tmov.u32 %r4, %ntid.x;\n"
    "\tmov.u32 %r5, %tid.x;\n"
    "\tmad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "\tsetp.ge.u32 %p1, %r1, %r2;\n"
    "\t@%p1 bra $L__BB0_2;\n"
    "\tcvta.to.global.u64 %rd4, %rd1;\n"
    "\tmul.wide.u32 %rd5, %r1, 4;\n"
    "\tadd.s64 %rd6, %rd4, %rd5;\n"
    "\tld.global.f32 %f2, [%rd6];\n"
    "\tcvta.to.global.u64 %rd7, %rd2;\n"
    "\tadd.s64 %rd8, %rd7, %rd5;\n"
    "\tld.global.f32 %f3, [%rd8];\n"
    "\tfma.rn.f32 %f4, %f2, %f1, %f3;\n"
    "\tcvta.to.global.u64 %rd9, %rd3;\n"
    "\tadd.s64 %rd10, %rd9, %rd5;\n"
    "\tst.global.f32 [%rd10], %f4;\n"
    "$L__BB0_2:\n"
    "\tret;\n"
    "}\n";

static void check(CUresult r, const char *call, int line) {
    if (r != CUDA_SUCCESS) {
        const char *name = "?", *text = "?";
        cuGetErrorName(r, &name);
        cuGetErrorString(r, &text);
        fprintf(stderr, "driver_api.c:%d: %s failed: %d %s (%s)\n", line, call, r, name, text);
        exit(1);
    }
}
#define CHECK(call) check((call), #call, __LINE__)

static void fail(const char *what) {
    fprintf(stderr, "driver_api: %s\n", what);
    exit(1);
}

/* xorshift64*, seeded from STREAMEXEC_TEST_SEED (the Rust test sets it) or the clock. */
static uint64_t rng_state;
static uint64_t next_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}
static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(next_u64() >> 11) / 9007199254740992.0);
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Host functions: one sets a flag, the other holds its stream until a flag is set. */
static void set_flag(void *user) { atomic_store((atomic_int *)user, 1); }
static void hold_until_open(void *user) {
    while (!atomic_load((atomic_int *)user)) sleep_ms(1);
}

/* got[i] must be a * x[i] + y[i] (computed in double) within a few float ulps; NaN fails. */
static void verify(const char *what, const float *got, float a, const float *x, const float *y,
                   unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        double want = (double)a * x[i] + y[i];
        double tol = 4.0 * 1.1920929e-7 * (fabs((double)a * x[i]) + fabs((double)y[i])) + 1e-30;
        if (!(fabs((double)got[i] - want) <= tol)) {
            fprintf(stderr, "driver_api: %s: element %u is %.9g, the reference says %.9g\n", what,
                    i, (double)got[i], want);
            exit(1);
        }
    }
}

int main(void) {
    const char *seed_text = getenv("STREAMEXEC_TEST_SEED");
    rng_state = seed_text ? strtoull(seed_text, NULL, 10) : (uint64_t)time(NULL);
    if (rng_state == 0) rng_state = 1;
    printf("driver_api: seed %llu\n", (unsigned long long)rng_state);

    /* Device queries. */
    int version = 0, count = 0;
    CHECK(cuDriverGetVersion(&version));
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&count));
    if (version < 12000) fail("cuDriverGetVersion reports less than CUDA 12.0");
    if (count < 1) fail("no device");
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    char name[256];
    CHECK(cuDeviceGetName(name, (int)sizeof name, dev));
    int warp = 0, major = 0, minor = 0, max_threads = 0, sms = 0;
    CHECK(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev));
    CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CHECK(cuDeviceGetAttribute(&max_threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    size_t total = 0;
    CHECK(cuDeviceTotalMem(&total, dev));
    printf("driver_api: %d device(s); device 0: %s, sm_%d%d, %d SMs, %zu bytes\n", count, name,
           major, minor, sms, total);
    if (warp != 32) fail("warp size is not 32");
    if (max_threads < 256) fail("fewer than 256 threads per block");
    if (sms < 1 || total == 0) fail("no multiprocessors or no memory");
    if (strncmp(name, "streamexec", 10) == 0) {
        /* The CPU libcuda reports 7.0 unless STREAMEXEC_CUDA_CC says otherwise. */
        int want_major = 7, want_minor = 0;
        const char *cc = getenv("STREAMEXEC_CUDA_CC");
        if (cc && sscanf(cc, "%d.%d", &want_major, &want_minor) != 2) fail("bad STREAMEXEC_CUDA_CC");
        if (major != want_major || minor != want_minor) fail("unexpected compute capability");
    } else if (major < 7) {
        fail("the PTX targets sm_70");
    }

    /* The primary context, current on this thread. */
    CUcontext ctx, cur = NULL;
    CUdevice ctx_dev = -1;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuCtxGetCurrent(&cur));
    CHECK(cuCtxGetDevice(&ctx_dev));
    if (cur != ctx || ctx_dev != dev) fail("the primary context is not current");

    /* The module and its function; a missing name is CUDA_ERROR_NOT_FOUND. */
    CUmodule mod;
    CUfunction saxpy, missing;
    CHECK(cuModuleLoadData(&mod, PTX));
    CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
    CUresult r = cuModuleGetFunction(&missing, mod, "no_such_kernel");
    const char *err_name = NULL;
    CHECK(cuGetErrorName(r, &err_name));
    if (r != CUDA_ERROR_NOT_FOUND || strcmp(err_name, "CUDA_ERROR_NOT_FOUND") != 0)
        fail("looking up a missing kernel is not CUDA_ERROR_NOT_FOUND");
    int fn_threads = 0;
    CHECK(cuFuncGetAttribute(&fn_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, saxpy));
    if (fn_threads < 256) fail("saxpy allows fewer than 256 threads per block");

    /* Random inputs; n is not a multiple of the block size. */
    unsigned n = 1000 + (unsigned)(next_u64() % 3000);
    size_t bytes = n * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes), *out1 = malloc(bytes), *out2 = malloc(bytes);
    if (!x || !y || !out1 || !out2) fail("out of host memory");
    for (unsigned i = 0; i < n; i++) {
        x[i] = uniform(-100.0f, 100.0f);
        y[i] = uniform(-100.0f, 100.0f);
    }
    float a1 = uniform(-4.0f, 4.0f), a2 = uniform(-4.0f, 4.0f);

    CUdeviceptr dx, dy, d1, d2;
    CHECK(cuMemAlloc(&dx, bytes));
    CHECK(cuMemAlloc(&dy, bytes));
    CHECK(cuMemAlloc(&d1, bytes));
    CHECK(cuMemAlloc(&d2, bytes));
    CHECK(cuMemcpyHtoD(dx, x, bytes));
    CHECK(cuMemcpyHtoD(dy, y, bytes));
    /* Outputs start as NaN, so an element no launch wrote fails the check. */
    CHECK(cuMemsetD32(d1, 0x7FBADBADu, n));
    CHECK(cuMemsetD32(d2, 0x7FBADBADu, n));

    unsigned block = 128, grid = (n + block - 1) / block;

    /* The legacy stream is held by a host function until `gate` opens, so that the order
     * below rests on cuStreamWaitEvent alone, not on timing. */
    atomic_int gate = 0, flag = 0;
    CHECK(cuLaunchHostFunc(NULL, hold_until_open, &gate));

    /* Launch 1, on the legacy stream, parameters through kernelParams: out1 = a1 * x + y. */
    void *params[] = {&a1, &dx, &dy, &d1, &n};
    CHECK(cuLaunchKernel(saxpy, grid, 1, 1, block, 1, 1, 0, NULL, params, NULL));

    /* A non-blocking stream (no implicit order with the legacy stream) waits for launch 1
     * through an event, then launch 2, parameters packed in `extra`: out2 = a2 * out1 + y. */
    CUstream s;
    CUevent ready, start, stop;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    CHECK(cuEventRecord(ready, NULL));
    CHECK(cuStreamWaitEvent(s, ready, 0));
    CHECK(cuEventRecord(start, s));
    unsigned char buf[36];
    memset(buf, 0xFF, sizeof buf);
    memcpy(buf + 0, &a2, sizeof a2);
    memcpy(buf + 8, &d1, sizeof d1);
    memcpy(buf + 16, &dy, sizeof dy);
    memcpy(buf + 24, &d2, sizeof d2);
    memcpy(buf + 32, &n, sizeof n);
    size_t buf_size = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &buf_size,
                     CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel(saxpy, grid, 1, 1, block, 1, 1, 0, s, NULL, extra));
    CHECK(cuEventRecord(stop, s));
    CHECK(cuLaunchHostFunc(s, set_flag, &flag));

    /* While the gate is closed nothing on `s` past the wait may run. */
    for (int i = 0; i < 100; i++) {
        if (atomic_load(&flag)) fail("stream s ran past cuStreamWaitEvent before its event");
        sleep_ms(1);
    }
    if (cuEventQuery(stop) != CUDA_ERROR_NOT_READY)
        fail("cuEventQuery is not CUDA_ERROR_NOT_READY for work still waiting");
    atomic_store(&gate, 1);

    CHECK(cuEventSynchronize(stop));
    CHECK(cuEventQuery(stop));
    float ms = -1.0f;
    CHECK(cuEventElapsedTime(&ms, start, stop));
    if (!(ms >= 0.0f) || isinf(ms)) fail("cuEventElapsedTime gave no time");
    CHECK(cuStreamSynchronize(s));
    if (atomic_load(&flag) != 1)
        fail("the host function did not run before cuStreamSynchronize returned");
    printf("driver_api: launch 2 took %.3f ms\n", (double)ms);

    /* Results; the host buffers start poisoned too. */
    memset(out1, 0xFF, bytes);
    memset(out2, 0xFF, bytes);
    CHECK(cuMemcpyDtoH(out1, d1, bytes));
    CHECK(cuMemcpyDtoH(out2, d2, bytes));
    verify("launch 1 (kernelParams)", out1, a1, x, y, n);
    verify("launch 2 (extra, after the event)", out2, a2, out1, y, n);

    /* Teardown. */
    CHECK(cuCtxSynchronize());
    CHECK(cuEventDestroy(ready));
    CHECK(cuEventDestroy(start));
    CHECK(cuEventDestroy(stop));
    CHECK(cuStreamDestroy(s));
    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dy));
    CHECK(cuMemFree(d1));
    CHECK(cuMemFree(d2));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    free(x);
    free(y);
    free(out1);
    free(out2);
    printf("driver_api: %u elements checked\ndriver_api: OK\n", n);
    return 0;
}
