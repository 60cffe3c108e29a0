//! The interactive view of `pkprof top` (ratatui). Frames arrive from the sampling thread; this
//! thread only draws and reads keys (`state`: what the keys do; `draw`: the layout). The terminal
//! is restored by a guard's `Drop`, on a panic by ratatui's panic hook, and around Ctrl-Z.

mod breakdown;
mod draw;
mod state;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use crossterm::event::{self, Event, KeyEventKind};
use pkprof_accounting::Interval;
use ratatui::widgets::TableState;
use ratatui::DefaultTerminal;

use super::TopOptions;
use crate::signals;
use state::{Action, Scroll, ViewState};

/// Restores the terminal when dropped, whatever way the view ends.
struct TerminalGuard(DefaultTerminal);

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

pub fn run(
    opts: &TopOptions,
    frames: &Receiver<Arc<Interval>>,
    per_thread: &AtomicBool,
) -> Result<()> {
    // Installs a panic hook that restores the terminal before the panic message is printed.
    let mut term = TerminalGuard(ratatui::try_init().context("setting up the terminal")?);
    let mut state = ViewState::default();
    let mut table = TableState::default();
    // The frame on screen, and (while paused) the newest one received.
    let mut shown: Option<Arc<Interval>> = None;
    let mut newest: Option<Arc<Interval>> = None;
    let mut received = 0u64;
    // Redraw only when something changed: a new frame, a key, a resize.
    let mut dirty = true;
    // Per-thread rows before the breakdown view asked for them (restored when it closes).
    let mut per_thread_before = false;
    loop {
        match frames.recv_timeout(Duration::from_millis(50)) {
            Ok(f) => {
                received += 1;
                if state.paused {
                    newest = Some(f);
                } else {
                    shown = Some(f);
                    dirty = true;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if dirty {
            term.0
                .draw(|f| draw::view(f, shown.as_deref(), &state, &mut table))
                .context("drawing")?;
            dirty = false;
        }
        if opts.iterations.is_some_and(|n| received >= n) || signals::stop_requested() {
            return Ok(());
        }
        while event::poll(Duration::ZERO).context("reading the keyboard")? {
            let ev = event::read().context("reading the keyboard")?;
            dirty = true;
            let Event::Key(k) = ev else {
                continue; // a resize: redrawn to the new size
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            match state.handle_key(k) {
                Action::None => {}
                Action::Quit => return Ok(()),
                Action::Suspend => suspend(&mut term.0)?,
                Action::TogglePerThread => {
                    let now = !per_thread.fetch_xor(true, Ordering::Relaxed);
                    state.message = Some(format!(
                        "{} from the next refresh",
                        if now {
                            "per-thread rows"
                        } else {
                            "per-process rows"
                        }
                    ));
                }
                Action::Resume => {
                    if let Some(f) = newest.take() {
                        shown = Some(f);
                    }
                }
                Action::Scroll(s) => scroll(&mut table, s),
                Action::Breakdown => {
                    let Some(frame) = shown.as_deref() else {
                        continue;
                    };
                    let rows = state.rows(frame);
                    let Some(r) = rows.get(table.selected().unwrap_or(0)) else {
                        continue;
                    };
                    state.breakdown = Some(r.pid);
                    per_thread_before = per_thread.swap(true, Ordering::Relaxed);
                }
                Action::LeaveBreakdown => {
                    per_thread.store(per_thread_before, Ordering::Relaxed);
                }
            }
        }
    }
}

fn scroll(table: &mut TableState, s: Scroll) {
    const PAGE: u16 = 10;
    match s {
        Scroll::Down => table.select_next(),
        Scroll::Up => table.select_previous(),
        Scroll::PageDown => table.scroll_down_by(PAGE),
        Scroll::PageUp => table.scroll_up_by(PAGE),
        Scroll::Top => table.select_first(),
        Scroll::Bottom => table.select_last(),
    }
}

/// Ctrl-Z: the terminal goes back to how the shell left it, pkprof stops as a job does (SIGTSTP,
/// so the shell says "Stopped"), and on `fg` (SIGCONT) the view takes the screen again and is
/// redrawn in full. The kernel counts on meanwhile; the first frame after covers the pause.
fn suspend(term: &mut DefaultTerminal) -> Result<()> {
    term.show_cursor().context("restoring the terminal")?;
    ratatui::try_restore().context("restoring the terminal")?;
    // SAFETY: raise(2) with a valid signal number. pkprof leaves SIGTSTP at its default action,
    // which stops every thread of the process until SIGCONT; then raise returns.
    unsafe { libc::raise(libc::SIGTSTP) };
    crossterm::terminal::enable_raw_mode().context("taking the terminal back")?;
    crossterm::execute!(std::io::stdout(), crossterm::terminal::EnterAlternateScreen)
        .context("taking the terminal back")?;
    term.clear().context("taking the terminal back")?;
    Ok(())
}
