//! FFT plans and calls that cannot be valid: each is an `Err` naming the argument, at plan
//! creation or (failing the stream, which then skips later work) at enqueue. Skips platforms
//! without FFT, as fft.rs does.

use streamexec::{Error, FftDirection, FftLayout, FftPlanSpec};

use crate::common::executors;
use crate::fft::{El, has_fft};
use crate::on_each_platform;

use FftDirection::{Forward, Inverse};

/// `result` is an `Err` whose message names `arg`.
#[track_caller]
fn names<T: std::fmt::Debug>(result: streamexec::Result<T>, arg: &str) {
    match result {
        Ok(v) => panic!("expected an error naming `{arg}`, got Ok({v:?})"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(arg), "the error does not name `{arg}`: {msg}");
            assert!(
                matches!(e, Error::InvalidArgument { .. } | Error::OutOfBounds { .. }),
                "{msg}"
            );
        }
    }
}

#[test]
fn fft_invalid_plans_are_errors_naming_the_argument() {
    on_each_platform(|exec| {
        if !has_fft(exec) {
            return;
        }
        let plan = |s: FftPlanSpec| exec.create_fft_plan::<[f32; 2], [f32; 2]>(&s);
        let l = |embed: &[u64], stride: u64, dist: u64| FftLayout {
            embed: embed.to_vec(),
            stride,
            dist,
        };
        names(plan(FftPlanSpec::new(&[])), "dims");
        names(plan(FftPlanSpec::new(&[2, 2, 2, 2])), "dims");
        names(plan(FftPlanSpec::new(&[4, 0])), "dims[1]");
        names(plan(FftPlanSpec::new(&[4]).batch(0)), "batch");
        names(
            plan(FftPlanSpec::new(&[4, 4]).input_layout(l(&[4], 1, 16))),
            "input_layout.embed",
        );
        names(
            plan(FftPlanSpec::new(&[4, 4]).output_layout(l(&[4, 3], 1, 16))),
            "output_layout.embed[1]",
        );
        names(
            plan(FftPlanSpec::new(&[4]).input_layout(l(&[4], 0, 4))),
            "input_layout.stride",
        );
        names(
            plan(FftPlanSpec::new(&[4]).output_layout(l(&[4], 1, 0))),
            "output_layout.dist",
        );
        // One transform's extent, and a batch, that overflow 64 bits.
        names(
            plan(FftPlanSpec::new(&[3]).input_layout(l(&[3], u64::MAX / 2 + 1, 3))),
            "input_layout",
        );
        names(plan(FftPlanSpec::new(&[1 << 20]).batch(1 << 50)), "batch");
        // Output batches that overlap; interleaved ones are fine, overlapping input too.
        names(
            plan(FftPlanSpec::new(&[4]).batch(2).output_layout(l(&[4], 1, 3))),
            "output_layout.dist",
        );
        names(
            plan(FftPlanSpec::new(&[4]).batch(4).output_layout(l(&[4], 3, 1))),
            "output_layout.dist",
        );
        plan(FftPlanSpec::new(&[4]).batch(4).output_layout(l(&[4], 4, 1))).unwrap();
        plan(FftPlanSpec::new(&[4]).batch(2).input_layout(l(&[4], 1, 1))).unwrap();
        // The host refuses (rather than aborts on) a transform too large for its memory.
        if exec.platform_name() == "host" {
            let huge = plan(FftPlanSpec::new(&[1 << 20, 1 << 20]));
            assert!(matches!(huge, Err(Error::Unsupported { .. })), "{huge:?}");
        }
        // R2C's output side is n/2 + 1 wide: an embed of that is enough, one less is not.
        let r2c = |s: FftPlanSpec| exec.create_fft_plan::<f64, [f64; 2]>(&s);
        r2c(FftPlanSpec::new(&[3, 8]).output_layout(l(&[3, 5], 1, 15))).unwrap();
        names(
            r2c(FftPlanSpec::new(&[3, 8]).output_layout(l(&[3, 4], 1, 15))),
            "output_layout.embed[1]",
        );
    });
}

