//! One MCP tool as the agent sees it: its exposed name, level and schema, and a call through the
//! server's peer with structured content and `isError` carried to the model.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use tracing::Instrument;

use crate::agent::background::TaskHandle;
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolSpec};

use super::McpServer;

/// `mcp__<server>__<tool>`.
pub fn exposed_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// The level a tool requires: from configuration, else from the annotations of a trusted server
/// (`readOnlyHint: true` gives `read`), else `unrestricted`.
pub fn tool_level(config: &McpServer, tool: &str, read_only_hint: Option<bool>) -> Level {
    if let Some(l) = config.levels.get(tool) {
        return *l;
    }
    if config.trusted && read_only_hint == Some(true) {
        return Level::Read;
    }
    Level::Unrestricted
}

/// The background tasks of MCP calls under way, by the progress token their request carries: the
/// server's `notifications/progress` for a call is that task's progress note (and heartbeat).
type ProgressTasks = std::sync::Mutex<std::collections::HashMap<rmcp::model::ProgressToken, TaskHandle>>;

fn progress_tasks() -> &'static ProgressTasks {
    static TASKS: std::sync::OnceLock<ProgressTasks> = std::sync::OnceLock::new();
    TASKS.get_or_init(Default::default)
}

/// A call's progress token (the one the MCP client gives its request), registered for the length of the
/// call with the background task it runs in.
struct Registered(rmcp::model::ProgressToken);

impl Registered {
    fn new(token: rmcp::model::ProgressToken, task: TaskHandle) -> Registered {
        progress_tasks().lock().unwrap_or_else(|p| p.into_inner()).insert(token.clone(), task);
        Registered(token)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        progress_tasks().lock().unwrap_or_else(|p| p.into_inner()).remove(&self.0);
    }
}

/// A request that is cancelled at the server (`notifications/cancelled`) if dropped before its answer
/// came: a background call cancelled past its grace period.
struct Abandoned {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let why = Some("the call was cancelled".to_string());
                let _ = peer.notify_cancelled(rmcp::model::CancelledNotificationParam::new(Some(id), why)).await;
            });
        }
    }
}

/// A server's progress notification, forwarded to the task of the call whose token it names: its
/// message, else `progress/total` (or `progress`). A token of no call under way is ignored.
pub(super) fn forward_progress(params: &rmcp::model::ProgressNotificationParam) {
    let tasks = progress_tasks().lock().unwrap_or_else(|p| p.into_inner());
    let Some(task) = tasks.get(&params.progress_token).cloned() else {
        return;
    };
    let note = match (&params.message, params.total) {
        (Some(m), _) if !m.trim().is_empty() => m.chars().take(200).collect(),
        (_, Some(total)) => format!("{}/{total}", params.progress),
        _ => params.progress.to_string(),
    };
    drop(tasks);
    task.progress(note);
}

/// A tool of an MCP server.
pub struct McpTool {
    spec: ToolSpec,
    /// The server's own name for the tool.
    tool: String,
    server: String,
    peer: Peer<RoleClient>,
    /// The server's dirty flag, set once the call has its answer (see [`McpTool::call`]).
    dirty: Arc<AtomicBool>,
}

impl McpTool {
    pub(super) fn new(
        config: &McpServer,
        tool: &rmcp::model::Tool,
        peer: Peer<RoleClient>,
        dirty: Arc<AtomicBool>,
    ) -> McpTool {
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
        let mut schema = (*tool.input_schema).clone();
        schema.entry("type").or_insert_with(|| Value::String("object".into()));
        let parameters = Value::Object(schema);
        let description = tool.description.as_deref().unwrap_or_default().to_string();
        let spec = ToolSpec::new(exposed_name(&config.name, &tool.name), description, parameters)
            .with_level(tool_level(config, &tool.name, read_only));
        McpTool { spec, tool: tool.name.to_string(), server: config.name.clone(), peer, dirty }
    }

    /// The server's name and the server's name for the tool.
    pub fn origin(&self) -> (&str, &str) {
        (&self.server, &self.tool)
    }
}

/// The text the model receives for a result: the content blocks, then the structured content when it
/// is not already the text.
pub fn result_text(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result.content.iter().map(block_text).collect();
    if let Some(s) = &result.structured_content {
        let json = s.to_string();
        if !parts.iter().any(|p| p.trim() == json) {
            parts.push(format!("structured_content: {json}"));
        }
    }
    parts.join("\n")
}

