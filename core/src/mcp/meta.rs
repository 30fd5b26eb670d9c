//! The seven MCP meta-tools (SPEC §3): browse the servers' resources and prompts. Five work on one
//! server (list resources, list resource templates, read a resource, list prompts, get a prompt) and
//! two across all of them (list everything, read a URI from whichever server has it). They are listed
//! under the `mcp` heading, deferred by default, following the install-wide deferral setting. Every
//! list is read whole, page by page, at the call: a resources/list_changed can never leave one stale.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use super::client::ServerConn;
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolSpec};

/// The tool listing a server's resources.
pub const RESOURCE_LIST: &str = "mcp_resource_list";
/// The tool listing a server's resource templates.
pub const RESOURCE_TEMPLATE_LIST: &str = "mcp_resource_template_list";
/// The tool reading one of a server's resources.
pub const RESOURCE_READ: &str = "mcp_resource_read";
/// The tool listing a server's prompts.
pub const PROMPT_LIST: &str = "mcp_prompt_list";
/// The tool getting one of a server's prompts.
pub const PROMPT_GET: &str = "mcp_prompt_get";
/// The tool listing the resources and prompts of every server.
pub const LIST_ALL: &str = "mcp_list_all";
/// The tool reading a resource from whichever server has it.
pub const READ_ANY: &str = "mcp_resource_read_any";

/// The names of the seven, in the order they are registered.
pub const NAMES: [&str; 7] =
    [RESOURCE_LIST, RESOURCE_TEMPLATE_LIST, RESOURCE_READ, PROMPT_LIST, PROMPT_GET, LIST_ALL, READ_ANY];

/// The catalog heading they are listed under.
pub const GROUP: &str = "mcp";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ResourceList,
    TemplateList,
    ResourceRead,
    PromptList,
    PromptGet,
    ListAll,
    ReadAny,
}

fn server_param() -> Value {
    json!({"type": "string", "description": "The MCP server's name (the <server> of mcp__<server>__<tool>)."})
}

fn spec(kind: Kind) -> ToolSpec {
    let (name, description, parameters) = match kind {
        Kind::ResourceList => (
            RESOURCE_LIST,
            "Lists the resources of one MCP server: uri, name, description and MIME type of each. Read one \
             with mcp_resource_read.",
            json!({"type": "object", "properties": {"server": server_param()}, "required": ["server"]}),
        ),
        Kind::TemplateList => (
            RESOURCE_TEMPLATE_LIST,
            "Lists the resource templates of one MCP server: URI templates (RFC 6570) whose filled-in URIs \
             mcp_resource_read reads.",
            json!({"type": "object", "properties": {"server": server_param()}, "required": ["server"]}),
        ),
        Kind::ResourceRead => (
            RESOURCE_READ,
            "Reads one resource of an MCP server by URI: its text contents (binary contents are described, \
             not shown).",
            json!({"type": "object", "properties": {
                "server": server_param(),
                "uri": {"type": "string", "description": "The resource's URI, from mcp_resource_list or a template."},
            }, "required": ["server", "uri"]}),
        ),
        Kind::PromptList => (
            PROMPT_LIST,
            "Lists the prompts of one MCP server, with their arguments. Get one with mcp_prompt_get.",
            json!({"type": "object", "properties": {"server": server_param()}, "required": ["server"]}),
        ),
        Kind::PromptGet => (
            PROMPT_GET,
            "Gets one prompt of an MCP server, filled in with its arguments: the messages it expands to.",
            json!({"type": "object", "properties": {
                "server": server_param(),
                "name": {"type": "string", "description": "The prompt's name, from mcp_prompt_list."},
                "arguments": {
                    "type": "object", "additionalProperties": {"type": "string"},
                    "description": "The prompt's arguments by name, as strings.",
                },
            }, "required": ["server", "name"]}),
        ),
        Kind::ListAll => (
            LIST_ALL,
            "Lists the resources, resource templates and prompts of every MCP server at once.",
            json!({"type": "object", "properties": {}}),
        ),
        Kind::ReadAny => (
            READ_ANY,
            "Reads a resource by URI from whichever MCP server lists it (or, failing that, the first that \
             can read it).",
            json!({"type": "object", "properties": {
                "uri": {"type": "string", "description": "The resource's URI."},
            }, "required": ["uri"]}),
        ),
    };
    ToolSpec::new(name, description, parameters).with_level(Level::Read)
}

