//! The logging bridge: the core's `tracing` events reach a JS function (`telemetry.setLogger`).
//!
//! The core's events become `log` records (tracing's `log` feature, with no `tracing` subscriber; with
//! OTLP export on, the core's [`ambit::telemetry::LogForward`] passes them on), and this `log` logger hands
//! each at or above the chosen level to the JS function as the JSON text `{"level", "target",
//! "message"}`, on the JS thread, in order. Without a logger, `log`'s maximum level is `Off`: a core
//! event costs its callsite check and nothing else.

use std::sync::RwLock;

use napi::Status;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue};
use napi_derive::napi;
use serde_json::json;

/// The host's logger: called with one record's JSON text; what it returns is ignored. Weak: it does not
/// keep the process alive.
pub type JsLogFn = ThreadsafeFunction<String, UnknownReturnValue, String, Status, false, true>;

static SINK: RwLock<Option<JsLogFn>> = RwLock::new(None);

pub struct Bridge;

static BRIDGE: Bridge = Bridge;

impl log::Log for Bridge {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        // The core's own spans' lifecycle (tracing's `log` output under `tracing::span`) is not logged.
        metadata.level() <= log::max_level() && !metadata.target().starts_with("tracing::span")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let sink = SINK.read().unwrap_or_else(|p| p.into_inner());
        let Some(f) = sink.as_ref() else { return };
        let level = match record.level() {
            log::Level::Error => "error",
            log::Level::Warn => "warn",
            log::Level::Info => "info",
            log::Level::Debug => "debug",
            log::Level::Trace => "trace",
        };
        let text = json!({"level": level, "target": record.target(), "message": record.args().to_string()});
        let _ = f.call(text.to_string(), ThreadsafeFunctionCallMode::NonBlocking);
    }

    fn flush(&self) {}
}

/// Waits until every record handed to the logger before this call has reached it
/// (`telemetry.flushLogger`): the logger is weak, so a program that ends at once after a run may
/// otherwise end with the run's last records still queued. A marker (the empty text, which the facade
/// does not pass on) follows the records through the logger's queue, which keeps its order; nothing to
/// wait for without a logger.
#[napi]
pub async fn telemetry_flush_logger() -> napi::Result<()> {
    let done = {
        let sink = SINK.read().unwrap_or_else(|p| p.into_inner());
        let Some(f) = sink.as_ref() else { return Ok(()) };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let status = f.call_with_return_value(String::new(), ThreadsafeFunctionCallMode::NonBlocking, move |_, _| {
            let _ = tx.send(());
            Ok(())
        });
        if status != Status::Ok {
            return Ok(());
        }
        rx
    };
    // A logger removed or replaced before the marker ran drops it unsent: nothing is left to wait for.
    let _ = done.await;
    Ok(())
}

/// Sets the logger (`telemetry.setLogger`): `callback` gets every record at `level` (`error`, `warn`,
/// `info`, `debug`, `trace`) or above; `None` removes it. An unknown level is refused (the facade
/// checks it first).
#[napi]
pub fn telemetry_set_logger(callback: Option<JsLogFn>, level: String) -> napi::Result<()> {
    let filter = match level.as_str() {
        "error" => log::LevelFilter::Error,
        "warn" => log::LevelFilter::Warn,
        "info" => log::LevelFilter::Info,
        "debug" => log::LevelFilter::Debug,
        "trace" => log::LevelFilter::Trace,
        other => return Err(napi::Error::from_reason(format!("unknown log level {other:?}"))),
    };
    // The first call installs the bridge as the process's `log` logger; nothing else in Node sets one.
    let _ = log::set_logger(&BRIDGE);
    let on = callback.is_some();
    *SINK.write().unwrap_or_else(|p| p.into_inner()) = callback;
    log::set_max_level(if on { filter } else { log::LevelFilter::Off });
    Ok(())
}
