//! `ambit._native.NativeSessions`: the session store for Python (SPEC §8). Results cross as JSON text;
//! `ambit.session` wraps them. A run's own failure raises the same exception `Agent.run` would.

use ambit::session::{SessionConfig, SessionError, Sessions};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{NativeAgent, awaitable, core_err};

pub(crate) fn session_err(e: SessionError) -> PyErr {
    match e {
        SessionError::Run(e) => core_err(e),
        other => Python::attach(|py| {
            let details = PyDict::new(py);
            if let SessionError::AwaitingApproval { session_id, request } = &other {
                let _ = details.set_item("session_id", session_id);
                let _ = details.set_item("request", serde_json::to_string(request).unwrap_or_default());
            }
            crate::python_err(py, "ambit.errors", other.code(), other.to_string(), details)
        }),
    }
}

pub(crate) fn json_err(e: serde_json::Error) -> PyErr {
    session_err(SessionError::InvalidArgument(e.to_string()))
}

/// What the run leaves running after it returns (a session's background tasks) runs on the same event
/// loop the run did, so the async Python tools it calls still have theirs.
fn carrier(locals: &pyo3_async_runtimes::TaskLocals) -> ambit::runtime::Carrier {
    let locals = locals.clone();
    std::sync::Arc::new(move |fut| Box::pin(pyo3_async_runtimes::tokio::scope(locals.clone(), fut)))
}

/// The deliveries of a store handle (`ambit.Sessions.deliveries`), one `next()` at a time.
#[pyclass(name = "NativeDeliveries", module = "ambit._native", frozen)]
pub struct NativeDeliveries {
    rx: std::sync::Arc<tokio::sync::Mutex<ambit::session::Deliveries>>,
}

#[pymethods]
impl NativeDeliveries {
    /// The next delivery as JSON (`null` once the store handle is gone).
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let rx = self.rx.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                let next = rx.lock().await.next().await;
                serde_json::to_string(&next).map_err(json_err)
            })
        })
    }
}

/// The native store; `ambit.Sessions` wraps it.
#[pyclass(name = "NativeSessions", module = "ambit._native", frozen)]
pub struct NativeSessions {
    pub(crate) sessions: Sessions,
}

#[pymethods]
impl NativeSessions {
    /// Opens `sqlite:///path` or `postgres://…`; `config` is a SessionConfig as JSON.
    #[staticmethod]
    fn open<'py>(py: Python<'py>, url: String, config: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let config = SessionConfig::from_json(&config).map_err(session_err)?;
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                let sessions =
                    Sessions::open(&url).await.map_err(session_err)?.with_config(config).map_err(session_err)?;
                Ok(NativeSessions { sessions })
            })
        })
    }

    /// A new session's id.
    fn create<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let s = self.sessions.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move { s.create().await.map_err(session_err) })
        })
    }

    /// Runs `agent` in the session on `input`, or on `messages` (a JSON list holding the user message of
    /// parts) when given, with the run context `context` (an id of the facade's; 0: none); the RunResult
    /// as JSON.
    #[pyo3(signature = (agent, session_id, input, context=0, messages=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        agent: &NativeAgent,
        session_id: String,
        input: String,
        context: u64,
        messages: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let (s, agent) = (self.sessions.clone(), agent.agent.clone());
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            let carrier = carrier(&locals);
            awaitable::into_awaitable(py, locals, async move {
                let input = crate::run_input(input, messages).map_err(crate::core_err)?;
                let run: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> =
                    match crate::run_context(context) {
                        Some(c) => Box::pin(s.run_with_context(&agent, &session_id, input, c)),
                        None => Box::pin(s.run(&agent, &session_id, input)),
                    };
                let result = ambit::runtime::with_carrier(carrier, run).await.map_err(session_err)?;
                serde_json::to_string(&result).map_err(json_err)
            })
        })
    }

    /// Answers the approval the parked session waits on (`decision` as JSON) and continues the run, with
    /// the run context `context` (0: none).
    #[pyo3(signature = (agent, session_id, decision, context=0))]
    fn resume<'py>(
        &self,
        py: Python<'py>,
        agent: &NativeAgent,
        session_id: String,
        decision: String,
        context: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let decision: ambit::ApprovalDecision = serde_json::from_str(&decision).map_err(json_err)?;
            let (s, agent) = (self.sessions.clone(), agent.agent.clone());
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            let carrier = carrier(&locals);
            awaitable::into_awaitable(py, locals, async move {
                let resumed: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> =
                    match crate::run_context(context) {
                        Some(c) => Box::pin(s.resume_with_context(&agent, &session_id, decision, c)),
                        None => Box::pin(s.resume(&agent, &session_id, decision)),
                    };
                let result = ambit::runtime::with_carrier(carrier, resumed).await.map_err(session_err)?;
                serde_json::to_string(&result).map_err(json_err)
            })
        })
    }

    /// The approval a parked session waits on, as JSON (`null` when it is not parked).
    fn pending<'py>(&self, py: Python<'py>, session_id: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let s = self.sessions.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                serde_json::to_string(&s.pending(&session_id).await.map_err(session_err)?).map_err(json_err)
            })
        })
    }

    /// Compacts the session now; whether anything was summarised.
    fn compact<'py>(&self, py: Python<'py>, agent: &NativeAgent, session_id: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let (s, agent) = (self.sessions.clone(), agent.agent.clone());
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(
                py,
                locals,
                async move { s.compact(&agent, &session_id).await.map_err(session_err) },
            )
        })
    }

    /// `conversation_search` over the session.
    fn search<'py>(
        &self,
        py: Python<'py>,
        session_id: String,
        query: String,
        is_regex: bool,
        limit: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let s = self.sessions.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                s.search(&session_id, &query, is_regex, limit).await.map_err(session_err)
            })
        })
    }

    /// `conversation_read` over the session.
    fn read<'py>(&self, py: Python<'py>, session_id: String, start: i64, limit: usize) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let s = self.sessions.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                s.read(&session_id, start, limit).await.map_err(session_err)
            })
        })
    }

    /// The background-task results that land in this store's sessions from now on.
    fn deliveries(&self) -> NativeDeliveries {
        NativeDeliveries { rx: std::sync::Arc::new(tokio::sync::Mutex::new(self.sessions.deliveries())) }
    }

    /// A session's background task as JSON: `{session_id, task_id, name, status, note, result}`.
    fn task_result<'py>(&self, py: Python<'py>, session_id: String, task_id: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let s = self.sessions.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                let task = s.task_result(&session_id, &task_id).await.map_err(session_err)?;
                serde_json::to_string(&task).map_err(json_err)
            })
        })
    }

    /// The whole log as JSON: `[{index, kind, ...}]`.
    fn entries<'py>(&self, py: Python<'py>, session_id: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let s = self.sessions.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                serde_json::to_string(&s.entries(&session_id).await.map_err(session_err)?).map_err(json_err)
            })
        })
    }
}
