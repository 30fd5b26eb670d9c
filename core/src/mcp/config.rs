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
        /// The program to run.
        command: String,
        #[serde(default)]
        /// Its arguments.
        args: Vec<String>,
        #[serde(default)]
        /// Extra environment variables (the server's credentials are added to them).
        env: BTreeMap<String, String>,
        #[serde(default)]
        /// The working directory (default: the agent's).
        cwd: Option<String>,
    },
    /// Streamable HTTP at this URL.
    Http {
        /// The server's URL.
        url: String,
    },
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
    /// How to reach it.
    pub transport: McpTransport,
    #[serde(default)]
    /// The MCP protocol revision to speak (default: the newest both sides know).
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
    /// HTTP only: headers sent with every request, as given (their values never appear in an error).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// HTTP only: headers whose value is a credential, by alias (crate::credentials), sent as is.
    #[serde(default)]
    pub credential_headers: BTreeMap<String, String>,
    /// HTTP only: a credential sent as `Authorization: Bearer <value>`.
    #[serde(default)]
    pub bearer: Option<String>,
    /// Stdio only: environment variables whose value is a credential, by alias.
    #[serde(default)]
    pub credential_env: BTreeMap<String, String>,
    /// HTTP only: OAuth 2.1 (the MCP authorization spec) for a server that answers 401.
    #[serde(default)]
    pub oauth: Option<super::McpOAuth>,
    /// The host's handler for the server's elicitation requests (declined when unset).
    #[serde(skip)]
    pub on_elicit: Option<super::oauth::Hook<dyn super::Elicit>>,
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

    /// A server named `name` reached by `transport`, every setting at its default.
    pub fn new(name: impl Into<String>, transport: McpTransport) -> McpServer {
        McpServer {
            name: name.into(),
            transport,
            protocol: McpProtocol::default(),
            trusted: false,
            levels: BTreeMap::new(),
            deferral: None,
            eager_load_tools: BTreeSet::new(),
            headers: BTreeMap::new(),
            credential_headers: BTreeMap::new(),
            bearer: None,
            credential_env: BTreeMap::new(),
            oauth: None,
            on_elicit: None,
        }
    }

    /// OAuth 2.1 for an HTTP server.
    pub fn oauth(mut self, oauth: super::McpOAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// The handler for the server's elicitation requests.
    pub fn on_elicit(mut self, handler: impl super::Elicit + 'static) -> Self {
        self.on_elicit = Some(super::oauth::Hook(std::sync::Arc::new(handler)));
        self
    }

    /// [`McpServer::on_elicit`] with a shared handler.
    pub fn on_elicit_arc(mut self, handler: std::sync::Arc<dyn super::Elicit>) -> Self {
        self.on_elicit = Some(super::oauth::Hook(handler));
        self
    }

    /// A header sent with every request to an HTTP server.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// A header of an HTTP server whose value is the credential `alias`.
    pub fn credential_header(mut self, name: impl Into<String>, alias: impl Into<String>) -> Self {
        self.credential_headers.insert(name.into(), alias.into());
        self
    }

    /// The credential `alias` as an HTTP server's bearer token.
    pub fn bearer(mut self, alias: impl Into<String>) -> Self {
        self.bearer = Some(alias.into());
        self
    }

    /// An environment variable of a stdio server whose value is the credential `alias`.
    pub fn credential_env(mut self, var: impl Into<String>, alias: impl Into<String>) -> Self {
        self.credential_env.insert(var.into(), alias.into());
        self
    }

    /// Every credential alias the server's configuration names.
    pub fn credential_aliases(&self) -> Vec<String> {
        self.credential_headers
            .values()
            .chain(self.credential_env.values())
            .chain(self.bearer.iter())
            .chain(self.oauth.iter().flat_map(|o| o.client_secret.iter()))
            .cloned()
            .collect()
    }

    /// Sets the protocol revision.
    pub fn protocol(mut self, protocol: McpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Whether the server's annotations are believed (`readOnlyHint: true` gives level `read`).
    pub fn trusted(mut self, yes: bool) -> Self {
        self.trusted = yes;
        self
    }

    /// The level `tool` (the server's name for it) requires.
    pub fn level(mut self, tool: impl Into<String>, level: Level) -> Self {
        self.levels.insert(tool.into(), level);
        self
    }

    /// Sets the server's deferral setting (overriding the install-wide one).
    pub fn deferral(mut self, setting: Deferral) -> Self {
        self.deferral = Some(setting);
        self
    }

    /// Tools of the server always shipped with their schemas, never deferred.
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
        let http = matches!(self.transport, McpTransport::Http { .. });
        if !http && (!self.headers.is_empty() || !self.credential_headers.is_empty() || self.bearer.is_some()) {
            return Err(format!("MCP server '{}': headers and bearer are for an HTTP server, not stdio", self.name));
        }
        if let Some(oauth) = &self.oauth {
            if !http {
                return Err(format!("MCP server '{}': oauth is for an HTTP server, not stdio", self.name));
            }
            if self.bearer.is_some() {
                return Err(format!("MCP server '{}': bearer and oauth both set the Authorization header", self.name));
            }
            oauth.validate(&self.name)?;
            // Tokens travel to this URL: https only (plain http to a loopback address, for tests and
            // local servers, as OAuth's own endpoints).
            if let McpTransport::Http { url } = &self.transport {
                let parsed = url::Url::parse(url)
                    .map_err(|e| format!("MCP server '{}': url '{url}' is not a URL: {e}", self.name))?;
                super::oauth::check_scheme(&parsed).map_err(|e| format!("MCP server '{}': url: {e}", self.name))?;
            }
        }
        if http && !self.credential_env.is_empty() {
            return Err(format!("MCP server '{}': credential_env is for a stdio server, not HTTP", self.name));
        }
        for name in self.headers.keys().chain(self.credential_headers.keys()) {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("MCP server '{}': '{name}' is not a header name", self.name));
            }
        }
        Ok(())
    }
}
