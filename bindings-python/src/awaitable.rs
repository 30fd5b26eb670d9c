//! Core futures as asyncio awaitables, on the core's runtime.
//!
//! pyo3-async-runtimes' `future_into_py` finishes its work under the GIL after the asyncio future is
//! already resolved; at interpreter exit that races with finalization (a worker thread then takes the
//! GIL of a finalizing interpreter and the process aborts). Here the result is handed to the loop with
//! `call_soon_threadsafe` from a counted section, and `ambit` drains the count at exit (`_drain`,
//! registered with `atexit`) with the GIL released, so no worker is inside Python when it finalizes.
//!
//! Two things never stay inside the Rust task: a panic (the awaitable raises `ambit.InternalError`), and
//! `KeyboardInterrupt` or `SystemExit` raised by a tool or an approval handler (see [`Escape`]): the
//! awaitable raises that exception itself and the run is dropped, as asyncio does when a task raises them.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3_async_runtimes::TaskLocals;

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

tokio::task_local! {
    /// The escape hatch of the awaitable (or stream) whose task this is.
    static ESCAPE: Arc<Escape>;
}

/// Where a `KeyboardInterrupt` or `SystemExit` raised by Python code the run called (a sync or an async
/// tool, an approval handler) waits for the awaitable to raise it: the run does not go on past it.
#[derive(Default)]
pub struct Escape {
    raised: Mutex<Option<PyErr>>,
    notify: tokio::sync::Notify,
}

impl Escape {
    /// Runs `fut` with this escape hatch as its task's.
    pub fn scope<F: Future>(self: &Arc<Self>, fut: F) -> impl Future<Output = F::Output> + use<F> {
        ESCAPE.scope(self.clone(), fut)
    }

    /// The exception once one is raised (at once if one already was).
    pub async fn raised(&self) -> PyErr {
        loop {
            if let Some(err) = self.raised.lock().unwrap_or_else(|p| p.into_inner()).take() {
                return err;
            }
            self.notify.notified().await;
        }
    }
}

/// Whether `err` is one of the exceptions that end the program rather than a call (asyncio's rule):
/// `KeyboardInterrupt` and `SystemExit`.
pub fn ends_the_program(py: Python<'_>, err: &PyErr) -> bool {
    err.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py)
        || err.is_instance_of::<pyo3::exceptions::PySystemExit>(py)
}

/// Hands `err` to the escape hatch of the current task, if it has one (the first one raised wins).
pub fn escape(err: PyErr) {
    let _ = ESCAPE.try_with(|e| {
        let mut slot = e.raised.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(err);
        }
        drop(slot);
        e.notify.notify_one();
    });
}

/// Cancels the Rust task when its asyncio future is cancelled (a done callback).
#[pyclass(module = "ambit._native", frozen)]
struct AbortOnCancel {
    handle: tokio::task::AbortHandle,
}

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        crate::guard(|| {
            if fut.call_method0("cancelled")?.is_truthy()? {
                self.handle.abort();
            }
            Ok(())
        })
    }
}

/// Runs `fut` on the core's runtime, with `locals` as its task locals (async tools run on that loop),
/// and returns an asyncio future of its output.
pub fn into_awaitable<'py, F, T>(py: Python<'py>, locals: TaskLocals, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let event_loop = locals.event_loop(py);
    let py_fut = event_loop.call_method0("create_future")?;
    let fut_ref = py_fut.clone().unbind();
    let loop_ref = event_loop.unbind();
    let complete = py.import("ambit._aio")?.getattr("complete")?.unbind();
    let runtime = ambit::runtime::runtime();
    let hatch = Arc::new(Escape::default());
    let fut = async move {
        let raised = hatch.raised();
        tokio::select! {
            biased;
            err = raised => Err(err),
            out = hatch.scope(fut) => out,
        }
    };
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let task = runtime.spawn(pyo3_async_runtimes::tokio::scope(locals, fut));
    py_fut.call_method1("add_done_callback", (AbortOnCancel { handle: task.abort_handle() },))?;
    runtime.spawn(async move {
        let out = task.await;
        Python::attach(|py| {
            let (ok, value): (bool, Py<PyAny>) = match out {
                Ok(Ok(v)) => match v.into_py_any(py) {
                    Ok(b) => (true, b),
                    Err(e) => (false, e.into_value(py).into_any()),
                },
                Ok(Err(e)) => (false, e.into_value(py).into_any()),
                // A panic in the task (the core or this binding) is the typed internal error.
                Err(join) => match join.try_into_panic() {
                    Ok(payload) => {
                        (false, crate::core_err(ambit::Error::from_panic(&*payload)).into_value(py).into_any())
                    }
                    Err(_cancelled) => (false, py.None()),
                },
            };
            // A closed loop (the program moved on) has nobody to tell.
            let _ = loop_ref
                .bind(py)
                .call_method1("call_soon_threadsafe", (complete.bind(py), fut_ref.bind(py), ok, value));
        });
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    });
    Ok(py_fut)
}

/// Waits (the GIL released, at most 5 s) until no completion is still inside Python. `ambit` registers
/// it with `atexit`.
#[pyfunction]
pub fn _drain(py: Python<'_>) -> PyResult<()> {
    crate::guard(|| {
        py.detach(|| {
            let deadline = Instant::now() + Duration::from_secs(5);
            while IN_FLIGHT.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Ok(())
    })
}
