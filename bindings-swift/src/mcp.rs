//! MCP in the Swift binding: the servers and deferral settings arrive as the core's `ToolingOptions`
//! JSON (`AgentConfig.tooling_json`, written by Mcp.swift); here, the call that connects and lists the
//! servers before a run.

use crate::{CoreAgent, CoreError, guard_async};

#[uniffi::export(async_runtime = "tokio")]
impl CoreAgent {
    /// Connects the MCP servers not yet connected and re-lists those that changed, as a run does before
    /// each model request; `list_tools` then shows their tools.
    pub async fn refresh_tools(&self) -> Result<(), CoreError> {
        guard_async(async move {
            self.inner.refresh_tools().await;
            Ok(())
        })
        .await
    }
}
