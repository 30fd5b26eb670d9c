//! Test hooks for the bindings' suites: ways to make the core panic on purpose, so each language's
//! tests can show that a panic reaches them as the typed `internal` error (SPEC: no panic crosses the
//! boundary). Hidden from the documentation; nothing in ambit calls these.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// The name of [`tool_with_panicking_spec`]'s tool.
pub const PANICKING_SPEC_TOOL: &str = "ambit_testing_panicking_spec";

/// A tool (level `none`) whose [`Tool::spec`] panics once the returned switch is set: an agent is built
/// with it unarmed, then listing its tools, or a session sizing its request, panics in the caller's
/// call (outside any run's task), as a bug there would.
pub fn tool_with_panicking_spec() -> (Arc<dyn Tool>, Arc<AtomicBool>) {
    let armed = Arc::new(AtomicBool::new(false));
    let spec = ToolSpec::new(
        PANICKING_SPEC_TOOL,
        "Its spec panics once armed (a test hook).",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .with_level(crate::Level::None);
    (Arc::new(PanickingSpec { spec, armed: armed.clone() }), armed)
}

struct PanickingSpec {
    spec: ToolSpec,
    armed: Arc<AtomicBool>,
}

#[async_trait]
impl Tool for PanickingSpec {
    fn spec(&self) -> &ToolSpec {
        if self.armed.load(Ordering::SeqCst) {
            force_panic()
        }
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Ok(Value::String("ok".into()))
    }
}
