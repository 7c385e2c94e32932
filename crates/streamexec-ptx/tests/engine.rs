//! The host platform's PTX engine through the public API: hand-written PTX kernels checked
//! against Rust references on random inputs, warp semantics, barriers, atomics, calls, faults
//! that name the instruction and thread, load-time rejection, and the race checker.
#![allow(clippy::type_complexity)]

mod common;

use common::{Device, DevicePtr, Error, SharedMemory, Spec, TypedKernel};
use common::{HEADER, download, fault_text, host, launch, poisoned, ptx_kernel, run, upload};

use common::{POISON_U32, random_u32s, rng};

#[test]
fn add_mystery_value_runs_its_ptx_on_host() {
    let exec = host();
    let k: TypedKernel<(f32, DevicePtr<f32>)> = ptx_kernel(
        &exec,
        r#"
.visible .entry add_mystery_value(.param .f32 p0, .param .u64 p1)
{
    .reg .f32 %f<3>;
    .reg .b64 %rd<3>;
    ld.param.f32 %f1, [p0];
    ld.param.u64 %rd1, [p1];
    cvta.to.global.u64 %rd2, %rd1;
    add.f32 %f2, %f1, 0f42F60000;
    st.global.f32 [%rd2], %f2;
    ret;
}"#,
        "add_mystery_value",
    );
    let out = exec
        .copy_to_device(&[f32::from_bits(common::POISON_F32_BITS)])
        .unwrap();
    launch(&exec, 1, 1, &k, (42.5, out.ptr())).unwrap();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), vec![165.5]);
}

/// Every entry of the committed clang corpus decodes.
#[test]
fn the_committed_corpus_decodes() {
    let mut entries = 0;
    for path in common::committed_ptx() {
        let text = std::fs::read_to_string(&path).unwrap();
        let ast = streamexec_ptx::parse_module(&text).unwrap();
        let decoded = streamexec_ptx::check_decodes(&ast, 0x1000)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let want = ast
            .functions
            .iter()
            .filter(|f| f.is_entry && f.body.is_some())
            .count();
        assert_eq!(decoded.len(), want, "{}", path.display());
        entries += want;
    }
    assert!(entries >= 20, "only {entries} entries found");
}

const CONFORMANCE_O0: &str = include_str!("../../../kernels/ptx/conformance.O0.ptx");
const CONFORMANCE_O3: &str = include_str!("../../../kernels/ptx/conformance.O3.ptx");

fn corpus_kernel<A: common::KernelArgs>(exec: &Device, ptx: &str, name: &str) -> TypedKernel<A> {
    let spec = Spec::new(A::ARITY).add_cuda_ptx_in_memory(ptx, name);
    exec.get_kernel(&spec).unwrap_or_else(|e| panic!("{e}"))
}

/// The clang-compiled kernels the conformance suite uses, at -O0 and -O3, through PTX only.
#[test]
fn conformance_kernels_run_from_ptx_at_o0_and_o3() {
    let exec = host();
    let mut r = rng("conformance_kernels_run_from_ptx_at_o0_and_o3");
    for ptx in [CONFORMANCE_O0, CONFORMANCE_O3] {
        // saxpy with a partial last block.
        let n = 1000usize;
        let x = common::random_f32s(&mut r, n);
        let y = common::random_f32s(&mut r, n);
        let a = 1.75f32;
        let k: TypedKernel<(u32, f32, DevicePtr<f32>, DevicePtr<f32>)> =
            corpus_kernel(&exec, ptx, "saxpy");
        let (dx, dy) = (
            exec.copy_to_device(&x).unwrap(),
            exec.copy_to_device(&y).unwrap(),
        );
        launch(&exec, 256, 4, &k, (n as u32, a, dx.ptr(), dy.ptr())).unwrap();
        let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a.mul_add(*x, *y)).collect();
        let got = exec.copy_to_vec(&dy).unwrap();
        for i in 0..n {
            // -O0 multiplies and adds separately, -O3 fuses.
            assert!(
                (got[i] - want[i]).abs() <= 1e-5 * want[i].abs().max(1.0),
                "saxpy[{i}] {} vs {}",
                got[i],
                want[i]
            );
        }
        // Block reductions, static and dynamic shared memory, odd block size.
        let n = 3000usize;
        let input = random_u32s(&mut r, n, 1000);
        let bs = 200usize;
        let blocks = n.div_ceil(bs);
        let want: Vec<u32> = input.chunks(bs).map(|c| c.iter().sum()).collect();
        let din = exec.copy_to_device(&input).unwrap();
        let k: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, u32)> =
            corpus_kernel(&exec, ptx, "block_reduce");
        let out = exec.copy_to_device(&vec![POISON_U32; blocks]).unwrap();
        launch(
            &exec,
            bs as u32,
            blocks as u32,
            &k,
            (din.ptr(), out.ptr(), n as u32),
        )
        .unwrap();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
        let k: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, u32, SharedMemory<u32>)> =
            corpus_kernel(&exec, ptx, "block_reduce_dyn");
        let out = exec.copy_to_device(&vec![POISON_U32; blocks]).unwrap();
        launch(
            &exec,
            bs as u32,
            blocks as u32,
            &k,
            (din.ptr(), out.ptr(), n as u32, SharedMemory::new(bs)),
        )
        .unwrap();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
        // A 3-D launch shape.
        let k: TypedKernel<(DevicePtr<u32>,)> = corpus_kernel(&exec, ptx, "thread_ids");
        let (g, b) = ((3u32, 2u32, 2u32), (5u32, 3u32, 4u32));
        let total = (g.0 * g.1 * g.2 * b.0 * b.1 * b.2) as usize;
        let out = exec.copy_to_device(&vec![POISON_U32; total]).unwrap();
        launch(&exec, b, g, &k, (out.ptr(),)).unwrap();
        let per = (b.0 * b.1 * b.2) as usize;
        let want: Vec<u32> = (0..total)
            .map(|i| ((i / per) * 65536 + i % per) as u32)
            .collect();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
    }
}

