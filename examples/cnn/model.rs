//! The small CNN of `cnn_train` (also timed by `crates/streamexec/benches/dnn.rs`): its
//! synthetic data, its weights and one training step, all enqueued on a stream.
//!
//! ```text
//! x [8×1×12×12] ─ conv 3×3, 4 filters, pad 1 ─ + bias ─ ReLU ─ h1 [8×4×12×12]
//!               ─ conv 3×3, 8 filters, stride 2 ─ + bias ─ ReLU ─ h2 [8×8×5×5] = [8×200]
//!               ─ dense 200→4 + bias (then_matmul_bias_activation) ─ log-softmax ─ loss
//! ```
//!
//! The loss is the batch's mean cross-entropy, `−Σ t·log p` with `t = onehot / N` as a dot
//! product; its gradient comes from the log-softmax backward with `dy = −t`. The dense layer's
//! gradients are BLAS GEMMs, the bias gradients GEMVs against a vector of ones, the
//! convolutions' gradients `then_convolution_backward_data/_filter`, and the SGD update one
//! `then_blas_axpy` over all the parameters (which live in one buffer, as do their gradients).
//! Only data generation, weight initialisation and reading the loss happen on the host.

// The bench uses only part of this module.
#![allow(dead_code)]

use streamexec::{
    Activation, ConvDesc, ConvProblem, DeviceMemory, DnnDataType, FilterDesc, MatmulProblem,
    Result, SoftmaxAlgorithm, SoftmaxMode, Stream, StreamExecutor, TensorDesc, TensorLayout,
    Transpose,
};

/// Images per batch.
pub const BATCH: usize = 8;
/// Image side (one channel).
pub const SIDE: usize = 12;
/// Filters of the first convolution.
pub const C1: usize = 4;
/// Filters of the second convolution.
pub const C2: usize = 8;
/// Side of the second convolution's output: `(12 − 3) / 2 + 1`.
pub const SIDE2: usize = 5;
/// Inputs of the dense layer per image.
pub const FEATURES: usize = C2 * SIDE2 * SIDE2;
/// Classes: which quadrant holds the blob.
pub const CLASSES: usize = 4;
/// Images in the synthetic data set (the steps cycle through its batches).
pub const DATASET: usize = 256;

// Offsets of the parameters (and of their gradients) in their one buffer.
const W1: usize = 0;
const B1: usize = W1 + C1 * 9;
const W2: usize = B1 + C1;
const B2: usize = W2 + C2 * C1 * 9;
const W3: usize = B2 + C2;
const B3: usize = W3 + FEATURES * CLASSES;
/// Parameters in all.
pub const PARAMS: usize = B3 + CLASSES;

