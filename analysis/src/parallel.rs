//! Two passes side by side on the machine's two cores (the report's tables, detectors and views;
//! the detectors' two halves; the op-arg walk's two halves).

/// Runs `first` on this thread and `second` on another, and returns both results; a panic in
/// `second` (a bug) is raised here rather than lost.
pub(crate) fn side_by_side<A, B: Send>(
    first: impl FnOnce() -> A,
    second: impl FnOnce() -> B + Send,
) -> (A, B) {
    std::thread::scope(|scope| {
        let other = scope.spawn(second);
        let mine = first();
        let theirs = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (mine, theirs)
    })
}
