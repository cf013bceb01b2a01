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
/// its position.
pub(crate) fn assign_ranks<'a>(
    inputs: impl Iterator<Item = (Option<i64>, bool, &'a str)>,
) -> Vec<(i64, &'static str)> {
    let mut rank_of: Vec<(i64, &'static str)> = inputs
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
        .collect();
    let mut distinct: Vec<i64> = rank_of.iter().map(|r| r.0).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != rank_of.len() {
        for (i, r) in rank_of.iter_mut().enumerate() {
            *r = (i as i64, INPUT_ORDER);
        }
    }
    rank_of
}

/// How a rank is known when nothing names it: the input's position.
pub const INPUT_ORDER: &str = "input order";

/// The rank of each input of `t` as the rank analysis reads it, with how it was known
/// (`distributedInfo`, `file name`, `input order`).
#[must_use]
pub fn input_ranks(t: &Timeline) -> Vec<(i64, &'static str)> {
    assign_ranks(t.sources.iter().map(|info| {
        let written = info.top_level.iter().any(|(k, _)| k == "distributedInfo");
        (info.rank, written, info.path.as_str())
    }))
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
