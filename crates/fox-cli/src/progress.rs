//! Progress on standard error for long work: a spinner with a line saying what is being
//! done (the loop iteration and its new rows, the input being read, the benchmark run) and
//! the time it has taken.
//!
//! Invariant: progress is drawn only when it is asked for and standard error is a
//! terminal ([`wanted`]); otherwise nothing is created and nothing is written, so files,
//! pipes and captured output never receive it.

use fox_runtime::{plural, RunEvent, RunObserver};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// Whether to draw progress: not turned off (`--no-progress`), and standard error is a
/// terminal.
pub fn wanted(no_progress: bool) -> bool {
    !no_progress && std::io::stderr().is_terminal()
}

/// A spinner on standard error with a message, cleared when finished or dropped; inert
/// (no bar at all) when not enabled.
#[derive(Debug)]
pub struct Spinner {
    bar: Option<ProgressBar>,
}

impl Spinner {
    /// A spinner saying `msg`, drawn on standard error when `enabled` (see [`wanted`]).
    pub fn new(enabled: bool, msg: impl Into<String>) -> Spinner {
        Spinner::with_target(enabled.then(ProgressDrawTarget::stderr), msg)
    }

    /// A spinner saying `msg` drawn on `target`, or none.
    pub fn with_target(target: Option<ProgressDrawTarget>, msg: impl Into<String>) -> Spinner {
        let msg = msg.into();
        let bar = target.map(|t| {
            let bar = ProgressBar::with_draw_target(None, t).with_style(
                ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(msg);
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Spinner { bar }
    }

    /// Shows `msg` (the spinner keeps turning).
    pub fn set(&self, msg: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_message(msg.into());
        }
    }

    /// The message shown, when there is a spinner.
    pub fn message(&self) -> Option<String> {
        self.bar.as_ref().map(|b| b.message())
    }

    /// Runs `f` (which prints to standard error) with the spinner off the screen.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    /// Removes the spinner from the screen (before printing results or reports).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A run's progress: each [`RunEvent`] becomes the spinner's message.
#[derive(Debug)]
pub struct RunProgress {
    pub spinner: Spinner,
    /// When set (`foxrun --timing`), each iteration of a semi-naive loop is also printed
    /// on standard error as a line with the time since the run started.
    pub iterations: Option<std::time::Instant>,
}

impl RunObserver for RunProgress {
    fn event(&self, event: &RunEvent<'_>) {
        let message = event_message(event);
        if let (Some(start), RunEvent::Iteration { block, .. }) = (self.iterations, event) {
            if semi_naive_loop(block) {
                let at = start.elapsed().as_secs_f64() * 1e3;
                self.spinner.suspend(|| eprintln!("{message} (at {at:.1} ms)"));
            }
        }
        self.spinner.set(message);
    }
}

/// Whether the block labelled `block` is the body of a semi-naive loop (labelled
/// `stratum N loop (…)` by the planner), not of the rounds of a windowed expansion.
pub fn semi_naive_loop(block: &str) -> bool {
    block.starts_with("stratum ")
}

/// What the spinner says for an event. Blocks of semi-naive loops are labelled
/// `stratum N loop (…)` by the planner; other loops are the rounds of a multi-round
/// expansion, whose test buffer is a window, not rows.
pub fn event_message(event: &RunEvent<'_>) -> String {
    match event {
        RunEvent::Loading { input } => format!("reading input `{input}`"),
        RunEvent::Iteration {
            block,
            iterations,
            rows,
        } if semi_naive_loop(block) => {
            format!("{block}: iteration {iterations}, {}", plural(*rows, "new row"))
        }
        RunEvent::Iteration {
            block,
            iterations,
            rows: 0,
        } => format!("{block}: {} done", plural(*iterations, "round")),
        RunEvent::Iteration { block, iterations, .. } => format!("{block}: round {}", iterations + 1),
        RunEvent::Output { name } => format!("ordering output `{name}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_become_the_spinner_message() {
        let p = RunProgress {
            spinner: Spinner::with_target(Some(ProgressDrawTarget::hidden()), "running"),
            iterations: None,
        };
        assert_eq!(p.spinner.message().as_deref(), Some("running"));
        p.event(&RunEvent::Loading { input: "edge" });
        assert_eq!(p.spinner.message().as_deref(), Some("reading input `edge`"));
        p.event(&RunEvent::Iteration {
            block: "stratum 0 loop (path)",
            iterations: 3,
            rows: 1,
        });
        assert_eq!(
            p.spinner.message().as_deref(),
            Some("stratum 0 loop (path): iteration 3, 1 new row")
        );
        p.event(&RunEvent::Iteration {
            block: "stratum 0 loop (path)",
            iterations: 4,
            rows: 12345,
        });
        assert_eq!(
            p.spinner.message().as_deref(),
            Some("stratum 0 loop (path): iteration 4, 12345 new rows")
        );
        // A window loop's test comes before each round: the round about to run.
        p.event(&RunEvent::Iteration {
            block: "c.round1",
            iterations: 0,
            rows: 2,
        });
        assert_eq!(p.spinner.message().as_deref(), Some("c.round1: round 1"));
        p.event(&RunEvent::Iteration {
            block: "c.round1",
            iterations: 2,
            rows: 0,
        });
        assert_eq!(p.spinner.message().as_deref(), Some("c.round1: 2 rounds done"));
        p.event(&RunEvent::Output { name: "path" });
        assert_eq!(p.spinner.message().as_deref(), Some("ordering output `path`"));
        p.spinner.finish();
    }

    #[test]
    fn a_disabled_spinner_has_no_bar() {
        let s = Spinner::new(false, "running");
        s.set("anything");
        assert_eq!(s.message(), None);
    }
}