/// Lanes diverge in an if/else, reconverge, then exchange values with shfl and vote: the
/// results need the whole warp back together.
#[test]
fn divergence_reconverges_before_shfl_and_vote() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    and.b32 %r3, %r2, 1;
    setp.eq.u32 %p1, %r3, 0;
    @%p1 bra EVEN;
    mul.lo.u32 %r4, %r2, 3;
    bra.uni JOIN;
EVEN:
    shr.u32 %r4, %r2, 1;
JOIN:
    // warp sum of r4 by butterfly
    shfl.sync.bfly.b32 %r5, %r4, 16, 31, -1;
    add.u32 %r6, %r4, %r5;
    shfl.sync.bfly.b32 %r5, %r6, 8, 31, -1;
    add.u32 %r6, %r6, %r5;
    shfl.sync.bfly.b32 %r5, %r6, 4, 31, -1;
    add.u32 %r6, %r6, %r5;
    shfl.sync.bfly.b32 %r5, %r6, 2, 31, -1;
    add.u32 %r6, %r6, %r5;
    shfl.sync.bfly.b32 %r5, %r6, 1, 31, -1;
    add.u32 %r6, %r6, %r5;
    // ballot of odd inputs, shfl.up with its predicate, shfl.idx broadcast of lane 3
    setp.ne.u32 %p2, %r3, 0;
    vote.sync.ballot.b32 %r7, %p2, -1;
    shfl.sync.up.b32 %r8|%p3, %r2, 1, 0, -1;
    selp.u32 %r9, %r8, 12345, %p3;
    shfl.sync.idx.b32 %r10, %r2, 3, 31, -1;
    vote.sync.any.pred %p3, %p2, -1;
    selp.u32 %r11, 1, 0, %p3;
    activemask.b32 %r12;
    mul.wide.u32 %rd5, %r1, 32;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v2.u32 [%rd6], {%r6, %r7};
    st.global.v4.u32 [%rd6+16], {%r9, %r10, %r11, %r12};
    ret;
}"#,
        "k",
    );
    let mut r = rng("divergence_reconverges_before_shfl_and_vote");
    let n = 64;
    let input = random_u32s(&mut r, n, 1 << 20);
    let din = exec.copy_to_device(&input).unwrap();
    let out = exec.copy_to_device(&vec![POISON_U32; n * 8]).unwrap();
    launch(&exec, 64, 1, &k, (din.ptr(), out.ptr())).unwrap();
    let got = exec.copy_to_vec(&out).unwrap();
    for w in 0..2 {
        let lanes = &input[w * 32..w * 32 + 32];
        let sum: u32 = lanes
            .iter()
            .map(|&v| if v % 2 == 0 { v / 2 } else { v.wrapping_mul(3) })
            .fold(0, u32::wrapping_add);
        let ballot: u32 = lanes.iter().enumerate().map(|(i, v)| (v % 2) << i).sum();
        for l in 0..32 {
            let t = w * 32 + l;
            let row = &got[t * 8..t * 8 + 8];
            let up = if l == 0 { 12345 } else { lanes[l - 1] };
            let want = [
                sum,
                ballot,
                POISON_U32,
                POISON_U32,
                up,
                lanes[3],
                (ballot != 0) as u32,
                u32::MAX,
            ];
            assert_eq!(row, want, "thread {t}");
        }
    }
}

/// A tree reduction in shared memory with bar.sync inside a loop, 3 warps per block.
#[test]
fn barrier_in_a_loop() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>)> = ptx_kernel(
        &exec,
        r#"
.visible .entry red(.param .u64 pin, .param .u64 pout)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<10>;
    .shared .align 4 .b32 sh[192];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r5, [%rd4];
    mov.u64 %rd5, sh;
    mul.wide.u32 %rd6, %r1, 4;
    add.s64 %rd7, %rd5, %rd6;
    st.shared.u32 [%rd7], %r5;
    st.shared.u32 [%rd7+384], 0;
    bar.sync 0;
    mov.u32 %r6, 64;
LOOP:
    setp.ge.u32 %p1, %r1, %r6;
    @%p1 bra SKIP;
    mul.wide.u32 %rd8, %r6, 4;
    add.s64 %rd9, %rd7, %rd8;
    ld.shared.u32 %r7, [%rd9];
    ld.shared.u32 %r8, [%rd7];
    add.s32 %r8, %r8, %r7;
    st.shared.u32 [%rd7], %r8;
SKIP:
    barrier.sync 0;
    shr.u32 %r6, %r6, 1;
    setp.ne.u32 %p2, %r6, 0;
    @%p2 bra LOOP;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    ld.shared.u32 %r9, [sh];
    mul.wide.u32 %rd8, %r2, 4;
    add.s64 %rd9, %rd2, %rd8;
    st.global.u32 [%rd9], %r9;
DONE:
    ret;
}"#,
        "red",
    );
    let mut r = rng("barrier_in_a_loop");
    let (bs, blocks) = (96usize, 7usize);
    let input = random_u32s(&mut r, bs * blocks, 1 << 16);
    let din = exec.copy_to_device(&input).unwrap();
    let out = exec.copy_to_device(&vec![POISON_U32; blocks]).unwrap();
    launch(&exec, bs as u32, blocks as u32, &k, (din.ptr(), out.ptr())).unwrap();
    let want: Vec<u32> = input.chunks(bs).map(|c| c.iter().sum()).collect();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
}

