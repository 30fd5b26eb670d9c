//! `ambit._native`: the Python binding. It translates: Python callables become core tools, core
//! futures become awaitables on the core's runtime, core errors become the exceptions defined in
//! `ambit.errors`. Every rule lives in the core.

use ambit::{Agent, Error, OpenAiChat, Tool, ToolError, ToolSpec};
use async_trait::async_trait;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

/// Builds the exception `ambit.errors` defines for a core error, keeping its code and details.
fn core_err(e: Error) -> PyErr {
    Python::attach(|py| {
        let details = PyDict::new(py);
        let _ = details.set_item("code", e.code());
        match &e {
            Error::Model(ambit::ModelError::Http { status, .. }) => {
                let _ = details.set_item("status", *status);
            }
            Error::MaxTurns { max_turns, usage } => {
                let _ = details.set_item("max_turns", *max_turns);
                let _ = details.set_item("usage", serde_json::to_string(usage).unwrap_or_default());
            }
            _ => {}
        }
        let made = py
            .import("ambit.errors")
            .and_then(|m| m.getattr("_from_core"))
            .and_then(|f| f.call1((e.code(), e.to_string(), details)));
        match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(err) => err,
        }
    })
}

/// The text of a Python exception, for the model: its message, else its type's name.
fn exception_text(py: Python<'_>, err: &PyErr) -> String {
    let value = err.value(py);
    match value.str() {
        Ok(s) if !s.to_string().is_empty() => s.to_string(),
        _ => value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "exception".into()),
    }
}

/// A Python callable as a core tool. The facade hands over `call(arguments_json) -> str` (or a
/// coroutine for async functions); the result text reaches the model as is.
struct PyTool {
    spec: ToolSpec,
    call: Py<PyAny>,
    is_async: bool,
}

#[async_trait]
impl Tool for PyTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let args = arguments.to_string();
        if self.is_async {
            // The run's future carries its event loop as a task local (set by future_into_py_with_locals),
            // so the coroutine runs on the loop that awaited the run.
            let fut = Python::attach(|py| {
                let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
                let coro = self.call.bind(py).call1((args,))?;
                pyo3_async_runtimes::into_future_with_locals(&locals, coro)
            })
            .map_err(|e| Python::attach(|py| ToolError::Failed(exception_text(py, &e))))?;
            let out = fut.await;
            return Python::attach(|py| match out {
                Ok(v) => v
                    .bind(py)
                    .extract::<String>()
                    .map(Value::String)
                    .map_err(|e| ToolError::Failed(exception_text(py, &e))),
                Err(e) => Err(ToolError::Failed(exception_text(py, &e))),
            });
        }
        let call = Python::attach(|py| self.call.clone_ref(py));
        // A plain function runs on a blocking thread, so it never stalls the runtime's workers.
        tokio::task::spawn_blocking(move || {
            Python::attach(|py| match call.bind(py).call1((args,)).and_then(|v| v.extract::<String>()) {
                Ok(s) => Ok(Value::String(s)),
                Err(e) => Err(ToolError::Failed(exception_text(py, &e))),
            })
        })
        .await
        .map_err(|e| ToolError::Failed(format!("the tool's thread failed: {e}")))?
    }
}

/// The native agent; `ambit.Agent` wraps it.
#[pyclass(name = "NativeAgent", module = "ambit._native", frozen)]
struct NativeAgent {
    agent: Agent,
}

#[pymethods]
impl NativeAgent {
    /// `tools` holds `(name, description, parameters_json, call, is_async)` tuples.
    #[new]
    #[pyo3(signature = (model, tools, base_url=None, api_key=None, instructions=None, max_turns=None))]
    fn new(
        model: String,
        tools: Vec<(String, String, String, Py<PyAny>, bool)>,
        base_url: Option<String>,
        api_key: Option<String>,
        instructions: Option<String>,
        max_turns: Option<u32>,
    ) -> PyResult<Self> {
        let mut m = OpenAiChat::new(model);
        if let Some(url) = base_url {
            m = m.base_url(url);
        }
        if let Some(key) = api_key {
            m = m.api_key(key);
        }
        let mut b = Agent::builder().model(m);
        if let Some(i) = instructions {
            b = b.instructions(i);
        }
        if let Some(n) = max_turns {
            b = b.max_turns(n);
        }
        for (name, description, parameters, call, is_async) in tools {
            let parameters: Value = serde_json::from_str(&parameters)
                .map_err(|e| core_err(Error::Config(format!("tool '{name}': parameters are not JSON: {e}"))))?;
            b = b.tool(PyTool { spec: ToolSpec::new(name, description, parameters), call, is_async });
        }
        let agent = b.build().map_err(core_err)?;
        Ok(NativeAgent { agent })
    }

    /// Runs the agent; returns an awaitable of the result as JSON text.
    fn run<'py>(&self, py: Python<'py>, input: String) -> PyResult<Bound<'py, PyAny>> {
        let task_locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        let agent = self.agent.clone();
        pyo3_async_runtimes::tokio::future_into_py_with_locals(py, task_locals, async move {
            let result = agent.run(input).await.map_err(core_err)?;
            serde_json::to_string(&result).map_err(|e| core_err(Error::Config(e.to_string())))
        })
    }

    /// The names of the registered tools, in order.
    fn tool_names(&self) -> Vec<String> {
        self.agent.tools().specs().into_iter().map(|s| s.name).collect()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = pyo3_async_runtimes::tokio::init_with_runtime(ambit::runtime::runtime());
    m.add_class::<NativeAgent>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
