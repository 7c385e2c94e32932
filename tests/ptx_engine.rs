//! The host platform's PTX engine through the public API: hand-written PTX kernels checked
//! against Rust references on random inputs, warp semantics, barriers, atomics, calls, faults
//! that name the instruction and thread, load-time rejection, and the race checker.

mod common;

use streamexec::{
    DevicePtr, Error, MultiKernelLoaderSpec, PlatformManager, SharedMemory, StreamExecutor,
    TypedKernel,
};

use common::{POISON_U32, random_u32s, rng};

fn host() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .unwrap()
        .executor_for_device(0)
        .unwrap()
}

const HEADER: &str = ".version 7.0\n.target sm_70\n.address_size 64\n";

fn ptx_kernel<A: streamexec::KernelArgs>(
    exec: &StreamExecutor,
    body: &str,
    name: &str,
) -> TypedKernel<A> {
    let text = format!("{HEADER}{body}");
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(&text, name);
    exec.get_kernel(&spec).unwrap_or_else(|e| panic!("{e}"))
}

fn launch<A: streamexec::KernelArgs>(
    exec: &StreamExecutor,
    threads: impl Into<streamexec::ThreadDim>,
    blocks: impl Into<streamexec::BlockDim>,
    k: &TypedKernel<A>,
    args: A,
) -> streamexec::Result<()> {
    let mut s = exec.create_stream()?;
    s.then_launch(threads, blocks, k, args);
    s.block_host_until_done()
}

fn fault_text(r: streamexec::Result<()>) -> String {
    match r {
        Err(e @ Error::KernelFault { .. }) => e.to_string(),
        other => panic!("expected a KernelFault, got {other:?}"),
    }
}

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
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/ptx");
    let mut entries = 0;
    for f in std::fs::read_dir(dir).unwrap() {
        let path = f.unwrap().path();
        if path.extension().is_none_or(|e| e != "ptx") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let ast = streamexec::ptx::parse_module(&text).unwrap();
        let data = streamexec::ptx::module_data(&ast).unwrap();
        let m = streamexec::ptx::decode_module(&ast, &data, 0x1000)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let want = ast
            .functions
            .iter()
            .filter(|f| f.is_entry && f.body.is_some())
            .count();
        assert_eq!(m.programs.len(), want, "{}", path.display());
        entries += want;
    }
    assert!(entries >= 20, "only {entries} entries found");
}

const CONFORMANCE_O0: &str = include_str!("../kernels/ptx/conformance.O0.ptx");
const CONFORMANCE_O3: &str = include_str!("../kernels/ptx/conformance.O3.ptx");

fn corpus_kernel<A: streamexec::KernelArgs>(
    exec: &StreamExecutor,
    ptx: &str,
    name: &str,
) -> TypedKernel<A> {
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(ptx, name);
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
