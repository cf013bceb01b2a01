//! The work of one call by op family: FLOPs and bytes moved, from the call's input shapes and
//! dtypes (`Input Dims` / `Input type`) and its non-tensor arguments (`Concrete Inputs`).
//! Formulas per family, documented in `docs/roofline.md`:
//! - GEMM (`mm`, `addmm`, `bmm`, `baddbmm`, `matmul`, `linear`, `_scaled_mm`): FLOPs =
//!   (2·M·N·K + M·N when a bias is added)·B; bytes = A, B, C (and the bias) at their dtypes;
//! - convolution forward (`convolution`, `_convolution`, `cudnn_convolution`): 2·N·K·Π(out)·(C/g)·Π(kernel)
//!   (+ N·K·Π(out) with a bias), the output size from stride, padding and dilation in
//!   `Concrete Inputs`; backward (`convolution_backward`): twice the forward, the output size
//!   from the gradient's shape;
//! - attention (`scaled_dot_product_attention` and its flash / efficient / cuDNN forms): 2·B·H·L·S·(E + Ev),
//!   half of it when causal; the backward ops 2.5 × that (the recomputed scores and three
//!   gradients);
//! - normalization (layer, batch, group, RMS): 5 FLOPs per element; bytes = input, output and
//!   the affine parameters;
//! - elementwise: one FLOP per output element (broadcast shape); bytes = inputs and output;
//! - reductions (`sum`, `mean`, `amax`, …): one FLOP per input element; bytes = the input;
//! - anything else is `other`: bytes of its inputs where known, no FLOPs. Nothing is guessed: a
//!   missing shape or parameter leaves the figure out.

use serde::{Deserialize, Serialize};

/// An op family of the performance model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Matrix multiplies.
    Gemm,
    /// Convolutions, forward and backward.
    Conv,
    /// Scaled dot-product attention.
    Attention,
    /// Layer, batch, group and RMS normalization.
    Norm,
    /// Elementwise ops.
    Elementwise,
    /// Reductions.
    Reduce,
    /// Collectives.
    Communication,
    /// Everything else.
    Other,
}

impl Family {
    /// The name the report uses (`gemm`, `conv`, …).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gemm => "gemm",
            Self::Conv => "conv",
            Self::Attention => "attention",
            Self::Norm => "norm",
            Self::Elementwise => "elementwise",
            Self::Reduce => "reduce",
            Self::Communication => "communication",
            Self::Other => "other",
        }
    }
}

/// A GEMM's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmDims {
    /// Rows of A and C.
    pub m: i64,
    /// Columns of B and C.
    pub n: i64,
    /// The shared dimension.
    pub k: i64,
    /// Batch count (1 for a plain matrix multiply).
    pub b: i64,
    /// Whether a bias is added.
    pub bias: bool,
}

/// The work of one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Work {
    /// Floating-point operations, when the model covers the op.
    pub flops: Option<f64>,
    /// Bytes read and written, when the shapes and dtypes are known.
    pub bytes: Option<f64>,
    /// The op's family (`None`: other).
    pub family: Option<Family>,
    /// A GEMM's dimensions.
    pub gemm: Option<GemmDims>,
}

impl Work {
    /// FLOPs per byte moved, when both are known.
    #[must_use]
    pub fn arithmetic_intensity(&self) -> Option<f64> {
        self.flops
            .zip(self.bytes)
            .filter(|(_, b)| *b > 0.0)
            .map(|(f, b)| f / b)
    }
}

/// One input: its shape and dtype as the trace gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    /// Shape (empty for a scalar or a non-tensor).
    pub dims: Vec<i64>,
    /// `Input type` entry (`float`, `c10::BFloat16`, `Scalar`, …).
    pub dtype: String,
}

impl Operand {
    fn numel(&self) -> i64 {
        self.dims.iter().product()
    }

    fn elem_bytes(&self) -> Option<i64> {
        crate::op_names::dtype_size(&self.dtype)
    }

    fn bytes(&self) -> Option<f64> {
        Some((self.numel() * self.elem_bytes()?) as f64)
    }

    fn is_tensor(&self) -> bool {
        !self.dims.is_empty() && self.elem_bytes().is_some()
    }
}

