//! MCP in the Node binding: the servers and deferral settings arrive in the agent's options JSON (see
//! mcp.js); here, the call that connects and lists the servers before a run.

use napi_derive::napi;

use crate::NativeAgent;

#[napi]
impl NativeAgent {
    /// Connects the MCP servers not yet connected and re-lists those that changed, as a run does
    /// before each model request; `listTools()` then shows their tools.
    #[napi]
    pub async fn refresh_tools(&self) -> napi::Result<()> {
        let agent = self.agent.clone();
        tokio::spawn(async move { agent.refresh_tools().await }).await.map_err(|e| match e.try_into_panic() {
            Ok(payload) => crate::internal_error(&*payload),
            Err(e) => napi::Error::from_reason(e.to_string()),
        })
    }
}
