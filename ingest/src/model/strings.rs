//! Interned names and categories, and the class each category falls in.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::{CatId, StrId};

/// Interned strings: each distinct name is stored once and referred to by a [`StrId`].
#[derive(Debug, Default, Clone)]
pub struct StringTable {
    strings: Vec<Arc<str>>,
    index: FxHashMap<Arc<str>, StrId>,
}

impl StringTable {
    /// The id of `s`, adding it when it is new.
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = StrId::try_from(self.strings.len()).unwrap_or(StrId::MAX);
        let arc: Arc<str> = Arc::from(s);
        self.strings.push(Arc::clone(&arc));
        self.index.insert(arc, id);
        id
    }

    /// The id of `s` if it was interned.
    #[must_use]
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.index.get(s).copied()
    }

    /// The string behind `id` (empty for an unknown id).
    #[must_use]
    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// Number of distinct strings.
    #[must_use]
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether no string was interned.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// Iterates over `(id, string)`.
    pub fn iter(&self) -> impl Iterator<Item = (StrId, &str)> {
        self.strings
            .iter()
            .enumerate()
            .map(|(i, s)| (i as StrId, &**s))
    }

    pub(super) fn heap_bytes(&self) -> usize {
        let text: usize = self.strings.iter().map(|s| s.len() + 16).sum();
        text + self.strings.capacity() * 16 + self.index.capacity() * 24
    }
}

/// What an event category means, so analyses never compare category strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CategoryClass {
    /// ATen ops, autograd nodes, compiled-region runtime spans (`cpu_op`).
    CpuOp,
    /// `record_function` ranges (`user_annotation`): steps, data loader, optimizer.
    UserAnnotation,
    /// Python frames (`python_function`).
    PythonFunction,
    /// Device kernels (`kernel`, Gaudi `Kernel`, MTIA `mtia_ccp_events`).
    Kernel,
    /// Device copies (`gpu_memcpy`, `Memcpy`).
    Memcpy,
    /// Device memsets (`gpu_memset`, `Memset`).
    Memset,
    /// Host runtime calls that launch device work (`cuda_runtime`, `privateuse1_runtime`, …).
    Runtime,
    /// Driver calls (`cuda_driver`).
    Driver,
    /// Synchronization activity on device lanes (`cuda_sync`).
    DeviceSync,
    /// Device-side mirror of annotations (`gpu_user_annotation`).
    DeviceAnnotation,
    /// CUPTI range-profiler ranges (`cuda_profiler_range`).
    ProfilerRange,
    /// The profiler's own span (`Trace`).
    TraceSpan,
    /// Flow categories (`ac2g`, `fwdbwd`, `async_cpu_to_gpu`).
    Flow,
    /// Ranges derived by a tool, not executed work (Gaudi Trace Analyzer nodes, the steps and
    /// findings steplens draws into its own Perfetto exports).
    Derived,
    /// Anything else.
    Other,
}

impl CategoryClass {
    /// Classifies a category string as written in Kineto and Gaudi bridge traces, in any
    /// case and in every spelling PyTorch has used since 1.8 (`Operator` and `cpu_op`,
    /// `Runtime` and `cuda_runtime`, `Kernel` and `kernel`, `Memcpy` and `gpu_memcpy`, …;
    /// `docs/kineto-compat.md` has the history).
    #[must_use]
    pub fn of(cat: &str) -> Self {
        // Category strings are short; a lowercase copy on the stack keeps this allocation-free.
        let mut buf = [0u8; 32];
        let Some(lower) = buf.get_mut(..cat.len()) else {
            return Self::Other;
        };
        lower.copy_from_slice(cat.as_bytes());
        lower.make_ascii_lowercase();
        match &*lower {
            b"cpu_op" | b"operator" | b"hpu_op" => Self::CpuOp,
            b"user_annotation" => Self::UserAnnotation,
            b"python_function" => Self::PythonFunction,
            b"kernel" | b"mtia_ccp_events" => Self::Kernel,
            b"gpu_memcpy" | b"memcpy" => Self::Memcpy,
            b"gpu_memset" | b"memset" => Self::Memset,
            b"cuda_runtime" | b"runtime" | b"privateuse1_runtime" | b"mtia_runtime" => {
                Self::Runtime
            }
            b"cuda_driver" | b"privateuse1_driver" => Self::Driver,
            b"cuda_sync" => Self::DeviceSync,
            b"gpu_user_annotation" => Self::DeviceAnnotation,
            b"cuda_profiler_range" => Self::ProfilerRange,
            b"trace" => Self::TraceSpan,
            b"ac2g" | b"fwdbwd" | b"async_cpu_to_gpu" => Self::Flow,
            b"analyzed_node" | b"steplens_overlay" => Self::Derived,
            _ => Self::Other,
        }
    }

    /// Whether a slice of this class occupies a device engine (counts as device busy time).
    #[must_use]
    pub fn is_device_work(self) -> bool {
        matches!(
            self,
            Self::Kernel | Self::Memcpy | Self::Memset | Self::ProfilerRange
        )
    }

    /// Whether this class only ever appears on device lanes.
    #[must_use]
    pub fn is_device_only(self) -> bool {
        self.is_device_work() || matches!(self, Self::DeviceSync | Self::DeviceAnnotation)
    }

    /// Whether a slice of this class is host work (an op, a runtime or driver call).
    #[must_use]
    pub fn is_host_work(self) -> bool {
        matches!(self, Self::CpuOp | Self::Runtime | Self::Driver)
    }

    pub(crate) fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// Interned categories with their classes.
#[derive(Debug, Default, Clone)]
pub struct Categories {
    names: Vec<Box<str>>,
    classes: Vec<CategoryClass>,
    index: FxHashMap<Box<str>, CatId>,
}

impl Categories {
    /// The id of `cat`, adding it when new. Beyond 65,535 distinct categories every new one maps
    /// to the last id (a trace with that many categories is not a real profiler trace).
    pub fn intern(&mut self, cat: &str) -> CatId {
        if let Some(&id) = self.index.get(cat) {
            return id;
        }
        let Ok(id) = CatId::try_from(self.names.len()) else {
            return CatId::MAX;
        };
        self.names.push(cat.into());
        self.classes.push(CategoryClass::of(cat));
        self.index.insert(cat.into(), id);
        id
    }

    /// The category string.
    #[must_use]
    pub fn name(&self, id: CatId) -> &str {
        self.names.get(id as usize).map_or("", |s| s)
    }

    /// The category class.
    #[must_use]
    pub fn class(&self, id: CatId) -> CategoryClass {
        self.classes
            .get(id as usize)
            .copied()
            .unwrap_or(CategoryClass::Other)
    }

    /// The id of `cat` if present.
    #[must_use]
    pub fn lookup(&self, cat: &str) -> Option<CatId> {
        self.index.get(cat).copied()
    }

    /// Number of categories.
    #[must_use]
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
