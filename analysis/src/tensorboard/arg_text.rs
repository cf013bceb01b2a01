//! Arg values as the plugin prints them: a JSON string decoded, a list of lists of numbers as
//! Python's `repr` writes it.

/// A raw JSON value as text: a string decoded, anything else as written.
pub(super) fn json_text(raw: &[u8]) -> String {
    if raw.first() == Some(&b'"') {
        serde_json::from_slice::<String>(raw)
            .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned())
    } else {
        String::from_utf8_lossy(raw).into_owned()
    }
}
/// A JSON list of lists of numbers as Python prints it (`[[32, 3], []]`), the plugin's
/// grouping key; other text as written.
pub(super) fn python_repr(raw: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(raw) {
        Ok(v) => repr(&v),
        Err(_) => String::from_utf8_lossy(raw).into_owned(),
    }
}

fn repr(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(repr).collect::<Vec<_>>().join(", ")
            )
        }
        serde_json::Value::String(s) => format!("'{s}'"),
        serde_json::Value::Null => "None".to_owned(),
        serde_json::Value::Bool(b) => if *b { "True" } else { "False" }.to_owned(),
        other => other.to_string(),
    }
}
