//! The JSON documents steplens itself writes (a saved report, a baseline set, a rank summary,
//! and outputs nothing reads back), the registry beside the trace readers' (`readers.rs`): the first
//! look at a file (`open.rs`) tells one from a trace by its `"schema"` tag, the
//! command that reads it takes it from there, and a load of traces refuses it with
//! [`Document::refusal`], naming what reads it. Adding a document is one entry in
//! [`DOCUMENTS`]; a test holds every schema steplens writes to an entry.

/// A JSON document steplens writes, known by the family of its `"schema"` tag. It is not a
/// trace: the command that reads it takes it by that tag (one look, in `open.rs`), and a
/// load of traces refuses it with [`Document::refusal`].
#[derive(Debug)]
pub struct Document {
    /// The schema tag up to its version: `steplens.report` for `steplens.report/1`.
    pub family: &'static str,
    /// What it is and what writes it, for people.
    pub what: &'static str,
    /// What reads it.
    pub read_by: &'static str,
}

/// A report saved with `report -f json`.
pub static REPORT: Document = Document {
    family: "steplens.report",
    what: "a report saved with report -f json",
    read_by: "report renders it again (-f text, markdown or html), check and diff compare it as \
              a run, and steplens.check in Python takes it",
};

/// A rolling set of accepted runs (`baseline update`).
pub static BASELINE_SET: Document = Document {
    family: "steplens.baselines",
    what: "a baseline set written by baseline update",
    read_by: "check --baseline pools its runs, and baseline update adds to it",
};

/// One rank's summary (`summarize`).
pub static RANK_SUMMARY: Document = Document {
    family: "steplens.rank-summary",
    what: "a rank summary written by summarize",
    read_by: "report --summaries reads one per rank",
};

/// Every document steplens writes. The last four are outputs only: nothing reads them back.
pub static DOCUMENTS: &[&Document] = &[
    &REPORT,
    &BASELINE_SET,
    &RANK_SUMMARY,
    &Document {
        family: "steplens.ranks",
        what: "a rank table written by report --summaries -f json",
        read_by: "",
    },
    &Document {
        family: "steplens.check",
        what: "an outcome written by check -f json",
        read_by: "",
    },
    &Document {
        family: "steplens.diff",
        what: "a comparison written by diff -f json",
        read_by: "",
    },
    &Document {
        family: "steplens.error",
        what: "an error that a command with JSON output wrote",
        read_by: "",
    },
];

impl Document {
    /// The document whose family `schema` (`steplens.report/1`) belongs to, any version.
    #[must_use]
    pub fn of_schema(schema: &str) -> Option<&'static Self> {
        DOCUMENTS.iter().copied().find(|d| d.is(schema))
    }

    /// Whether `schema` is of this document's family.
    #[must_use]
    pub fn is(&self, schema: &str) -> bool {
        schema.split_once('/').map_or(schema, |(family, _)| family) == self.family
    }

    /// Why a file whose schema tag is `schema` is not read as a trace, and what reads it: one
    /// line for the error a load of traces gives.
    #[must_use]
    pub fn refusal(schema: &str) -> String {
        match Self::of_schema(schema) {
            Some(d) if d.read_by.is_empty() => format!(
                "{} ({schema}), which no command reads back; give the traces it came from",
                d.what
            ),
            Some(d) => format!(
                "{} ({schema}): {}; give the traces it came from to open them here",
                d.what, d.read_by
            ),
            None => format!(
                "a {schema} document, which this steplens does not know; give the traces it came \
                 from"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BASELINE_SET, DOCUMENTS, Document, REPORT};

    #[test]
    fn a_schema_names_its_document_in_any_version() {
        assert!(REPORT.is("steplens.report/1") && REPORT.is("steplens.report/2"));
        assert!(!REPORT.is("steplens.reports/1") && !REPORT.is("steplens.baselines/1"));
        assert!(BASELINE_SET.is("steplens.baselines/1"));
        for d in DOCUMENTS {
            let schema = format!("{}/1", d.family);
            assert_eq!(
                Document::of_schema(&schema).map(|o| o.family),
                Some(d.family)
            );
            let why = Document::refusal(&schema);
            assert!(why.starts_with(d.what) && why.contains(&schema), "{why}");
            assert!(!why.contains('\n'), "one line: {why}");
        }
        assert!(Document::of_schema("steplens.nothing/1").is_none());
        assert!(Document::refusal("steplens.nothing/1").contains("does not know"));
    }

    #[test]
    fn what_reads_a_document_is_said_when_a_load_refuses_it() {
        let why = Document::refusal("steplens.report/1");
        assert!(why.contains("report renders it again") && why.contains("check and diff"));
        let out = Document::refusal("steplens.check/1");
        assert!(out.contains("no command reads back"), "{out}");
    }
}