/// The work of a call of op `name` on `inputs` (`concrete`: the `Concrete Inputs` entries).
#[must_use]
pub fn work_of(name: &str, inputs: &[Operand], concrete: &[String]) -> Work {
    let op = name.strip_prefix("aten::").unwrap_or(name);
    let w = match op {
        "mm" | "_scaled_mm" => gemm(inputs.first(), inputs.get(1), None),
        "addmm" | "_addmm_activation" => gemm(inputs.get(1), inputs.get(2), inputs.first()),
        "bmm" => gemm(inputs.first(), inputs.get(1), None),
        "baddbmm" => gemm(inputs.get(1), inputs.get(2), inputs.first()),
        "matmul" => gemm(inputs.first(), inputs.get(1), None),
        "linear" => linear(inputs),
        "convolution" | "_convolution" | "cudnn_convolution" | "conv1d" | "conv2d" | "conv3d" => {
            conv_forward(op, inputs, concrete)
        }
        "convolution_backward" => conv_backward(inputs, concrete),
        "scaled_dot_product_attention"
        | "_scaled_dot_product_flash_attention"
        | "_scaled_dot_product_efficient_attention"
        | "_scaled_dot_product_cudnn_attention" => attention(inputs, concrete, false, false),
        "_flash_attention_forward" | "_efficient_attention_forward" => {
            attention(inputs, concrete, true, false)
        }
        "_scaled_dot_product_flash_attention_backward"
        | "_scaled_dot_product_efficient_attention_backward"
        | "_scaled_dot_product_cudnn_attention_backward" => {
            attention(&inputs[inputs.len().min(1)..], concrete, false, true)
        }
        "_flash_attention_backward" | "_efficient_attention_backward" => {
            attention(&inputs[inputs.len().min(1)..], concrete, true, true)
        }
        "layer_norm"
        | "native_layer_norm"
        | "batch_norm"
        | "native_batch_norm"
        | "_batch_norm_impl_index"
        | "cudnn_batch_norm"
        | "group_norm"
        | "native_group_norm"
        | "rms_norm"
        | "_fused_rms_norm" => norm(inputs),
        "sum" | "mean" | "amax" | "amin" | "max" | "min" | "prod" | "norm" | "var" | "std"
        | "var_mean" | "std_mean" | "linalg_vector_norm" | "logsumexp" | "argmax" | "argmin"
            if inputs.first().is_some_and(Operand::is_tensor) =>
        {
            reduce(inputs)
        }
        _ if crate::detect::is_pointwise_name(name) => elementwise(inputs),
        _ => Work {
            bytes: tensor_bytes(inputs),
            ..Work::default()
        },
    };
    if w.family.is_none() && crate::tensorboard::is_comm_op(name) {
        return Work {
            family: Some(Family::Communication),
            ..w
        };
    }
    w
}

fn tensor_bytes(inputs: &[Operand]) -> Option<f64> {
    let tensors: Vec<&Operand> = inputs.iter().filter(|o| o.is_tensor()).collect();
    if tensors.is_empty() {
        return None;
    }
    tensors.iter().map(|o| o.bytes()).sum()
}

/// A (batched) matrix multiply of `a` by `b`, plus `bias` when given. A with more dimensions
/// than a 2-D B folds its leading dimensions into M.
fn gemm(a: Option<&Operand>, b: Option<&Operand>, bias: Option<&Operand>) -> Work {
    let (Some(a), Some(b)) = (a, b) else {
        return Work::default();
    };
    let (ad, bd) = (&a.dims, &b.dims);
    if ad.len() < 2 || bd.len() < 2 {
        return Work::default();
    }
    let k = ad[ad.len() - 1];
    let n = bd[bd.len() - 1];
    if bd[bd.len() - 2] != k {
        return Work::default();
    }
    let (m, batch) = if bd.len() == 2 {
        (ad[..ad.len() - 1].iter().product::<i64>(), 1)
    } else {
        let a_batch: i64 = ad[..ad.len() - 2].iter().product();
        let b_batch: i64 = bd[..bd.len() - 2].iter().product();
        (ad[ad.len() - 2], a_batch.max(b_batch))
    };
    let bias = bias.filter(|o| o.is_tensor());
    let dims = GemmDims {
        m,
        n,
        k,
        b: batch,
        bias: bias.is_some(),
    };
    gemm_work(dims, a, b, bias)
}

