//! The run context: a host value passed to one run and handed to every host tool that run calls (the
//! one place it travels, so hooks and guardrails can read it from here too). It stays a value of the
//! host's: the core holds it as an opaque `Arc<dyn Any>` and never serializes it, so it reaches neither
//! the model nor a session store. A binding puts its language's own handle inside.

use std::any::Any;
use std::sync::Arc;

/// The host value of one run (see [`crate::Agent::run_with_context`]); tools read it through
/// [`crate::ToolContext::context`].
#[derive(Clone)]
pub struct RunContextValue(pub Arc<dyn Any + Send + Sync>);

impl RunContextValue {
    /// A run context holding `value`.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        RunContextValue(Arc::new(value))
    }

    /// The value as `T`, when it is one.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

impl std::fmt::Debug for RunContextValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunContextValue(..)")
    }
}

tokio::task_local! {
    static CONTEXT: Option<RunContextValue>;
}

/// The context of the run this code runs in, if it has one.
pub(crate) fn current() -> Option<RunContextValue> {
    CONTEXT.try_with(Clone::clone).ok().flatten()
}

/// Runs `fut` (a whole run: its loop, its tool calls, its background tasks) with `context`.
pub(crate) async fn scope<F: std::future::Future>(context: Option<RunContextValue>, fut: F) -> F::Output {
    CONTEXT.scope(context, fut).await
}