/// The seven meta-tools' specs, for the walk over every built-in's schema.
#[cfg(test)]
pub(crate) fn specs() -> Vec<ToolSpec> {
    [
        Kind::ResourceList,
        Kind::TemplateList,
        Kind::ResourceRead,
        Kind::PromptList,
        Kind::PromptGet,
        Kind::ListAll,
        Kind::ReadAny,
    ]
    .into_iter()
    .map(spec)
    .collect()
}

/// The seven tools over these servers.
pub(super) fn tools(servers: Arc<Vec<Arc<ServerConn>>>) -> Vec<Arc<dyn Tool>> {
    [
        Kind::ResourceList,
        Kind::TemplateList,
        Kind::ResourceRead,
        Kind::PromptList,
        Kind::PromptGet,
        Kind::ListAll,
        Kind::ReadAny,
    ]
    .into_iter()
    .map(|kind| Arc::new(MetaTool { spec: spec(kind), kind, servers: servers.clone() }) as Arc<dyn Tool>)
    .collect()
}

struct MetaTool {
    spec: ToolSpec,
    kind: Kind,
    servers: Arc<Vec<Arc<ServerConn>>>,
}

fn text_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ToolError::Failed(format!("argument '{name}' is required")))
}

fn failed(server: &str, what: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(format!("MCP server '{server}': {what} failed: {e}"))
}

/// Drops what a listing carries for machines only (`_meta`, icons, empty fields).
fn clean(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.remove("_meta");
        m.remove("icons");
        m.retain(|_, x| !x.is_null());
    }
    v
}

fn listing<T: serde::Serialize>(items: &[T]) -> Value {
    Value::Array(items.iter().map(|i| clean(serde_json::to_value(i).unwrap_or(Value::Null))).collect())
}

/// A read result as text: text contents as they are, binary ones described. Public for the fuzzer
/// (core/fuzz).
pub fn contents_text(result: &rmcp::model::ReadResourceResult) -> String {
    let v = serde_json::to_value(&result.contents).unwrap_or(Value::Null);
    let mut parts = Vec::new();
    for c in v.as_array().into_iter().flatten() {
        let uri = c.get("uri").and_then(Value::as_str).unwrap_or_default();
        let mime = c.get("mimeType").and_then(Value::as_str).unwrap_or("unknown type");
        if let Some(t) = c.get("text").and_then(Value::as_str) {
            parts.push(format!("[resource {uri} ({mime})]\n{t}"));
        } else if let Some(b) = c.get("blob").and_then(Value::as_str) {
            parts.push(format!("[resource {uri} ({mime}): binary, {} bytes base64]", b.len()));
        } else {
            parts.push(format!("[resource {uri}]"));
        }
    }
    parts.join("\n")
}

/// A prompt as text: its description, then each message as `role: text`. Public for the fuzzer
/// (core/fuzz).
pub fn prompt_text(result: &rmcp::model::GetPromptResult) -> String {
    let v = serde_json::to_value(result).unwrap_or(Value::Null);
    let mut out = Vec::new();
    if let Some(d) = v.get("description").and_then(Value::as_str) {
        out.push(format!("description: {d}"));
    }
    for m in v.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        let c = m.get("content").unwrap_or(&Value::Null);
        let text = match c.get("type").and_then(Value::as_str) {
            Some("text") => c.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
            Some("resource") => {
                let r = c.get("resource").unwrap_or(&Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => format!("[resource {uri}]\n{t}"),
                    None => format!("[resource {uri} (binary)]"),
                }
            }
            _ => c.to_string(),
        };
        out.push(format!("{role}: {text}"));
    }
    out.join("\n")
}