fn gemm_work(d: GemmDims, a: &Operand, b: &Operand, bias: Option<&Operand>) -> Work {
    let (m, n, k, batch) = (d.m as f64, d.n as f64, d.k as f64, d.b as f64);
    let flops = (2.0 * m * n * k + if d.bias { m * n } else { 0.0 }) * batch;
    let out_elem = a.elem_bytes();
    let bytes = a.bytes().zip(b.bytes()).zip(out_elem).map(|((x, y), e)| {
        let c = m * n * batch * e as f64;
        x + y + c + bias.and_then(Operand::bytes).unwrap_or(0.0)
    });
    Work {
        flops: Some(flops),
        bytes,
        family: Some(Family::Gemm),
        gemm: Some(d),
    }
}

/// `linear(input[…, K], weight[N, K], bias[N]?)`.
fn linear(inputs: &[Operand]) -> Work {
    let (Some(x), Some(w)) = (inputs.first(), inputs.get(1)) else {
        return Work::default();
    };
    if x.dims.is_empty() || w.dims.len() != 2 || x.dims[x.dims.len() - 1] != w.dims[1] {
        return Work::default();
    }
    let bias = inputs.get(2).filter(|o| o.is_tensor());
    let d = GemmDims {
        m: x.dims[..x.dims.len() - 1].iter().product(),
        n: w.dims[0],
        k: w.dims[1],
        b: 1,
        bias: bias.is_some(),
    };
    gemm_work(d, x, w, bias)
}

/// A list of integers as `Concrete Inputs` writes it (`[1, 1]`, `2`).
fn int_list(text: &str) -> Option<Vec<i64>> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    if inner.trim().is_empty() {
        return None;
    }
    inner.split(',').map(|v| v.trim().parse().ok()).collect()
}

/// The `i`-th entry of a per-spatial-dim parameter (a single value applies to every dim).
fn nth(values: &[i64], i: usize) -> Option<i64> {
    values
        .get(i)
        .or_else(|| (values.len() == 1).then(|| &values[0]))
        .copied()
}

/// Convolution forward: `(input, weight, bias, stride, padding, dilation, …, groups)`.
fn conv_forward(op: &str, inputs: &[Operand], concrete: &[String]) -> Work {
    let (Some(x), Some(w)) = (inputs.first(), inputs.get(1)) else {
        return Work::default();
    };
    let spatial = x.dims.len().saturating_sub(2);
    if spatial == 0 || w.dims.len() != x.dims.len() {
        return Work::default();
    }
    // aten::convolution / _convolution: …, transposed (6), output_padding (7), groups (8);
    // conv1d/2d/3d and cudnn_convolution: …, groups (6).
    let param = |i: usize| concrete.get(i).and_then(|c| int_list(c));
    let (Some(stride), Some(padding), Some(dilation)) = (param(3), param(4), param(5)) else {
        return Work::default();
    };
    let groups_at = if matches!(op, "convolution" | "_convolution") {
        8
    } else {
        6
    };
    let transposed = matches!(op, "convolution" | "_convolution")
        && concrete.get(6).is_some_and(|c| c.trim() == "True");
    if transposed {
        return Work::default();
    }
    let groups = param(groups_at)
        .and_then(|g| g.first().copied())
        .unwrap_or(1);
    let mut out = Vec::with_capacity(spatial);
    for i in 0..spatial {
        let (Some(s), Some(p), Some(dl)) = (nth(&stride, i), nth(&padding, i), nth(&dilation, i))
        else {
            return Work::default();
        };
        let size = x.dims[2 + i];
        let kernel = w.dims[2 + i];
        if s <= 0 {
            return Work::default();
        }
        out.push((size + 2 * p - dl * (kernel - 1) - 1) / s + 1);
    }
    let bias = inputs.get(2).filter(|o| o.is_tensor());
    conv_work(x, w, bias, &out, groups, 1.0)
}

/// `convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
/// transposed, output_padding, groups, output_mask)`: twice the forward's FLOPs (the input's and
/// the weight's gradients), the output size read from the gradient.
fn conv_backward(inputs: &[Operand], concrete: &[String]) -> Work {
    let (Some(gy), Some(x), Some(w)) = (inputs.first(), inputs.get(1), inputs.get(2)) else {
        return Work::default();
    };
    if gy.dims.len() != x.dims.len() || x.dims.len() < 3 {
        return Work::default();
    }
    let groups = concrete
        .get(9)
        .and_then(|c| int_list(c))
        .and_then(|g| g.first().copied())
        .unwrap_or(1);
    let mut work = conv_work(x, w, None, &gy.dims[2..], groups, 2.0);
    work.bytes = work.bytes.zip(gy.bytes()).map(|(b, g)| b + g);
    work
}

