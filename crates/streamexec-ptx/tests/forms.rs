//! Hand-written PTX for forms compilers emit beyond the committed corpus, each run on both
//! engines through the crate's API with the engine chosen per launch: barrier spellings and
//! thread counts (`barrier.cta.*.aligned`, `bar.red` with a count, `bar.arrive`), launch
//! bounds (`.maxntid`, `.reqntid`, `.minnctapersm`), `%dynamic_smem_size`, `WARP_SZ` and the
//! cluster registers of a launch without clusters, and the limits of recursion (a fault naming
//! the thread, never a crash).

use std::sync::Arc;

use streamexec_ptx::{AllocTable, Arg, Dim3, Error, LaunchConfig, Module, PtxEngine};

const HEADER: &str = ".version 7.8\n.target sm_90\n.address_size 64\n";
const POISON: u32 = 0xDEAD_BEEF;

fn engines() -> Vec<PtxEngine> {
    if cfg!(feature = "jit") {
        vec![PtxEngine::Jit, PtxEngine::Interpreter]
    } else {
        vec![PtxEngine::Interpreter]
    }
}

/// A device of its own: memory and a pool.
struct Dev {
    table: Arc<AllocTable>,
    pool: rayon::ThreadPool,
}

impl Dev {
    fn new() -> Dev {
        Dev {
            table: Arc::new(AllocTable::default()),
            pool: rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .expect("a pool"),
        }
    }

    fn load(&self, body: &str) -> Arc<Module> {
        Module::load(&format!("{HEADER}{body}"), &self.table)
            .unwrap_or_else(|e| panic!("loading: {e}"))
    }

    /// `n` poisoned u32s; runs `entry` with the buffer as its only pointer parameter (then
    /// `scalars`), and returns the buffer's contents.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        m: &Arc<Module>,
        entry: &str,
        engine: PtxEngine,
        block: Dim3,
        grid: Dim3,
        n: usize,
        scalars: &[u32],
        shared: Option<u64>,
    ) -> Result<Vec<u32>, Error> {
        let bytes = 4 * n as u64;
        let addr = self.table.allocate(bytes).expect("memory");
        let init: Vec<u8> = std::iter::repeat_n(POISON.to_le_bytes(), n)
            .flatten()
            .collect();
        self.table.write(addr, &init).expect("live");
        let k = m.kernel(entry)?;
        let config = LaunchConfig {
            grid,
            block,
            engine,
            ..LaunchConfig::default()
        };
        let sc: Vec<[u8; 4]> = scalars.iter().map(|s| s.to_le_bytes()).collect();
        let mut args = vec![Arg::Pointer(self.table.resolve(addr, bytes).expect("live"))];
        args.extend(sc.iter().map(|s| Arg::Scalar(s)));
        args.extend(shared.map(Arg::SharedMemory));
        let r = k.launch(&self.pool, &config, &args);
        let mut out = vec![0u8; bytes as usize];
        self.table.read(addr, &mut out).expect("live");
        self.table.free(addr);
        r.map(|()| {
            out.chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
    }
}

fn d1(x: u32) -> Dim3 {
    Dim3::new(x, 1, 1)
}

/// Each thread stores what it reads at the barriers: counts at `bar.red` with a thread count
/// (two groups of 64 threads reduce separately on barriers 1 and 2), the `barrier.cta`
/// spellings, and `.aligned`.
#[test]
fn barrier_spellings_and_counted_reductions() {
    let dev = Dev::new();
    let m = dev.load(
        r#"
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<4>; .reg .b32 %r<12>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r2, %r1, 3;
    setp.eq.u32 %p1, %r2, 0;               // every fourth thread
    setp.lt.u32 %p2, %r1, 64;              // the first group
    @%p2 bra FIRST;
    barrier.cta.red.popc.aligned.u32 %r3, 2, 64, %p1;
    bar.red.and.pred %p3, 3, 64, !%p1;
    bra.uni JOIN;
FIRST:
    bar.cta.red.popc.u32 %r3, 1, 64, %p1;
    barrier.red.or.pred %p3, 4, 64, %p1;
JOIN:
    selp.u32 %r4, 1, 0, %p3;
    barrier.cta.sync.aligned 0;
    barrier.sync 5;
    bar.cta.sync 6, 128;
    st.global.v2.u32 [%rd3], {%r3, %r4};
    mov.u32 %r5, WARP_SZ;
    add.u32 %r6, %r5, WARP_SZ;
    st.global.v2.u32 [%rd3+8], {%r5, %r6};
    ret;
}
"#,
    );
    for e in engines() {
        let got = dev
            .run(&m, "k", e, d1(128), d1(1), 4 * 128 + 1, &[], None)
            .unwrap_or_else(|err| panic!("{e:?}: {err}"));
        for t in 0..128 {
            // 16 of each 64 have p; the second group's `and` of !p is false, the first's `or`
            // of p true.
            let want = [16, if t < 64 { 1 } else { 0 }, 32, 64];
            assert_eq!(&got[4 * t..4 * t + 4], &want, "{e:?} thread {t}");
        }
        assert_eq!(got[4 * 128], POISON, "{e:?}");
    }
}