/// Global and shared atomics: a histogram through shared atomics merged with global atomics,
/// atom.inc wrap-around, CAS, float add, min/max.
#[test]
fn atomics_global_and_shared() {
    let exec = host();
    let k: TypedKernel<(
        DevicePtr<u32>,
        u32,
        DevicePtr<u32>,
        DevicePtr<u32>,
        DevicePtr<f32>,
    )> = ptx_kernel(
        &exec,
        r#"
.visible .entry hist(.param .u64 pin, .param .u32 pn, .param .u64 phist, .param .u64 pmisc, .param .u64 pf)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<12>;
    .shared .align 4 .b32 bins[16];
    ld.param.u64 %rd1, [pin];
    ld.param.u32 %r1, [pn];
    ld.param.u64 %rd2, [phist];
    ld.param.u64 %rd3, [pmisc];
    ld.param.u64 %rd10, [pf];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, 16;
    @%p1 bra ZEROED;
    mul.wide.u32 %rd4, %r2, 4;
    mov.u64 %rd5, bins;
    add.s64 %rd5, %rd5, %rd4;
    st.shared.u32 [%rd5], 0;
ZEROED:
    bar.sync 0;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    setp.ge.u32 %p2, %r5, %r1;
    @%p2 bra TAIL;
    mul.wide.u32 %rd6, %r5, 4;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.u32 %r6, [%rd7];
    and.b32 %r7, %r6, 15;
    mul.wide.u32 %rd8, %r7, 4;
    mov.u64 %rd9, bins;
    add.s64 %rd9, %rd9, %rd8;
    atom.shared.add.u32 %r8, [%rd9], 1;
    atom.global.inc.u32 %r9, [%rd3], 9;
    atom.global.max.s32 %r10, [%rd3+4], %r6;
    atom.global.min.u32 %r10, [%rd3+8], %r6;
    red.global.add.u64 [%rd3+16], 3;
    cvt.rn.f32.u32 %f1, %r7;
    atom.global.add.f32 %f2, [%rd10], %f1;
CAS:
    ld.volatile.global.u32 %r11, [%rd3+12];
    add.u32 %r12, %r11, %r7;
    atom.global.cas.b32 %r13, [%rd3+12], %r11, %r12;
    setp.ne.u32 %p3, %r13, %r11;
    @%p3 bra CAS;
TAIL:
    bar.sync 0;
    @%p1 bra DONE;
    mul.wide.u32 %rd4, %r2, 4;
    mov.u64 %rd5, bins;
    add.s64 %rd5, %rd5, %rd4;
    ld.shared.u32 %r14, [%rd5];
    add.s64 %rd11, %rd2, %rd4;
    red.global.add.u32 [%rd11], %r14;
DONE:
    ret;
}"#,
        "hist",
    );
    let mut r = rng("atomics_global_and_shared");
    let n = 1000usize;
    let input = random_u32s(&mut r, n, 1 << 30);
    let din = exec.copy_to_device(&input).unwrap();
    let hist = exec.copy_to_device(&[0u32; 16]).unwrap();
    let misc = exec.copy_to_device(&[0u32, 0, u32::MAX, 0, 0, 0]).unwrap();
    let fsum = exec.copy_to_device(&[0f32]).unwrap();
    launch(
        &exec,
        128,
        n.div_ceil(128) as u32,
        &k,
        (din.ptr(), n as u32, hist.ptr(), misc.ptr(), fsum.ptr()),
    )
    .unwrap();
    let mut want = [0u32; 16];
    for v in &input {
        want[(v & 15) as usize] += 1;
    }
    assert_eq!(exec.copy_to_vec(&hist).unwrap(), want);
    let m = exec.copy_to_vec(&misc).unwrap();
    assert_eq!(
        m[0],
        (n % 10) as u32,
        "inc wraps at 9: n increments from 0 end at n mod 10"
    );
    assert_eq!(m[1] as i32, input.iter().map(|&v| v as i32).max().unwrap());
    assert_eq!(m[2], *input.iter().min().unwrap());
    assert_eq!(m[3], input.iter().map(|v| v & 15).sum::<u32>(), "CAS loop");
    assert_eq!(m[4] as u64 | (m[5] as u64) << 32, 3 * n as u64);
    let fs: u32 = input.iter().map(|v| v & 15).sum();
    assert_eq!(
        exec.copy_to_vec(&fsum).unwrap()[0],
        fs as f32,
        "integer-valued float sums are exact"
    );
}

/// A `.func` called with clang's `{ .param ...; call ...; }` sequence, from divergent lanes,
/// returning a value through the .param ABI.
#[test]
fn call_and_ret_of_a_func() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>,)> = ptx_kernel(
        &exec,
        r#"
.func (.param .b32 func_retval0) poly(.param .b32 poly_param_0, .param .b32 poly_param_1)
{
    .reg .b32 %r<6>;
    ld.param.u32 %r1, [poly_param_0];
    ld.param.u32 %r2, [poly_param_1];
    mul.lo.s32 %r3, %r1, %r1;
    mad.lo.s32 %r4, %r3, %r2, 7;
    st.param.b32 [func_retval0], %r4;
    ret;
}
.visible .entry k(.param .u64 pout)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    mov.u32 %r5, 0;
    and.b32 %r2, %r1, 3;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra SKIP;
    {
    .reg .b32 temp_param_reg;
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    .param .b32 param1;
    st.param.b32 [param1], %r2;
    .param .b32 retval0;
    call.uni (retval0), poly, (param0, param1);
    ld.param.b32 %r5, [retval0];
    }
SKIP:
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}"#,
        "k",
    );
    let n = 70;
    let out = exec.copy_to_device(&vec![POISON_U32; n]).unwrap();
    launch(&exec, n as u32, 1, &k, (out.ptr(),)).unwrap();
    let want: Vec<u32> = (0..n as u32)
        .map(|t| if t % 4 == 0 { 0 } else { t * t * (t % 4) + 7 })
        .collect();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
}

const STORE_AT: &str = r#"
.visible .entry st(.param .u64 p, .param .u64 off)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<6>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [p];
    ld.param.u64 %rd2, [off];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 37;
    @%p1 bra DONE;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
DONE:
    ret;
}"#;

/// An out-of-bounds store and a misaligned store fail the stream with a fault naming the
/// kernel, the instruction, the thread and the address; the executor stays usable.
#[test]
fn faults_name_instruction_thread_and_address() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, u64)> = ptx_kernel(&exec, STORE_AT, "st");
    let buf = exec.copy_to_device(&[0u32; 8]).unwrap();
    let e = fault_text(launch(&exec, 64, 2, &k, (buf.ptr(), 32)));
    let addr = format!("{:#x}", buf.address() + 32);
    for part in [
        "out-of-bounds",
        "st.global.u32 [%rd3], %r1;",
        "line 16",
        "thread (37, 0, 0)",
        "block (0, 0, 0)",
        &addr,
        "`st`",
    ] {
        assert!(e.contains(part), "`{part}` missing from: {e}");
    }
    let e = fault_text(launch(&exec, 64, 1, &k, (buf.ptr(), 2)));
    assert!(
        e.contains("misaligned") && e.contains("thread (37, 0, 0)"),
        "{e}"
    );
    // Unmapped memory far away from any allocation.
    let e = fault_text(launch(&exec, 64, 1, &k, (buf.ptr(), 1 << 40)));
    assert!(e.contains("not inside a live allocation"), "{e}");
    // Still usable: a good launch on a new stream works.
    launch(&exec, 64, 1, &k, (buf.ptr(), 4)).unwrap();
    assert_eq!(exec.copy_to_vec(&buf).unwrap()[1], 37);
}