/// SplitMix64: a small deterministic generator, so every platform starts from the same
/// numbers.
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize
    }

    /// Standard normal (Box–Muller).
    pub fn gaussian(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// The synthetic data set: `DATASET` images of `SIDE × SIDE` (NCHW, one channel) of noise with
/// a bright 3×3 blob somewhere in the quadrant of its class (0 top left, 1 top right, 2 bottom
/// left, 3 bottom right), and the cross-entropy targets `t = onehot(class) / BATCH`.
pub struct Dataset {
    /// `DATASET · SIDE²` pixels.
    pub images: Vec<f32>,
    /// `DATASET · CLASSES` targets.
    pub targets: Vec<f32>,
    /// `DATASET` classes.
    pub labels: Vec<usize>,
}

impl Dataset {
    /// The data set of `seed`.
    pub fn new(seed: u64) -> Self {
        let mut rng = SplitMix::new(seed);
        let (mut images, mut targets, mut labels) = (Vec::new(), Vec::new(), Vec::new());
        let half = SIDE / 2;
        for _ in 0..DATASET {
            let class = rng.below(CLASSES);
            let mut img: Vec<f32> = (0..SIDE * SIDE)
                .map(|_| (0.3 * rng.gaussian()) as f32)
                .collect();
            // The blob's top-left corner, so that all of it lies inside the quadrant.
            let top = (class / 2) * half + rng.below(half - 2);
            let left = (class % 2) * half + rng.below(half - 2);
            for r in top..top + 3 {
                for c in left..left + 3 {
                    img[r * SIDE + c] += 1.5;
                }
            }
            images.extend_from_slice(&img);
            targets.extend((0..CLASSES).map(|k| if k == class { 1.0 / BATCH as f32 } else { 0.0 }));
            labels.push(class);
        }
        Dataset {
            images,
            targets,
            labels,
        }
    }
}

/// Initial parameters from `seed`: He-normal convolution filters, dense weights of variance
/// `1 / FEATURES`, zero biases.
pub fn initial_params(seed: u64) -> Vec<f32> {
    let mut rng = SplitMix::new(seed);
    let mut p = vec![0f32; PARAMS];
    let mut fill = |range: std::ops::Range<usize>, std_dev: f64| {
        for v in &mut p[range] {
            *v = (std_dev * rng.gaussian()) as f32;
        }
    };
    fill(W1..B1, (2.0 / 9.0f64).sqrt());
    fill(W2..B2, (2.0 / (C1 * 9) as f64).sqrt());
    fill(W3..B3, (1.0 / FEATURES as f64).sqrt());
    p
}

/// The network on one executor: its problems, the data set, the parameters and every
/// intermediate buffer.
pub struct Net {
    conv1: ConvProblem,
    conv2: ConvProblem,
    dense: MatmulProblem,
    /// `BATCH × CLASSES × 1 × 1`: the logits as a tensor for the softmax.
    logits_desc: TensorDesc,
    learning_rate: f32,
    images: DeviceMemory<f32>,
    /// `−t` of every image.
    neg_targets: DeviceMemory<f32>,
    params: DeviceMemory<f32>,
    grads: DeviceMemory<f32>,
    z1: DeviceMemory<f32>,
    h1: DeviceMemory<f32>,
    z2: DeviceMemory<f32>,
    h2: DeviceMemory<f32>,
    logits: DeviceMemory<f32>,
    log_p: DeviceMemory<f32>,
    d_logits: DeviceMemory<f32>,
    /// The gradient of `h2`, then (in place) of `z2`.
    d_h2: DeviceMemory<f32>,
    /// The gradient of `h1`, then (in place) of `z1`.
    d_h1: DeviceMemory<f32>,
    /// Per-(image, channel) sums on the way to a bias gradient.
    sums: DeviceMemory<f32>,
    ones: DeviceMemory<f32>,
    /// The last step's loss.
    loss: DeviceMemory<f32>,
    /// The sum of the losses since the last [`Net::take_mean_loss`].
    loss_sum: DeviceMemory<f32>,
    steps_in_sum: usize,
}

impl Net {
    /// The network on `exec` with `data` uploaded and parameters `params` (`PARAMS` values),
    /// trained by SGD at `learning_rate`.
    pub fn new(
        exec: &StreamExecutor,
        data: &Dataset,
        params: &[f32],
        learning_rate: f32,
    ) -> Result<Self> {
        if params.len() != PARAMS {
            return Err(streamexec::Error::InvalidArgument {
                operation: "Net::new".into(),
                detail: format!(
                    "params has {} values; the network has {PARAMS}",
                    params.len()
                ),
            });
        }
        let (f32_, nchw) = (DnnDataType::F32, TensorLayout::Nchw);
        let (n, side) = (BATCH as u64, SIDE as u64);
        let x = TensorDesc::new(f32_, nchw, n, 1, side, side)?;
        let w1 = FilterDesc::new(f32_, nchw, C1 as u64, 1, 3, 3)?;
        let conv1 = ConvProblem::new(&x, &w1, &ConvDesc::new([1, 1], [1, 1], [1, 1], 1)?)?;
        let w2 = FilterDesc::new(f32_, nchw, C2 as u64, C1 as u64, 3, 3)?;
        let conv2 = ConvProblem::new(&conv1.y, &w2, &ConvDesc::new([0, 0], [2, 2], [1, 1], 1)?)?;
        let dense = MatmulProblem::new(f32_, n, CLASSES as u64, FEATURES as u64, None)?;
        let logits_desc = TensorDesc::new(f32_, nchw, n, CLASSES as u64, 1, 1)?;

        let upload = |v: &[f32]| -> Result<DeviceMemory<f32>> {
            let d = exec.allocate_array(v.len())?;
            exec.synchronous_memcpy_h2d(v, &d)?;
            Ok(d)
        };
        let zeros = |len: usize| exec.allocate_zeroed_array::<f32>(len);
        let (a1, a2) = (conv1.y.elements() as usize, conv2.y.elements() as usize);
        Ok(Net {
            conv1,
            conv2,
            dense,
            logits_desc,
            learning_rate,
            images: upload(&data.images)?,
            neg_targets: upload(&data.targets.iter().map(|t| -t).collect::<Vec<_>>())?,
            params: upload(params)?,
            grads: zeros(PARAMS)?,
            z1: zeros(a1)?,
            h1: zeros(a1)?,
            z2: zeros(a2)?,
            h2: zeros(a2)?,
            logits: zeros(BATCH * CLASSES)?,
            log_p: zeros(BATCH * CLASSES)?,
            d_logits: zeros(BATCH * CLASSES)?,
            d_h2: zeros(a2)?,
            d_h1: zeros(a1)?,
            sums: zeros(BATCH * C1.max(C2))?,
            ones: upload(&[1.0; SIDE * SIDE])?,
            loss: zeros(1)?,
            loss_sum: zeros(1)?,
            steps_in_sum: 0,
        })
    }

    /// Enqueues one SGD step on batch `step % (DATASET / BATCH)`: forward, loss (added to the
    /// running sum), backward and the update. Errors surface at the stream's
    /// `block_host_until_done`.
    pub fn enqueue_step(&mut self, stream: &mut Stream, step: usize) -> Result<()> {
        let b = step % (DATASET / BATCH);
        let pixels = BATCH * SIDE * SIDE;
        let x = self.images.slice(b * pixels..(b + 1) * pixels)?;
        let neg_t = self
            .neg_targets
            .slice(b * BATCH * CLASSES..(b + 1) * BATCH * CLASSES)?;
        let p = |r: std::ops::Range<usize>| self.params.slice(r);
        let g = |r: std::ops::Range<usize>| self.grads.slice(r);
        let (c1, c2, relu) = (&self.conv1, &self.conv2, Activation::Relu);
        let (a1, a2) = (&c1.y, &c2.y);
        let logits = &self.logits_desc;
        let (log, channel) = (SoftmaxAlgorithm::Log, SoftmaxMode::Channel);
        let (n, k) = (BATCH, CLASSES);
        let (hw1, hw2) = (SIDE * SIDE, SIDE2 * SIDE2);

        // Forward.
        stream
            .then_convolution_forward(c1, x, p(W1..B1)?, &self.z1)
            .then_bias_add(a1, &self.z1, p(B1..W2)?)
            .then_activation_forward(relu, a1, &self.z1, &self.h1)
            .then_convolution_forward(c2, &self.h1, p(W2..B2)?, &self.z2)
            .then_bias_add(a2, &self.z2, p(B2..W3)?)
            .then_activation_forward(relu, a2, &self.z2, &self.h2)
            .then_matmul_bias_activation(
                &self.dense,
                &self.h2,
                p(W3..B3)?,
                p(B3..PARAMS)?,
                &self.logits,
            )
            .then_softmax_forward(log, channel, logits, &self.logits, &self.log_p)
            // The loss, −Σ t·log p = Σ (−t)·log p, and its running sum.
            .then_blas_dot(n * k, &self.log_p, 1, neg_t, 1, &self.loss)
            .then_blas_axpy(1, 1.0f32, &self.loss, 1, &self.loss_sum, 1);

        // Backward. The log-softmax backward of dy = −t is softmax − t, the cross-entropy's
        // gradient with respect to the logits.
        stream
            .then_softmax_backward(log, channel, logits, &self.log_p, neg_t, &self.d_logits)
            // Dense layer, in column-major BLAS terms (a row-major `r × c` matrix is a
            // column-major `c × r` one): dW3ᵀ [k × F] = d_logitsᵀ [k × n] · h2 [n × F].
            .then_blas_gemm(
                Transpose::None,
                Transpose::Transpose,
                k,
                FEATURES,
                n,
                1.0f32,
                &self.d_logits,
                k,
                &self.h2,
                FEATURES,
                0.0,
                g(W3..B3)?,
                k,
            )
            // dB3 = Σ over the batch of d_logits.
            .then_blas_gemv(
                Transpose::None,
                k,
                n,
                1.0f32,
                &self.d_logits,
                k,
                self.ones.slice(..n)?,
                1,
                0.0,
                g(B3..PARAMS)?,
                1,
            )
            // d h2ᵀ [F × n] = W3 [F × k] · d_logitsᵀ [k × n].
            .then_blas_gemm(
                Transpose::Transpose,
                Transpose::None,
                FEATURES,
                n,
                k,
                1.0f32,
                p(W3..B3)?,
                k,
                &self.d_logits,
                k,
                0.0,
                &self.d_h2,
                FEATURES,
            )
            // Second convolution: d z2 (in place), its bias, filter and input gradients.
            .then_activation_backward(relu, a2, &self.z2, &self.h2, &self.d_h2, &self.d_h2);
        self.enqueue_bias_grad(stream, &self.d_h2, C2, hw2, g(B2..W3)?)?;
        stream
            .then_convolution_backward_filter(c2, &self.h1, &self.d_h2, g(W2..B2)?)
            .then_convolution_backward_data(c2, p(W2..B2)?, &self.d_h2, &self.d_h1)
            // First convolution: d z1 (in place), its bias and filter gradients.
            .then_activation_backward(relu, a1, &self.z1, &self.h1, &self.d_h1, &self.d_h1);
        self.enqueue_bias_grad(stream, &self.d_h1, C1, hw1, g(B1..W2)?)?;
        stream
            .then_convolution_backward_filter(c1, x, &self.d_h1, g(W1..B1)?)
            // SGD on every parameter at once.
            .then_blas_axpy(PARAMS, -self.learning_rate, &self.grads, 1, &self.params, 1);
        self.steps_in_sum += 1;
        Ok(())
    }

    /// Enqueues `db[c] = Σ_{n, h, w} dz[n, c, h, w]` for an NCHW `dz` of `BATCH × channels ×
    /// hw`: one GEMV sums each (image, channel) plane, a second sums over the batch.
    fn enqueue_bias_grad(
        &self,
        stream: &mut Stream,
        dz: &DeviceMemory<f32>,
        channels: usize,
        hw: usize,
        db: streamexec::DeviceSlice<'_, f32>,
    ) -> Result<()> {
        let planes = BATCH * channels;
        stream
            // sums [n·c] = dzᵀ · ones, dz as a column-major hw × (n·c) matrix.
            .then_blas_gemv(
                Transpose::Transpose,
                hw,
                planes,
                1.0f32,
                dz,
                hw,
                self.ones.slice(..hw)?,
                1,
                0.0,
                self.sums.slice(..planes)?,
                1,
            )
            // db [c] = sums · ones, sums as a column-major c × n matrix.
            .then_blas_gemv(
                Transpose::None,
                channels,
                BATCH,
                1.0f32,
                self.sums.slice(..planes)?,
                channels,
                self.ones.slice(..BATCH)?,
                1,
                0.0,
                db,
                1,
            );
        Ok(())
    }

    /// The mean loss of the steps enqueued since the last call (waits for `stream`), then
    /// starts a new sum; `None` when no step was enqueued.
    pub fn take_mean_loss(
        &mut self,
        exec: &StreamExecutor,
        stream: &mut Stream,
    ) -> Result<Option<f32>> {
        stream.block_host_until_done()?;
        if self.steps_in_sum == 0 {
            return Ok(None);
        }
        let mut sum = [0f32];
        exec.synchronous_memcpy_d2h(&self.loss_sum, &mut sum)?;
        exec.synchronous_memcpy_h2d(&[0f32], &self.loss_sum)?;
        let mean = sum[0] / self.steps_in_sum as f32;
        self.steps_in_sum = 0;
        Ok(Some(mean))
    }

    /// The parameters now (waits for nothing: block the stream first).
    pub fn params(&self, exec: &StreamExecutor) -> Result<Vec<f32>> {
        let mut out = vec![0f32; PARAMS];
        exec.synchronous_memcpy_d2h(&self.params, &mut out)?;
        Ok(out)
    }
}

/// The network's logits for one `SIDE × SIDE` image under `params`, computed on the host in
/// f64 with plain loops (a reference independent of every platform).
pub fn reference_logits(params: &[f32], image: &[f32]) -> [f64; CLASSES] {
    let w = |i: usize| f64::from(params[i]);
    // conv1: pad 1, stride 1, then bias and ReLU.
    let mut h1 = vec![0f64; C1 * SIDE * SIDE];
    for k in 0..C1 {
        for y in 0..SIDE {
            for x in 0..SIDE {
                let mut acc = w(B1 + k);
                for r in 0..3 {
                    for s in 0..3 {
                        let (iy, ix) = ((y + r) as isize - 1, (x + s) as isize - 1);
                        if (0..SIDE as isize).contains(&iy) && (0..SIDE as isize).contains(&ix) {
                            let px = f64::from(image[iy as usize * SIDE + ix as usize]);
                            acc += w(W1 + k * 9 + r * 3 + s) * px;
                        }
                    }
                }
                h1[(k * SIDE + y) * SIDE + x] = acc.max(0.0);
            }
        }
    }
    // conv2: no padding, stride 2, then bias and ReLU; flattened as (channel, row, column).
    let mut h2 = vec![0f64; FEATURES];
    for k in 0..C2 {
        for y in 0..SIDE2 {
            for x in 0..SIDE2 {
                let mut acc = w(B2 + k);
                for c in 0..C1 {
                    for r in 0..3 {
                        for s in 0..3 {
                            let tap = w(W2 + ((k * C1 + c) * 3 + r) * 3 + s);
                            acc += tap * h1[(c * SIDE + 2 * y + r) * SIDE + 2 * x + s];
                        }
                    }
                }
                h2[(k * SIDE2 + y) * SIDE2 + x] = acc.max(0.0);
            }
        }
    }
    // dense: W3 is row-major FEATURES × CLASSES.
    let mut logits = [0f64; CLASSES];
    for (j, l) in logits.iter_mut().enumerate() {
        *l = w(B3 + j)
            + (0..FEATURES)
                .map(|f| h2[f] * w(W3 + f * CLASSES + j))
                .sum::<f64>();
    }
    logits
}