#[test]
fn fft_invalid_calls_fail_the_stream_naming_the_argument() {
    on_each_platform(|exec| {
        if !has_fft(exec) {
            return;
        }
        let c2c = exec
            .create_fft_plan::<[f32; 2], [f32; 2]>(&FftPlanSpec::new(&[8]).batch(2))
            .unwrap();
        let r2c = exec
            .create_fft_plan::<f32, [f32; 2]>(&FftPlanSpec::new(&[8]))
            .unwrap();
        let c2r = exec
            .create_fft_plan::<[f32; 2], f32>(&FftPlanSpec::new(&[8]))
            .unwrap();
        let cx = |n: usize| exec.copy_to_device(&vec![[1.0f32, 0.0]; n]).unwrap();
        let re = |n: usize| exec.copy_to_device(&vec![1.0f32; n]).unwrap();
        let (a, b, big) = (cx(16), cx(16), cx(40));
        // Each call fails the stream: the error comes back from block_host_until_done, and a
        // valid call after it does not run (its output stays poisoned).
        let fails = |f: &dyn Fn(&mut streamexec::Stream), arg: &str| {
            let out = exec.copy_to_device(&[<[f32; 2]>::poison(); 16]).unwrap();
            let mut s = exec.create_stream().unwrap();
            f(&mut s);
            assert!(
                !s.ok(),
                "the stream has not failed (expected an error naming `{arg}`)"
            );
            s.then_fft(&c2c, Forward, &a, &out);
            names(s.block_host_until_done().map(|_| ()), arg);
            let out = exec.copy_to_vec(&out).unwrap();
            assert!(
                out.iter().all(|v| v.is_poison()),
                "a call after the failure ran"
            );
        };
        fails(
            &|s| {
                s.then_fft(&r2c, Inverse, &re(8), &cx(5));
            },
            "direction",
        );
        fails(
            &|s| {
                s.then_fft(&c2r, Forward, &cx(5), &re(8));
            },
            "direction",
        );
        fails(
            &|s| {
                s.then_fft(&c2c, Forward, &cx(15), &b);
            },
            "input",
        );
        fails(
            &|s| {
                s.then_fft(&c2c, Forward, &a, &cx(15));
            },
            "output",
        );
        fails(
            &|s| {
                s.then_fft(&r2c, Forward, &re(8), &cx(4));
            },
            "output",
        );
        // Out of place on overlapping buffers: the same one, and two slices of one.
        fails(
            &|s| {
                s.then_fft(&c2c, Forward, &big, &big);
            },
            "overlaps",
        );
        fails(
            &|s| {
                s.then_fft(
                    &c2c,
                    Forward,
                    big.slice(0..16).unwrap(),
                    big.slice(15..).unwrap(),
                );
            },
            "overlaps",
        );
        exec.create_stream()
            .unwrap()
            .then_fft(
                &c2c,
                Forward,
                big.slice(0..16).unwrap(),
                big.slice(16..).unwrap(),
            )
            .block_host_until_done()
            .unwrap();
        // In place: C2C layouts must be equal, real ones padded, and the data large enough.
        let odd = exec
            .create_fft_plan::<[f32; 2], [f32; 2]>(
                &FftPlanSpec::new(&[8]).output_layout(FftLayout::new(&[8], 2, 16)),
            )
            .unwrap();
        fails(
            &|s| {
                s.then_fft_inplace(&odd, Forward, &big);
            },
            "layouts",
        );
        fails(
            &|s| {
                s.then_fft_inplace(&r2c, Forward, &re(32));
            },
            "padded_real",
        );
        let padded = exec
            .create_fft_plan::<f32, [f32; 2]>(&FftPlanSpec::new(&[8]).padded_real())
            .unwrap();
        fails(
            &|s| {
                s.then_fft_inplace(&padded, Forward, &re(9));
            },
            "data",
        );
        fails(
            &|s| {
                s.then_fft_inplace(&c2c, Forward, &cx(15));
            },
            "data",
        );
        // A plan or buffers of another executor.
        for other in executors().into_iter().filter(|e| !e.same_as(exec)) {
            eprintln!("   with a foreign {}", other.platform_name());
            let foreign = other.copy_to_device(&[[0.0f32; 2]; 16]).unwrap();
            fails(
                &|s| {
                    s.then_fft(&c2c, Forward, &foreign, &b);
                },
                "input",
            );
            fails(
                &|s| {
                    s.then_fft(&c2c, Forward, &a, &foreign);
                },
                "output",
            );
            fails(
                &|s| {
                    s.then_fft_inplace(&c2c, Forward, &foreign);
                },
                "data",
            );
            if has_fft(&other) {
                let plan = other
                    .create_fft_plan::<[f32; 2], [f32; 2]>(&FftPlanSpec::new(&[8]).batch(2))
                    .unwrap();
                fails(
                    &|s| {
                        s.then_fft(&plan, Forward, &a, &b);
                    },
                    "plan",
                );
            }
        }
    });
}