/// Threads that exit count as arrived at a whole-block barrier, as on the hardware (`if (i >=
/// n) return; ... __syncthreads();`, which NVIDIA's own examples use): the others go on. With
/// the race checker (the checker mode) it is reported as barrier divergence naming the exited
/// thread; threads waiting at two different barriers are divergence in every mode.
#[test]
fn exited_threads_release_a_barrier_and_divergence_is_a_fault_not_a_hang() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>,)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    setp.gt.u32 %p1, %r1, 40;
    @%p1 bra OUT;
    bar.sync 0;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
OUT:
    ret;
}"#,
        "k",
    );
    let out = poisoned(&exec, 64, POISON_U32);
    run(&exec, 64, 1, &k, (out.ptr(),));
    let want: Vec<u32> = (0..64)
        .map(|t| if t <= 40 { t } else { POISON_U32 })
        .collect();
    assert_eq!(download(&exec, &out), want);
    {
        let _only = common::RACE_CHECK
            .write()
            .unwrap_or_else(|p| p.into_inner());
        exec.set_race_check(true).unwrap();
        let mut s = exec.create_stream().unwrap();
        let r = s
            .then_launch(64u32, 3u32, &k, (out.ptr(),))
            .block_host_until_done();
        exec.set_race_check(false).unwrap();
        let e = fault_text(r);
        assert!(
            e.contains("barrier divergence") && e.contains("bar.sync 0;") && e.contains("exited"),
            "{e}"
        );
    }
    let two: TypedKernel<(DevicePtr<u32>,)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<3>;
    .reg .pred %p<2>;
    mov.u32 %r1, %tid.x;
    setp.gt.u32 %p1, %r1, 31;
    @%p1 bra OTHER;
    bar.sync 0;
    ret;
OTHER:
    bar.sync 1;
    ret;
}"#,
        "k",
    );
    let e = fault_text(launch(&exec, 64, 3, &two, (out.ptr(),)));
    assert!(
        e.contains("barrier divergence") && e.contains("wait at a different barrier"),
        "{e}"
    );
}

/// Unsupported instructions are rejected when the kernel loads, naming the line.
#[test]
fn unsupported_instruction_is_a_load_error_naming_the_line() {
    let exec = host();
    let text = format!(
        "{HEADER}.visible .entry k(.param .u64 p)\n{{\n    .reg .b32 %r<3>;\n    mov.u32 %r1, 1;\n    dp4a.u32.u32 %r1, %r1, %r2, %r1;\n    ret;\n}}\n"
    );
    let spec = Spec::new(1).add_cuda_ptx_in_memory(&text, "k");
    let e = exec.get_untyped_kernel(&spec).unwrap_err();
    let s = e.to_string();
    assert!(matches!(e, Error::Ptx(_)), "{s}");
    assert!(
        s.contains("line 8")
            && s.contains("integer dot-product instructions (`dp4a.u32.u32`) are not supported"),
        "{s}"
    );
    // A modifier the engine does not run is rejected too (f16 adds round to nearest only).
    let text = format!(
        "{HEADER}.visible .entry k()\n{{\n    .reg .f32 %f<3>;\n    add.rz.f16 %f1, %f1, %f2;\n    ret;\n}}\n"
    );
    let spec = Spec::new(0).add_cuda_ptx_in_memory(&text, "k");
    let s = exec.get_untyped_kernel(&spec).unwrap_err().to_string();
    assert!(s.contains("line 7"), "{s}");
}

/// A spin lock inside a warp: the lanes that lose the CAS loop back (a lower PC) while the
/// holder waits further on; the scheduler's fairness rule lets the holder finish.
#[test]
fn intra_warp_spin_lock_terminates() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>,)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<3>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [p];
SPIN:
    atom.global.cas.b32 %r1, [%rd1], 0, 1;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SPIN;
    ld.volatile.global.u32 %r2, [%rd1+4];
    add.u32 %r2, %r2, 1;
    st.volatile.global.u32 [%rd1+4], %r2;
    membar.gl;
    atom.global.exch.b32 %r3, [%rd1], 0;
    ret;
}"#,
        "k",
    );
    let buf = exec.copy_to_device(&[0u32, 0]).unwrap();
    launch(&exec, 40, 2, &k, (buf.ptr(),)).unwrap();
    assert_eq!(exec.copy_to_vec(&buf).unwrap(), vec![0, 80]);
}

/// `bar.warp.sync` reconverges a warp: lane 0 spins long enough for the fairness rule to set
/// it aside, and lanes 1..31, which skipped the loop, wait at the warp barrier instead of
/// running ahead, so `activemask` after it is the whole warp (the live lanes of a partial warp).
/// A warp barrier whose missing lane waits at `bar.sync` is a fault, not a hang.
#[test]
fn bar_warp_sync_reconverges_a_warp_split_by_a_spin_loop() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, u32)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 pout, .param .u32 pn)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r5, [pn];
    mov.u32 %r1, %tid.x;
    and.b32 %r6, %r1, 31;
    setp.ne.u32 %p1, %r6, 0;
    @%p1 bra AFTER;
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p2, %r2, %r5;
    @%p2 bra LOOP;