/// A result with images as content parts: each `image` block, and each embedded `resource` whose blob
/// is an image, becomes an image part (one the wires take: PNG, JPEG, GIF or WebP within the cap, else
/// it stays a text note); every other block is its text. `None` when no block is such an image.
pub fn result_parts(result: &CallToolResult) -> Option<Vec<crate::content::Part>> {
    use crate::content::Part;
    let image = |mime: &str, data: &str| -> Option<Part> {
        let part = Part::Image { media_type: mime.to_string(), data: data.to_string() };
        part.check().is_ok().then_some(part)
    };
    let mut parts = Vec::new();
    let mut images = 0;
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or(Value::Null);
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let found = match v.get("type").and_then(Value::as_str) {
            Some("image") => s(&v, "mimeType").zip(s(&v, "data")).and_then(|(m, d)| image(&m, &d)),
            Some("resource") => {
                let r = v.get("resource").unwrap_or(&Value::Null);
                s(r, "mimeType").zip(s(r, "blob")).and_then(|(m, d)| image(&m, &d))
            }
            _ => None,
        };
        match found {
            Some(p) => {
                images += 1;
                parts.push(p);
            }
            None => parts.push(Part::text(block_text(block))),
        }
    }
    if images == 0 {
        return None;
    }
    if let Some(s) = &result.structured_content {
        parts.push(Part::text(format!("structured_content: {s}")));
    }
    Some(parts)
}

fn block_text(block: &ContentBlock) -> String {
    let v = serde_json::to_value(block).unwrap_or(Value::Null);
    let str_at = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    match v.get("type").and_then(Value::as_str) {
        Some("text") => str_at(&v, "text"),
        Some(kind @ ("image" | "audio")) => format!(
            "[{kind} {}, {} bytes base64]",
            v.get("mimeType").and_then(Value::as_str).unwrap_or("?"),
            v.get("data").and_then(Value::as_str).map(str::len).unwrap_or(0)
        ),
        Some("resource") => {
            let r = v.get("resource").unwrap_or(&Value::Null);
            match r.get("text").and_then(Value::as_str) {
                Some(t) => format!("[resource {}]\n{t}", str_at(r, "uri")),
                None => format!("[resource {} (binary)]", str_at(r, "uri")),
            }
        }
        Some("resource_link") => format!("[resource link {}]", str_at(&v, "uri")),
        _ => v.to_string(),
    }
}

impl McpTool {
    /// A call in a background task: the server's progress notifications for it are the task's notes
    /// (SPEC §5), so a long call that reports progress is not failed as dead.
    async fn call_in_background(
        &self,
        params: CallToolRequestParams,
        task: TaskHandle,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let options = rmcp::service::PeerRequestOptions::no_options();
        let handle = self.peer.send_cancellable_request(request, options).await?;
        let _registered = Registered::new(handle.progress_token.clone(), task);
        let mut abandoned = Abandoned { peer: self.peer.clone(), id: Some(handle.id.clone()) };
        let answer = handle.await_response().await;
        abandoned.id = None;
        match answer? {
            rmcp::model::ServerResult::CallToolResult(result) => Ok(result),
            _ => Err(rmcp::ServiceError::UnexpectedResponse),
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let mut params = CallToolRequestParams::new(self.tool.clone());
        if let Value::Object(map) = arguments {
            params.arguments = Some(map);
        }
        let span = tracing::info_span!(
            target: "ambit::mcp",
            "mcp_call",
            otel.name = "tools/call",
            otel.kind = "client",
            mcp.method.name = "tools/call",
            mcp.server = %self.server,
            gen_ai.tool.name = %self.tool,
        );
        let result = match TaskHandle::current() {
            Some(task) => self.call_in_background(params, task).instrument(span).await,
            None => self.peer.call_tool(params).instrument(span).await,
        };
        // A call may change the server's tool list (a tool that adds a tool), and the server's
        // list_changed for it need not arrive before the answer: over streamable HTTP it rides another
        // stream (the GET stream on 2025-11-25, `subscriptions/listen` on 2026-07-28), and a server may
        // not send one at all. So every answer marks the server dirty: the list the next model request
        // is built from is read after this answer, whatever the notifications' timing.
        // A call that finds the connection gone sets it too: the server is re-listed and, failing that,
        // reported unavailable (SPEC §3: a failed server never hides behind a stale cached list).
        self.dirty.store(true, Ordering::SeqCst);
        let result = result.map_err(|e| ToolError::Failed(format!("MCP server '{}': {e}", self.server)))?;
        let text = result_text(&result);
        if result.is_error == Some(true) {
            return Err(ToolError::Failed(text));
        }
        Ok(match result_parts(&result) {
            Some(parts) => crate::content::tool_content(parts),
            None => Value::String(text),
        })
    }
}
