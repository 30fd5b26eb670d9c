//! Test hooks for the bindings' suites: ways to make the core panic on purpose, so each language's
//! tests can show that a panic reaches them as the typed `internal` error (SPEC: no panic crosses the
//! boundary). Hidden from the documentation; nothing in ambit calls these.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::{Tool, ToolError, ToolSpec};

/// The message of every panic these hooks raise.
pub const PANIC_MESSAGE: &str = "ambit::testing: a panic forced by a test";

/// Panics, in the caller's thread: a binding's synchronous export calls it to show the panic is caught.
pub fn force_panic() -> ! {
    panic!("{PANIC_MESSAGE}")
}

/// The name of [`panicking_tool`].
pub const PANICKING_TOOL: &str = "ambit_testing_panic";

/// A tool (level `none`) whose call panics inside the run's task, as a bug in a tool or a wire would.
pub fn panicking_tool() -> Arc<dyn Tool> {
    Arc::new(PanickingTool {
        spec: ToolSpec::new(
            PANICKING_TOOL,
            "Panics (a test hook).",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
        .with_level(crate::Level::None),
    })
}

struct PanickingTool {
    spec: ToolSpec,
}

#[async_trait]
impl Tool for PanickingTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        force_panic()
    }
}
