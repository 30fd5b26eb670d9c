//! `ambit._native.NativeLedger`: the work ledger for Python. Requests and results cross as JSON text;
//! `ambit.ledger` turns them into dataclasses and enums, and ledger errors into its exceptions.

use ambit::ledger::tools::{RoutineRun, ledger_tools};
use ambit::ledger::{ClaimRequest, Durability, Ledger, LedgerError, LedgerOptions, ListQuery, RoutineLimits};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::awaitable;

/// Builds the exception `ambit.ledger` defines for a ledger error, keeping its code and details.
pub(crate) fn ledger_err(e: LedgerError) -> PyErr {
    Python::attach(|py| {
        let details = PyDict::new(py);
        match &e {
            LedgerError::StaleToken { subject_key } | LedgerError::NotClaimed { subject_key, .. } => {
                let _ = details.set_item("subject_key", subject_key);
            }
            LedgerError::ScopePinned { routine_id, pinned_scope, scope } => {
                let _ = details.set_item("routine_id", routine_id);
                let _ = details.set_item("pinned_scope", pinned_scope);
                let _ = details.set_item("scope", scope);
            }
            _ => {}
        }
        crate::python_err(py, "ambit.ledger", e.code(), e.to_string(), details)
    })
}

fn bad_json(e: serde_json::Error) -> PyErr {
    ledger_err(LedgerError::InvalidArgument(e.to_string()))
}

macro_rules! to_json {
    ($v:expr) => {
        serde_json::to_string($v).map_err(|e| ledger_err(LedgerError::Store(e.to_string())))
    };
}

/// The four ledger tools bound to one run of a routine; `ambit.ledger.RoutineLedger` wraps it and
/// `ambit.Agent(ledger=...)` registers them.
#[pyclass(name = "NativeLedgerTools", module = "ambit._native", frozen)]
pub struct NativeLedgerTools {
    pub(crate) tools: Vec<std::sync::Arc<dyn ambit::Tool>>,
}

#[pymethods]
impl NativeLedgerTools {
    /// The tools' names, in registration order.
    fn names(&self) -> PyResult<Vec<String>> {
        crate::guard(|| Ok(self.tools.iter().map(|t| t.spec().name.clone()).collect()))
    }

    /// These tools and `other`'s, in one set (a routine run's tools with its ledger's).
    fn join(&self, other: PyRef<'_, NativeLedgerTools>) -> PyResult<NativeLedgerTools> {
        crate::guard(|| Ok(NativeLedgerTools { tools: self.tools.iter().chain(other.tools.iter()).cloned().collect() }))
    }
}

/// The native ledger; `ambit.ledger.Ledger` wraps it.
#[pyclass(name = "NativeLedger", module = "ambit._native", frozen)]
pub struct NativeLedger {
    pub(crate) ledger: Ledger,
}

#[pymethods]
impl NativeLedger {
    /// Opens `sqlite:///path` or `postgres://…`; `durability` is `full` or `fast`.
    #[staticmethod]
    fn open<'py>(py: Python<'py>, url: String, durability: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let durability = match durability.as_str() {
                "full" => Durability::Full,
                "fast" => Durability::Fast,
                other => {
                    return Err(ledger_err(LedgerError::InvalidArgument(format!(
                        "durability is full or fast, got '{other}'"
                    ))));
                }
            };
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                let ledger = Ledger::open_with(&url, LedgerOptions { durability, ..LedgerOptions::default() })
                    .await
                    .map_err(ledger_err)?;
                Ok(NativeLedger { ledger })
            })
        })
    }

    /// Claims; `request` is a ClaimRequest as JSON. Returns the ClaimResult as JSON.
    fn claim<'py>(&self, py: Python<'py>, request: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let req: ClaimRequest = serde_json::from_str(&request).map_err(bad_json)?;
            let ledger = self.ledger.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(
                py,
                locals,
                async move { to_json!(&ledger.claim(req).await.map_err(ledger_err)?) },
            )
        })
    }

    /// Records a batch given as JSON (a list of objects); the whole batch or nothing.
    #[pyo3(signature = (scope, records, run_id=None))]
    fn record<'py>(
        &self,
        py: Python<'py>,
        scope: String,
        records: String,
        run_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let records: serde_json::Value = serde_json::from_str(&records).map_err(bad_json)?;
            let ledger = self.ledger.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&ledger.record_json(&scope, run_id.as_deref(), &records).await.map_err(ledger_err)?)
            })
        })
    }

    /// Lists rows; `query` is a ListQuery as JSON.
    fn list<'py>(&self, py: Python<'py>, query: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let query: ListQuery = serde_json::from_str(&query).map_err(bad_json)?;
            let ledger = self.ledger.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(
                py,
                locals,
                async move { to_json!(&ledger.list(&query).await.map_err(ledger_err)?) },
            )
        })
    }

    /// The four agent tools bound to one run of a routine; `limits` is RoutineLimits as JSON.
    #[pyo3(signature = (scope, run_id, limit, lease_ms, limits, routine_id=None))]
    fn tools_for_routine(
        &self,
        scope: String,
        run_id: String,
        limit: usize,
        lease_ms: i64,
        limits: String,
        routine_id: Option<String>,
    ) -> PyResult<NativeLedgerTools> {
        crate::guard(|| {
            let limits = RoutineLimits::from_json(&limits).map_err(ledger_err)?;
            let mut run = RoutineRun::new(scope, run_id).limit(limit).limits(limits);
            run.routine_id = routine_id;
            run.lease_ms = lease_ms;
            Ok(NativeLedgerTools { tools: ledger_tools(self.ledger.clone(), run) })
        })
    }

    fn grant_reason_counts<'py>(&self, py: Python<'py>, scope: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let ledger = self.ledger.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&ledger.grant_reason_counts(&scope).await.map_err(ledger_err)?)
            })
        })
    }

    #[pyo3(signature = (routine_id, subject_keys, batch_size, limits, run_id=None))]
    fn report_backlog<'py>(
        &self,
        py: Python<'py>,
        routine_id: String,
        subject_keys: Vec<String>,
        batch_size: i64,
        limits: String,
        run_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let limits = RoutineLimits::from_json(&limits).map_err(ledger_err)?;
            let batch_size = ambit::ledger::rules::batch_size(batch_size).map_err(ledger_err)?;
            let ledger = self.ledger.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                let report = ledger
                    .report_backlog(&routine_id, run_id.as_deref(), &subject_keys, batch_size, &limits)
                    .await
                    .map_err(ledger_err)?;
                to_json!(&report)
            })
        })
    }

    fn drain_decision<'py>(
        &self,
        py: Python<'py>,
        routine_id: String,
        run_id: String,
        limits: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let limits = RoutineLimits::from_json(&limits).map_err(ledger_err)?;
            let ledger = self.ledger.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&ledger.drain_decision(&routine_id, &run_id, &limits).await.map_err(ledger_err)?)
            })
        })
    }
}