AFTER:
    bar.warp.sync -1;
    activemask.b32 %r3;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}"#,
        "k",
    );
    let out = exec.copy_to_device(&[POISON_U32; 40]).unwrap();
    // 20000 rounds: far past the 4096 back-edges after which a spinning group is set aside.
    launch(&exec, 40, 1, &k, (out.ptr(), 20_000)).unwrap();
    let got = exec.copy_to_vec(&out).unwrap();
    let want: Vec<u32> = (0..40)
        .map(|t| if t < 32 { u32::MAX } else { 0xff })
        .collect();
    assert_eq!(got, want);

    let stuck: TypedKernel<(DevicePtr<u32>,)> = ptx_kernel(
        &exec,
        r#"
.visible .entry stuck(.param .u64 p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra BAR;
    bar.warp.sync -1;
    bra.uni END;
BAR:
    bar.sync 0;
END:
    ret;
}"#,
        "stuck",
    );
    let e = fault_text(launch(&exec, 32, 1, &stuck, (out.ptr(),)));
    assert!(
        e.contains("bar.warp.sync waits for thread 0") && e.contains("bar.warp.sync -1;"),
        "{e}"
    );
}

/// Bit-manipulation and tier-5 instructions wired through the decoder, against Rust on
/// random inputs.
#[test]
fn bit_ops_and_tier5_instructions() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
    .reg .b32 %r<30>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<4>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 12;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    ld.global.u32 %r3, [%rd4+4];
    ld.global.u32 %r4, [%rd4+8];
    lop3.b32 %r5, %r2, %r3, %r4, 150;
    shf.l.wrap.b32 %r6, %r2, %r2, %r4;
    prmt.b32 %r7, %r2, %r3, 0x5140;
    bfe.s32 %r8, %r2, 3, 9;
    popc.b32 %r9, %r3;
    brev.b32 %r10, %r4;
    clz.b32 %r11, %r2;
    mul24.lo.u32 %r12, %r2, %r3;
    bfi.b32 %r13, %r3, %r2, 4, 8;
    add.cc.u32 %r14, %r2, %r3;
    addc.u32 %r15, 0, 0;
    mov.b32 %f1, %r2;
    testp.normal.f32 %p1, %f1;
    selp.u32 %r16, 1, 0, %p1;
    mov.b32 %f2, %r3;
    copysign.f32 %f3, %f2, %f1;
    mov.b32 %r17, %f3;
    mul.wide.u32 %rd5, %r1, 48;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r5, %r6, %r7, %r8};
    st.global.v4.u32 [%rd6+16], {%r9, %r10, %r11, %r12};
    st.global.v4.u32 [%rd6+32], {%r13, %r15, %r16, %r17};
    ret;
}"#,
        "k",
    );
    let mut r = rng("bit_ops_and_tier5_instructions");
    let n = 96;
    let input = random_u32s(&mut r, 3 * n, u32::MAX);
    let din = exec.copy_to_device(&input).unwrap();
    let out = exec.copy_to_device(&vec![POISON_U32; 12 * n]).unwrap();
    launch(&exec, n as u32, 1, &k, (din.ptr(), out.ptr())).unwrap();
    let got = exec.copy_to_vec(&out).unwrap();
    for t in 0..n {
        let (a, b, c) = (input[3 * t], input[3 * t + 1], input[3 * t + 2]);
        let bytes = ((b as u64) << 32 | a as u64).to_le_bytes();
        let prmt = u32::from_le_bytes([bytes[0], bytes[4], bytes[1], bytes[5]]);
        let bfe = ((a >> 3) & 0x1FF) as i32;
        let bfe = ((bfe << 23) >> 23) as u32;
        let mask = 0xFFu32 << 4;
        let bfi = (a & !mask) | ((b << 4) & mask);
        let fa = f32::from_bits(a);
        let want = [
            a ^ b ^ c,
            a.rotate_left(c & 31),
            prmt,
            bfe,
            b.count_ones(),
            c.reverse_bits(),
            a.leading_zeros(),
            (a & 0xFF_FFFF).wrapping_mul(b & 0xFF_FFFF),
            bfi,
            a.overflowing_add(b).1 as u32,
            fa.is_normal() as u32,
            fa.copysign(f32::from_bits(b)).to_bits(), // PTX: the sign of the first source
        ];
        assert_eq!(
            &got[12 * t..12 * t + 12],
            &want,
            "thread {t}: a={a:#x} b={b:#x} c={c:#x}"
        );
    }
}

/// Mutated corpus instructions (operands dropped or swapped for immediates, modifiers
/// dropped or added) decode to `Ok` or `Err`, never a panic.
#[test]
fn mutated_instructions_never_panic_the_decoder() {
    let files = [
        CONFORMANCE_O3,
        include_str!("../../../kernels/ptx/bench.O3.ptx"),
    ];
    let mut tried = 0;
    for text in files {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim();
            if !t.ends_with(';') || t.starts_with('.') || t.starts_with("//") {
                continue;
            }
            let body = &t[..t.len() - 1];
            let (op, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
            let mut variants = vec![
                format!("{op};"),
                format!("{op}.f16 {rest};"),
                format!(
                    "{}{};",
                    op.split('.').next().unwrap_or(op),
                    if rest.is_empty() {
                        String::new()
                    } else {
                        format!(" {rest}")
                    }
                ),
            ];
            if let Some((head, _)) = rest.rsplit_once(',') {
                variants.push(format!("{op} {head};"));
                variants.push(format!("{op} {head}, 7;"));
                variants.push(format!("{op} {head}, {head};"));
            }
            for v in variants {
                let mut m = lines.clone();
                m[i] = &v;
                let src = m.join("\n");
                if let Ok(ast) = streamexec_ptx::parse_module(&src) {
                    // A layout error names no function: such a mutant never reached the decoder.
                    match streamexec_ptx::check_decodes(&ast, 0x10000) {
                        Err(e) if e.function().is_none() => {}
                        _ => tried += 1,
                    }
                }
            }
        }
    }
    assert!(tried > 200, "only {tried} mutants parsed");
}

