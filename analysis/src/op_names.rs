//! What the names of framework spans mean, shared by the step table, the critical path, the
//! detectors and the TensorBoard views: the data loader's annotation and torch.compile's own
//! spans. It depends on nothing else in the crate, so every analysis can use it.

/// Name prefix of the PyTorch DataLoader's `__next__` annotation.
pub const DATALOADER_PREFIX: &str = "enumerate(DataLoader)#";

/// Names of spans that belong to torch.compile's own machinery: anything under them is the
/// compiler working, not the training step.
const COMPILE_SPANS: &[&str] = &[
    "dynamo",
    "entire_frame_compile",
    "entire_backward_compile",
    "inductor_compile",
    "compile_fx_inner",
    "backend_compile",
];

/// Whether a span belongs to torch.compile's machinery.
pub fn is_compile_span(name: &str) -> bool {
    name.ends_with("(dynamo_timed)") || COMPILE_SPANS.contains(&name)
}