fn conv_work(
    x: &Operand,
    w: &Operand,
    bias: Option<&Operand>,
    out: &[i64],
    groups: i64,
    passes: f64,
) -> Work {
    let n = x.dims[0] as f64;
    let k = w.dims[0] as f64;
    let c_per_group = w.dims[1] as f64;
    let kernel: i64 = w.dims[2..].iter().product();
    let out_elems: i64 = out.iter().product();
    if groups <= 0 || out_elems <= 0 {
        return Work::default();
    }
    let macs = n * k * out_elems as f64 * c_per_group * kernel as f64;
    let flops = passes * 2.0 * macs
        + if bias.is_some() {
            n * k * out_elems as f64
        } else {
            0.0
        };
    let bytes = x
        .bytes()
        .zip(w.bytes())
        .zip(x.elem_bytes())
        .map(|((a, b), e)| {
            a + b
                + n * k * out_elems as f64 * e as f64
                + bias.and_then(Operand::bytes).unwrap_or(0.0)
        });
    Work {
        flops: Some(flops),
        bytes,
        family: Some(Family::Conv),
        gemm: None,
    }
}

/// Attention over `q`, `k`, `v` (the first three inputs): `[B, H, L, E]` (`seq_first`:
/// `[B, L, H, E]`, the flash / efficient kernels' own layout). Causal from the first
/// `True`/`False` among the concrete inputs after them.
fn attention(inputs: &[Operand], concrete: &[String], seq_first: bool, backward: bool) -> Work {
    let (Some(q), Some(k), Some(v)) = (inputs.first(), inputs.get(1), inputs.get(2)) else {
        return Work::default();
    };
    if q.dims.len() != 4 || k.dims.len() != 4 || v.dims.len() != 4 {
        return Work::default();
    }
    let (b, h, l, e) = if seq_first {
        (q.dims[0], q.dims[2], q.dims[1], q.dims[3])
    } else {
        (q.dims[0], q.dims[1], q.dims[2], q.dims[3])
    };
    let s = if seq_first { k.dims[1] } else { k.dims[2] };
    let ev = v.dims[3];
    let causal = concrete
        .iter()
        .skip(3)
        .find(|c| matches!(c.trim(), "True" | "False"))
        .is_some_and(|c| c.trim() == "True");
    let mut flops = 2.0 * (b * h * l * s) as f64 * (e + ev) as f64;
    if causal {
        flops *= 0.5;
    }
    if backward {
        flops *= 2.5;
    }
    let bytes = [q, k, v]
        .iter()
        .map(|o| o.bytes())
        .sum::<Option<f64>>()
        .zip(q.elem_bytes())
        .map(|(inp, el)| inp + (b * h * l * ev * el) as f64);
    Work {
        flops: Some(flops),
        bytes,
        family: Some(Family::Attention),
        gemm: None,
    }
}

fn norm(inputs: &[Operand]) -> Work {
    let Some(x) = inputs.first().filter(|o| o.is_tensor()) else {
        return Work::default();
    };
    let params: f64 = inputs
        .iter()
        .skip(1)
        .filter(|o| o.is_tensor())
        .filter_map(Operand::bytes)
        .sum();
    Work {
        flops: Some(5.0 * x.numel() as f64),
        bytes: x.bytes().map(|b| 2.0 * b + params),
        family: Some(Family::Norm),
        gemm: None,
    }
}

fn reduce(inputs: &[Operand]) -> Work {
    let Some(x) = inputs.first() else {
        return Work::default();
    };
    Work {
        flops: Some(x.numel() as f64),
        bytes: x.bytes(),
        family: Some(Family::Reduce),
        gemm: None,
    }
}

/// The broadcast shape of the tensor inputs.
fn broadcast(inputs: &[&Operand]) -> Option<Vec<i64>> {
    let rank = inputs.iter().map(|o| o.dims.len()).max()?;
    let mut out = vec![1i64; rank];
    for o in inputs {
        let off = rank - o.dims.len();
        for (i, &d) in o.dims.iter().enumerate() {
            let slot = &mut out[off + i];
            if *slot == 1 {
                *slot = d;
            } else if d != 1 && d != *slot {
                return None;
            }
        }
    }
    Some(out)
}

