//! Which kernels use Tensor Cores and which ops can, by the TensorBoard profiler plugin's own
//! lists (pytorch/kineto `tb_plugin/torch_tb_profiler/profiler/tensor_core.py`), so that the
//! plugin's Tensor Core figures come out the same.
//!
//! The kernel list is name fragments of cuBLAS/cuDNN/CUTLASS kernels of the Volta to Hopper
//! generations (`h884`/`s884`: Volta HMMA, `1688`/`16816`: Turing and Ampere MMA shapes,
//! `xmma_*`: the implicit-GEMM kernels). Kernels named otherwise (`nvjet_*` of recent cuBLAS,
//! Triton kernels) are not counted even when they use Tensor Cores: that is the plugin's rule,
//! and its figures are what these views reproduce.

/// Kernel-name fragments of Tensor Core kernels.
const KERNEL_FRAGMENTS: &[&str] = &[
    "h884",
    "s884",
    "h1688",
    "s1688",
    "hmma",
    "i8816",
    "16816",
    "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel",
    "conv1x1",
    "conv2d_c1_k1",
    "direct_group",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_warp_specialized_implicit_gemm",
    "xmma_gemm",
    "xmma_sparse_gemm",
    "c1688",
];

/// Ops that can run on Tensor Cores (exact names).
const ELIGIBLE_OPS: &[&str] = &[
    "aten::_convolution",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::conv_tbc",
    "aten::conv_transpose1d",
    "aten::conv_transpose2d",
    "aten::conv_transpose3d",
    "aten::convolution",
    "aten::cudnn_convolution",
    "aten::cudnn_convolution_transpose",
    "aten::prelu",
    "aten::addmm",
    "aten::addmv",
    "aten::addr",
    "aten::matmul",
    "aten::mm",
    "aten::mv",
    "aten::linear",
    "aten::addbmm",
    "aten::baddbmm",
    "aten::bmm",
    "aten::chain_matmul",
    "aten::linalg_multi_dot",
    "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell",
    "aten::lstm_cell",
    "aten::gru_cell",
    "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell",
    "CudnnConvolutionBackward",
    "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward",
    "CudnnConvolutionTransposeBackward",
    "MmBackward",
    "aten::cudnn_convolution_backward_weight",
    "aten::addmm_",
    "AddmvBackward",
    "MvBackward",
    "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input",
    "AddmmBackward",
    "aten::cudnn_convolution_backward_input",
    "AddbmmBackward",
    "aten::cudnn_convolution_backward",
];

/// Whether a kernel of this name uses Tensor Cores.
#[must_use]
pub fn kernel_uses_tensor_cores(name: &str) -> bool {
    KERNEL_FRAGMENTS.iter().any(|f| name.contains(f))
}

/// Whether an op of this name can use Tensor Cores.
#[must_use]
pub fn op_is_eligible(name: &str) -> bool {
    ELIGIBLE_OPS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugins_lists() {
        assert!(kernel_uses_tensor_cores(
            "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn"
        ));
        assert!(kernel_uses_tensor_cores(
            "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nn"
        ));
        assert!(kernel_uses_tensor_cores(
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3"
        ));
        assert!(!kernel_uses_tensor_cores("volta_sgemm_128x64_tn"));
        assert!(!kernel_uses_tensor_cores(
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
        ));
        assert!(op_is_eligible("aten::addmm"));
        assert!(op_is_eligible("AddmmBackward"));
        assert!(!op_is_eligible("AddmmBackward0"));
        assert!(!op_is_eligible("aten::relu"));
    }
}
