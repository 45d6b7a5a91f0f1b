//! The live progress line: one `\r`-rewritten line on stderr, shown only
//! when stderr is a terminal (in a log or a pipe, carriage returns would
//! leave every rewrite of the line behind).

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug)]
struct State {
    variant: String,
    phase: &'static str,
    since: Instant,
    width: usize,
}

/// A shared handle to the progress line.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    state: Arc<Mutex<State>>,
    /// Whether stderr is a terminal (else nothing is written).
    shown: bool,
}

impl Progress {
    pub(crate) fn new() -> Self {
        Progress {
            state: Arc::new(Mutex::new(State {
                variant: String::new(),
                phase: "",
                since: Instant::now(),
                width: 0,
            })),
            shown: std::io::stderr().is_terminal(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a new phase of a variant.
    pub(crate) fn phase(&self, variant: &str, phase: &'static str) {
        let mut s = self.lock();
        if s.variant != variant {
            s.variant = variant.to_owned();
            s.since = Instant::now();
        }
        s.phase = phase;
    }

    /// Rewrites the line with `detail`.
    pub(crate) fn update(&self, detail: std::fmt::Arguments<'_>) {
        if !self.shown {
            return;
        }
        let mut s = self.lock();
        let line = format!(
            "[{:>5.1}s] {:<14} {:<15} {detail}",
            s.since.elapsed().as_secs_f64(),
            s.variant,
            s.phase
        );
        let pad = s.width.saturating_sub(line.len());
        s.width = line.len();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}{}", " ".repeat(pad));
        let _ = err.flush();
    }

    /// Ends the line (so what follows starts on a fresh one).
    pub(crate) fn finish(&self) {
        let mut s = self.lock();
        if s.width > 0 {
            eprintln!();
            s.width = 0;
        }
    }
}
