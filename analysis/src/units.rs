//! Human units for durations and sizes, shared by the CLI's tables and the check verdicts.

/// A duration in the unit that keeps it short: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
#[must_use]
pub fn human_ns(ns: i64) -> String {
    let abs = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "" };
    if abs < 1e3 {
        format!("{ns} ns")
    } else if abs < 1e6 {
        format!("{sign}{} µs", three_digits(abs / 1e3))
    } else if abs < 1e9 {
        format!("{sign}{} ms", three_digits(abs / 1e6))
    } else {
        format!("{sign}{} s", three_digits(abs / 1e9))
    }
}

/// A signed change of duration: `+1.20 ms`, `-850 ns`, `±0 ns`.
#[must_use]
pub fn signed_ns(ns: i64) -> String {
    match ns.signum() {
        1 => format!("+{}", human_ns(ns)),
        -1 => human_ns(ns),
        _ => "±0 ns".to_owned(),
    }
}

/// Three significant digits at most.
fn three_digits(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A percentage or ratio rounded to two decimals, as reports print them.
#[must_use]
pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Bytes in binary units.
#[must_use]
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.2} GiB", b / (1024.0 * 1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_three_digits() {
        assert_eq!(human_ns(850), "850 ns");
        assert_eq!(human_ns(12_345), "12.3 µs");
        assert_eq!(human_ns(4_561_000), "4.56 ms");
        assert_eq!(human_ns(-4_561_000), "-4.56 ms");
        assert_eq!(human_ns(123_456_789_012), "123 s");
        assert_eq!(signed_ns(1_200_000), "+1.20 ms");
        assert_eq!(signed_ns(-850), "-850 ns");
        assert_eq!(signed_ns(0), "±0 ns");
    }

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(human_bytes(1000), "1000 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
    }
}

/// Names for a finding's title: the first two (each cut to 60 characters with an ellipsis) and
/// how many more there are; the full list belongs in the evidence and the JSON's `ops`.
#[must_use]
pub fn name_list<S: AsRef<str>>(names: &[S]) -> String {
    const SHOWN: usize = 2;
    const WIDTH: usize = 60;
    let cut = |n: &S| {
        let n = n.as_ref();
        if n.chars().count() > WIDTH {
            let head: String = n.chars().take(WIDTH - 1).collect();
            format!("{head}…")
        } else {
            n.to_owned()
        }
    };
    let shown: Vec<String> = names.iter().take(SHOWN).map(cut).collect();
    match names.len().saturating_sub(SHOWN) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod name_list_tests {
    use super::name_list;

    #[test]
    fn two_names_then_how_many_more() {
        let names: Vec<String> = ["aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(name_list(&names[..1]), "aten::mm");
        assert_eq!(name_list(&names[..2]), "aten::mm, aten::addmm");
        assert_eq!(name_list(&names), "aten::mm, aten::addmm and 2 more");
        let long = vec!["k".repeat(80)];
        assert_eq!(name_list(&long).chars().count(), 60);
        assert!(name_list(&long).ends_with('…'));
    }
}