/// `bar.arrive` with a bad barrier id is the same fault on both engines.
#[test]
fn barrier_ids_are_checked_at_arrive() {
    let dev = Dev::new();
    let m = dev.load(
        r#"
.visible .entry k(.param .u64 out, .param .u32 id)
{
    .reg .b32 %r<3>;
    ld.param.u32 %r1, [id];
    bar.arrive %r1, 32;
    ret;
}
"#,
    );
    let texts: Vec<String> = engines()
        .into_iter()
        .map(
            |e| match dev.run(&m, "k", e, d1(32), d1(1), 1, &[17], None) {
                Err(err @ Error::Fault { .. }) => err.to_string(),
                other => panic!("{e:?}: {other:?}"),
            },
        )
        .collect();
    assert!(
        texts[0].contains("barrier id 17 is not in 0..16"),
        "{}",
        texts[0]
    );
    assert!(texts.iter().all(|t| *t == texts[0]), "{texts:?}");
}

/// `.maxntid` bounds the product of the block's extents, `.reqntid` fixes them;
/// `.minnctapersm` is read and does not limit anything; a zero extent does not load.
#[test]
fn launch_bounds_are_checked_at_launch() {
    let dev = Dev::new();
    let body = |directive: &str| {
        format!(
            ".visible .entry k(.param .u64 out) {directive}\n{{\n    .reg .b32 %r<2>; .reg .b64 %rd<2>;\n    ld.param.u64 %rd1, [out];\n    mov.u32 %r1, %ntid.y;\n    st.global.u32 [%rd1], %r1;\n    ret;\n}}\n"
        )
    };
    let m = dev.load(&body(".maxntid 32, 4, 1 .minnctapersm 2"));
    for e in engines() {
        let ok = dev.run(&m, "k", e, Dim3::new(16, 8, 1), d1(1), 1, &[], None);
        assert_eq!(
            ok.unwrap(),
            vec![8],
            "{e:?}: 128 threads in another shape fit"
        );
        match dev.run(&m, "k", e, Dim3::new(16, 8, 2), d1(1), 1, &[], None) {
            Err(err @ Error::Launch { .. }) => {
                let s = err.to_string();
                assert!(s.contains(".maxntid 32, 4, 1") && s.contains("256"), "{s}");
            }
            other => panic!("{e:?}: {other:?}"),
        }
    }
    let k = m.kernel("k").unwrap();
    assert_eq!(
        (k.max_threads_per_block(), k.required_block()),
        (Some(128), None)
    );
    let m = dev.load(&body(".reqntid 32, 2"));
    let k = m.kernel("k").unwrap();
    assert_eq!(
        (k.max_threads_per_block(), k.required_block()),
        (Some(64), Some(Dim3::new(32, 2, 1)))
    );
    for e in engines() {
        let ok = dev.run(&m, "k", e, Dim3::new(32, 2, 1), d1(3), 1, &[], None);
        assert_eq!(ok.unwrap(), vec![2], "{e:?}");
        match dev.run(&m, "k", e, Dim3::new(64, 1, 1), d1(1), 1, &[], None) {
            Err(err @ Error::Launch { .. }) => {
                let s = err.to_string();
                assert!(s.contains(".reqntid 32, 2, 1"), "{s}");
            }
            other => panic!("{e:?}: {other:?}"),
        }
    }
    let bad = Module::load(&format!("{HEADER}{}", body(".maxntid 0, 1, 1")), &dev.table);
    match bad {
        Err(Error::Ptx(p)) => assert!(p.to_string().contains(".maxntid 0, 1, 1"), "{p}"),
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("a zero extent loaded"),
    }
}

