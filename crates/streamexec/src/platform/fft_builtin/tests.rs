//! The built-in FFT against an f64 DFT written here: the PTX the CUDA platform loads, run on
//! the host platform's PTX engine; and the whole `FftSupport` of the OpenCL (PoCL) and CUDA
//! (the CPU libcuda) executors where those platforms are available (required when named in
//! `STREAMEXEC_REQUIRE`). Random inputs, outputs poisoned with NaN first (every element the
//! output layout does not address must keep its bits), relative RMS error ≤ 5·log2(n)·ε.

use std::sync::Arc;

use super::{Device, create_plan};
use crate::interface::blas::Operand;
use crate::interface::fft::{
    FftDirection, FftLayout, FftPlanDesc, FftPlanInterface, FftPrecision, FftType,
};
use crate::types::{DeviceAddress, PackedArg};
use crate::{MultiKernelLoaderSpec, PlatformManager, StreamExecutor};

const FFT_PTX: &str = include_str!("../../../kernels/ptx/fft.O3.ptx");

/// What the checks need of `f32` / `f64`.
trait El: bytemuck::Pod + Send + Sync {
    const EPS: f64;
    const PRECISION: FftPrecision;
    fn of(v: f64) -> Self;
    fn get(self) -> f64;
    fn poison() -> Self;
    fn bits(self) -> u64;
}
impl El for f32 {
    const EPS: f64 = f32::EPSILON as f64;
    const PRECISION: FftPrecision = FftPrecision::F32;
    fn of(v: f64) -> Self {
        v as f32
    }
    fn get(self) -> f64 {
        self.into()
    }
    fn poison() -> Self {
        f32::from_bits(0x7FBA_DBAD)
    }
    fn bits(self) -> u64 {
        self.to_bits().into()
    }
}
impl El for f64 {
    const EPS: f64 = f64::EPSILON;
    const PRECISION: FftPrecision = FftPrecision::F64;
    fn of(v: f64) -> Self {
        v
    }
    fn get(self) -> f64 {
        self
    }
    fn poison() -> Self {
        f64::from_bits(0x7FF7_BADB_ADBA_DBAD)
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// `n` values in [-1, 1) (xorshift, seeded).
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// A contiguous layout of `shape`.
fn dense(shape: &[u64]) -> FftLayout {
    FftLayout {
        embed: shape.to_vec(),
        stride: 1,
        dist: shape.iter().product(),
    }
}

/// Every multi-index of `shape`, row-major.
fn indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let mut out = vec![vec![]];
    for &d in shape {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..d).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

/// The direct multi-dimensional DFT of one contiguous array of `dims`, exponent sign `sign`.
fn dft(x: &[[f64; 2]], dims: &[u64], sign: f64) -> Vec<[f64; 2]> {
    let mut x = x.to_vec();
    for a in 0..dims.len() {
        let n = dims[a] as usize;
        let s: usize = dims[a + 1..].iter().product::<u64>() as usize;
        let mut out = x.clone();
        for line in 0..x.len() / n {
            let base = (line / s) * n * s + line % s;
            for k in 0..n {
                let mut acc = [0.0; 2];
                for j in 0..n {
                    let t = (j * k % n) as f64 / n as f64;
                    let (si, co) = (sign * 2.0 * std::f64::consts::PI * t).sin_cos();
                    let v = x[base + j * s];
                    acc[0] += v[0] * co - v[1] * si;
                    acc[1] += v[0] * si + v[1] * co;
                }
                out[base + k * s] = acc;
            }
        }
        x = out;
    }
    x
}

/// One transform to check: a plan, a direction, and whether it runs in place.
#[derive(Clone, Debug)]
struct Case {
    desc: FftPlanDesc,
    dir: FftDirection,
    in_place: bool,
}

/// A case of `ty` over `dims` × `batch`, contiguous, out of place.
fn case(ty: FftType, dims: &[u64], batch: u64, dir: FftDirection) -> Case {
    let mut desc = FftPlanDesc {
        ty,
        precision: FftPrecision::F32,
        dims: dims.to_vec(),
        batch,
        input: dense(dims),
        output: dense(dims),
    };
    desc.input = dense(&desc.input_shape());
    desc.output = dense(&desc.output_shape());
    Case {
        desc,
        dir,
        in_place: false,
    }
}

/// Scalars a side's layout spans (`shape` × batch) with `per` scalars an element.
fn span(l: &FftLayout, shape: &[u64], batch: u64, per: u64) -> u64 {
    let last: Vec<u64> = shape.iter().map(|d| d - 1).collect();
    (l.offset(batch - 1, &last) + 1) * per
}

/// Runs `c` (its precision taken from `T`) with plans from `make` on `exec`, and checks it.
fn check<T: El>(
    exec: &StreamExecutor,
    make: &dyn Fn(&FftPlanDesc) -> Box<dyn FftPlanInterface>,
    c: &Case,
    seed: u64,
) {
    let mut d = c.desc.clone();
    d.precision = T::PRECISION;
    let what = format!("{:?} {:?} {:?} {:?}", d, c.dir, c.in_place, T::PRECISION);
    let (ci, co) = (d.input_is_complex(), d.output_is_complex());
    let (pi, po) = (1 + u64::from(ci), 1 + u64::from(co));
    let (ishape, oshape) = (d.input_shape(), d.output_shape());
    let per_batch: u64 = d.dims.iter().product();
    // The logical data, one contiguous complex array per batch of the full shape.
    let full: Vec<[f64; 2]> = match d.ty {
        FftType::C2C => values(seed, 2 * (d.batch * per_batch) as usize)
            .chunks(2)
            .map(|v| [v[0], v[1]])
            .collect(),
        // Real data; for C2R its spectrum is the input (so the input is Hermitian).
        _ => values(seed, (d.batch * per_batch) as usize)
            .iter()
            .map(|&v| [v, 0.0])
            .collect(),
    };
    let pb = per_batch as usize;
    let spectra: Vec<[f64; 2]> = full
        .chunks(pb)
        .flat_map(|x| dft(x, &d.dims, -1.0))
        .collect();
    let (given, want): (&[[f64; 2]], Vec<[f64; 2]>) = match (d.ty, c.dir) {
        (FftType::C2R, _) => (
            &spectra,
            full.iter().map(|v| [v[0] * pb as f64, 0.0]).collect(),
        ),
        (_, FftDirection::Forward) => (&full, spectra.clone()),
        (_, FftDirection::Inverse) => (
            &full,
            full.chunks(pb).flat_map(|x| dft(x, &d.dims, 1.0)).collect(),
        ),
    };
    let pos = |shape_idx: &[u64], b: u64| -> usize {
        let mut lin = 0u64;
        for (a, &i) in shape_idx.iter().enumerate() {
            lin = lin * d.dims[a] + i;
        }
        (b * per_batch + lin) as usize
    };
    // The input buffer, poisoned where its layout does not reach.
    let in_len = span(&d.input, &ishape, d.batch, pi);
    let out_len = span(&d.output, &oshape, d.batch, po);
    let len = if c.in_place {
        in_len.max(out_len)
    } else {
        in_len
    };
    let mut input = vec![T::poison(); len as usize];
    for b in 0..d.batch {
        for idx in indices(&ishape) {
            let at = (d.input.offset(b, &idx) * pi) as usize;
            let v = given[pos(&idx, b)];
            input[at] = T::of(v[0]);
            if ci {
                input[at + 1] = T::of(v[1]);
            }
        }
    }
    let din = exec.copy_to_device(&input).unwrap();
    let dout = if c.in_place {
        None
    } else {
        Some(
            exec.copy_to_device(&vec![T::poison(); out_len as usize])
                .unwrap(),
        )
    };
    let out_mem = dout.as_ref().unwrap_or(&din);
    let operand = |addr: DeviceAddress, scalars: u64, per: u64| Operand {
        addr,
        len: scalars / per,
    };
    let plan = make(&d);
    let mut s = exec.create_stream().unwrap();
    // SAFETY: the operands are whole allocations of `exec` covering every element their
    // layouts address; in place uses one buffer, with layouts the validator accepts.
    unsafe {
        plan.execute(
            s.iface(),
            c.dir,
            operand(din.address(), din.len() as u64, pi),
            operand(out_mem.address(), out_mem.len() as u64, po),
        )
    }
    .unwrap();
    s.block_host_until_done().unwrap();
    let got = exec.copy_to_vec(out_mem).unwrap();
    let before = if c.in_place {
        input.clone()
    } else {
        vec![T::poison(); out_len as usize]
    };
    let mut written = vec![false; got.len()];
    let (mut err, mut mag) = (0.0, 0.0);
    for b in 0..d.batch {
        for idx in indices(&oshape) {
            let at = (d.output.offset(b, &idx) * po) as usize;
            let w = want[pos(&idx, b)];
            let g = [got[at].get(), if co { got[at + 1].get() } else { 0.0 }];
            written[at] = true;
            if co {
                written[at + 1] = true;
            }
            assert!(
                g[0].is_finite() && g[1].is_finite(),
                "{what}: {idx:?} of batch {b} is {g:?}"
            );
            err += (g[0] - w[0]).powi(2) + (g[1] - w[1]).powi(2);
            mag += w[0].powi(2) + w[1].powi(2);
        }
    }
    for (i, g) in got.iter().enumerate() {
        if !written[i] {
            assert_eq!(
                g.bits(),
                before[i].bits(),
                "{what}: scalar {i} outside the output written"
            );
        }
    }
    let n = (per_batch as f64).max(2.0);
    let rel = (err / mag.max(f64::MIN_POSITIVE)).sqrt();
    let tol = 5.0 * n.log2() * T::EPS;
    assert!(rel <= tol, "{what}: relative RMS error {rel:e} > {tol:e}");
}

/// The cases every backend runs (both precisions, and both directions of C2C).
fn cases() -> Vec<Case> {
    use FftDirection::{Forward, Inverse};
    use FftType::{C2C, C2R, R2C};
    let mut out = Vec::new();
    for (dims, batch) in [
        (&[1u64][..], 2),
        (&[2], 3),
        (&[64], 3),
        (&[4096], 2),
        (&[105], 2),
        (&[294], 1),
        (&[17], 3),
        (&[97], 2),
        (&[1009], 1),
        (&[12, 20], 2),
        (&[17, 8], 1),
        (&[4, 6, 5], 2),
        (&[3, 11, 4], 1),
    ] {
        for dir in [Forward, Inverse] {
            out.push(case(C2C, dims, batch, dir));
        }
    }
    for (dims, batch) in [
        (&[16u64][..], 2),
        (&[15], 3),
        (&[17], 2),
        (&[105], 1),
        (&[9, 14], 2),
        (&[6, 4, 10], 1),
        (&[5, 3, 7], 2),
    ] {
        out.push(case(R2C, dims, batch, Forward));
        out.push(case(C2R, dims, batch, Inverse));
    }
    // Strided, embedded layouts with gaps between batches.
    let mut c = case(C2C, &[6, 10], 2, Forward);
    c.desc.input = FftLayout {
        embed: vec![7, 13],
        stride: 2,
        dist: 2 * 7 * 13 + 5,
    };
    c.desc.output = FftLayout {
        embed: vec![6, 11],
        stride: 3,
        dist: 3 * 6 * 11 + 1,
    };
    out.push(c.clone());
    c.dir = Inverse;
    out.push(c);
    let mut c = case(R2C, &[5, 12], 2, Forward);
    c.desc.input = FftLayout {
        embed: vec![5, 14],
        stride: 1,
        dist: 5 * 14 + 3,
    };
    c.desc.output = FftLayout {
        embed: vec![5, 9],
        stride: 2,
        dist: 2 * 5 * 9,
    };
    out.push(c.clone());
    let mut c2r = case(C2R, &[5, 12], 2, Inverse);
    (c2r.desc.input, c2r.desc.output) = (c.desc.output.clone(), c.desc.input.clone());
    out.push(c2r);
    // In place: C2C on one layout; R2C and C2R with the real side padded to 2·(n/2+1).
    let mut c = case(C2C, &[64], 2, Inverse);
    c.in_place = true;
    out.push(c);
    let mut c = case(C2C, &[7, 17], 1, Forward);
    c.in_place = true;
    out.push(c);
    for (ty, dir) in [(R2C, Forward), (C2R, Inverse)] {
        let mut c = case(ty, &[8, 14], 2, dir);
        let real = FftLayout {
            embed: vec![8, 16],
            stride: 1,
            dist: 128,
        };
        let cplx = FftLayout {
            embed: vec![8, 8],
            stride: 1,
            dist: 64,
        };
        (c.desc.input, c.desc.output) = if ty == R2C {
            (real, cplx)
        } else {
            (cplx, real)
        };
        c.in_place = true;
        out.push(c);
    }
    out
}

fn run_all(exec: &StreamExecutor, make: &dyn Fn(&FftPlanDesc) -> Box<dyn FftPlanInterface>) {
    for (i, c) in cases().iter().enumerate() {
        check::<f32>(exec, make, c, 2 * i as u64 + 1);
        check::<f64>(exec, make, c, 2 * i as u64 + 2);
    }
}

fn host() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .unwrap()
}

/// The executor of platform `name`, or `None` (with a note) where it is unavailable and not
/// required by `STREAMEXEC_REQUIRE`.
fn optional(name: &str) -> Option<StreamExecutor> {
    match PlatformManager::platform_with_name(name).and_then(|p| p.executor_for_device(0)) {
        Ok(e) => Some(e),
        Err(e) => {
            let required = std::env::var("STREAMEXEC_REQUIRE")
                .is_ok_and(|v| v.split(',').any(|p| p.trim() == name));
            assert!(!required, "{name} is required but unavailable: {e}");
            eprintln!("skipping the {name} FFT checks: {e}");
            None
        }
    }
}

/// A pointer on the host platform (addresses are plain).
fn raw_pointer(addr: DeviceAddress, bytes: u64, scalar: u64) -> crate::Result<(PackedArg, u64)> {
    Ok((
        PackedArg::backend_pointer(addr, bytes, scalar as usize, "fft operand"),
        0,
    ))
}

/// The plan over `exec`'s interface with the committed FFT PTX, grids capped at `max_blocks`.
fn ptx_plans(
    exec: &StreamExecutor,
    max_blocks: u32,
) -> impl Fn(&FftPlanDesc) -> Box<dyn FftPlanInterface> + use<> {
    let iface = exec.interface().clone();
    move |desc| {
        let dev = Device {
            exec: iface.clone(),
            pointer: raw_pointer,
            threads: 64,
            max_blocks,
        };
        let load = |name: &'static str| {
            iface.load_kernel(&MultiKernelLoaderSpec::new(0).add_cuda_ptx_in_memory(FFT_PTX, name))
        };
        create_plan(dev, desc, &load).unwrap()
    }
}

