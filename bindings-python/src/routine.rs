//! `ambit._native.NativeRoutines` and `NativeRunner`: routines for Python (SPEC §13). Definitions,
//! runs and tick reports cross as JSON text; `ambit.routines` turns them into dataclasses, and routine
//! errors into its exceptions. An agent factory is a Python callable given the run's context (JSON) and
//! the run's tools; it returns an `ambit.Agent`.

use std::time::Duration;

use ambit::Error;
use ambit::routine::{RoutineError, Routines, Runner};
use pyo3::prelude::*;

use crate::ledger::{NativeLedger, NativeLedgerTools};
use crate::session::NativeSessions;
use crate::{NativeAgent, awaitable};

/// Builds the exception `ambit.routines` defines for a routine error, keeping its code and field.
pub(crate) fn routine_err(e: RoutineError) -> PyErr {
    crate::field_err("ambit.routines", e.code(), e.to_string(), e.field())
}

fn json_arg(field: &str, text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| routine_err(RoutineError::Invalid { field: field.into(), message: e.to_string() }))
}

macro_rules! to_json {
    ($v:expr) => {
        serde_json::to_string($v).map_err(|e| routine_err(RoutineError::Store(e.to_string())))
    };
}

/// The native routine store; `ambit.routines.Routines` wraps it.
#[pyclass(name = "NativeRoutines", module = "ambit._native", frozen)]
pub struct NativeRoutines {
    pub(crate) routines: Routines,
}

#[pymethods]
impl NativeRoutines {
    /// Opens `sqlite:///path` or `postgres://…`, applying the migrations.
    #[staticmethod]
    fn open<'py>(py: Python<'py>, url: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                Ok(NativeRoutines { routines: Routines::open(&url).await.map_err(routine_err)? })
            })
        })
    }

    /// Creates a routine from its definition (JSON); the routine as JSON.
    fn create<'py>(&self, py: Python<'py>, definition: String, actor: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let value = json_arg("routine", &definition)?;
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&r.create_json(&value, &actor).await.map_err(routine_err)?)
            })
        })
    }

    /// A routine with its revisions, as JSON.
    fn get<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move { to_json!(&r.get(&id).await.map_err(routine_err)?) })
        })
    }

    /// The revisions of a routine (also after its deletion), as JSON.
    fn revisions<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(
                py,
                locals,
                async move { to_json!(&r.revisions(&id).await.map_err(routine_err)?) },
            )
        })
    }

    /// Every routine, or an agent's, as JSON.
    #[pyo3(signature = (agent=None))]
    fn list<'py>(&self, py: Python<'py>, agent: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&r.list(agent.as_deref()).await.map_err(routine_err)?)
            })
        })
    }

    /// Applies an update (JSON: absent fields stay, null clears); the routine as JSON.
    fn update<'py>(&self, py: Python<'py>, id: String, patch: String, actor: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let value = json_arg("update", &patch)?;
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&r.update_json(&id, &value, &actor).await.map_err(routine_err)?)
            })
        })
    }

    /// Deletes a routine (its revisions stay).
    fn delete<'py>(&self, py: Python<'py>, id: String, actor: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move { r.delete(&id, &actor).await.map_err(routine_err) })
        })
    }

    /// The runs of a routine (or of all), latest first, as JSON.
    #[pyo3(signature = (routine_id=None, limit=100))]
    fn runs<'py>(&self, py: Python<'py>, routine_id: Option<String>, limit: i64) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&r.runs(routine_id.as_deref(), limit).await.map_err(routine_err)?)
            })
        })
    }

    /// The skipped slots of a routine (or of all), as JSON.
    #[pyo3(signature = (routine_id=None))]
    fn skipped<'py>(&self, py: Python<'py>, routine_id: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let r = self.routines.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&r.skipped(routine_id.as_deref()).await.map_err(routine_err)?)
            })
        })
    }
}

/// Calls a Python agent factory for one run: `factory(context_json, tools)` returns an `ambit.Agent`.
fn call_factory(factory: &Py<PyAny>, ctx: &ambit::routine::RunContext) -> Result<ambit::Agent, Error> {
    let context = serde_json::json!({"routine": ctx.routine, "run": ctx.run}).to_string();
    Python::attach(|py| {
        let tools = Py::new(py, NativeLedgerTools { tools: ctx.tools() })?;
        let agent = factory.call1(py, (context, tools))?;
        let native = agent.getattr(py, "_native")?;
        let native: PyRef<'_, NativeAgent> = native.extract(py)?;
        Ok::<_, PyErr>(native.agent.clone())
    })
    .map_err(|e: PyErr| Error::Config(format!("the agent factory raised: {e}")))
}

/// The native runner; `ambit.routines.Runner` wraps it.
#[pyclass(name = "NativeRunner", module = "ambit._native", frozen)]
pub struct NativeRunner {
    runner: Runner,
}

#[pymethods]
impl NativeRunner {
    /// `agents` maps agent names to factories; `lease` and `poll` are seconds; with `ledger`, runs get
    /// the ledger's tools and a backlog report starts a drain.
    #[new]
    #[pyo3(signature = (routines, sessions, agents, lease=60.0, poll=1.0, id=None, ledger=None))]
    fn new(
        routines: &NativeRoutines,
        sessions: &NativeSessions,
        agents: Vec<(String, Py<PyAny>)>,
        lease: f64,
        poll: f64,
        id: Option<String>,
        ledger: Option<PyRef<'_, NativeLedger>>,
    ) -> PyResult<Self> {
        crate::guard(|| {
            let seconds = |field: &str, v: f64| {
                Duration::try_from_secs_f64(v).map_err(|_| {
                    routine_err(RoutineError::Invalid {
                        field: field.into(),
                        message: format!("must be seconds >= 0, got {v}"),
                    })
                })
            };
            let mut b = Runner::builder(routines.routines.clone(), sessions.sessions.clone())
                .lease(seconds("lease", lease)?)
                .poll_interval(seconds("poll", poll)?);
            if let Some(id) = id {
                b = b.id(id);
            }
            if let Some(l) = ledger {
                b = b.ledger(l.ledger.clone());
            }
            for (name, factory) in agents {
                b = b.agent(name, move |ctx| call_factory(&factory, ctx));
            }
            Ok(NativeRunner { runner: b.build().map_err(routine_err)? })
        })
    }

    /// The runner's id.
    fn id(&self) -> PyResult<String> {
        crate::guard(|| Ok(self.runner.id().to_string()))
    }

    /// One pass at `now` (ms since the epoch; the routines' clock when omitted); the report as JSON.
    #[pyo3(signature = (now=None))]
    fn tick<'py>(&self, py: Python<'py>, now: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let runner = self.runner.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                let report = match now {
                    Some(now) => runner.tick(now).await,
                    None => runner.tick_now().await,
                }
                .map_err(routine_err)?;
                to_json!(&report)
            })
        })
    }

    /// Waits until every run this runner started has ended.
    fn wait_idle<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let runner = self.runner.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                runner.wait_idle().await;
                Ok(())
            })
        })
    }

    /// Ticks until cancelled.
    fn run_forever<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let runner = self.runner.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move { runner.run_forever().await.map_err(routine_err) })
        })
    }
}
