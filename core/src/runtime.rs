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
