//! What each accelerator class can do: the rates that large dense GEMMs reach in practice per
//! precision (what a fix that changes precision is priced with), the dense datasheet peaks and
//! memory bandwidth, and the bus bandwidth that all-reduces reach over the class's usual links.
//! The figures and their sources are in `docs/research/device-rates.md`; `docs/findings.md`
//! says how the detectors use them.
//!
//! A device is matched by the name its trace gives (`deviceProperties[].name`, the Gaudi
//! bridge's `GAUDI3`). An unknown device gets no class, and each user says what it does then.
//! AMD MI250X figures are per GCD, as PyTorch sees one.

/// TFLOP/s per precision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// fp32 without TF32 (CUDA cores; AMD's fp32 matrix cores; Gaudi's MME in fp32).
    pub fp32: f64,
    /// TF32 (NVIDIA tensor cores; Gaudi's MME); the fp32 rate on AMD, where PyTorch keeps
    /// fp32 matmuls on the fp32 path unless xf32 is turned on.
    pub tf32: f64,
    /// bf16 and fp16.
    pub bf16: f64,
}

/// One class of accelerator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceClass {
    /// The class's name in reports (`H100 SXM`).
    pub name: &'static str,
    /// Fragments of a trace's device name that select this class (case-insensitive; the first
    /// class with a matching fragment wins, so narrower classes come first).
    matches: &'static [&'static str],
    /// Dense datasheet peaks, TFLOP/s.
    pub peak: Rates,
    /// Memory bandwidth, TB/s.
    pub memory_tbps: f64,
    /// What large, well-shaped dense GEMMs reach (measured where a public measurement exists,
    /// else a stated share of the peak), TFLOP/s.
    pub gemm: Rates,
    /// The class's usual scale-up link, for wording (`NVLink 4`).
    pub link: &'static str,
    /// The all-reduce bus bandwidth (nccl-tests' busbw) a large message reaches over that link
    /// within one node, GB/s.
    pub link_busbw_gbps: f64,
}

impl DeviceClass {
    /// The share of an fp32 (`tf32`: TF32) matrix kernel's time that running it in bf16 takes
    /// away: `1 − rate(fp32) / rate(bf16)` at the rates GEMMs reach.
    #[must_use]
    pub fn reduced_precision_saving(&self, tf32: bool) -> f64 {
        let from = if tf32 { self.gemm.tf32 } else { self.gemm.fp32 };
        (1.0 - from / self.gemm.bf16).clamp(0.0, 1.0)
    }
}

