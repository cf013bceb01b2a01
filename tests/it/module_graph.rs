//! The modules of each crate import one way: no module reaches, through `crate::` or `super::`
//! paths, a module that reaches back to it. A circle means two modules can only be understood
//! (and changed) together; ARCHITECTURE.md describes the layers this keeps honest.
//!
//! The scan reads source text, not the compiler's view: a `crate::a::b` path names the longest
//! module file it matches, a module and its own submodules are one unit for this purpose, and
//! the `#[cfg(test)] mod tests` at the end of a file is left out (tests may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATE_ROOTS: &[&str] = &[
    "ingest/src",
    "analysis/src",
    "output/src",
    "viewer/src",
    "src",
    "python/src",
    "tools/src",
];

/// Module path (`detect/sync_point`, `ranks`) of every `.rs` file under `root`.
fn modules(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .with_extension("")
                .to_string_lossy()
                .replace('\\', "/");
            let name = rel.strip_suffix("/mod").unwrap_or(&rel).to_owned();
            if matches!(name.as_str(), "lib" | "main") || name.starts_with("bin/") {
                continue;
            }
            out.insert(name, path);
        }
    }
    out
}

/// The source without its trailing unit-test module.
fn without_tests(src: &str) -> &str {
    src.find("#[cfg(test)]\nmod tests")
        .or_else(|| src.find("#[cfg(test)]\n#[allow"))
        .map_or(src, |at| &src[..at])
}

/// The leading `::`-separated lowercase identifiers of `text` (`ranks::collect` → both), and
/// what follows them.
fn leading_path(text: &str) -> (Vec<&str>, &str) {
    let mut parts = Vec::new();
    let mut tail = text;
    loop {
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        if end == 0 {
            break;
        }
        parts.push(&tail[..end]);
        match tail[end..].strip_prefix("::") {
            Some(next) => tail = next,
            None => return (parts, &tail[end..]),
        }
    }
    (parts, tail)
}

/// The paths inside a brace group that starts `text` (`{a::x, b}`), one level deep.
fn brace_group(text: &str) -> Vec<&str> {
    let Some(inner) = text.strip_prefix('{') else {
        return Vec::new();
    };
    let mut depth = 0usize;
    let mut items = Vec::new();
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&inner[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.into_iter().map(str::trim).collect()
}

/// The `::`-separated identifiers that follow each occurrence of `prefix`, each path of a brace
/// group (`crate::{a::x, b}`) on its own.
fn paths_after<'a>(src: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    for (at, _) in src.match_indices(prefix) {
        let before = src[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let (parts, tail) = leading_path(&src[at + prefix.len()..]);
        let group = brace_group(tail);
        if group.is_empty() {
            if !parts.is_empty() {
                out.push(parts);
            }
            continue;
        }
        for item in group {
            let (more, _) = leading_path(item);
            let path: Vec<&str> = parts.iter().copied().chain(more).collect();
            if !path.is_empty() {
                out.push(path);
            }
        }
    }
    out
}

fn related(a: &str, b: &str) -> bool {
    a == b || b.starts_with(&format!("{a}/")) || a.starts_with(&format!("{b}/"))
}

/// Edges `module -> module it names`, for one crate.
fn edges(mods: &BTreeMap<String, PathBuf>) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, path) in mods {
        let src = std::fs::read_to_string(path).unwrap_or_default();
        let src = without_tests(&src);
        let mut targets = BTreeSet::new();
        for parts in paths_after(src, "crate::") {
            if let Some(target) = (1..=parts.len())
                .rev()
                .map(|k| parts[..k].join("/"))
                .find(|cand| mods.contains_key(cand))
            {
                targets.insert(target);
            }
        }
        // `super::x` from module `a/b/c` names `a/b/x`.
        let path: Vec<&str> = name.split('/').collect();
        let base = &path[..path.len().saturating_sub(1)];
        for parts in paths_after(src, "super::") {
            let mut cand: Vec<&str> = base.to_vec();
            cand.push(parts[0]);
            let cand = cand.join("/");
            if mods.contains_key(&cand) {
                targets.insert(cand);
            }
        }
        targets.retain(|t| !related(name, t));
        graph.insert(name.clone(), targets);
    }
    graph
}

/// Strongly connected sets of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.out.push(set);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_module_imports_circle_back() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for root in CRATE_ROOTS {
        let mods = modules(&workspace.join(root));
        assert!(!mods.is_empty(), "no modules under {root}");
        let graph = edges(&mods);
        for set in circles(&graph) {
            let detail: Vec<String> = set
                .iter()
                .map(|m| {
                    let inside: Vec<&str> = graph[m]
                        .iter()
                        .filter(|t| set.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", inside.join(", "))
                })
                .collect();
            found.push(format!("{root}: {}", detail.join("; ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules import in a circle:\n{}",
        found.join("\n")
    );
}

/// Imports the scan must see in the real tree, in each form it reads.
#[test]
fn the_scan_resolves_real_imports() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let analysis = edges(&modules(&workspace.join("analysis/src")));
    // `use crate::op_names::…`, `crate::ranks::…(…)` inside an expression, and modules of the
    // rooms (`compare/`, `export/`) naming each other by their full paths.
    for (from, to) in [
        ("busy", "op_names"),
        ("critical_path", "ranks"),
        ("compare/check", "compare/figures"),
        ("compare/diff", "compare/op_rows"),
        ("export/table", "export/columns"),
    ] {
        assert!(
            analysis.get(from).is_some_and(|t| t.contains(to)),
            "analysis: {from} -> {to}: {:?}",
            analysis.get(from)
        );
    }
    let ingest = edges(&modules(&workspace.join("ingest/src")));
    assert!(
        ingest["habana_nodes"].contains("gaudi"),
        "`use crate::gaudi::CATEGORY`"
    );
    assert!(
        ingest["kineto"].contains("builder"),
        "{:?}",
        ingest["kineto"]
    );
}

#[test]
fn the_scan_sees_a_circle() {
    let mods: BTreeMap<String, PathBuf> = BTreeMap::new();
    assert!(circles(&edges(&mods)).is_empty());
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(circles(&graph), vec![vec!["a", "b", "c"]]);
    let src = "use crate::ranks::collect; fn f() { super::detect::x(); notcrate::y }";
    assert_eq!(paths_after(src, "crate::"), vec![vec!["ranks", "collect"]]);
    let grouped = "use crate::{model::{A, B}, source::Input};";
    assert_eq!(
        paths_after(grouped, "crate::"),
        vec![vec!["model"], vec!["source"]]
    );
    assert_eq!(paths_after(src, "super::"), vec![vec!["detect", "x"]]);
}

/// Output only renders: no module of `output` names the Timeline, so everything a page or a
/// table shows is in the report (and a saved report renders as its trace did).
#[test]
fn output_takes_no_timeline() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mods = modules(&workspace.join("output/src"));
    assert!(!mods.is_empty(), "no modules under output/src");
    let mut readers = Vec::new();
    for (name, path) in &mods {
        let src = std::fs::read_to_string(path).unwrap_or_default();
        let code: String = without_tests(&src)
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        if code.contains("Timeline") {
            readers.push(name.clone());
        }
    }
    assert!(
        readers.is_empty(),
        "output modules that read the Timeline: {readers:?}"
    );
}
