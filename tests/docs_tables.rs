//! The documented code tables match the closed sets in the code, so an undocumented warning
//! code cannot ship: `docs/report-schema.md`'s warning table lists exactly
//! `WarningCode::ALL`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use steplens_ingest::model::WarningCode;

mod support;

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
    let code: BTreeSet<&str> = steplens_analysis::detect::FINDING_KINDS
        .iter()
        .copied()
        .collect();
    assert_eq!(documented, code);
}
