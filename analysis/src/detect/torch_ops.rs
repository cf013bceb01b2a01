//! What torch traces say about ops, shared by the detectors: the arg helpers (`Input Dims`,
//! `Concrete Inputs`, `Input type`), the op tree (children, the autograd engine's ranges) and
//! the classes of ATen op names. No detector logic: a detector reads these, never another
//! detector's module.

use steplens_ingest::model::{OpArg, SliceId, Timeline};

use super::Under;
use crate::context::Context;

/// Whether `slice` runs inside the autograd engine (the backward pass).
pub(crate) fn in_backward(ctx: &Context<'_>, slice: SliceId) -> bool {
    ctx.is_under(slice, Under::BACKWARD)
}

/// Direct children of `slice` on its track.
pub(crate) fn children(t: &Timeline, slice: SliceId) -> impl Iterator<Item = SliceId> + '_ {
    let begin = t.slices.start[slice as usize];
    let end = t.slices.end(slice);
    let track_end = t.slice_track(slice).map_or(slice, |tr| tr.slices.end);
    (slice + 1..track_end)
        .take_while(move |&j| {
            let s = t.slices.start[j as usize];
            s < end || s == begin
        })
        .filter(move |&j| t.slices.parent[j as usize] == slice)
}

/// The `index`-th entry of a shape-like arg (`Input Dims`, `Input Strides`) when it is one
/// tensor's list of integers.
pub(crate) fn tensor_arg(
    ctx: &Context<'_>,
    slice: SliceId,
    arg: OpArg,
    index: usize,
) -> Option<Vec<i64>> {
    nth_int_list(ctx.arg(slice, arg)?, index)
}

/// The `index`-th element of a JSON array when it is an array of integers, read straight from
/// the arg's raw text: transformer traces have a shape arg on every one of hundreds of
/// thousands of ops, and a `serde_json::Value` per number cost the detectors a fifth of their
/// time. `None` when the text is not an array, the element is missing or holds anything but
/// integers (a tensor list, a float, a string) — what `as_i64` over parsed values gave.
pub(crate) fn nth_int_list(raw: &[u8], index: usize) -> Option<Vec<i64>> {
    let mut at = skip_ws(raw, 0);
    if raw.get(at) != Some(&b'[') {
        return None;
    }
    at += 1;
    for _ in 0..index {
        at = skip_element(raw, skip_ws(raw, at))?;
        at = skip_ws(raw, at);
        if raw.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
    at = skip_ws(raw, at);
    if raw.get(at) != Some(&b'[') {
        return None;
    }
    let close = at + 1 + raw.get(at + 1..)?.iter().position(|&b| b == b']')?;
    let inner = std::str::from_utf8(&raw[at + 1..close]).ok()?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|n| n.trim().parse::<i64>().ok())
        .collect()
}

fn skip_ws(raw: &[u8], mut at: usize) -> usize {
    while raw.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The index just past the JSON value starting at `at` (strings and nesting respected).
fn skip_element(raw: &[u8], mut at: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        match *raw.get(at)? {
            b'"' => {
                at += 1;
                loop {
                    match *raw.get(at)? {
                        b'\\' => at += 2,
                        b'"' => break,
                        _ => at += 1,
                    }
                }
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                if depth == 0 {
                    return Some(at);
                }
                depth -= 1;
            }
            b',' if depth == 0 => return Some(at),
            _ => {}
        }
        at += 1;
        if depth == 0 && matches!(raw.get(at), Some(b',' | b']')) {
            return Some(at);
        }
    }
}

/// The `index`-th entry of a shape-like arg when it is a tensor list (`_foreach_*` ops): one
/// shape per tensor.
pub(crate) fn tensor_list_arg(
    ctx: &Context<'_>,
    slice: SliceId,
    arg: OpArg,
    index: usize,
) -> Option<Vec<Vec<i64>>> {
    let raw = ctx.arg(slice, arg)?;
    let all: Vec<serde_json::Value> = serde_json::from_slice(raw).ok()?;
    all.get(index)?
        .as_array()?
        .iter()
        .map(|s| {
            s.as_array()?
                .iter()
                .map(serde_json::Value::as_i64)
                .collect()
        })
        .collect()
}

