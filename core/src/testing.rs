//! Test hooks for the bindings' suites: ways to make the core panic on purpose, so each language's
//! tests can show that a panic reaches them as the typed `internal` error (SPEC: no panic crosses the
//! boundary); and a clock the test moves by hand, so ledger and session timelines (leases running out,
//! cooldowns, stale backlog reports) run in every language without waiting. Hidden from the
//! documentation; nothing in ambit calls these.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};

pub use crate::ledger::ManualClock;
use crate::ledger::{Ledger, LedgerError, LedgerOptions};
use crate::session::{SessionError, Sessions};
use crate::{Tool, ToolError, ToolSpec};

/// The message of every panic these hooks raise.
pub const PANIC_MESSAGE: &str = "ambit::testing: a panic forced by a test";

/// Panics, in the caller's thread: a binding's synchronous export calls it to show the panic is caught.
pub fn force_panic() -> ! {
    panic!("{PANIC_MESSAGE}")
}

/// The name of [`panicking_tool`].
pub const PANICKING_TOOL: &str = "ambit_testing_panic";

/// A tool (level `none`) whose call panics inside the run's task, as a bug in a tool or a wire would.
pub fn panicking_tool() -> Arc<dyn Tool> {
    Arc::new(PanickingTool {
        spec: ToolSpec::new(
            PANICKING_TOOL,
            "Panics (a test hook).",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
        .with_level(crate::Level::None),
    })
}

struct PanickingTool {
    spec: ToolSpec,
}

#[async_trait]
impl Tool for PanickingTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        force_panic()
    }
}

/// The name of [`tool_with_panicking_spec`]'s tool.
pub const PANICKING_SPEC_TOOL: &str = "ambit_testing_panicking_spec";

/// A tool (level `none`) whose [`Tool::spec`] panics once the returned switch is set: an agent is built
/// with it unarmed, then listing its tools, or a session sizing its request, panics in the caller's
/// call (outside any run's task), as a bug there would.
pub fn tool_with_panicking_spec() -> (Arc<dyn Tool>, Arc<AtomicBool>) {
    let armed = Arc::new(AtomicBool::new(false));
    let spec = ToolSpec::new(
        PANICKING_SPEC_TOOL,
        "Its spec panics once armed (a test hook).",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .with_level(crate::Level::None);
    (Arc::new(PanickingSpec { spec, armed: armed.clone() }), armed)
}

struct PanickingSpec {
    spec: ToolSpec,
    armed: Arc<AtomicBool>,
}

#[async_trait]
impl Tool for PanickingSpec {
    fn spec(&self) -> &ToolSpec {
        if self.armed.load(Ordering::SeqCst) {
            force_panic()
        }
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Ok(Value::String("ok".into()))
    }
}

/// A manual clock at `start_ms` (milliseconds since the Unix epoch) for [`open_ledger`] and
/// [`open_sessions`]; clones share the time. Refuses a negative start.
pub fn manual_clock(start_ms: i64) -> Result<ManualClock, LedgerError> {
    if start_ms < 0 {
        return Err(LedgerError::InvalidArgument(format!(
            "start_ms is milliseconds since the Unix epoch, at least 0, got {start_ms}"
        )));
    }
    Ok(ManualClock::new(start_ms))
}

/// Moves `clock` forward by `ms` milliseconds and answers the new time. Time never runs backwards: a
/// negative `ms` is refused and the clock stays where it was.
pub fn advance_clock(clock: &ManualClock, ms: i64) -> Result<i64, LedgerError> {
    if ms < 0 {
        return Err(LedgerError::InvalidArgument(format!("ms is how far the clock moves, at least 0, got {ms}")));
    }
    let now = crate::ledger::Clock::now_ms(clock)
        .checked_add(ms)
        .ok_or_else(|| LedgerError::InvalidArgument(format!("moving the clock {ms} ms overflows its time")))?;
    clock.set(now);
    Ok(now)
}

/// Opens the ledger at `url` (durable) on `clock` instead of the system clock: every claim, record,
/// listing, backlog report and drain decision reads its time from it.
pub async fn open_ledger(url: &str, clock: &ManualClock) -> Result<Ledger, LedgerError> {
    Ledger::open_with(url, LedgerOptions { clock: Arc::new(clock.clone()), ..LedgerOptions::default() }).await
}

/// Opens the session store at `url` on `clock` (leases are judged by it: a clock moved past a lease
/// takes over a session whose run stopped renewing it).
pub async fn open_sessions(url: &str, clock: &ManualClock) -> Result<Sessions, SessionError> {
    Ok(Sessions::open(url).await?.with_clock(Arc::new(clock.clone())))
}

/// Opens the routine store at `url` on `clock`: definitions are timed by it (a new routine's first
/// slot, revisions, a resume's reschedule), so a scenario's slots are exact.
pub async fn open_routines(
    url: &str,
    clock: &ManualClock,
) -> Result<crate::routine::Routines, crate::routine::RoutineError> {
    let options = crate::routine::RoutineOptions { clock: Arc::new(clock.clone()), ..Default::default() };
    crate::routine::Routines::open_with(url, options).await
}

/// Makes the file tools open every path from now on in this process the way they do off Linux (macOS,
/// iOS, Windows): by path, each component checked not to be a link, and the opened descriptor's device
/// and inode compared with the path's ([`crate::permission::scope`]); `false` goes back to the
/// platform's own method. For tests, so the portable method is exercised where the suite runs.
pub fn force_portable_file_open(on: bool) {
    crate::permission::open::force_portable(on);
}

/// The broker with its redactor switched off: the negative control of the exfiltration tests, which
/// must then find the values they look for.
pub fn without_redaction(mut credentials: crate::credentials::Credentials) -> crate::credentials::Credentials {
    credentials.redaction_off = true;
    credentials
}