/// The classes, narrower names first.
pub const DEVICE_CLASSES: &[DeviceClass] = &[
    DeviceClass {
        name: "H100 PCIe",
        matches: &["h100 pcie", "h100pcie"],
        peak: Rates {
            fp32: 51.2,
            tf32: 378.0,
            bf16: 756.0,
        },
        memory_tbps: 2.0,
        gemm: Rates {
            fp32: 37.0,
            tf32: 240.0,
            bf16: 496.0,
        },
        link: "PCIe 5",
        link_busbw_gbps: 40.0,
    },
    DeviceClass {
        name: "H200",
        matches: &["h200"],
        peak: Rates {
            fp32: 67.0,
            tf32: 494.7,
            bf16: 989.4,
        },
        memory_tbps: 4.8,
        gemm: Rates {
            fp32: 52.0,
            tf32: 402.0,
            bf16: 795.0,
        },
        link: "NVLink 4",
        link_busbw_gbps: 475.0,
    },
    DeviceClass {
        name: "H100 SXM",
        matches: &["h100", "gh200"],
        peak: Rates {
            fp32: 67.0,
            tf32: 494.7,
            bf16: 989.4,
        },
        memory_tbps: 3.35,
        gemm: Rates {
            fp32: 52.0,
            tf32: 402.0,
            bf16: 795.0,
        },
        link: "NVLink 4",
        link_busbw_gbps: 480.0,
    },
    DeviceClass {
        name: "B200",
        matches: &["b200", "gb200"],
        peak: Rates {
            fp32: 75.0,
            tf32: 1100.0,
            bf16: 2250.0,
        },
        memory_tbps: 7.7,
        gemm: Rates {
            fp32: 66.0,
            tf32: 850.0,
            bf16: 1696.0,
        },
        link: "NVLink 5",
        link_busbw_gbps: 830.0,
    },
    DeviceClass {
        name: "A100",
        matches: &["a100"],
        peak: Rates {
            fp32: 19.5,
            tf32: 156.0,
            bf16: 312.0,
        },
        memory_tbps: 2.0,
        gemm: Rates {
            fp32: 19.2,
            tf32: 134.0,
            bf16: 271.0,
        },
        link: "NVLink 3",
        link_busbw_gbps: 230.0,
    },
    DeviceClass {
        name: "L40S",
        matches: &["l40s"],
        peak: Rates {
            fp32: 91.6,
            tf32: 183.0,
            bf16: 362.0,
        },
        memory_tbps: 0.864,
        gemm: Rates {
            fp32: 47.0,
            tf32: 135.0,
            bf16: 269.0,
        },
        link: "PCIe 4",
        link_busbw_gbps: 20.0,
    },
    DeviceClass {
        name: "MI300X",
        matches: &["mi300x", "mi300"],
        peak: Rates {
            fp32: 163.4,
            tf32: 653.7,
            bf16: 1307.4,
        },
        memory_tbps: 5.3,
        gemm: Rates {
            fp32: 130.0,
            tf32: 130.0,
            bf16: 668.0,
        },
        link: "Infinity Fabric (xGMI)",
        link_busbw_gbps: 300.0,
    },
    DeviceClass {
        name: "MI250X",
        matches: &["mi250"],
        peak: Rates {
            fp32: 47.9,
            tf32: 47.9,
            bf16: 191.5,
        },
        memory_tbps: 1.64,
        gemm: Rates {
            fp32: 40.0,
            tf32: 40.0,
            bf16: 147.0,
        },
        link: "Infinity Fabric (xGMI)",
        link_busbw_gbps: 100.0,
    },
    DeviceClass {
        name: "MI210",
        matches: &["mi210"],
        peak: Rates {
            fp32: 45.3,
            tf32: 45.3,
            bf16: 181.0,
        },
        memory_tbps: 1.6,
        gemm: Rates {
            fp32: 37.9,
            tf32: 37.9,
            bf16: 139.0,
        },
        link: "PCIe 4 (Infinity Fabric bridge optional)",
        link_busbw_gbps: 20.0,
    },
    DeviceClass {
        name: "Gaudi 3",
        matches: &["gaudi3", "gaudi 3", "hl-325", "hl-338"],
        peak: Rates {
            fp32: 229.0,
            tf32: 459.0,
            bf16: 1835.0,
        },
        memory_tbps: 3.7,
        gemm: Rates {
            fp32: 161.0,
            tf32: 322.0,
            bf16: 1289.0,
        },
        link: "integrated RoCE (24 × 200 GbE)",
        link_busbw_gbps: 513.0,
    },
    DeviceClass {
        name: "Gaudi 2",
        matches: &["gaudi2", "gaudi 2", "hl-225"],
        peak: Rates {
            fp32: 108.0,
            tf32: 216.0,
            bf16: 432.0,
        },
        memory_tbps: 2.46,
        gemm: Rates {
            fp32: 54.0,
            tf32: 107.0,
            bf16: 429.0,
        },
        link: "integrated RoCE (24 × 100 GbE)",
        link_busbw_gbps: 250.0,
    },
];

/// The class of the device a trace names, when steplens knows it.
#[must_use]
pub fn device_class(name: &str) -> Option<&'static DeviceClass> {
    let lower = name.to_ascii_lowercase();
    DEVICE_CLASSES
        .iter()
        .find(|c| c.matches.iter().any(|m| lower.contains(m)))
}

#[cfg(test)]
mod tests {
    use super::device_class;

    #[test]
    fn names_as_traces_write_them_pick_their_class() {
        let class = |n: &str| device_class(n).map(|c| c.name);
        assert_eq!(class("NVIDIA H100 80GB HBM3"), Some("H100 SXM"));
        assert_eq!(class("NVIDIA H100 PCIe"), Some("H100 PCIe"));
        assert_eq!(class("NVIDIA H200"), Some("H200"));
        assert_eq!(class("NVIDIA A100-SXM4-80GB"), Some("A100"));
        assert_eq!(class("NVIDIA A100-PG509-200"), Some("A100"));
        assert_eq!(class("AMD Instinct MI300X"), Some("MI300X"));
        assert_eq!(class("AMD Instinct MI250X / MI250"), Some("MI250X"));
        assert_eq!(class("GAUDI3"), Some("Gaudi 3"));
        assert_eq!(class("GAUDI2"), Some("Gaudi 2"));
        assert_eq!(class("Tesla V100-SXM2-32GB"), None);
    }

    #[test]
    fn every_class_prices_bf16_as_faster_and_tf32_between() {
        for c in super::DEVICE_CLASSES {
            let fp32 = c.reduced_precision_saving(false);
            let tf32 = c.reduced_precision_saving(true);
            assert!(fp32 > 0.0 && fp32 < 1.0, "{}", c.name);
            assert!(tf32 <= fp32, "{}", c.name);
            assert!(
                c.gemm.bf16 <= c.peak.bf16 && c.gemm.fp32 <= c.peak.fp32,
                "{}",
                c.name
            );
        }
    }
}
