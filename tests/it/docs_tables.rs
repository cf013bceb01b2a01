//! The documented code tables match the closed sets in the code, so an undocumented warning
//! code, finding kind, severity or format id cannot ship: `docs/report-schema.md`'s warning
//! table lists exactly `WarningCode::ALL`, its format and severity rows `FormatId::ALL` and
//! `Severity::ALL`, and `docs/findings.md` has one section per `FindingKind` and a thresholds
//! table with exactly the fields of `Thresholds`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use steplens_analysis::{FindingKind, Severity};
use steplens_ingest::FormatId;
use steplens_ingest::model::WarningCode;

use crate::support;

/// The first-column codes of the markdown table that follows `heading` in `text`.
fn table_codes(text: &str, heading: &str) -> BTreeSet<String> {
    let start = text.find(heading).expect("heading in the doc");
    text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cell = l.trim_start_matches('|').split('|').next()?.trim();
            cell.strip_prefix('`')?.strip_suffix('`').map(str::to_owned)
        })
        .collect()
}

#[test]
fn every_warning_code_is_documented_and_no_other() {
    let doc = std::fs::read_to_string(support::repo().join("docs/report-schema.md")).unwrap();
    let documented = table_codes(&doc, "**Warning**");
    let code: BTreeSet<String> = WarningCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    assert_eq!(documented, code);
    // Serde writes the same names.
    for c in WarningCode::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
    }
}

#[test]
fn every_finding_kind_has_its_section_in_findings_md() {
    let doc = std::fs::read_to_string(support::repo().join("docs/findings.md")).unwrap();
    let documented: BTreeSet<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("## `")?.split('`').next())
        .collect();
    let code: BTreeSet<&str> = FindingKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(documented, code);
}

/// The backquoted names in the row of `field` of the report schema's tables.
fn row_names(doc: &str, field: &str) -> Vec<String> {
    let row = doc
        .lines()
        .find(|l| l.starts_with(&format!("| `{field}` |")))
        .expect("field row in the schema");
    let description = row.rsplit('|').nth(1).expect("description cell");
    description
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn severities_and_format_ids_are_documented_as_the_code_names_them() {
    let doc = std::fs::read_to_string(support::repo().join("docs/report-schema.md")).unwrap();
    let severities: Vec<&str> = Severity::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(row_names(&doc, "severity"), severities);
    let documented: BTreeSet<String> = row_names(&doc, "format").into_iter().collect();
    let code: BTreeSet<String> = FormatId::ALL
        .iter()
        .map(|f| f.as_str().to_owned())
        .collect();
    assert_eq!(documented, code);
    for f in FormatId::ALL {
        assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
    }
}

#[test]
fn findings_md_lists_every_threshold() {
    let doc = std::fs::read_to_string(support::repo().join("docs/findings.md")).unwrap();
    let documented = table_codes(&doc, "**Thresholds** are declared by the detector");
    let fields: BTreeSet<String> = serde_json::to_value(steplens_analysis::Thresholds::default())
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(documented, fields);
}