#[test]
#[cfg_attr(miri, ignore = "the PTX engine is too slow under Miri")]
fn built_in_fft_matches_an_f64_dft_on_the_host_ptx_engine() {
    let exec = host();
    run_all(&exec, &ptx_plans(&exec, 256));
    // One block per launch: the grid-stride loops cover the rest.
    let one = ptx_plans(&exec, 1);
    check::<f32>(
        &exec,
        &one,
        &case(FftType::C2C, &[6, 17], 2, FftDirection::Forward),
        99,
    );
    check::<f64>(
        &exec,
        &one,
        &case(FftType::R2C, &[5, 12], 3, FftDirection::Forward),
        98,
    );
}

/// `exec`'s own `FftSupport`.
fn native_plans(
    exec: &StreamExecutor,
) -> impl Fn(&FftPlanDesc) -> Box<dyn FftPlanInterface> + use<> {
    let iface = exec.interface().clone();
    move |desc| {
        let fft = iface.fft().expect("the platform has FFT");
        assert_eq!(fft.implementation(), "built-in kernels");
        fft.create_plan(desc).unwrap()
    }
}

#[cfg(feature = "opencl")]
#[test]
#[cfg_attr(miri, ignore = "OpenCL is foreign code")]
fn built_in_fft_matches_an_f64_dft_on_opencl() {
    if let Some(exec) = optional("opencl") {
        run_all(&exec, &native_plans(&exec));
    }
}

