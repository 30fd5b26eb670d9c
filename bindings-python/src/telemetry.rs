//! Telemetry: OTLP export of the core's spans (`ambit.telemetry`), and the `logging` bridge: the core's
//! `tracing` events reach Python's `logging` through `pyo3-log`, under loggers named by module
//! (`ambit.agent`, `ambit.mcp.client`, …), levels mapped (`WARN` to `WARNING`, `TRACE` to `DEBUG`).

use pyo3::prelude::*;

use crate::{core_err, guard};

/// Turns OTLP export on (see `ambit.telemetry.enable`).
#[pyfunction]
#[pyo3(signature = (endpoint, headers, record_content, service_name))]
pub(crate) fn telemetry_enable(
    py: Python<'_>,
    endpoint: String,
    headers: Vec<(String, String)>,
    record_content: bool,
    service_name: String,
) -> PyResult<()> {
    guard(|| {
        let config = ambit::telemetry::OtlpConfig { endpoint, headers, record_content, service_name };
        // The exporter's thread is made and joined without the GIL.
        py.detach(|| ambit::telemetry::init(config)).map(|_| ()).map_err(core_err)
    })
}

/// Exports what is pending (see `ambit.telemetry.flush`).
#[pyfunction]
pub(crate) fn telemetry_flush(py: Python<'_>) -> PyResult<()> {
    guard(|| py.detach(ambit::telemetry::flush).map_err(core_err))
}

/// Exports what is pending and turns export off (see `ambit.telemetry.disable`).
#[pyfunction]
pub(crate) fn telemetry_disable(py: Python<'_>) -> PyResult<()> {
    guard(|| py.detach(ambit::telemetry::shutdown).map_err(core_err))
}

/// The `logging` bridge, installed when the module is imported. `pyo3-log` caches each logger's level:
/// `ambit.telemetry.reset_logging()` drops the cache after the host changes levels.
pub(crate) fn init_logging() -> pyo3_log::ResetHandle {
    pyo3_log::Logger::default()
        // The core's own spans' lifecycle (tracing's `log` output under `tracing::span`) is not logged.
        .filter_target("tracing::span".to_string(), log::LevelFilter::Off)
        .filter_target("tracing::span::active".to_string(), log::LevelFilter::Off)
        .install()
        .unwrap_or_else(|_| pyo3_log::Logger::default().reset_handle())
}

static RESET: std::sync::OnceLock<pyo3_log::ResetHandle> = std::sync::OnceLock::new();

pub(crate) fn install_logging() {
    let _ = RESET.get_or_init(init_logging);
}

/// Drops the bridge's cache of logger levels (see `ambit.telemetry.reset_logging`).
#[pyfunction]
pub(crate) fn telemetry_reset_logging() {
    if let Some(h) = RESET.get() {
        h.reset();
    }
}
