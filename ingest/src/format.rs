//! Format ids, what a sniff can find, and the byte helpers the readers' content checks share.

use serde::{Deserialize, Serialize};

/// The format of one input, as reports name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormatId {
    /// PyTorch profiler (Kineto) / Chrome Trace Event Format JSON.
    KinetoJson,
    /// A torch trace with HPU lanes from the Gaudi PyTorch bridge.
    HabanaBridgeJson,
    /// The Synapse profiler's own Trace Event JSON: one process per engine type.
    SynapseTefJson,
    /// Gaudi HW-trace CSV (`Name,Trace Source,Engine,Event type,…`).
    HabanaHwCsv,
    /// Gaudi Trace Analyzer "Analyzed Nodes" table (CSV or JSON).
    HabanaAnalyzedNodes,
    /// Gaudi bridge metrics file (`PT_HPU_METRICS_FILE`).
    HabanaMetrics,
    /// Perfetto protobuf.
    PerfettoProto,
}

impl FormatId {
    /// Every format id.
    pub const ALL: [Self; 7] = [
        Self::KinetoJson,
        Self::HabanaBridgeJson,
        Self::SynapseTefJson,
        Self::HabanaHwCsv,
        Self::HabanaAnalyzedNodes,
        Self::HabanaMetrics,
        Self::PerfettoProto,
    ];

    /// The id reports use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KinetoJson => "kineto-json",
            Self::HabanaBridgeJson => "habana-bridge-json",
            Self::SynapseTefJson => "synapse-tef-json",
            Self::HabanaHwCsv => "habana-hw-csv",
            Self::HabanaAnalyzedNodes => "habana-analyzed-nodes",
            Self::HabanaMetrics => "habana-metrics",
            Self::PerfettoProto => "perfetto-proto",
        }
    }

    /// An input of this format needs no other input once read: it can load on its own worker
    /// (device-only captures are aligned to another input, tables and metrics attach to one).
    #[must_use]
    pub fn stands_alone(self) -> bool {
        matches!(
            self,
            Self::KinetoJson | Self::HabanaBridgeJson | Self::PerfettoProto
        )
    }

    /// Its host lanes run on the device clock (Synapse's own trace): never the reference other
    /// inputs' clocks are aligned to.
    #[must_use]
    pub fn host_on_device_clock(self) -> bool {
        self == Self::SynapseTefJson
    }
}

impl std::fmt::Display for FormatId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for FormatId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// What the first bytes of an input are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A trace in a format steplens reads.
    Trace(FormatId),
    /// A ZIP archive (Gaudi `.hltv`): its members are read one by one.
    Zip,
    /// Other comma-separated text.
    Csv,
    /// Something else.
    Unknown,
}

/// The input without a UTF-8 byte-order mark.
pub(crate) fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// The first byte that is not ASCII whitespace.
pub(crate) fn first_non_space(body: &[u8]) -> Option<u8> {
    body.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// The first line (without its line break), at most 4 KiB.
pub(crate) fn first_line(bytes: &[u8]) -> &[u8] {
    let head = &bytes[..bytes.len().min(4096)];
    let end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    &head[..end]
}
