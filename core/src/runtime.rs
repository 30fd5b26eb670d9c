//! The one tokio runtime the bindings share. Rust programs use their own runtime instead.

use std::sync::OnceLock;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// The process-wide runtime the language bindings run the core on, created on first use.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("ambit")
            .enable_all()
            .build()
            .expect("the tokio runtime could not be started (out of threads or file descriptors)")
    })
}

/// Wraps a future that outlives the call that made it so it runs in that call's context (a binding's:
/// Python's event loop, for the async tools it calls).
pub type Carrier = std::sync::Arc<dyn Fn(BoxFuture) -> BoxFuture + Send + Sync>;

type BoxFuture = futures::future::BoxFuture<'static, ()>;

tokio::task_local! {
    static CARRIER: Carrier;
}

/// Runs `fut` with `carrier` wrapping what it leaves running after it returns ([`detach`]).
pub async fn with_carrier<F: std::future::Future>(carrier: Carrier, fut: F) -> F::Output {
    CARRIER.scope(carrier, fut).await
}

/// Spawns `fut` to run on after the calling code returns (a session's background tasks that outlive their
/// run), in the context the caller's carrier gives it, on the current runtime.
pub(crate) fn detach(fut: BoxFuture) {
    let fut = match CARRIER.try_with(Clone::clone) {
        Ok(carrier) => carrier(fut),
        Err(_) => fut,
    };
    tokio::spawn(fut);
}