impl MetaTool {
    fn server(&self, name: &str) -> Result<&Arc<ServerConn>, ToolError> {
        self.servers.iter().find(|s| s.config.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.servers.iter().map(|s| s.config.name.as_str()).collect();
            ToolError::Failed(format!("no MCP server is named '{name}' (servers: {})", known.join(", ")))
        })
    }

    async fn peer(&self, name: &str) -> Result<Peer<RoleClient>, ToolError> {
        self.server(name)?
            .peer()
            .await
            .map_err(|reason| ToolError::Failed(format!("MCP server '{name}' is unavailable: {reason}")))
    }

    async fn read(peer: &Peer<RoleClient>, server: &str, uri: &str) -> Result<String, ToolError> {
        let result = peer
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .map_err(|e| failed(server, "resources/read", e))?;
        Ok(contents_text(&result))
    }

    /// Everything one server offers; a method the server does not support is left out.
    async fn everything(&self, server: &ServerConn) -> Value {
        let name = server.config.name.as_str();
        let peer = match server.peer().await {
            Ok(p) => p,
            Err(reason) => return json!({"server": name, "unavailable": reason}),
        };
        let caps = peer.peer_info().map(|i| i.capabilities.clone());
        let has_resources = caps.as_ref().is_some_and(|c| c.resources.is_some());
        let has_prompts = caps.as_ref().is_some_and(|c| c.prompts.is_some());
        let mut out = serde_json::Map::new();
        out.insert("server".into(), json!(name));
        if has_resources {
            out.insert(
                "resources".into(),
                peer.list_all_resources().await.map(|r| listing(&r)).unwrap_or_else(|e| json!(format!("failed: {e}"))),
            );
            out.insert(
                "resource_templates".into(),
                peer.list_all_resource_templates()
                    .await
                    .map(|r| listing(&r))
                    .unwrap_or_else(|e| json!(format!("failed: {e}"))),
            );
        }
        if has_prompts {
            out.insert(
                "prompts".into(),
                peer.list_all_prompts().await.map(|r| listing(&r)).unwrap_or_else(|e| json!(format!("failed: {e}"))),
            );
        }
        Value::Object(out)
    }
}

#[async_trait]
impl Tool for MetaTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, args: Value) -> Result<Value, ToolError> {
        match self.kind {
            Kind::ResourceList => {
                let server = text_arg(&args, "server")?;
                let r = self
                    .peer(server)
                    .await?
                    .list_all_resources()
                    .await
                    .map_err(|e| failed(server, "resources/list", e))?;
                Ok(json!({"server": server, "resources": listing(&r)}))
            }
            Kind::TemplateList => {
                let server = text_arg(&args, "server")?;
                let r = self
                    .peer(server)
                    .await?
                    .list_all_resource_templates()
                    .await
                    .map_err(|e| failed(server, "resources/templates/list", e))?;
                Ok(json!({"server": server, "resource_templates": listing(&r)}))
            }
            Kind::ResourceRead => {
                let server = text_arg(&args, "server")?;
                let uri = text_arg(&args, "uri")?;
                Ok(Value::String(Self::read(&self.peer(server).await?, server, uri).await?))
            }
            Kind::PromptList => {
                let server = text_arg(&args, "server")?;
                let r =
                    self.peer(server).await?.list_all_prompts().await.map_err(|e| failed(server, "prompts/list", e))?;
                Ok(json!({"server": server, "prompts": listing(&r)}))
            }
            Kind::PromptGet => {
                let server = text_arg(&args, "server")?;
                let name = text_arg(&args, "name")?;
                let mut params = GetPromptRequestParams::new(name);
                match args.get("arguments") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(m)) => params.arguments = Some(m.clone()),
                    Some(other) => {
                        return Err(ToolError::Failed(format!("argument 'arguments' must be an object, got {other}")));
                    }
                }
                let r =
                    self.peer(server).await?.get_prompt(params).await.map_err(|e| failed(server, "prompts/get", e))?;
                Ok(Value::String(prompt_text(&r)))
            }
            Kind::ListAll => {
                let all = futures::future::join_all(self.servers.iter().map(|s| self.everything(s))).await;
                Ok(json!({"servers": all}))
            }
            Kind::ReadAny => {
                let uri = text_arg(&args, "uri")?;
                // The server that lists the URI first; then any that can read it.
                let mut errors = Vec::new();
                for s in self.servers.iter() {
                    let Ok(peer) = s.peer().await else { continue };
                    let listed = peer.list_all_resources().await.is_ok_and(|r| r.iter().any(|x| x.uri == uri));
                    if listed {
                        return Ok(Value::String(Self::read(&peer, &s.config.name, uri).await?));
                    }
                }
                for s in self.servers.iter() {
                    match s.peer().await {
                        Ok(peer) => match Self::read(&peer, &s.config.name, uri).await {
                            Ok(t) => return Ok(Value::String(t)),
                            Err(e) => errors.push(e.to_string()),
                        },
                        Err(reason) => errors.push(format!("MCP server '{}' is unavailable: {reason}", s.config.name)),
                    }
                }
                Err(ToolError::Failed(format!("no MCP server could read '{uri}': {}", errors.join("; "))))
            }
        }
    }
}