/// Module-scope `.global` and `.const` data with initializers (including an address
/// initializer, relocated to where the module's data lives), read through symbols, generic
/// pointers and `ld.const`; kernels of one module share it.
#[test]
fn module_data_with_initializers() {
    let exec = host();
    let text = format!(
        "{HEADER}{}",
        r#"
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.global .align 8 .u64 table_ptr = table;
.const .align 4 .f32 scale = 0f40000000;
.global .align 4 .u32 counter;

.visible .entry bump()
{
    .reg .b32 %r<3>;
    atom.global.add.u32 %r1, [counter], 1;
    ret;
}

.visible .entry read(.param .u64 pout)
{
    .reg .b32 %r<8>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    ld.global.u64 %rd2, [table_ptr];
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.u32 %r2, [%rd4];
    ld.const.f32 %f1, [scale];
    cvt.rn.f32.u32 %f2, %r2;
    mul.f32 %f2, %f2, %f1;
    cvt.rzi.u32.f32 %r3, %f2;
    ld.global.u32 %r4, [counter];
    add.s64 %rd5, %rd1, %rd3;
    add.u32 %r5, %r3, %r4;
    st.global.u32 [%rd5], %r5;
    ret;
}"#
    );
    let bump: TypedKernel<()> = exec
        .get_kernel(&Spec::new(0).add_cuda_ptx_in_memory(&text, "bump"))
        .unwrap();
    let read: TypedKernel<(DevicePtr<u32>,)> = exec
        .get_kernel(&Spec::new(1).add_cuda_ptx_in_memory(&text, "read"))
        .unwrap();
    launch(&exec, 32, 3, &bump, ()).unwrap();
    let out = exec.copy_to_device(&[POISON_U32; 4]).unwrap();
    launch(&exec, 4, 1, &read, (out.ptr(),)).unwrap();
    assert_eq!(
        exec.copy_to_vec(&out).unwrap(),
        vec![20 + 96, 40 + 96, 60 + 96, 80 + 96]
    );
}

/// Named, counted barriers: warps 0-1 meet at barrier 1 (64 threads) while warps 2-3 meet at
/// barrier 2, then everyone at barrier 0; a warp-shuffle reduction and %lanemask_lt /
/// vote.uni run in between.
#[test]
fn named_barriers_and_warp_reduction() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 sums[4];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    shfl.sync.down.b32 %r3, %r2, 16, 31, -1;
    add.u32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 8, 31, -1;
    add.u32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 4, 31, -1;
    add.u32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 2, 31, -1;
    add.u32 %r2, %r2, %r3;
    shfl.sync.down.b32 %r3, %r2, 1, 31, -1;
    add.u32 %r2, %r2, %r3;
    shr.u32 %r4, %r1, 5;
    mov.u32 %r5, %laneid;
    setp.ne.u32 %p1, %r5, 0;
    @%p1 bra SKIP;
    mul.wide.u32 %rd5, %r4, 4;
    mov.u64 %rd6, sums;
    add.s64 %rd6, %rd6, %rd5;
    st.shared.u32 [%rd6], %r2;
SKIP:
    setp.lt.u32 %p2, %r1, 64;
    @%p2 bra LOW;
    bar.sync 2, 64;
    bra.uni JOIN;
LOW:
    bar.sync 1, 64;
JOIN:
    bar.sync 0;
    ld.shared.u32 %r6, [sums];
    ld.shared.u32 %r7, [sums+4];
    ld.shared.u32 %r8, [sums+8];
    ld.shared.u32 %r9, [sums+12];
    add.u32 %r6, %r6, %r7;
    add.u32 %r6, %r6, %r8;
    add.u32 %r6, %r6, %r9;
    mov.u32 %r10, %lanemask_lt;
    popc.b32 %r11, %r10;
    setp.lt.u32 %p3, %r5, 40;
    vote.sync.uni.pred %p3, %p3, -1;
    selp.u32 %r12, 1, 0, %p3;
    mul.wide.u32 %rd5, %r1, 8;
    add.s64 %rd7, %rd2, %rd5;
    mul.lo.u32 %r13, %r11, 2;
    add.u32 %r13, %r13, %r12;
    st.global.v2.u32 [%rd7], {%r6, %r13};
    ret;
}"#,
        "k",
    );
    let mut r = rng("named_barriers_and_warp_reduction");
    let input = random_u32s(&mut r, 128, 1 << 20);
    let din = exec.copy_to_device(&input).unwrap();
    let out = exec.copy_to_device(&[POISON_U32; 256]).unwrap();
    launch(&exec, 128, 1, &k, (din.ptr(), out.ptr())).unwrap();
    let total: u32 = input.iter().sum();
    let got = exec.copy_to_vec(&out).unwrap();
    for t in 0..128 {
        // {block sum, 2 * popc(lanemask_lt) + vote.uni(lane < 40) = 2 * lane + 1}
        assert_eq!(
            got[2 * t..2 * t + 2],
            [total, 2 * (t as u32 % 32) + 1],
            "thread {t}"
        );
    }
}

/// A struct passed by value, read through a generic pointer to the parameter (`cvta.param`),
/// and through `ld.param` with a register address.
#[test]
fn param_space_by_address() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, [u32; 4])> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 pout, .param .align 4 .b8 s[16])
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [pout];
    mov.u64 %rd2, s;
    cvta.param.u64 %rd3, %rd2;
    ld.u32 %r1, [%rd3+4];
    ld.param.u32 %r2, [%rd2+12];
    add.u32 %r3, %r1, %r2;
    st.global.u32 [%rd1], %r3;
    ret;
}"#,
        "k",
    );
    let out = exec.copy_to_device(&[POISON_U32]).unwrap();
    launch(&exec, 1, 1, &k, (out.ptr(), [1, 20, 300, 4000])).unwrap();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), vec![4020]);
}

