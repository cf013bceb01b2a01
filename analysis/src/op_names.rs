//! What framework names mean, shared by the step table, the critical path, the detectors, the
//! collectives and the TensorBoard views: the data loader's annotation, torch.compile's own
//! spans and the sizes of torch's element types, and a per-name flag table for passes over every
//! slice. It depends on nothing else in the crate, so every analysis can use it.

use steplens_ingest::model::{SliceId, Timeline};

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

/// Whether a host span is a graph compile: torch.compile's machinery ([`is_compile_span`]) or
/// the Gaudi graph compiler (`synGraphCompile`).
#[must_use]
pub fn is_graph_compile(name: &str) -> bool {
    name == "synGraphCompile" || is_compile_span(name)
}

/// Bytes of one element of a torch dtype, as the profiler writes it: an `Input type` entry
/// (`float`, `c10::BFloat16`, `long int`) or a `record_param_comms` `dtype` (`Float`,
/// `BFloat16`, `Long`). `None` for anything else (`TensorList`, `Scalar`, an empty entry).
#[must_use]
pub fn dtype_size(name: &str) -> Option<i64> {
    let lower = name.trim().to_ascii_lowercase();
    let ty = lower.strip_prefix("c10::").unwrap_or(&lower);
    Some(match ty {
        "complex<double>" | "complexdouble" => 16,
        "double" | "float64" | "long" | "long int" | "long long int" | "int64" | "uint64"
        | "unsigned long" | "unsigned long int" | "unsigned long long" | "complex<float>"
        | "complexfloat" => 8,
        "float" | "float32" | "int" | "int32" | "unsigned int" | "uint32"
        | "complex<c10::half>" | "complex<half>" | "complexhalf" => 4,
        "half" | "float16" | "bfloat16" | "short" | "short int" | "int16" | "unsigned short"
        | "uint16" => 2,
        "bool" | "byte" | "char" | "signed char" | "unsigned char" | "int8" | "uint8" => 1,
        _ if ty.starts_with("float8") => 1,
        _ => return None,
    })
}

/// The autograd engine's range around one backward node (`autograd::engine::evaluate_function:
/// MmBackward0`).
pub(crate) const EVALUATE_PREFIX: &str = "autograd::engine::evaluate_function: ";

/// Per interned name, a few bits of what a pass asks of it (a collective op, a blocking call, a
/// step marker …), classified once per name: a trace has far fewer names than slices, and a
/// pass over every slice then reads a byte instead of matching strings.
pub(crate) struct NameFlags(Vec<u8>);

impl NameFlags {
    /// The flags `classify` gives each of `t`'s names.
    pub(crate) fn new(t: &Timeline, classify: impl Fn(&str) -> u8) -> Self {
        Self(t.strings.iter().map(|(_, name)| classify(name)).collect())
    }

    /// The flags of slice `slice`'s name (0 for a slice out of range).
    pub(crate) fn of(&self, t: &Timeline, slice: SliceId) -> u8 {
        t.slices
            .name
            .get(slice as usize)
            .and_then(|&n| self.0.get(n as usize))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::dtype_size;

    #[test]
    fn dtype_sizes_read_both_spellings() {
        for (name, bytes) in [
            ("float", 4),
            ("Float", 4),
            ("c10::BFloat16", 2),
            ("BFloat16", 2),
            ("c10::Half", 2),
            ("long int", 8),
            ("Long", 8),
            ("UInt64", 8),
            ("unsigned long", 8),
            ("unsigned char", 1),
            ("c10::Float8_e4m3fn", 1),
            ("c10::complex<double>", 16),
        ] {
            assert_eq!(dtype_size(name), Some(bytes), "{name}");
        }
        for name in ["TensorList", "Scalar", "", "GenericList"] {
            assert_eq!(dtype_size(name), None, "{name}");
        }
    }
}
