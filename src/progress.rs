//! A progress bar on stderr for loads that take longer than about a second. Quiet when
//! stderr is not a terminal, and never drawn for fast loads.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Loads shorter than this never show a bar.
const SHOW_AFTER: Duration = Duration::from_millis(800);
const WIDTH: usize = 30;

pub(crate) struct ProgressBar {
    label: String,
    started: Instant,
    enabled: bool,
    drawn: bool,
}

impl ProgressBar {
    pub(crate) fn new(label: &str) -> Self {
        Self {
            label: steplens_output::escape::terminal(label).into_owned(),
            started: Instant::now(),
            enabled: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    pub(crate) fn update(&mut self, done: u64, total: u64) {
        let elapsed = self.started.elapsed();
        if !self.enabled || elapsed < SHOW_AFTER || total == 0 {
            return;
        }
        let fraction = (done as f64 / total as f64).clamp(0.0, 1.0);
        let filled = (fraction * WIDTH as f64) as usize;
        let mb = |b: u64| b as f64 / 1e6;
        let line = format!(
            "\r{}  [{}{}] {:>3.0}%  {:.0}/{:.0} MB  {:.1} s",
            self.label,
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            fraction * 100.0,
            mb(done),
            mb(total),
            elapsed.as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
        self.drawn = true;
    }

    pub(crate) fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}