/// `nanosleep.u32` with a register and with an immediate operand: the warp waits (the host
/// thread sleeps for requests from 50 µs on, at most 1 ms; shorter ones yield the CPU) and
/// goes on. Each thread writes how long its two sleeps took (`%clock64` counts nanoseconds on
/// the host) and its id.
#[test]
fn nanosleep_waits_and_the_kernel_goes_on() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u64>, u32)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 pout, .param .u32 pns)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r1, [pns];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r2, %r2, %r3, %tid.x;
    mul.wide.u32 %rd2, %r2, 24;
    add.u64 %rd3, %rd1, %rd2;
    mov.u64 %rd4, %clock64;
    nanosleep.u32 %r1;
    mov.u64 %rd5, %clock64;
    nanosleep.u32 60000;
    mov.u64 %rd6, %clock64;
    nanosleep.u32 0;
    sub.u64 %rd7, %rd5, %rd4;
    sub.u64 %rd8, %rd6, %rd5;
    cvt.u64.u32 %rd9, %r2;
    st.global.u64 [%rd3], %rd7;
    st.global.u64 [%rd3+8], %rd8;
    st.global.u64 [%rd3+16], %rd9;
    ret;
}"#,
        "k",
    );
    let (threads, blocks) = (40usize, 2usize);
    let n = threads * blocks;
    // A short request (yields), a long one (sleeps), one past the 1 ms cap.
    for (ns, at_least, below) in [
        (100u32, 0u64, u64::MAX),
        (200_000, 200_000, u64::MAX),
        (u32::MAX, 1_000_000, 2_000_000_000),
    ] {
        let out = exec.copy_to_device(&vec![u64::MAX; 3 * n]).unwrap();
        launch(&exec, threads as u32, blocks as u32, &k, (out.ptr(), ns)).unwrap();
        let got = exec.copy_to_vec(&out).unwrap();
        for t in 0..n {
            let (by_reg, by_imm, id) = (got[3 * t], got[3 * t + 1], got[3 * t + 2]);
            assert_eq!(id, t as u64, "ns {ns}: thread {t} did not finish");
            assert!(
                (at_least..below).contains(&by_reg),
                "ns {ns}: thread {t} slept {by_reg} ns on `nanosleep.u32 %r1`"
            );
            assert!(
                (60_000..2_000_000_000).contains(&by_imm),
                "ns {ns}: thread {t} slept {by_imm} ns on `nanosleep.u32 60000`"
            );
        }
    }
}

/// `nanosleep` takes `.u32` and one register or unsigned 32-bit immediate; anything else is a
/// load error naming the line and the instruction.
#[test]
fn nanosleep_operand_forms_are_checked_at_load() {
    let exec = host();
    for bad in [
        "nanosleep %r1;",
        "nanosleep.b32 %r1;",
        "nanosleep.u64 %rd1;",
        "nanosleep.u32.u32 %r1;",
        "nanosleep.u32 %r1, %r1;",
        "nanosleep.u32 -1;",
        "nanosleep.u32 4294967296;",
        "nanosleep.u32 1.5;",
        "nanosleep.u32 %tid.x;",
        "nanosleep.u32 [%rd1];",
    ] {
        let text = format!(
            "{HEADER}.visible .entry k()\n{{\n    .reg .b32 %r<3>;\n    .reg .b64 %rd<3>;\n    \
             {bad}\n    ret;\n}}\n"
        );
        let spec = Spec::new(0).add_cuda_ptx_in_memory(&text, "k");
        let e = exec.get_untyped_kernel(&spec).unwrap_err();
        let s = e.to_string();
        assert!(matches!(e, Error::Ptx(_)), "{bad}: {s}");
        assert!(
            s.contains("line 8") && s.contains("nanosleep takes the type .u32"),
            "{bad}: {s}"
        );
    }
    // The accepted forms load.
    let text = format!(
        "{HEADER}.visible .entry k()\n{{\n    .reg .b32 %r<3>;\n    mov.u32 %r1, 5;\n    \
         nanosleep.u32 %r1;\n    nanosleep.u32 0xFFFFFFFF;\n    ret;\n}}\n"
    );
    let spec = Spec::new(0).add_cuda_ptx_in_memory(&text, "k");
    exec.get_untyped_kernel(&spec)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// `isspacep` on generic addresses of each space: a shared variable, a local array, a kernel
/// parameter and a device buffer, each tested against every space. Output: one u32 per
/// (address, space) pair, 1 where the address lies in the space.
#[test]
fn isspacep_tells_the_window_of_a_generic_address() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>,)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 pout)
{
    .shared .align 4 .b32 sh[4];
    .local .align 4 .b8 loc[16];
    .reg .pred %p<5>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd2, sh;
    cvta.shared.u64 %rd3, %rd2;
    mov.u64 %rd4, loc;
    cvta.local.u64 %rd5, %rd4;
    mov.u64 %rd6, pout;
    cvta.param.u64 %rd7, %rd6;
    cvta.to.global.u64 %rd8, %rd1;
    cvta.global.u64 %rd8, %rd8;
    // %rd9 = the address of row tid: shared, local, param, global.
    setp.eq.u32 %p1, %r1, 0;
    selp.b64 %rd9, %rd3, %rd5, %p1;
    setp.eq.u32 %p1, %r1, 2;
    selp.b64 %rd9, %rd7, %rd9, %p1;
    setp.eq.u32 %p1, %r1, 3;
    selp.b64 %rd9, %rd8, %rd9, %p1;
    isspacep.shared %p1, %rd9;
    isspacep.local %p2, %rd9;
    isspacep.param %p3, %rd9;
    isspacep.global %p4, %rd9;
    mul.wide.u32 %rd10, %r1, 16;
    add.u64 %rd11, %rd1, %rd10;
    selp.u32 %r2, 1, 0, %p1;
    st.global.u32 [%rd11], %r2;
    selp.u32 %r2, 1, 0, %p2;
    st.global.u32 [%rd11+4], %r2;
    selp.u32 %r2, 1, 0, %p3;
    st.global.u32 [%rd11+8], %r2;
    selp.u32 %r2, 1, 0, %p4;
    st.global.u32 [%rd11+12], %r2;
    ret;
}"#,
        "k",
    );
    let out = poisoned(&exec, 16, POISON_U32);
    run(&exec, 4, 1, &k, (out.ptr(),));
    #[rustfmt::skip]
    let want = vec![
        1, 0, 0, 0, // shared
        0, 1, 0, 0, // local
        0, 0, 1, 0, // param
        0, 0, 0, 1, // global
    ];
    assert_eq!(download(&exec, &out), want);
}

