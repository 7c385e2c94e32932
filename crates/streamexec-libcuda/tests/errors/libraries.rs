//! CUDA 12's libraries and kernels (`cuLibrary*`, `cuKernel*`), `cuLaunchKernelEx` and its
//! attributes, and linking PTX (`cuLink*`): what cuda-core and numba-cuda load and launch with.

use super::*;
use sys::{CUkernel, CUlaunchAttribute, CUlaunchConfig, CUlibrary};

/// `cuGetProcAddress_v2(name, 12050)`: for the CUDA 12.3+ entry points cudarc's 12.0 bindings
/// lack.
fn entry(name: &CStr) -> usize {
    let mut p = null_mut();
    ok!(cuGetProcAddress_v2(
        name.as_ptr(),
        &mut p,
        12050,
        0,
        null_mut()
    ));
    p.addr()
}

fn load_library(ptx: &str) -> CUlibrary {
    let text = CString::new(ptx).expect("no NUL in PTX");
    let mut lib = null_mut();
    ok!(cuLibraryLoadData(
        &mut lib,
        text.as_ptr().cast(),
        null_mut(),
        null_mut(),
        0,
        null_mut(),
        null_mut(),
        0
    ));
    lib
}

fn kernel(lib: CUlibrary, name: &CStr) -> CUkernel {
    let mut k = null_mut();
    ok!(cuLibraryGetKernel(&mut k, lib, name.as_ptr()));
    k
}