/// `%dynamic_smem_size` is the size the launch asked for (the placement still rounds to 16),
/// and the predefined identifiers of a launch without clusters read as a one-block cluster.
#[test]
fn special_registers_of_the_launch() {
    let dev = Dev::new();
    let m = dev.load(
        r#"
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<12>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 32;
    add.s64 %rd3, %rd1, %rd2;
    mov.u32 %r2, %dynamic_smem_size;
    mov.u32 %r3, %clusterid.x;
    mov.u32 %r4, %nclusterid.x;
    mov.u32 %r5, %cluster_ctarank;
    mov.u32 %r6, %cluster_nctarank;
    mov.u32 %r7, %cluster_nctaid.y;
    mov.u32 %r8, %is_explicit_cluster;
    mov.u32 %r9, %aggr_smem_size;
    st.global.v4.u32 [%rd3], {%r2, %r3, %r4, %r5};
    st.global.v4.u32 [%rd3+16], {%r6, %r7, %r8, %r9};
    ret;
}
"#,
    );
    for e in engines() {
        let got = dev
            .run(&m, "k", e, d1(32), d1(3), 3 * 8 + 1, &[], Some(20))
            .unwrap_or_else(|err| panic!("{e:?}: {err}"));
        for b in 0..3u32 {
            let want = [20, b, 3, 0, 1, 1, 0, 32];
            assert_eq!(
                &got[8 * b as usize..8 * b as usize + 8],
                &want,
                "{e:?} block {b}"
            );
        }
        assert_eq!(got[24], POISON);
    }
}

const RECURSE: &str = r#"
.func (.param .b32 ret) down(.param .b32 n)
{
    .local .align 4 .b8 depot[1024];
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<3>;
    ld.param.b32 %r1, [n];
    mov.u64 %rd1, depot;
    st.local.u32 [%rd1], %r1;
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra BASE;
    add.s32 %r2, %r1, -1;
    {
        .param .b32 arg;
        st.param.b32 [arg], %r2;
        .param .b32 r;
        call.uni (r), down, (arg);
        ld.param.b32 %r3, [r];
    }
    ld.local.u32 %r4, [%rd1];
    add.s32 %r5, %r3, %r4;
    st.param.b32 [ret], %r5;
    ret;
BASE:
    st.param.b32 [ret], 0;
    ret;
}

.visible .entry k(.param .u64 out, .param .u32 n)
{
    .reg .b32 %r<4>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    add.u32 %r1, %r1, %r2;
    {
        .param .b32 arg;
        st.param.b32 [arg], %r1;
        .param .b32 r;
        call.uni (r), down, (arg);
        ld.param.b32 %r3, [r];
    }
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}
"#;

