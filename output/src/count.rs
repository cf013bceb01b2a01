//! Counts in prose, as every output writes them: thousands separated, the noun singular for one
//! (`1 step`, `2 steps`, `1,204 events`).

/// An integer with thousands separators.
#[must_use]
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` and a regular noun, singular for one: `1 call`, `3 calls`, `12,000 events`.
#[must_use]
pub(crate) fn plural(n: u64, one: &str) -> String {
    format!("{} {one}{}", thousands(n), if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::{plural, thousands};

    #[test]
    fn one_is_singular_and_others_plural() {
        assert_eq!(plural(1, "step"), "1 step");
        assert_eq!(plural(0, "finding"), "0 findings");
        assert_eq!(plural(2, "call"), "2 calls");
        assert_eq!(plural(12_000, "event"), "12,000 events");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