/// A call that takes a return value from a `void` function (numba's `declare_device` of a C
/// function declares it this way): the call runs, the function's stores land; a call with the
/// wrong number of arguments is still refused at load.
#[test]
fn a_void_function_called_with_a_return_slot_runs() {
    let exec = host();
    let body = |args: &str| {
        format!(
            r#"
.visible .func consume(.param .b64 p)
{{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, 42;
    st.u32 [%rd1], %r1;
    ret;
}}
.visible .entry k(.param .u64 pout)
{{
    .reg .b64 %rd<4>;
    .reg .b32 %r<3>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    {{
    .param .b64 param0;
    .param .b32 retval0;
    st.param.b64 [param0], %rd3;
    call.uni (retval0), consume, ({args});
    ld.param.b32 %r2, [retval0];
    }}
    ret;
}}"#
        )
    };
    let k: TypedKernel<(DevicePtr<u32>,)> = ptx_kernel(&exec, &body("param0"), "k");
    let out = poisoned(&exec, 8, POISON_U32);
    run(&exec, 8, 1, &k, (out.ptr(),));
    assert_eq!(download(&exec, &out), vec![42; 8]);
    let spec =
        Spec::new(1).add_cuda_ptx_in_memory(&format!("{HEADER}{}", body("param0, param0")), "k");
    let e = exec
        .get_kernel::<(DevicePtr<u32>,)>(&spec)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("takes 1 argument(s)"), "{e}");
}

/// Recursion where a caller passes the address of its own local variable to the callee,
/// which writes its result there (numba returns every value this way): each activation has
/// local memory of its own, so `fib` through return slots in the callers' frames is right,
/// with the lanes of a warp at different depths. Addresses are taken both as `.local`
/// (`[depot+8]`) and generic (`cvta.local`).
#[test]
fn recursion_through_pointers_into_the_callers_frame() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u64>, DevicePtr<u64>)> = ptx_kernel(
        &exec,
        r#"
.func fib(.param .b64 pret, .param .b64 pn)
{
    .local .align 8 .b8 depot[16];
    .reg .pred %p<2>;
    .reg .b64 %rd<24>;
    mov.u64 %rd20, depot;
    cvta.local.u64 %rd21, %rd20;
    ld.param.u64 %rd3, [pret];
    ld.param.u64 %rd4, [pn];
    add.u64 %rd5, %rd21, 0;
    add.u64 %rd7, %rd21, 8;
    mov.u64 %rd6, 0;
    st.local.u64 [depot], %rd6;
    st.local.u64 [depot+8], %rd6;
    setp.lt.s64 %p1, %rd4, 2;
    @%p1 bra BASE;
    add.s64 %rd8, %rd4, -1;
    {
    .param .b64 a0;
    .param .b64 a1;
    st.param.b64 [a0], %rd5;
    st.param.b64 [a1], %rd8;
    call.uni fib, (a0, a1);
    }
    add.s64 %rd12, %rd4, -2;
    {
    .param .b64 b0;
    .param .b64 b1;
    st.param.b64 [b0], %rd7;
    st.param.b64 [b1], %rd12;
    call.uni fib, (b0, b1);
    }
    ld.local.u64 %rd11, [depot];
    ld.u64 %rd14, [%rd7];
    add.s64 %rd15, %rd14, %rd11;
    st.u64 [%rd3], %rd15;
    ret;
BASE:
    st.u64 [%rd3], %rd4;
    ret;
}
.visible .entry k(.param .u64 pout, .param .u64 pin)
{
    .local .align 8 .b8 slot[8];
    .reg .b32 %r<2>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [pout];
    ld.param.u64 %rd2, [pin];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u64 %rd5, [%rd4];
    mov.u64 %rd6, slot;
    cvta.local.u64 %rd7, %rd6;
    {
    .param .b64 c0;
    .param .b64 c1;
    st.param.b64 [c0], %rd7;
    st.param.b64 [c1], %rd5;
    call.uni fib, (c0, c1);
    }
    ld.local.u64 %rd8, [slot];
    add.s64 %rd9, %rd1, %rd3;
    st.global.u64 [%rd9], %rd8;
    ret;
}"#,
        "k",
    );
    fn fib(n: u64) -> u64 {
        if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
    }
    let mut r = rng("recursion_through_pointers_into_the_callers_frame");
    let n: Vec<u64> = (0..40)
        .map(|_| rand::RngExt::random_range(&mut r, 0..16u64))
        .collect();
    let input = upload(&exec, &n);
    let out = poisoned(&exec, 40, u64::MAX);
    run(&exec, 40, 1, &k, (out.ptr(), input.ptr()));
    let want: Vec<u64> = n.iter().map(|&v| fib(v)).collect();
    assert_eq!(download(&exec, &out), want);
}

/// Calls through function addresses (`mov.u64 %rd, f;` then `call (r), %rd, (a), proto;`, as
/// numba's runtime calls a destructor): each lane calls the function its register names (the
/// lanes of a warp diverge between two functions and come back together), on the interpreter
/// (a forced JIT refuses the kernel); an address that is no function is a fault.
#[test]
fn indirect_calls_reach_the_function_each_lane_names() {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>, u32)> = ptx_kernel(
        &exec,
        r#"
.func (.param .b32 r) twice(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    add.u32 %r2, %r1, %r1;
    st.param.b32 [r], %r2;
    ret;
}
.func (.param .b32 r) plus_seven(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    add.u32 %r2, %r1, 7;
    st.param.b32 [r], %r2;
    ret;
}
.visible .entry k(.param .u64 pout, .param .u32 pbad)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r5, [pbad];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    mov.u64 %rd2, twice;
    mov.u64 %rd3, plus_seven;
    selp.b64 %rd4, %rd2, %rd3, %p1;
    setp.ne.u32 %p2, %r5, 0;
    @%p2 add.u64 %rd4, %rd4, 4096;
    {
    .param .b32 p0;
    .param .b32 r0;
    st.param.b32 [p0], %r1;
    prototype_0 : .callprototype (.param .b32 _) _ (.param .b32 _);
    call (r0), %rd4, (p0), prototype_0;
    ld.param.b32 %r3, [r0];
    }
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r3;
    ret;
}"#,
        "k",
    );
    let out = poisoned(&exec, 64, POISON_U32);
    run(&exec, 64, 1, &k, (out.ptr(), 0));
    let want: Vec<u32> = (0..64)
        .map(|t| if t % 2 == 0 { 2 * t } else { t + 7 })
        .collect();
    assert_eq!(download(&exec, &out), want);
    let e = fault_text(launch(&exec, 64, 1, &k, (out.ptr(), 1)));
    assert!(e.contains("indirect call to"), "{e}");
}
