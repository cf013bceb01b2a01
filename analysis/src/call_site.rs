//! Where in the user's code a slice was called from: the first Python frame outside the Python
//! installation and the libraries (`python_function` frames' `CallFrom`, or an old trace's
//! `Call stack` arg). One definition for the detectors' titles and the memory holders.

use steplens_ingest::model::{CategoryClass, NO_PARENT, SliceId, Timeline};

/// Top-level module paths that are libraries, not the user's code, in `CallFrom` values.
const LIBRARY_ROOTS: &[&str] = &[
    "torch/",
    "torchvision/",
    "torchaudio/",
    "tqdm/",
    "numpy/",
    "transformers/",
    "accelerate/",
    "lightning/",
    "pytorch_lightning/",
    "deepspeed/",
    "habana_frameworks/",
    "optimum/",
    "apex/",
    "triton/",
    "functorch/",
    "datasets/",
    "<frozen",
    "contextlib.py",
    "threading.py",
    "functools.py",
    "runpy.py",
    "typing.py",
    "abc.py",
];

/// Ancestors of `slice` in `t`, innermost first.
pub(crate) fn ancestors(t: &Timeline, slice: SliceId) -> impl Iterator<Item = SliceId> + '_ {
    let parents = &t.slices.parent;
    std::iter::successors(parents.get(slice as usize).copied(), move |&p| {
        parents.get(p as usize).copied()
    })
    .take_while(|&p| p != NO_PARENT)
}

/// The user's call site (`file.py:line`) of `slice`: the innermost enclosing Python frame
/// called from outside the Python and torch installation, from `python_function` frames'
/// `CallFrom`; in traces without Python frames (PyTorch 1.8–1.10 `with_stack`), the first
/// user frame of the innermost op's `Call stack` arg. `None` when the trace has neither.
pub(crate) fn call_site(t: &Timeline, slice: SliceId) -> Option<String> {
    for a in ancestors(t, slice) {
        if t.slice_class(a) != CategoryClass::PythonFunction {
            continue;
        }
        let Some(from) = t.arg_str(a, "CallFrom") else {
            continue;
        };
        if !is_library_path(&from) {
            return Some(from);
        }
    }
    std::iter::once(slice)
        .chain(ancestors(t, slice))
        .find_map(|a| t.arg_str(a, "Call stack"))
        .and_then(|stack| user_frame_of_call_stack(&stack))
}

/// The first frame outside the libraries of a `Call stack` arg (frames innermost first,
/// separated by `;`, each `path(line): function`), as `file:line`.
fn user_frame_of_call_stack(stack: &str) -> Option<String> {
    stack.split(';').find_map(|frame| {
        let head = frame
            .trim()
            .split_once("): ")
            .map_or(frame.trim(), |(h, _)| h);
        let (path, line) = head.trim_end_matches(')').rsplit_once('(')?;
        let line: u32 = line.trim().parse().ok()?;
        let path = path.trim();
        // The file name alone, as a `CallFrom` of a script run from its own directory reads.
        let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
        (!path.is_empty() && !is_library_path(path)).then(|| format!("{file}:{line}"))
    })
}

fn is_library_path(path: &str) -> bool {
    path.contains("site-packages/")
        || path.contains("dist-packages/")
        || path.contains("/lib/python")
        || LIBRARY_ROOTS.iter().any(|root| {
            // A root at the start of a module path, or after a directory of an absolute one.
            path.match_indices(root)
                .any(|(i, _)| i == 0 || path.as_bytes().get(i - 1) == Some(&b'/'))
        })
}

#[cfg(test)]
mod tests {
    use super::{is_library_path, user_frame_of_call_stack};

    #[test]
    fn call_stack_arg_gives_the_first_user_frame() {
        let stack = "/opt/conda/lib/python3.8/site-packages/torch/_tensor.py(613): item;\
                     /home/ml/proj/train.py(42): train_step;/home/ml/proj/train.py(88): main";
        assert_eq!(
            user_frame_of_call_stack(stack).as_deref(),
            Some("train.py:42")
        );
        assert_eq!(
            user_frame_of_call_stack(
                "/src/pytorch/torch/nn/modules/module.py(1051): _call_impl;train.py(7): <module>"
            )
            .as_deref(),
            Some("train.py:7")
        );
        assert_eq!(user_frame_of_call_stack(""), None);
        assert_eq!(user_frame_of_call_stack("garbage;also(x): y"), None);
    }

    #[test]
    fn library_paths() {
        assert!(is_library_path("torch/_tensor_str.py:590"));
        assert!(is_library_path("tqdm/std.py:1200"));
        assert!(is_library_path(
            "/usr/lib/python3.11/site-packages/foo.py:3"
        ));
        assert!(!is_library_path("sync_points.py:43"));
        assert!(!is_library_path("myproj/train.py:10"));
    }
}
