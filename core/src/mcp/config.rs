//! How an MCP server is configured.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::deferral::Deferral;
use crate::permission::Level;

/// How to reach the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum McpTransport {
    /// A child process speaking on its stdin and stdout.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        #[serde(default)]
        cwd: Option<String>,
    },
    /// Streamable HTTP at this URL.
    Http { url: String },
}

/// Which protocol revision to speak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpProtocol {
    /// 2025-11-25, with `initialize` (rmcp's `LATEST_WITH_INITIALIZE`): what every server in use speaks.
    #[default]
    Initialize,
    /// 2026-07-28, stateless: `server/discover`, notifications through `subscriptions/listen`.
    Stateless,
    /// Probe with `server/discover` and fall back to `initialize` when the server is older.
    Auto,
}

/// One MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// The `<server>` of `mcp__<server>__<tool>`.
    pub name: String,
    pub transport: McpTransport,
    #[serde(default)]
    pub protocol: McpProtocol,
    /// Whether the server's annotations are believed (`readOnlyHint: true` gives `read`).
    #[serde(default)]
    pub trusted: bool,
    /// The level each tool requires, by the server's tool name; wins over annotations.
    #[serde(default)]
    pub levels: BTreeMap<String, Level>,
    /// This server's deferral setting; `None` follows the install-wide one.
    #[serde(default)]
    pub deferral: Option<Deferral>,
    /// Tools (the server's names) that ship eager under every setting.
    #[serde(default)]
    pub eager_load_tools: BTreeSet<String>,
}

impl McpServer {
    /// A server run as a child process: the command and its arguments.
    pub fn stdio(name: impl Into<String>, command: impl IntoIterator<Item = impl Into<String>>) -> McpServer {
        let mut parts = command.into_iter().map(Into::into);
        let command = parts.next().unwrap_or_default();
        McpServer::new(name, McpTransport::Stdio { command, args: parts.collect(), env: BTreeMap::new(), cwd: None })
    }

    /// A server reached over streamable HTTP.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> McpServer {
        McpServer::new(name, McpTransport::Http { url: url.into() })
    }

    pub fn new(name: impl Into<String>, transport: McpTransport) -> McpServer {
        McpServer {
            name: name.into(),
            transport,
            protocol: McpProtocol::default(),
            trusted: false,
            levels: BTreeMap::new(),
            deferral: None,
            eager_load_tools: BTreeSet::new(),
        }
    }

    pub fn protocol(mut self, protocol: McpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    pub fn trusted(mut self, yes: bool) -> Self {
        self.trusted = yes;
        self
    }

    /// The level `tool` (the server's name for it) requires.
    pub fn level(mut self, tool: impl Into<String>, level: Level) -> Self {
        self.levels.insert(tool.into(), level);
        self
    }

    pub fn deferral(mut self, setting: Deferral) -> Self {
        self.deferral = Some(setting);
        self
    }

    pub fn eager_load_tools(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.eager_load_tools.extend(tools.into_iter().map(Into::into));
        self
    }

    /// An environment variable for a stdio server.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio { env, .. } = &mut self.transport {
            env.insert(key.into(), value.into());
        }
        self
    }

    /// Checks the name: it becomes part of every tool name.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(format!("MCP server name '{}' must be non-empty ASCII letters, digits, '_' or '-'", self.name));
        }
        Ok(())
    }
}
