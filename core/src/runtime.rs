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

/// A child that exits without reading its stdin (an MCP stdio server that fails as it starts) makes the
/// next write to its pipe raise SIGPIPE, whose default action ends the whole host process. Rust
/// programs, Python and Node ignore SIGPIPE already; a Swift or C host does not (a Swift test process was
/// killed by it). So before the core writes to a child's pipe, SIGPIPE is ignored process-wide, unless the
/// host installed a handler of its own (its choice stands): the write then fails with EPIPE and the
/// server is reported unavailable, as any peer that hangs up is.
pub(crate) fn ignore_sigpipe() {
    #[cfg(unix)]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: reading the current disposition into a zeroed sigaction, then setting SIG_IGN, with
            // valid pointers; no handler of ours runs.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL
                {
                    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                }
            }
        });
    }
}
