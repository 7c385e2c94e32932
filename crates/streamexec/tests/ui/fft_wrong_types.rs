// An FFT plan's element types are its type parameters: a real-to-real plan does not exist, and
// buffers of another precision do not fit a plan.
use streamexec::*;

fn real_to_real(exec: &StreamExecutor) {
    let _ = exec.create_fft_plan::<f32, f32>(&FftPlanSpec::new(&[8]));
}

fn wrong_precision(
    s: &mut Stream,
    plan: &FftPlan<[f32; 2], [f32; 2]>,
    x: &DeviceMemory<[f64; 2]>,
    y: &DeviceMemory<[f32; 2]>,
) {
    s.then_fft(plan, FftDirection::Forward, x, y);
}

fn main() {}