#[test]
fn libraries_and_kernels() {
    let Some(drv) = setup("libraries_and_kernels") else {
        return;
    };
    let base = free_memory();
    let lib = load_library(PTX);
    let k = kernel(lib, c"add_k");
    let mut k2 = null_mut();
    ok!(cuLibraryGetKernel(&mut k2, lib, c"add_k".as_ptr()));
    assert_eq!(k, k2, "one kernel handle per name");
    // A CUkernel launches where a CUfunction is taken, and is the current context's function.
    add_works(k.cast(), null_mut(), "add_k launched as a CUkernel");
    let mut f = null_mut();
    ok!(cuKernelGetFunction(&mut f, k));
    add_works(f, stream(), "add_k from cuKernelGetFunction");
    let mut m = null_mut();
    ok!(cuLibraryGetModule(&mut m, lib));
    assert_eq!(
        function(m, c"add_k"),
        f,
        "the library's module holds the same function"
    );
    expect!(CUDA_ERROR_NOT_PERMITTED, cuModuleUnload(m));
    let mut threads = 0;
    ok!(cuKernelGetAttribute(
        &mut threads,
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        k,
        0
    ));
    assert_eq!(threads, 1024);
    ok!(cuKernelSetAttribute(
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        1024,
        k,
        0
    ));
    let mut shared = 0;
    ok!(cuFuncGetAttribute(
        &mut shared,
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        f
    ));
    assert_eq!(
        shared, 1024,
        "cuKernelSetAttribute reaches the context's function"
    );
    ok!(cuKernelSetCacheConfig(
        k,
        sys::CUfunc_cache::CU_FUNC_CACHE_PREFER_L1,
        0
    ));
    expect!(
        CUDA_ERROR_INVALID_DEVICE,
        cuKernelSetCacheConfig(k, sys::CUfunc_cache::CU_FUNC_CACHE_PREFER_L1, 7)
    );
    // Globals.
    let (mut g, mut size) = (0, 0);
    ok!(cuLibraryGetGlobal(
        &mut g,
        &mut size,
        lib,
        c"__llvm_rpc_client".as_ptr()
    ));
    assert_eq!(size, 24);
    ok!(cuMemsetD8_v2(g, 0xab, 24));
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuLibraryGetGlobal(&mut g, &mut size, lib, c"nope".as_ptr())
    );
    expect!(
        CUDA_ERROR_NOT_SUPPORTED,
        cuLibraryGetManaged(&mut g, &mut size, lib, c"__llvm_rpc_client".as_ptr())
    );
    // Names, counts, parameter layout (CUDA 12.3 to 12.5 entry points, through the lookup).
    type Count = unsafe extern "C" fn(*mut c_uint, CUlibrary) -> CUresult;
    type Enumerate = unsafe extern "C" fn(*mut CUkernel, c_uint, CUlibrary) -> CUresult;
    type Name<T> = unsafe extern "C" fn(*mut *const c_char, T) -> CUresult;
    type ParamInfo = unsafe extern "C" fn(CUkernel, usize, *mut usize, *mut usize) -> CUresult;
    type GetLibrary = unsafe extern "C" fn(*mut CUlibrary, CUkernel) -> CUresult;
    // SAFETY: the addresses of those exports, whose C signatures these are.
    let (count, enumerate, kname, fname, params, get_lib) = unsafe {
        (
            std::mem::transmute::<usize, Count>(entry(c"cuLibraryGetKernelCount")),
            std::mem::transmute::<usize, Enumerate>(entry(c"cuLibraryEnumerateKernels")),
            std::mem::transmute::<usize, Name<CUkernel>>(entry(c"cuKernelGetName")),
            std::mem::transmute::<usize, Name<CUfunction>>(entry(c"cuFuncGetName")),
            std::mem::transmute::<usize, ParamInfo>(entry(c"cuKernelGetParamInfo")),
            std::mem::transmute::<usize, GetLibrary>(entry(c"cuKernelGetLibrary")),
        )
    };
    let mut n = 0;
    // SAFETY: valid out-pointers and handles, buffers of the sizes given.
    unsafe {
        assert_eq!(count(&mut n, lib), CUresult::CUDA_SUCCESS);
        assert_eq!(n, 5);
        let mut all = [null_mut(); 5];
        assert_eq!(enumerate(all.as_mut_ptr(), 5, lib), CUresult::CUDA_SUCCESS);
        assert_eq!(all[0], k, "the kernels in PTX order");
        assert_eq!(
            enumerate(all.as_mut_ptr(), 6, lib),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
        let mut s = null();
        assert_eq!(kname(&mut s, all[4]), CUresult::CUDA_SUCCESS);
        assert_eq!(CStr::from_ptr(s), c"noargs");
        assert_eq!(fname(&mut s, f), CUresult::CUDA_SUCCESS);
        assert_eq!(CStr::from_ptr(s), c"add_k");
        assert_eq!(fname(&mut s, k.cast()), CUresult::CUDA_SUCCESS);
        assert_eq!(CStr::from_ptr(s), c"add_k");
        let mut l = null_mut();
        assert_eq!(get_lib(&mut l, k), CUresult::CUDA_SUCCESS);
        assert_eq!(l, lib);
        // add_k(u64 out, u64 in, u32 k, u32 n).
        let layout: Vec<(usize, usize)> = (0..4)
            .map(|i| {
                let (mut off, mut size) = (0, 0);
                assert_eq!(params(k, i, &mut off, &mut size), CUresult::CUDA_SUCCESS);
                (off, size)
            })
            .collect();
        assert_eq!(layout, [(0, 8), (8, 8), (16, 4), (20, 4)]);
        let (mut off, mut size) = (0, 0);
        assert_eq!(
            params(k, 4, &mut off, &mut size),
            CUresult::CUDA_ERROR_INVALID_VALUE
        );
    }
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuLibraryGetKernel(&mut k2, lib, c"nope".as_ptr())
    );
    // Loaded with no context current: its module is loaded in a context on first use.
    ok!(cuCtxSetCurrent(null_mut()));
    let lazy = load_library(PTX);
    let mut f2 = null_mut();
    expect!(
        CUDA_ERROR_INVALID_CONTEXT,
        cuKernelGetFunction(&mut f2, kernel(lazy, c"add_k"))
    );
    ok!(cuCtxSetCurrent(drv.primary));
    add_works(
        kernel(lazy, c"add_k").cast(),
        null_mut(),
        "a lazily loaded library",
    );
    // A created context gets its own module and function.
    let other = created_context();
    let mut f3 = null_mut();
    ok!(cuKernelGetFunction(&mut f3, k));
    assert_ne!(f3, f);
    add_works(k.cast(), null_mut(), "add_k in a created context");
    ok!(cuCtxDestroy_v2(other));
    ok!(cuCtxSetCurrent(drv.primary));
    // Unloading: the kernels and the library's module go with it.
    ok!(cuLibraryUnload(lib));
    ok!(cuLibraryUnload(lazy));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuKernelGetFunction(&mut f2, k));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuLibraryUnload(lib));
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuModuleGetFunction(&mut f2, m, c"add_k".as_ptr())
    );
    // A binary, and bad PTX with its log.
    let mut cubin = [0u8; 64];
    cubin[..4].copy_from_slice(b"\x7fELF");
    let mut l = null_mut();
    expect!(
        CUDA_ERROR_NO_BINARY_FOR_GPU,
        cuLibraryLoadData(
            &mut l,
            cubin.as_ptr().cast(),
            null_mut(),
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            0
        )
    );
    let bad = CString::new(PTX.replace("bar.sync 0;", "frobnicate.b32 %r1;")).unwrap();
    let mut log = vec![0u8; 1024];
    let mut opts = [
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut vals = [
        log.as_mut_ptr().cast::<c_void>(),
        std::ptr::without_provenance_mut(log.len()),
    ];
    expect!(
        CUDA_ERROR_INVALID_PTX,
        cuLibraryLoadData(
            &mut l,
            bad.as_ptr().cast(),
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
            2,
            null_mut(),
            null_mut(),
            0
        )
    );
    let log = CStr::from_bytes_until_nul(&log).unwrap().to_string_lossy();
    assert!(
        log.contains("frobnicate"),
        "the JIT log names the instruction: {log}"
    );
    assert_eq!(free_memory(), base);
}