/// `Concrete Inputs` as strings (`""` for tensors).
pub(crate) fn concrete_inputs(ctx: &Context<'_>, slice: SliceId) -> Option<Vec<String>> {
    let raw = ctx.arg(slice, OpArg::ConcreteInputs)?;
    let all: Vec<serde_json::Value> = serde_json::from_slice(raw).ok()?;
    Some(
        all.into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            })
            .collect(),
    )
}

/// One integer or a list of integers, as `Concrete Inputs` writes them (`"1"`, `"[0, 2, 1]"`).
pub(crate) fn ints(text: &str) -> Option<Vec<i64>> {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        if inner.trim().is_empty() {
            return Some(Vec::new());
        }
        inner.split(',').map(|x| x.trim().parse().ok()).collect()
    } else {
        Some(vec![text.parse().ok()?])
    }
}

/// Bytes per element of the op's first input, from `Input type`.
pub(crate) fn dtype_bytes(ctx: &Context<'_>, op: SliceId) -> Option<i64> {
    let raw = ctx.arg(op, OpArg::InputType)?;
    let types: Vec<String> = serde_json::from_slice(raw).ok()?;
    crate::op_names::dtype_size(types.first()?)
}

/// Elementwise ATen ops (out-of-place and in-place).
const POINTWISE_OPS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "abs",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log1p",
    "log2",
    "pow",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "erf",
    "erfc",
    "sin",
    "cos",
    "clamp",
    "clamp_min",
    "clamp_max",
    "where",
    "maximum",
    "minimum",
    "rsub",
    "square",
    "sign",
    "floor",
    "ceil",
    "round",
    "trunc",
    "lerp",
    "addcmul",
    "addcdiv",
    "hardtanh",
    "leaky_relu",
    "softplus",
    "mish",
    "hardswish",
    "hardsigmoid",
    "elu",
    "threshold",
    "masked_fill",
    "sgn",
];

/// Whether `name` is an elementwise ATen op.
pub(crate) fn is_pointwise(name: &str) -> bool {
    let Some(op) = name.strip_prefix("aten::") else {
        return false;
    };
    let op = op.strip_suffix('_').unwrap_or(op);
    POINTWISE_OPS.contains(&op)
}

#[cfg(test)]
mod tests {
    use super::{ints, nth_int_list};

    #[test]
    fn int_lists_are_read_from_the_raw_text_as_parsed_json_would_give_them() {
        let raw = br#"[[64, 128], [], "x,]", [[1, 2], [3]], [1.5], [-3,4] ,7]"#;
        assert_eq!(nth_int_list(raw, 0), Some(vec![64, 128]));
        assert_eq!(nth_int_list(raw, 1), Some(vec![]));
        assert_eq!(nth_int_list(raw, 2), None);
        assert_eq!(nth_int_list(raw, 3), None);
        assert_eq!(nth_int_list(raw, 4), None);
        assert_eq!(nth_int_list(raw, 5), Some(vec![-3, 4]));
        assert_eq!(nth_int_list(raw, 6), None);
        assert_eq!(nth_int_list(raw, 7), None);
        assert_eq!(nth_int_list(b"{}", 0), None);
        assert_eq!(nth_int_list(b"[", 0), None);
        assert_eq!(nth_int_list(br#"[["a\"]", 1], [2]]"#, 1), Some(vec![2]));
    }

    #[test]
    fn parses_concrete_ints() {
        assert_eq!(ints("[0, 2, 3, 1]"), Some(vec![0, 2, 3, 1]));
        assert_eq!(ints("-1"), Some(vec![-1]));
        assert_eq!(ints("[]"), Some(vec![]));
        assert_eq!(ints(""), None);
    }

    #[test]
    fn pointwise_names() {
        assert!(super::is_pointwise("aten::mul_"));
        assert!(super::is_pointwise("aten::mul"));
        assert!(super::is_pointwise("aten::add_"));
        assert!(super::is_pointwise("aten::tanh"));
        assert!(!super::is_pointwise("aten::mm"));
        assert!(!super::is_pointwise("aten::copy_"));
        assert!(!super::is_pointwise("mul"));
    }
}