#[cfg(feature = "cuda")]
#[test]
#[cfg_attr(miri, ignore = "the CUDA driver is foreign code")]
fn built_in_fft_matches_an_f64_dft_on_cuda() {
    if let Some(exec) = optional("cuda") {
        run_all(&exec, &native_plans(&exec));
    }
}

/// Two streams share one plan (and its scratch): executions are ordered by the plan's event,
/// so each stream's result is its own input's transform. The plan is dropped with work still
/// queued behind a gate, which the executor's deferred free must survive.
fn shared_plan_on_two_streams(
    exec: &StreamExecutor,
    make: &dyn Fn(&FftPlanDesc) -> Box<dyn FftPlanInterface>,
) {
    let n = 1024u64;
    let desc = FftPlanDesc {
        precision: FftPrecision::F32,
        ..case(FftType::C2C, &[n], 4, FftDirection::Forward).desc
    };
    let plan: Arc<dyn FftPlanInterface> = make(&desc).into();
    let inputs: Vec<Vec<f32>> = (0..2)
        .map(|k| {
            values(50 + k, 2 * 4 * n as usize)
                .iter()
                .map(|&v| v as f32)
                .collect()
        })
        .collect();
    let mut streams: Vec<_> = (0..2).map(|_| exec.create_stream().unwrap()).collect();
    let bufs: Vec<_> = inputs
        .iter()
        .map(|x| {
            (
                exec.copy_to_device(x).unwrap(),
                exec.copy_to_device(&vec![f32::NAN; x.len()]).unwrap(),
            )
        })
        .collect();
    let gate = Arc::new(std::sync::Barrier::new(2));
    let g = gate.clone();
    streams[0].then_host_callback(move || {
        g.wait();
    });
    for _round in 0..3 {
        for (s, (i, o)) in streams.iter().zip(&bufs) {
            let op = |m: &crate::DeviceMemory<f32>| Operand {
                addr: m.address(),
                len: m.len() as u64 / 2,
            };
            // SAFETY: whole allocations of `exec`, dense layouts of the plan's size.
            unsafe { plan.execute(s.iface(), FftDirection::Forward, op(i), op(o)) }.unwrap();
        }
    }
    drop(plan);
    gate.wait();
    for s in &mut streams {
        s.block_host_until_done().unwrap();
    }
    for (x, (_, o)) in inputs.iter().zip(&bufs) {
        let got = exec.copy_to_vec(o).unwrap();
        let xs: Vec<[f64; 2]> = x.chunks(2).map(|v| [v[0].into(), v[1].into()]).collect();
        let want: Vec<[f64; 2]> = xs
            .chunks(n as usize)
            .flat_map(|l| dft(l, &[n], -1.0))
            .collect();
        let (mut err, mut mag) = (0.0, 0.0);
        for (g, w) in got.chunks(2).zip(&want) {
            err += (f64::from(g[0]) - w[0]).powi(2) + (f64::from(g[1]) - w[1]).powi(2);
            mag += w[0].powi(2) + w[1].powi(2);
        }
        let rel = (err / mag).sqrt();
        assert!(
            rel <= 5.0 * 10.0 * f64::from(f32::EPSILON),
            "shared plan: error {rel:e}"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "the PTX engine is too slow under Miri")]
fn one_plan_on_two_streams_and_dropped_with_work_queued_on_the_host_ptx_engine() {
    let exec = host();
    shared_plan_on_two_streams(&exec, &ptx_plans(&exec, 64));
}

#[cfg(feature = "opencl")]
#[test]
#[cfg_attr(miri, ignore = "OpenCL is foreign code")]
fn one_plan_on_two_streams_on_opencl() {
    if let Some(exec) = optional("opencl") {
        shared_plan_on_two_streams(&exec, &native_plans(&exec));
    }
}

#[cfg(feature = "cuda")]
#[test]
#[cfg_attr(miri, ignore = "the CUDA driver is foreign code")]
fn one_plan_on_two_streams_on_cuda() {
    if let Some(exec) = optional("cuda") {
        shared_plan_on_two_streams(&exec, &native_plans(&exec));
    }
}

/// Prints the time of one C2C f32 4096 × 64 forward transform (after a warm-up) on each
/// available platform: `cargo test --lib fft_timing -- --ignored --nocapture`.
#[test]
#[ignore = "a timing printout, not a check"]
fn fft_timing() {
    let desc = case(FftType::C2C, &[4096], 64, FftDirection::Forward).desc;
    let runs: Vec<(&str, StreamExecutor, bool)> = [("host (PTX engine)", Some(host()), false)]
        .into_iter()
        .chain([
            ("opencl", optional("opencl"), true),
            ("cuda", optional("cuda"), true),
        ])
        .filter_map(|(n, e, native)| e.map(|e| (n, e, native)))
        .collect();
    for (name, exec, native) in runs {
        let plan = if native {
            native_plans(&exec)(&desc)
        } else {
            ptx_plans(&exec, 1024)(&desc)
        };
        let x: Vec<f32> = values(7, 2 * 4096 * 64).iter().map(|&v| v as f32).collect();
        let (i, o) = (
            exec.copy_to_device(&x).unwrap(),
            exec.copy_to_device(&x).unwrap(),
        );
        let op = |m: &crate::DeviceMemory<f32>| Operand {
            addr: m.address(),
            len: m.len() as u64 / 2,
        };
        let mut s = exec.create_stream().unwrap();
        let mut best = f64::INFINITY;
        for _ in 0..4 {
            let t = std::time::Instant::now();
            // SAFETY: whole allocations of `exec`, dense layouts of the plan's size.
            unsafe { plan.execute(s.iface(), FftDirection::Forward, op(&i), op(&o)) }.unwrap();
            s.block_host_until_done().unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("C2C f32 4096 x 64 on {name}: {:.2} ms", best * 1e3);
    }
}