fn elementwise(inputs: &[Operand]) -> Work {
    let tensors: Vec<&Operand> = inputs.iter().filter(|o| o.is_tensor()).collect();
    let Some(shape) = broadcast(&tensors) else {
        return Work {
            family: Some(Family::Elementwise),
            ..Work::default()
        };
    };
    let elems: i64 = shape.iter().product();
    let out_bytes = tensors
        .first()
        .and_then(|o| o.elem_bytes())
        .map(|e| (elems * e) as f64);
    Work {
        flops: Some(elems as f64),
        bytes: tensor_bytes(inputs).zip(out_bytes).map(|(i, o)| i + o),
        family: Some(Family::Elementwise),
        gemm: None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Family, Operand, work_of};

    fn t(dims: &[i64], dtype: &str) -> Operand {
        Operand {
            dims: dims.to_vec(),
            dtype: dtype.to_owned(),
        }
    }

    #[test]
    fn gemm_formulas_with_bias_and_batch() {
        // mm: A[64,128] x B[128,32]: 2·64·32·128 = 524,288 FLOPs; bytes (64·128 + 128·32 +
        // 64·32)·4 = (8192 + 4096 + 2048)·4 = 57,344.
        let w = work_of(
            "aten::mm",
            &[t(&[64, 128], "float"), t(&[128, 32], "float")],
            &[],
        );
        assert_eq!(w.flops, Some(524_288.0));
        assert_eq!(w.bytes, Some(57_344.0));
        assert_eq!(w.family, Some(Family::Gemm));
        // addmm(bias[32], A[64,128], B[128,32]): 524,288 + 64·32 = 526,336; bytes + 32·4.
        let w = work_of(
            "aten::addmm",
            &[
                t(&[32], "float"),
                t(&[64, 128], "float"),
                t(&[128, 32], "float"),
            ],
            &[],
        );
        assert_eq!(w.flops, Some(526_336.0));
        assert_eq!(w.bytes, Some(57_344.0 + 128.0));
        assert!(
            w.gemm
                .is_some_and(|g| g.bias && g.m == 64 && g.n == 32 && g.k == 128)
        );
        // bmm A[8,16,64] x B[8,64,32] bf16: 2·16·32·64·8 = 524,288; bytes (8192 + 16384 + 4096)·2.
        let w = work_of(
            "aten::bmm",
            &[
                t(&[8, 16, 64], "c10::BFloat16"),
                t(&[8, 64, 32], "c10::BFloat16"),
            ],
            &[],
        );
        assert_eq!(w.flops, Some(524_288.0));
        assert_eq!(w.bytes, Some((8192.0 + 16384.0 + 4096.0) * 2.0));
        assert!(w.gemm.is_some_and(|g| g.b == 8 && g.m == 16));
        // baddbmm adds B·M·N = 8·16·32 = 4096.
        let w = work_of(
            "aten::baddbmm",
            &[
                t(&[8, 16, 32], "float"),
                t(&[8, 16, 64], "float"),
                t(&[8, 64, 32], "float"),
            ],
            &[],
        );
        assert_eq!(w.flops, Some(524_288.0 + 4096.0));
        // linear(x[4,10,512], W[256,512], b[256]): M = 40, N = 256, K = 512:
        // 2·40·256·512 + 40·256 = 10,485,760 + 10,240 = 10,496,000.
        let w = work_of(
            "aten::linear",
            &[
                t(&[4, 10, 512], "float"),
                t(&[256, 512], "float"),
                t(&[256], "float"),
            ],
            &[],
        );
        assert_eq!(w.flops, Some(10_496_000.0));
        assert!(
            w.gemm
                .is_some_and(|g| g.m == 40 && g.n == 256 && g.k == 512 && g.b == 1)
        );
        // matmul of a 3-D by a 2-D folds the batch into M: [2,3,4] x [4,5] → M = 6.
        let w = work_of(
            "aten::matmul",
            &[t(&[2, 3, 4], "float"), t(&[4, 5], "float")],
            &[],
        );
        assert_eq!(w.flops, Some(2.0 * 6.0 * 5.0 * 4.0));
        // Mismatched inner dims: no guess.
        let w = work_of("aten::mm", &[t(&[4, 3], "float"), t(&[4, 5], "float")], &[]);
        assert_eq!(w.flops, None);
    }

    #[test]
    fn convolution_forward_and_backward() {
        // x[8,3,32,32], W[16,3,3,3], stride 1, padding 1, dilation 1 → out 32×32:
        // 2·8·16·(32·32)·3·(3·3) = 7,077,888 FLOPs, + bias 8·16·1024 = 131,072.
        let concrete: Vec<String> = [
            "", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let w = work_of(
            "aten::convolution",
            &[
                t(&[8, 3, 32, 32], "float"),
                t(&[16, 3, 3, 3], "float"),
                t(&[16], "float"),
            ],
            &concrete,
        );
        assert_eq!(w.flops, Some(7_077_888.0 + 131_072.0));
        // Stride 2, no padding: out (32 - 3)/2 + 1 = 15 → 2·8·16·225·3·9 = 1,555,200.
        let mut strided = concrete;
        strided[3] = "[2, 2]".into();
        strided[4] = "[0, 0]".into();
        let w = work_of(
            "aten::convolution",
            &[
                t(&[8, 3, 32, 32], "float"),
                t(&[16, 3, 3, 3], "float"),
                t(&[], ""),
            ],
            &strided,
        );
        assert_eq!(w.flops, Some(1_555_200.0));
        // Without stride/padding/dilation there is nothing to compute the output from.
        let w = work_of(
            "aten::convolution",
            &[t(&[8, 3, 32, 32], "float"), t(&[16, 3, 3, 3], "float")],
            &[],
        );
        assert_eq!(w.flops, None);
        // Backward, from the gradient's 32×32: twice the forward MACs ×2 = 14,155,776.
        let w = work_of(
            "aten::convolution_backward",
            &[
                t(&[8, 16, 32, 32], "float"),
                t(&[8, 3, 32, 32], "float"),
                t(&[16, 3, 3, 3], "float"),
            ],
            &[],
        );
        assert_eq!(w.flops, Some(2.0 * 7_077_888.0));
    }

    #[test]
    fn attention_causal_and_backward() {
        // q,k,v [2,8,128,64]: 2·2·8·128·128·(64 + 64) = 67,108,864.
        let qkv = [
            t(&[2, 8, 128, 64], "c10::BFloat16"),
            t(&[2, 8, 128, 64], "c10::BFloat16"),
            t(&[2, 8, 128, 64], "c10::BFloat16"),
        ];
        let w = work_of("aten::scaled_dot_product_attention", &qkv, &[]);
        assert_eq!(w.flops, Some(67_108_864.0));
        let causal: Vec<String> = ["", "", "", "", "0.", "True"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let w = work_of("aten::scaled_dot_product_attention", &qkv, &causal);
        assert_eq!(w.flops, Some(33_554_432.0));
        // The flash kernel's own layout [B, L, H, E] gives the same work.
        let blhe = [
            t(&[2, 128, 8, 64], "c10::BFloat16"),
            t(&[2, 128, 8, 64], "c10::BFloat16"),
            t(&[2, 128, 8, 64], "c10::BFloat16"),
        ];
        let w = work_of("aten::_flash_attention_forward", &blhe, &[]);
        assert_eq!(w.flops, Some(67_108_864.0));
    }

    #[test]
    fn norms_elementwise_and_reductions() {
        // layer_norm over x[4,1024] with weight and bias [1024]: 5·4096 FLOPs; bytes 2·4096·4 +
        // 2·1024·4.
        let w = work_of(
            "aten::layer_norm",
            &[
                t(&[4, 1024], "float"),
                t(&[1], "int"),
                t(&[1024], "float"),
                t(&[1024], "float"),
            ],
            &[],
        );
        assert_eq!(w.flops, Some(20_480.0));
        assert_eq!(w.bytes, Some(32_768.0 + 4.0 + 8192.0));
        // add with broadcasting [4,1,8] + [1,5,8] → [4,5,8] = 160 elements; bytes (32 + 40 + 160)·4.
        let w = work_of(
            "aten::add",
            &[
                t(&[4, 1, 8], "float"),
                t(&[1, 5, 8], "float"),
                t(&[], "Scalar"),
            ],
            &[],
        );
        assert_eq!(w.flops, Some(160.0));
        assert_eq!(w.bytes, Some((32.0 + 40.0 + 160.0) * 4.0));
        let w = work_of("aten::sum", &[t(&[64, 64], "float")], &[]);
        assert_eq!(w.flops, Some(4096.0));
        assert_eq!(w.family, Some(Family::Reduce));
        // An op outside the families: bytes only.
        let w = work_of(
            "aten::index_select",
            &[t(&[10, 4], "float"), t(&[], "Scalar"), t(&[3], "long int")],
            &[],
        );
        assert_eq!(w.flops, None);
        assert_eq!(w.bytes, Some(160.0 + 24.0));
    }
}
