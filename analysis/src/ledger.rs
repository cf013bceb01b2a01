//! The phase ledger: the wall and CPU time of each pass of an analysis, in the order the passes
//! ended, for `steplens-bench` (`bench/README.md` keeps its figures). Passes that run side by
//! side on two cores each keep their own wall time, so their shares can add up to more than
//! the whole.

use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

/// One pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    /// What ran (`detector sync_point`, `critical path`, …).
    pub name: String,
    /// Wall time, s.
    pub wall_s: f64,
    /// CPU time of the thread that ran it, s (`None` where the OS does not say).
    pub cpu_s: Option<f64>,
}

/// The passes of one analysis, filled from any thread.
#[derive(Debug, Default)]
pub struct Ledger {
    phases: Mutex<Vec<Phase>>,
}

impl Ledger {
    /// An empty ledger.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `pass` and records it under `name`.
    pub fn time<T>(&self, name: &str, pass: impl FnOnce() -> T) -> T {
        let cpu0 = thread_cpu_s();
        let t0 = Instant::now();
        let out = pass();
        let wall_s = t0.elapsed().as_secs_f64();
        let cpu_s = cpu0.zip(thread_cpu_s()).map(|(a, b)| (b - a).max(0.0));
        self.record(Phase {
            name: name.to_owned(),
            wall_s,
            cpu_s,
        });
        out
    }

    /// Records a pass timed elsewhere.
    pub fn record(&self, phase: Phase) {
        if let Ok(mut phases) = self.phases.lock() {
            phases.push(phase);
        }
    }

    /// The passes so far, in the order they ended.
    #[must_use]
    pub fn phases(&self) -> Vec<Phase> {
        self.phases.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

/// Runs `pass` under `name` in `ledger`, or just runs it.
pub(crate) fn timed<T>(ledger: Option<&Ledger>, name: &str, pass: impl FnOnce() -> T) -> T {
    match ledger {
        Some(l) => l.time(name, pass),
        None => pass(),
    }
}

/// CPU time of the calling thread, s: the first field of `/proc/thread-self/schedstat` (time on
/// a CPU, ns). `None` off Linux.
fn thread_cpu_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

#[cfg(test)]
mod tests {
    use super::Ledger;

    #[test]
    fn passes_are_recorded_with_their_time() {
        let ledger = Ledger::new();
        let sum = ledger.time("spin", || (0..2_000_000u64).fold(0u64, |a, b| a ^ b));
        assert_eq!(sum, (0..2_000_000u64).fold(0u64, |a, b| a ^ b));
        let phases = ledger.phases();
        assert_eq!(phases.len(), 1);
        assert_eq!(phases[0].name, "spin");
        assert!(phases[0].wall_s >= 0.0);
        if let Some(cpu) = phases[0].cpu_s {
            // A busy loop runs on a CPU for (nearly) all of its wall time, never more.
            assert!(cpu <= phases[0].wall_s + 0.01, "{phases:?}");
        }
    }
}
