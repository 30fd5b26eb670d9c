//! MCP in the Swift binding: the servers and deferral settings arrive as the core's `ToolingOptions`
//! JSON (`AgentConfig.tooling_json`, written by Mcp.swift); here, the call that connects and lists the
//! servers before a run; and the servers' host callbacks (OAuth consent, token store, elicitation).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::{CoreAgent, CoreError, HostTool, guard_async};

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

/// A host callback of one MCP server (`kind`: `authorize`, `token_store` or `elicit`), as a function of
/// JSON text: `authorize` gets the authorization URL and answers the redirect it led to; `token_store`
/// gets `{"op": "load"|"save"|"clear", "key", "value"}` and answers JSON (`load`: the text or null);
/// `elicit` gets the request's JSON and answers the response's. The facade (Mcp.swift) makes them.
#[derive(uniffi::Record)]
pub struct McpHook {
    pub server: String,
    pub kind: String,
    pub function: Arc<dyn HostTool>,
}

async fn call(f: &Arc<dyn HostTool>, input: String) -> Result<String, String> {
    f.call(input, 0, "{}".to_string(), 0).await.map_err(|e| match e {
        crate::HostToolError::Failed { message } => message,
    })
}

struct SwiftAuthorize(Arc<dyn HostTool>);

#[async_trait]
impl ambit::mcp::Authorize for SwiftAuthorize {
    async fn authorize(&self, url: String) -> Result<String, String> {
        call(&self.0, url).await
    }
}

struct SwiftElicit(Arc<dyn HostTool>);

#[async_trait]
impl ambit::mcp::Elicit for SwiftElicit {
    async fn elicit(&self, request: ambit::mcp::ElicitationRequest) -> Result<ambit::mcp::ElicitationResponse, String> {
        let request = serde_json::to_string(&request).map_err(|e| e.to_string())?;
        let answer = call(&self.0, request).await?;
        serde_json::from_str(&answer).map_err(|e| format!("the elicitation handler's answer is not a response: {e}"))
    }
}

struct SwiftTokenStore(Arc<dyn HostTool>);

impl SwiftTokenStore {
    async fn op(&self, op: Value) -> Result<Value, String> {
        let answer = call(&self.0, op.to_string()).await?;
        serde_json::from_str(&answer).map_err(|e| format!("the token store's answer is not JSON: {e}"))
    }
}

#[async_trait]
impl ambit::mcp::TokenStore for SwiftTokenStore {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        match self.op(json!({"op": "load", "key": key})).await? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(format!("the token store's load answered {other}, not a string or null")),
        }
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        self.op(json!({"op": "save", "key": key, "value": value})).await.map(|_| ())
    }
    async fn clear(&self, key: &str) -> Result<(), String> {
        self.op(json!({"op": "clear", "key": key})).await.map(|_| ())
    }
}

/// Attaches the host callbacks to the servers of `tooling`, naming a server or kind that is wrong.
pub(crate) fn attach(tooling: &mut ambit::ToolingOptions, hooks: Vec<McpHook>) -> Result<(), ambit::Error> {
    for hook in hooks {
        let callback = match hook.kind.as_str() {
            "authorize" => ambit::McpCallback::Authorize(Arc::new(SwiftAuthorize(hook.function))),
            "token_store" => ambit::McpCallback::TokenStore(Arc::new(SwiftTokenStore(hook.function))),
            "elicit" => ambit::McpCallback::Elicit(Arc::new(SwiftElicit(hook.function))),
            other => return Err(ambit::Error::Config(format!("unknown MCP callback kind '{other}'"))),
        };
        callback.attach(tooling.mcp_servers.iter_mut(), &hook.server, &hook.kind)?;
    }
    Ok(())
}
