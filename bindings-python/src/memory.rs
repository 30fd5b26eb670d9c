//! `ambit._native.NativeMemory`: the memory store for Python. Memories, recalls and results cross as
//! JSON text; `ambit.memory` turns them into dataclasses, and memory errors into its exceptions.

use ambit::memory::{Memory, MemoryError, Target};
use pyo3::prelude::*;

use crate::awaitable;

/// Builds the exception `ambit.memory` defines for a memory error, keeping its code and field.
fn memory_err(e: MemoryError) -> PyErr {
    crate::field_err("ambit.memory", e.code(), e.to_string(), e.field())
}

fn json_arg(field: &str, text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| memory_err(MemoryError::InvalidArgument { field: field.into(), message: e.to_string() }))
}

macro_rules! to_json {
    ($v:expr) => {
        serde_json::to_string($v).map_err(|e| memory_err(MemoryError::Store(e.to_string())))
    };
}

/// The native memory store; `ambit.memory.Memory` wraps it.
#[pyclass(name = "NativeMemory", module = "ambit._native", frozen)]
pub struct NativeMemory {
    memory: Memory,
}

#[pymethods]
impl NativeMemory {
    /// Opens `sqlite:///path` or `postgres://…`, applying the migrations.
    #[staticmethod]
    fn open<'py>(py: Python<'py>, url: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                Ok(NativeMemory { memory: Memory::open(&url).await.map_err(memory_err)? })
            })
        })
    }

    /// Saves (or updates by key) a memory given as JSON; returns the Saved result as JSON.
    fn remember<'py>(&self, py: Python<'py>, agent: String, memory: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let value = json_arg("memory", &memory)?;
            let mem = self.memory.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&mem.remember_json(&agent, &value).await.map_err(memory_err)?)
            })
        })
    }

    /// Recalls with a Recall given as JSON; returns the memories as JSON.
    fn recall<'py>(&self, py: Python<'py>, agent: String, recall: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let value = json_arg("recall", &recall)?;
            let mem = self.memory.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                to_json!(&mem.recall_json(&agent, &value).await.map_err(memory_err)?)
            })
        })
    }

    /// Forgets one memory by id or key; whether it existed.
    #[pyo3(signature = (agent, id=None, key=None))]
    fn forget<'py>(
        &self,
        py: Python<'py>,
        agent: String,
        id: Option<i64>,
        key: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let target = match (id, key) {
                (Some(id), None) => Target::Id(id),
                (None, Some(key)) => Target::Key(key),
                _ => {
                    return Err(memory_err(MemoryError::InvalidArgument {
                        field: "id".into(),
                        message: "give the memory's id or its key, one of them".into(),
                    }));
                }
            };
            let mem = self.memory.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move { mem.forget(&agent, &target).await.map_err(memory_err) })
        })
    }

    /// Every memory of an agent as JSON, oldest first.
    fn list<'py>(&self, py: Python<'py>, agent: String) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let mem = self.memory.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move { to_json!(&mem.list(&agent).await.map_err(memory_err)?) })
        })
    }

    /// The export document (`{"version": 1, "memories": [...]}`) of an agent, or of every agent.
    #[pyo3(signature = (agent=None))]
    fn export<'py>(&self, py: Python<'py>, agent: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        crate::guard(|| {
            let mem = self.memory.clone();
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(
                py,
                locals,
                async move { mem.export_json(agent.as_deref()).await.map_err(memory_err) },
            )
        })
    }
}