/// A launch attribute with raw id `id` whose value starts with `value`'s bytes.
fn attribute(id: u32, value: &[u8]) -> CUlaunchAttribute {
    // SAFETY: all-zero is a valid CUlaunchAttribute (id IGNORE, zero value).
    let mut a: CUlaunchAttribute = unsafe { std::mem::zeroed() };
    // SAFETY: the id is a u32 field; the value is 64 bytes, `value` fewer.
    unsafe {
        (&raw mut a.id).cast::<u32>().write(id);
        std::ptr::copy_nonoverlapping(value.as_ptr(), (&raw mut a.value).cast::<u8>(), value.len());
    }
    a
}

#[test]
fn launch_kernel_ex_and_its_attributes() {
    let Some(_drv) = setup("launch_kernel_ex_and_its_attributes") else {
        return;
    };
    let base = free_memory();
    let m = load(PTX);
    let f = function(m, c"add_k");
    let s = stream();
    let n = 200u32;
    let input: Vec<u32> = (0..n).map(|i| i * 7).collect();
    let (din, dout) = (alloc(n as usize * 4), alloc(n as usize * 4));
    upload(din, &input);
    let mut ev = null_mut();
    ok!(cuEventCreate(&mut ev, 0));
    let launch = |attrs: &mut [CUlaunchAttribute], k: u32| {
        let (mut o, mut i, mut k, mut nn) = (dout, din, k, n);
        let mut params = [
            (&raw mut o).cast::<c_void>(),
            (&raw mut i).cast(),
            (&raw mut k).cast(),
            (&raw mut nn).cast(),
        ];
        let config = CUlaunchConfig {
            gridDimX: n.div_ceil(64),
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: 64,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: s,
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as c_uint,
        };
        cu!(cuLaunchKernelEx(
            &config,
            f,
            params.as_mut_ptr(),
            null_mut()
        ))
    };
    // Hints are accepted; a launch-completion event (12) is recorded after the kernel.
    let mut attrs = [
        attribute(8, &1i32.to_ne_bytes()),                   // PRIORITY
        attribute(4, &[1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]), // CLUSTER_DIMENSION 1 × 1 × 1
        attribute(2, &0i32.to_ne_bytes()),                   // COOPERATIVE off
        attribute(6, &1i32.to_ne_bytes()),                   // PROGRAMMATIC_STREAM_SERIALIZATION
        attribute(12, &(ev as usize).to_ne_bytes()),         // LAUNCH_COMPLETION_EVENT
    ];
    check(
        launch(&mut attrs, 5),
        CUresult::CUDA_SUCCESS,
        "cuLaunchKernelEx",
    );
    ok!(cuEventSynchronize(ev));
    let want: Vec<u32> = input.iter().map(|x| x + 5).collect();
    assert_eq!(download(dout, n as usize), want);
    check(launch(&mut [], 9), CUresult::CUDA_SUCCESS, "no attributes");
    ok!(cuStreamSynchronize(s));
    assert_eq!(download(dout, n as usize)[3], input[3] + 9);
    // What has no meaning on the CPU is refused, before anything is launched.
    // (A cooperative launch, attribute 2, is tests/errors/cooperative.rs's.)
    let refused: [(CUlaunchAttribute, CUresult); 4] = [
        (
            attribute(4, &[2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]),
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
        ),
        (attribute(7, &[]), CUresult::CUDA_ERROR_NOT_SUPPORTED),
        (attribute(13, &[1]), CUresult::CUDA_ERROR_INVALID_VALUE),
        (attribute(99, &[]), CUresult::CUDA_ERROR_INVALID_VALUE),
    ];
    for (a, want) in refused {
        check(launch(&mut [a], 1000), want, "a refused launch attribute");
    }
    let mut bad_event = [attribute(12, &0xdead0usize.to_ne_bytes())];
    check(
        launch(&mut bad_event, 1000),
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        "a completion event that is no event",
    );
    ok!(cuStreamSynchronize(s));
    assert_eq!(
        download(dout, n as usize)[3],
        input[3] + 9,
        "nothing refused ran"
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuLaunchKernelEx(null(), f, null_mut(), null_mut())
    );
    ok!(cuEventDestroy_v2(ev));
    ok!(cuStreamDestroy_v2(s));
    ok!(cuMemFree_v2(din));
    ok!(cuMemFree_v2(dout));
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

/// Calls `helper` (defined in [`LINK_B`]) and reads `bias` (defined there too):
/// `out[t] = helper(t) + bias`. Both inputs have an internal `$str`.
const LINK_A: &str = r#".version 7.0
.target sm_70
.address_size 64
.extern .func (.param .b32 r) helper (.param .b32 x);
.extern .global .align 4 .u32 bias;
.global .align 1 .b8 $str[2] = {65, 0};

.visible .entry linked(.param .u64 pout)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    {
    .param .b32 p0;
    .param .b32 r0;
    st.param.b32 [p0], %r1;
    call.uni (r0), helper, (p0);
    ld.param.b32 %r2, [r0];
    }
    ld.global.u32 %r3, [bias];
    ld.global.u8 %r4, [$str];
    add.u32 %r2, %r2, %r3;
    add.u32 %r2, %r2, %r4;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"#;

/// `helper(x) = x + 100 + $str[0]` (`$str` = "B"), `bias = 22`.
const LINK_B: &str = r#".version 7.8
.target sm_70
.address_size 64
.global .align 1 .b8 $str[2] = {66, 0};
.visible .global .align 4 .u32 bias = 22;

.visible .func (.param .b32 r) helper (.param .b32 x)
{
    .reg .b32 %r<4>;
    ld.param.b32 %r1, [x];
    ld.global.u8 %r3, [$str];
    add.u32 %r2, %r1, 100;
    add.u32 %r2, %r2, %r3;
    st.param.b32 [r], %r2;
    ret;
}
"#;

#[test]
fn linking_ptx_inputs() {
    let Some(_drv) = setup("linking_ptx_inputs") else {
        return;
    };
    let base = free_memory();
    let mut info = vec![0u8; 1024];
    let mut error = vec![0u8; 1024];
    let mut opts = [
        CUjit_option::CU_JIT_INFO_LOG_BUFFER,
        CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        CUjit_option::CU_JIT_OPTIMIZATION_LEVEL,
    ];
    let mut vals = [
        info.as_mut_ptr().cast::<c_void>(),
        std::ptr::without_provenance_mut(info.len()),
        error.as_mut_ptr().cast(),
        std::ptr::without_provenance_mut(error.len()),
        std::ptr::without_provenance_mut(4),
    ];
    let mut state = null_mut();
    ok!(cuLinkCreate_v2(
        5,
        opts.as_mut_ptr(),
        vals.as_mut_ptr(),
        &mut state
    ));
    let add = |state: sys::CUlinkState, text: &str, name: &CStr| {
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(0);
        cu!(cuLinkAddData_v2(
            state,
            sys::CUjitInputType::CU_JIT_INPUT_PTX,
            bytes.as_mut_ptr().cast(),
            bytes.len(),
            name.as_ptr(),
            0,
            null_mut(),
            null_mut()
        ))
    };
    check(
        add(state, LINK_A, c"a.ptx"),
        CUresult::CUDA_SUCCESS,
        "cuLinkAddData(a)",
    );
    // From a file, too.
    let path = std::env::temp_dir().join(format!("streamexec-link-b-{}.ptx", std::process::id()));
    std::fs::write(&path, LINK_B).unwrap();
    let cpath = CString::new(path.to_str().unwrap()).unwrap();
    ok!(cuLinkAddFile_v2(
        state,
        sys::CUjitInputType::CU_JIT_INPUT_PTX,
        cpath.as_ptr(),
        0,
        null_mut(),
        null_mut()
    ));
    std::fs::remove_file(&path).unwrap();
    // Bad inputs are refused when added, with the error log.
    let bad = LINK_B.replace("add.u32 %r2, %r1, 100;", "add.u32 %r2, %r1, ;");
    check(
        add(state, &bad, c"bad.ptx"),
        CUresult::CUDA_ERROR_INVALID_PTX,
        "bad PTX",
    );
    let err = CStr::from_bytes_until_nul(&error)
        .unwrap()
        .to_string_lossy();
    assert!(
        err.contains("bad.ptx"),
        "the error log names the input: {err}"
    );
    let mut cubin = b"\x7fELF\x02\x01\x01\0".to_vec();
    expect!(
        CUDA_ERROR_NO_BINARY_FOR_GPU,
        cuLinkAddData_v2(
            state,
            sys::CUjitInputType::CU_JIT_INPUT_CUBIN,
            cubin.as_mut_ptr().cast(),
            cubin.len(),
            null(),
            0,
            null_mut(),
            null_mut()
        )
    );
    let (mut image, mut size) = (null_mut(), 0usize);
    ok!(cuLinkComplete(state, &mut image, &mut size));
    assert!(size > 0);
    let info_text = CStr::from_bytes_until_nul(&info).unwrap().to_string_lossy();
    assert!(info_text.contains("2 PTX input"), "{info_text}");
    // The image loads as a module (and as a library) and runs across both inputs.
    let mut m = null_mut();
    ok!(cuModuleLoadData(&mut m, image));
    let mut lib = null_mut();
    ok!(cuLibraryLoadData(
        &mut lib,
        image,
        null_mut(),
        null_mut(),
        0,
        null_mut(),
        null_mut(),
        0
    ));
    ok!(cuLinkDestroy(state));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuLinkDestroy(state));
    let f = function(m, c"linked");
    let out = alloc(32 * 4);
    let mut o = out;
    let mut params = [(&raw mut o).cast::<c_void>()];
    ok!(cuLaunchKernel(
        f,
        1,
        1,
        1,
        32,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    ok!(cuCtxSynchronize());
    // helper(t) + bias + 'A' = t + 100 + 'B' + 22 + 'A': the two `$str` stay apart.
    let want: Vec<u32> = (0..32).map(|t| t + 100 + 66 + 22 + 65).collect();
    assert_eq!(download(out, 32), want);
    ok!(cuMemFree_v2(out));
    ok!(cuModuleUnload(m));
    ok!(cuLibraryUnload(lib));
    // An unresolved reference, and two definitions of one name, fail at cuLinkComplete.
    for (inputs, needle) in [
        (vec![LINK_A], "undefined reference to `helper`"),
        (
            vec![LINK_A, LINK_B, LINK_B],
            "multiple definitions of `bias`",
        ),
    ] {
        error.fill(0);
        ok!(cuLinkCreate_v2(
            4,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
            &mut state
        ));
        for text in inputs {
            check(
                add(state, text, c"x.ptx"),
                CUresult::CUDA_SUCCESS,
                "cuLinkAddData",
            );
        }
        expect!(
            CUDA_ERROR_INVALID_PTX,
            cuLinkComplete(state, &mut image, &mut size)
        );
        let err = CStr::from_bytes_until_nul(&error)
            .unwrap()
            .to_string_lossy();
        assert!(err.contains(needle), "{err}");
        ok!(cuLinkDestroy(state));
    }
    ok!(cuLinkCreate_v2(0, null_mut(), null_mut(), &mut state));
    expect!(
        CUDA_ERROR_INVALID_PTX,
        cuLinkComplete(state, &mut image, &mut size)
    );
    ok!(cuLinkDestroy(state));
    assert_eq!(free_memory(), base);
}
