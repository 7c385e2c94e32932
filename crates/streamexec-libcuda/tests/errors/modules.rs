//! Module images and names: binaries, malformed PTX with its JIT log, unknown names, globals.

use super::*;

/// Loads `image` with `cuModuleLoadDataEx` and both JIT log buffers; returns the code, the
/// error log and the size the driver wrote back.
fn load_with_log(image: *const c_void) -> (CUresult, CUmodule, String, usize) {
    let mut log = vec![0u8; 4096];
    let mut info = vec![0u8; 4096];
    let mut options = [
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        CUjit_option::CU_JIT_INFO_LOG_BUFFER,
        CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut values = [
        log.as_mut_ptr().cast::<c_void>(),
        std::ptr::without_provenance_mut(log.len()),
        info.as_mut_ptr().cast(),
        std::ptr::without_provenance_mut(info.len()),
    ];
    let mut m = null_mut();
    let r = cu!(cuModuleLoadDataEx(
        &mut m,
        image,
        4,
        options.as_mut_ptr(),
        values.as_mut_ptr()
    ));
    let text = CStr::from_bytes_until_nul(&log)
        .expect("the log is NUL-terminated")
        .to_string_lossy()
        .into_owned();
    (r, m, text, values[1] as usize)
}

#[test]
fn module_errors() {
    let Some(_drv) = setup("module_errors") else {
        return;
    };
    let base = free_memory();
    // A cubin (ELF) and fatbins (the fatbin and its wrapper's magic): no GPU code runs here.
    let mut cubin = vec![0u8; 64];
    cubin[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    let mut fatbin = vec![0u8; 64];
    fatbin[..4].copy_from_slice(&0xBA55_ED50u32.to_le_bytes());
    let mut wrapper = vec![0u8; 64];
    wrapper[..4].copy_from_slice(&0x4662_43B1u32.to_le_bytes());
    for image in [&cubin, &fatbin, &wrapper] {
        let mut m = null_mut();
        expect!(
            CUDA_ERROR_NO_BINARY_FOR_GPU,
            cuModuleLoadData(&mut m, image.as_ptr().cast())
        );
        assert!(m.is_null());
        let (r, m, _, _) = load_with_log(image.as_ptr().cast());
        check(
            r,
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
            "cuModuleLoadDataEx(binary)",
        );
        assert!(m.is_null());
    }
    let mut m = null_mut();
    expect!(
        CUDA_ERROR_NO_BINARY_FOR_GPU,
        cuModuleLoadFatBinary(&mut m, fatbin.as_ptr().cast())
    );
    // Neither text nor a known binary.
    let junk = b"\xff\xfe\x80junk\0";
    expect!(
        CUDA_ERROR_INVALID_IMAGE,
        cuModuleLoadData(&mut m, junk.as_ptr().cast())
    );
    // Malformed PTX: the error log names the line and the instruction.
    let bad = PTX.replace(
        "    shl.b32 %r2, %r1, 1;",
        "    frobnicate.b32 %r2, %r1, 1;",
    );
    let line = line_of(&bad, "frobnicate");
    let text = CString::new(bad).unwrap();
    let (r, m, log, written) = load_with_log(text.as_ptr().cast());
    check(
        r,
        CUresult::CUDA_ERROR_INVALID_PTX,
        "cuModuleLoadDataEx(bad PTX)",
    );
    assert!(m.is_null());
    assert!(
        log.contains(&format!("line {line}")) && log.contains("frobnicate"),
        "the JIT error log must name PTX line {line} and the instruction: {log:?}"
    );
    assert_eq!(
        written,
        log.len() + 1,
        "the size option holds the bytes written"
    );
    // A syntax error too.
    let broken = PTX.replace("    ld.param.u32 %r2, [pn];", "    ld.param.u32 %r2, [pn;");
    let line = line_of(&broken, "[pn;");
    let text = CString::new(broken).unwrap();
    let (r, _, log, _) = load_with_log(text.as_ptr().cast());
    check(
        r,
        CUresult::CUDA_ERROR_INVALID_PTX,
        "cuModuleLoadDataEx(syntax error)",
    );
    assert!(
        log.contains(&format!("line {line}")),
        "the JIT error log must name PTX line {line}: {log:?}"
    );
    // A good module: its log is empty; unknown names are NOT_FOUND.
    let good = CString::new(PTX).unwrap();
    let (r, m, log, _) = load_with_log(good.as_ptr().cast());
    check(r, CUresult::CUDA_SUCCESS, "cuModuleLoadDataEx(good PTX)");
    assert!(log.is_empty(), "{log}");
    let mut f = null_mut();
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuModuleGetFunction(&mut f, m, c"no_such_kernel".as_ptr())
    );
    assert!(f.is_null());
    let (mut dptr, mut bytes) = (0, 0);
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuModuleGetGlobal_v2(&mut dptr, &mut bytes, m, c"no_such_global".as_ptr())
    );
    // A kernel is not a global, nor shared memory.
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuModuleGetGlobal_v2(&mut dptr, &mut bytes, m, c"add_k".as_ptr())
    );
    // The RPC client global of LLVM's GPU libc: address and size, and a copy into it reaches
    // the kernels.
    ok!(cuModuleGetGlobal_v2(
        &mut dptr,
        &mut bytes,
        m,
        c"__llvm_rpc_client".as_ptr()
    ));
    assert_eq!(bytes, 24);
    assert_ne!(dptr, 0);
    let mut size_only = 0;
    ok!(cuModuleGetGlobal_v2(
        null_mut(),
        &mut size_only,
        m,
        c"__llvm_rpc_client".as_ptr()
    ));
    assert_eq!(size_only, 24);
    let mut r = rng("module_errors");
    let client: [u64; 3] = [r.random(), r.random(), r.random()];
    ok!(cuMemcpyHtoD_v2(dptr, client.as_ptr().cast(), 24));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoD_v2(dptr + 8, client.as_ptr().cast(), 24)
    );
    let out = alloc(24);
    ok!(cuMemsetD32_v2(out, POISON_U32, 6));
    let read = function(m, c"read_client");
    let mut o = out;
    let mut params = [(&raw mut o).cast::<c_void>()];
    ok!(cuLaunchKernel(
        read,
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    let mut got = [0u64; 3];
    ok!(cuMemcpyDtoH_v2(got.as_mut_ptr().cast(), out, 24));
    assert_eq!(
        got, client,
        "the kernel reads what was copied into the global"
    );
    let mut back = [0u64; 3];
    ok!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr, 24));
    assert_eq!(back, client);
    // A second live load of the same PTX (here in another context) has its own globals, and
    // unloading one module leaves the other's global usable.
    let c = created_context();
    let m2 = load(PTX);
    let (mut dptr2, mut bytes2) = (0, 0);
    ok!(cuModuleGetGlobal_v2(
        &mut dptr2,
        &mut bytes2,
        m2,
        c"__llvm_rpc_client".as_ptr()
    ));
    assert_eq!(bytes2, 24);
    assert_ne!(dptr2, dptr, "two loads of one PTX share a global");
    let client2: [u64; 3] = [r.random(), r.random(), r.random()];
    ok!(cuMemcpyHtoD_v2(dptr2, client2.as_ptr().cast(), 24));
    let mut popped = null_mut();
    ok!(cuCtxPopCurrent_v2(&mut popped));
    assert_eq!(popped, c);
    ok!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr, 24));
    assert_eq!(back, client, "the other module's copy changed this global");
    ok!(cuMemFree_v2(out));
    // Unloading drops the global's range.
    ok!(cuModuleUnload(m));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoD_v2(dptr, client.as_ptr().cast(), 24)
    );
    ok!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr2, 24));
    assert_eq!(
        back, client2,
        "the live module's global after unloading its twin"
    );
    ok!(cuCtxDestroy_v2(c));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr2, 24)
    );
    assert_eq!(free_memory(), base);
    let m = load(PTX);
    add_works(function(m, c"add_k"), null_mut(), "module_errors");
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// Launches.
