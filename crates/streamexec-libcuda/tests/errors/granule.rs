//! Faults as a GPU has them: by default a kernel may read and write the slack between the end
//! of a `cuMemAlloc` allocation and the end of its 256-byte granule (real memory, as on
//! hardware); past the granule is `CUDA_ERROR_ILLEGAL_ADDRESS`. With
//! `STREAMEXEC_CUDA_MEMCHECK=1` every out-of-bounds byte is a fault.

use super::*;

/// `poke(p, off, v)`: stores `v` at `p + off`; `peek(p, off)`: copies the u32 at `p + off` to
/// `p[0]`.
const SLACK_PTX: &str = r#".version 7.0
.target sm_70
.address_size 64

.visible .entry poke(.param .u64 pp, .param .u64 poff, .param .u32 pv)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pp];
    ld.param.u64 %rd2, [poff];
    ld.param.u32 %r1, [pv];
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}

.visible .entry peek(.param .u64 pp, .param .u64 poff)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pp];
    ld.param.u64 %rd2, [poff];
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r1, [%rd3];
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

const GRANULE: usize = 256;

/// Launches `f` on one thread with `args` (each a pointer to its value); the launch's code.
fn launch1(f: CUfunction, args: &mut [*mut c_void]) -> CUresult {
    cu!(cuLaunchKernel(
        f,
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        null_mut(),
        args.as_mut_ptr(),
        null_mut()
    ))
}

/// `poke(p, off, v)` then `peek(p, off)` (which copies what it reads at `p + off` to `p[0]`,
/// poisoned first): the first code that is not success (a fault is sticky, so it may come from
/// the second launch or the synchronization).
fn poke_peek(m: CUmodule, p: CUdeviceptr, off: u64, v: u32) -> CUresult {
    let (poke, peek) = (function(m, c"poke"), function(m, c"peek"));
    ok!(cuMemsetD32_v2(p, POISON_U32, 1));
    let (mut pp, mut po, mut pv) = (p, off, v);
    let codes = [
        launch1(
            poke,
            &mut [
                (&raw mut pp).cast(),
                (&raw mut po).cast(),
                (&raw mut pv).cast(),
            ],
        ),
        launch1(peek, &mut [(&raw mut pp).cast(), (&raw mut po).cast()]),
        cu!(cuCtxSynchronize()),
    ];
    codes
        .into_iter()
        .find(|c| *c != CUresult::CUDA_SUCCESS)
        .unwrap_or(CUresult::CUDA_SUCCESS)
}

#[test]
fn accesses_in_the_granule_behave_as_on_a_gpu() {
    let Some(drv) = setup("accesses_in_the_granule_behave_as_on_a_gpu") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("accesses_in_the_granule_behave_as_on_a_gpu");
    let c = created_context();
    let m = load(SLACK_PTX);
    for _ in 0..20 {
        // A size that leaves slack, and a word in it.
        let n = 4 * r.random_range(1..(4 * GRANULE / 4));
        let granule_end = n.next_multiple_of(GRANULE);
        if granule_end == n {
            continue;
        }
        let p = alloc(n);
        assert_eq!(
            p % GRANULE as u64,
            0,
            "allocations are aligned to the granule"
        );
        let off = 4 * r.random_range(n / 4..granule_end / 4) as u64;
        let v = r.random::<u32>() | 1;
        check(
            poke_peek(m, p, off, v),
            CUresult::CUDA_SUCCESS,
            &format!("poke/peek at {off} of {n} bytes"),
        );
        assert_eq!(
            download(p, 1),
            vec![v],
            "the slack is real memory ({n} bytes, offset {off})"
        );
        ok!(cuMemFree_v2(p));
    }
    // Copies still stop at the size asked for.
    let p = alloc(100);
    let x = [0u8; 104];
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoD_v2(p, x.as_ptr().cast(), 104)
    );
    // Past the granule is a fault.
    check(
        poke_peek(m, p, GRANULE as u64, 7),
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        "poke past the granule",
    );
    assert!(last_fault().contains("poke"), "{}", last_fault());
    ok!(cuCtxDestroy_v2(c));
    ok!(cuCtxSetCurrent(drv.primary));
    assert_eq!(free_memory(), base);
}

#[test]
fn memcheck_faults_on_every_out_of_bounds_byte() {
    const NAME: &str = "granule::memcheck_faults_on_every_out_of_bounds_byte";
    if !lib_available(NAME) || !in_child(NAME, &[("STREAMEXEC_CUDA_MEMCHECK", "1")]) {
        return;
    }
    let Some(_drv) = setup(NAME) else {
        return;
    };
    let mut r = rng(NAME);
    let n = 4 * r.random_range(1..GRANULE / 4);
    let m = load(SLACK_PTX);
    let p = alloc(n);
    // In bounds: fine.
    let last = (n - 4) as u64;
    let v = r.random::<u32>() | 1;
    check(
        poke_peek(m, p, last, v),
        CUresult::CUDA_SUCCESS,
        "in bounds",
    );
    assert_eq!(download(p, 1), vec![v]);
    // The first byte past the end is a fault.
    check(
        poke_peek(m, p, n as u64, v),
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        "poke one byte past the end",
    );
    let report = last_fault();
    assert!(report.contains("poke"), "{report}");
}