/// Recursion keeps each activation's registers and local memory (the sum 1 + .. + n); a
/// recursion deeper than the thread's frame budget is a fault naming the thread; a forced JIT
/// refuses the kernel.
#[test]
fn recursion_depth_is_bounded_by_a_fault() {
    let dev = Dev::new();
    let m = dev.load(RECURSE);
    let got = dev
        .run(&m, "k", PtxEngine::Auto, d1(40), d1(1), 41, &[10], None)
        .unwrap();
    for t in 0..40u32 {
        let n = 10 + t;
        assert_eq!(got[t as usize], n * (n + 1) / 2, "thread {t}");
    }
    assert_eq!(got[40], POISON);
    // Each level saves 1 KiB of local memory: 200 levels are past the 64 KiB of frames.
    match dev.run(
        &m,
        "k",
        PtxEngine::Interpreter,
        d1(40),
        d1(1),
        41,
        &[160],
        None,
    ) {
        Err(err @ Error::Fault { .. }) => {
            let s = err.to_string();
            assert!(s.contains("stack overflow") && s.contains("thread"), "{s}");
        }
        other => panic!("{other:?}"),
    }
    if cfg!(feature = "jit") {
        match dev.run(&m, "k", PtxEngine::Jit, d1(40), d1(1), 41, &[10], None) {
            Err(Error::JitUnsupported { detail, .. }) => {
                assert!(detail.contains("recursive"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A recursion with no end stops at the call-depth limit, a fault, not a crash of the host.
#[test]
fn unbounded_recursion_is_a_fault() {
    let dev = Dev::new();
    let m = dev.load(
        r#"
.func spin(.param .b32 n)
{
    .reg .b32 %r<2>;
    ld.param.b32 %r1, [n];
    {
        .param .b32 arg;
        st.param.b32 [arg], %r1;
        call.uni spin, (arg);
    }
    ret;
}
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<2>;
    mov.u32 %r1, %tid.x;
    {
        .param .b32 arg;
        st.param.b32 [arg], %r1;
        call.uni spin, (arg);
    }
    ret;
}
"#,
    );
    match dev.run(&m, "k", PtxEngine::Auto, d1(8), d1(1), 1, &[], None) {
        Err(err @ Error::Fault { .. }) => {
            let s = err.to_string();
            assert!(
                s.contains("call stack overflow") && s.contains("thread (0, 0, 0)"),
                "{s}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// `atom`/`red` `.add.noftz` on halves, in global and shared memory: 128 threads each add
/// 1.0 (exact at every step, so any order gives 128.0); the old values `atom` returns are
/// 0.0 .. 127.0, each once.
#[test]
fn half_atomics_add_in_place() {
    let dev = Dev::new();
    let m = dev.load(
        r#"
.visible .entry k(.param .u64 out)
{
    .shared .align 4 .b8 sh[4];
    .reg .pred %p<2>; .reg .b16 %h<5>; .reg .b32 %r<6>; .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 st.global.v4.u32 [%rd1], {0, 0, 0, 0};
    @%p1 st.shared.u32 [sh], 0;
    bar.sync 0;
    mov.b16 %h1, 0x3C00;
    atom.global.add.noftz.f16 %h2, [%rd1], %h1;
    mov.b32 %r2, 0x3C003C00;
    red.global.add.noftz.f16x2 [%rd1+4], %r2;
    mov.b16 %h3, 0x3F80;
    red.add.noftz.bf16 [%rd1+8], %h3;
    atom.shared.add.noftz.f16 %h4, [sh], %h1;
    bar.sync 0;
    @%p1 ld.shared.u32 %r3, [sh];
    @%p1 st.global.u32 [%rd1+12], %r3;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    cvt.u32.u16 %r4, %h2;
    st.global.u32 [%rd3+16], %r4;
    ret;
}
"#,
    );
    let f16_of = |k: u32| -> u32 {
        if k == 0 {
            return 0;
        }
        let e = 31 - k.leading_zeros();
        ((e + 15) << 10) | ((k << (10 - e)) & 0x3FF)
    };
    for e in engines() {
        let got = dev
            .run(&m, "k", e, d1(128), d1(1), 4 + 128 + 1, &[], None)
            .unwrap_or_else(|err| panic!("{e:?}: {err}"));
        assert_eq!(&got[..4], &[0x5800, 0x5800_5800, 0x4300, 0x5800], "{e:?}");
        let mut olds = got[4..4 + 128].to_vec();
        olds.sort_unstable();
        let mut want: Vec<u32> = (0..128).map(f16_of).collect();
        want.sort_unstable();
        assert_eq!(olds, want, "{e:?}: the old values");
        assert_eq!(got[4 + 128], POISON, "{e:?}");
    }
}

/// `redux.sync` (sm_80's `__reduce_*_sync`) over the executing lanes of the member mask: the
/// whole warp, then only the lanes with an odd value.
#[test]
fn redux_reduces_the_executing_lanes() {
    let dev = Dev::new();
    let m = dev.load(
        r#"
.visible .entry k(.param .u64 out, .param .u32 seed)
{
    .reg .pred %p<2>; .reg .b32 %r<16>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [seed];
    mov.u32 %r2, %tid.x;
    // A scrambled value per thread, negative for some.
    mad.lo.s32 %r3, %r2, -1640531535, %r1;
    shr.s32 %r3, %r3, 20;
    redux.sync.add.s32 %r4, %r3, -1;
    redux.sync.min.s32 %r5, %r3, -1;
    redux.sync.max.u32 %r6, %r3, -1;
    redux.sync.and.b32 %r7, %r3, -1;
    redux.sync.or.b32 %r8, %r3, -1;
    redux.sync.xor.b32 %r9, %r3, -1;
    and.b32 %r10, %r3, 1;
    setp.eq.u32 %p1, %r10, 1;
    mov.u32 %r11, 0;
    activemask.b32 %r12;
    @%p1 redux.sync.min.u32 %r11, %r3, %r12;
    mul.wide.u32 %rd2, %r2, 32;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r4, %r5, %r6, %r7};
    st.global.v4.u32 [%rd3+16], {%r8, %r9, %r11, %r3};
    ret;
}
"#,
    );
    for e in engines() {
        for seed in [7u32, 0x9E37_79B9] {
            let got = dev
                .run(&m, "k", e, d1(64), d1(1), 8 * 64 + 1, &[seed], None)
                .unwrap_or_else(|err| panic!("{e:?}: {err}"));
            for w in 0..2 {
                let v: Vec<u32> = (0..32).map(|l| got[8 * (32 * w + l) + 7]).collect();
                let odd: Vec<u32> = v.iter().copied().filter(|x| x & 1 == 1).collect();
                let sum = v.iter().fold(0u32, |s, x| s.wrapping_add(*x));
                let smin = v.iter().map(|&x| x as i32).min().unwrap() as u32;
                let umax = *v.iter().max().unwrap();
                let and = v.iter().fold(u32::MAX, |s, x| s & x);
                let or = v.iter().fold(0, |s, x| s | x);
                let xor = v.iter().fold(0, |s, x| s ^ x);
                let odd_min = odd.iter().copied().min().unwrap_or(0);
                for (l, &mine_v) in v.iter().enumerate() {
                    let t = 32 * w + l;
                    let mine = if mine_v & 1 == 1 { odd_min } else { 0 };
                    let want = [sum, smin, umax, and, or, xor, mine, mine_v];
                    assert_eq!(
                        &got[8 * t..8 * t + 8],
                        &want,
                        "{e:?} seed {seed} thread {t}"
                    );
                }
            }
            assert_eq!(got[8 * 64], POISON, "{e:?}");
        }
    }
}

/// A module in the shape NVVM writes for numba-cuda (a `.common` environment pointer, a
/// kernel wrapper calling the Python function's `.func` with its status return, `$L__BB`
/// labels, `cuda.syncthreads_count`, `cuda.warpsize`, float16 through `cvt`) loads and runs on
/// both engines; `print()` (a `vprintf` call) loads (the launcher serves it: `services.rs`),
/// a call of any other function without a body is refused at load, naming the line.
#[test]
fn numba_style_modules() {
    let dev = Dev::new();
    let m = dev.load(
        r#"
	// .globl	_ZN6cudapy8__main__5countB2v1B94cw51cXTLSUwv1sDUaKthqaNgqamjgOR3W3CW7Ww0LSgRWMEQQJbQgDgFSgRMQJxE0BkEkLIdQGmgUVGB8CFJQAoM7GeAUGB2CFJQDr4sAE8AACi0AAAJaEJ3ZZOwAAAAAAJE5jaWFzaW5nAAAAAAA0AgIA_3dA5int32E5ArrayIiLi1E1C7mutable7alignedE
.common .global .align 8 .u64 _ZN08NumbaEnv8__main__5countB2v1E;

.visible .func  (.param .b32 func_retval0) _ZN8__main__5countB2v1E(
	.param .b64 _ZN8__main__5countB2v1E_param_0,
	.param .b64 _ZN8__main__5countB2v1E_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .b16 	%rs<3>;
	.reg .b32 	%r<9>;
	.reg .f32 	%f<3>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd1, [_ZN8__main__5countB2v1E_param_0];
	ld.param.u64 	%rd2, [_ZN8__main__5countB2v1E_param_1];
	mov.u32 	%r1, %tid.x;
	cvt.u64.u32 	%rd3, %r1;
	setp.lt.s64 	%p1, %rd3, %rd2;
	shl.b64 	%rd4, %rd3, 2;
	add.s64 	%rd5, %rd1, %rd4;
	ld.u32 	%r2, [%rd5];
	setp.gt.s32 	%p2, %r2, 0;
	and.pred 	%p2, %p2, %p1;
	bar.red.popc.u32 	%r3, 0, %p2;
	@!%p1 bra 	$L__BB0_2;
	mov.u32 	%r4, WARP_SZ;
	cvt.rn.f32.s32 	%f1, %r2;
	cvt.rn.f16.f32 	%rs1, %f1;
	cvt.f32.f16 	%f2, %rs1;
	cvt.rzi.s32.f32 	%r5, %f2;
	mad.lo.s32 	%r6, %r3, %r4, %r5;
	st.u32 	[%rd5], %r6;
$L__BB0_2:
	mov.u32 	%r7, 0;
	st.param.b32 	[func_retval0+0], %r7;
	ret;
}

.visible .entry _ZN6cudapy8__main__5countB2v1E(
	.param .u64 _ZN6cudapy8__main__5countB2v1E_param_0,
	.param .u32 _ZN6cudapy8__main__5countB2v1E_param_1
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [_ZN6cudapy8__main__5countB2v1E_param_0];
	ld.param.u32 	%r1, [_ZN6cudapy8__main__5countB2v1E_param_1];
	cvt.u64.u32 	%rd2, %r1;
	cvta.to.global.u64 	%rd3, %rd1;
	cvta.global.u64 	%rd3, %rd3;
	{ // callseq 0, 0
	.reg .b32 temp_param_reg;
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd3;
	.param .b64 param1;
	st.param.b64 	[param1+0], %rd2;
	.param .b32 retval0;
	call.uni (retval0),
	_ZN8__main__5countB2v1E,
	(
	param0,
	param1
	);
	ld.param.b32 	%r2, [retval0+0];
	} // callseq 0
	ret;
}
"#,
    );
    for e in engines() {
        // 64 threads over 40 values: each becomes popc(values > 0) * 32 + value.
        let n = 40usize;
        let bytes = 4 * 64u64;
        let addr = dev.table.allocate(bytes).expect("memory");
        let vals: Vec<i32> = (0..64).map(|i| (i * 37 % 23) - 9).collect();
        let raw: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        dev.table.write(addr, &raw).expect("live");
        let k = m.kernel("_ZN6cudapy8__main__5countB2v1E").unwrap();
        let config = LaunchConfig {
            grid: d1(1),
            block: d1(64),
            engine: e,
            ..LaunchConfig::default()
        };
        let nb = (n as u32).to_le_bytes();
        let args = [
            Arg::Pointer(dev.table.resolve(addr, bytes).expect("live")),
            Arg::Scalar(&nb),
        ];
        k.launch(&dev.pool, &config, &args)
            .unwrap_or_else(|err| panic!("{e:?}: {err}"));
        let mut out = vec![0u8; bytes as usize];
        dev.table.read(addr, &mut out).expect("live");
        dev.table.free(addr);
        let got: Vec<i32> = out
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let popc = vals[..n].iter().filter(|&&v| v > 0).count() as i32;
        for i in 0..64 {
            let want = if i < n { popc * 32 + vals[i] } else { vals[i] };
            assert_eq!(got[i], want, "{e:?} element {i}");
        }
    }
    let printing = |callee: &str| {
        format!(
            "{HEADER}.extern .func (.param .b32 func_retval0) {callee}(.param .b64 a, .param .b64 b);\n\
             .visible .entry k()\n{{\n\t.reg .b32 %r<2>;\n\t{{\n\t.param .b64 param0;\n\t\
             st.param.b64 [param0+0], 0;\n\t.param .b64 param1;\n\tst.param.b64 [param1+0], 0;\n\t\
             .param .b32 retval0;\n\tcall.uni (retval0), {callee}, (param0, param1);\n\t}}\n\tret;\n}}\n"
        )
    };
    Module::load(&printing("vprintf"), &dev.table).expect("vprintf is served");
    match Module::load(&printing("not_served"), &dev.table) {
        Err(Error::Ptx(p)) => {
            let s = p.to_string();
            assert!(s.contains("not_served") && s.contains("line 14"), "{s}");
        }
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("a call of a function without a body loaded"),
    }
}
