//! Which input is which rank: `distributedInfo`, `--rank-regex`, the file name, else the input
//! order.

use steplens_ingest::model::Timeline;

/// The rank in a file name: `rank3`, `rank-3`, `rank_3`, `_r3`.
pub(crate) fn rank_from_name(path: &str) -> Option<i64> {
    let name = path
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(path)
        .to_ascii_lowercase();
    let digits_after = |at: usize| -> Option<i64> {
        let rest = name.get(at..)?.trim_start_matches(['-', '_']);
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest.get(..end).filter(|d| !d.is_empty())?.parse().ok()
    };
    if let Some(at) = name.find("rank") {
        return digits_after(at + 4);
    }
    let bytes = name.as_bytes();
    (0..bytes.len().saturating_sub(2)).find_map(|i| {
        (matches!(bytes[i], b'_' | b'-' | b'.') && bytes[i + 1] == b'r')
            .then(|| digits_after(i + 2))
            .flatten()
    })
}

/// Which rank each input is, and how that was known, from (rank the input states, whether
/// `distributedInfo` wrote it, path) in input order: the stated rank, else one in the file
/// name, else the input's position; when two inputs claim one rank, every input falls back to
/// its position (see [`duplicate_ranks`] for who clashed).
pub(crate) fn assign_ranks<'a>(
    inputs: impl Iterator<Item = (Option<i64>, bool, &'a str)>,
) -> Vec<(i64, &'static str)> {
    let stated = stated_ranks(inputs);
    if duplicate_ranks(&stated).is_empty() {
        stated
    } else {
        (0..stated.len()).map(|i| (i as i64, INPUT_ORDER)).collect()
    }
}

/// Each input's rank as it states it (written, else from its file name, else its position),
/// duplicates kept.
pub(crate) fn stated_ranks<'a>(
    inputs: impl Iterator<Item = (Option<i64>, bool, &'a str)>,
) -> Vec<(i64, &'static str)> {
    inputs
        .enumerate()
        .map(|(i, (rank, written, path))| {
            rank.map(|r| {
                (
                    r,
                    if written {
                        "distributedInfo"
                    } else {
                        "file name"
                    },
                )
            })
            .or_else(|| rank_from_name(path).map(|r| (r, "file name")))
            .unwrap_or((i as i64, INPUT_ORDER))
        })
        .collect()
}

/// The ranks two or more inputs claim, each with those inputs (indices, in input order).
pub(crate) fn duplicate_ranks(stated: &[(i64, &'static str)]) -> Vec<(i64, Vec<usize>)> {
    let mut by_rank: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
    for (i, (rank, _)) in stated.iter().enumerate() {
        by_rank.entry(*rank).or_default().push(i);
    }
    by_rank
        .into_iter()
        .filter(|(_, inputs)| inputs.len() > 1)
        .collect()
}

/// Whether the rank of `info` is the one its `distributedInfo` writes (not one read from its
/// path by `--rank-regex`).
pub(crate) fn rank_written(info: &steplens_ingest::model::SourceInfo) -> bool {
    info.top_level
        .iter()
        .find(|(k, _)| k == "distributedInfo")
        .and_then(|(_, v)| serde_json::from_str::<serde_json::Value>(v).ok())
        .and_then(|v| v.get("rank")?.as_i64())
        .is_some_and(|r| Some(r) == info.rank)
}

/// How a rank is known when nothing names it: the input's position.
pub const INPUT_ORDER: &str = "input order";

/// The rank of each input of `t` as the rank analysis reads it, with how it was known
/// (`distributedInfo`, `file name`, `input order`).
#[must_use]
pub fn input_ranks(t: &Timeline) -> Vec<(i64, &'static str)> {
    assign_ranks(
        t.sources
            .iter()
            .map(|info| (info.rank, rank_written(info), info.path.as_str())),
    )
}

/// The rank of each input as steps and findings name it: with several inputs, as the rank
/// analysis reads them ([`input_ranks`], so a step or finding names the rank the ranks table
/// does) where a trace or its file name says it, never from input order alone; with one input,
/// only a written `distributedInfo`.
#[must_use]
pub fn known_ranks(t: &Timeline) -> Vec<Option<i64>> {
    if t.sources.len() > 1 {
        input_ranks(t)
            .into_iter()
            .map(|(rank, how)| (how != INPUT_ORDER).then_some(rank))
            .collect()
    } else {
        t.sources.iter().map(|s| s.rank).collect()
    }
}
