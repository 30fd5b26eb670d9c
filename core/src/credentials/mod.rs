//! The credential broker (SPEC §15): secrets registered by alias and delivered to the tools that need
//! them, never to the model. A credential is a value, an environment variable read when it is needed,
//! or a host callback run on demand (a token refreshed each time). Delivery:
//! - a host tool that declares an alias ([`crate::ToolSpec::credentials`]) reads it from its context
//!   ([`crate::ToolContext::credential`]), never from its arguments;
//! - `shell_execute` gets the environment variables [`Credentials::shell_env`] names;
//! - `web_fetch` adds a header to requests for the hosts [`Credentials::web_fetch`] names;
//! - an MCP stdio server gets environment variables, an MCP HTTP server headers
//!   ([`crate::mcp::McpServer::credential_env`], [`crate::mcp::McpServer::credential_header`]).
//!
//! The broker is not a tool and nothing of it is in any request. Every value it has handed out (and
//! every value it knows beforehand) feeds the [`Redactor`], which the loop applies where outside text
//! enters it: each tool result and error text ([`crate::Agent`]'s dispatch) and each MCP server's
//! reason for being unavailable. So the conversation, its events, the session store and the run's
//! result never hold a value or its common encodings, only `[credential:alias]`.

mod redact;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use redact::Redactor;

/// The shortest value the broker takes: a shorter one would be replaced inside ordinary text.
pub const MIN_VALUE_LEN: usize = 8;

/// A host callback that produces a credential's value when a tool needs it (a token refreshed, read
/// from a vault). Implemented by Rust types and by each binding for its language's plain and async
/// functions. An `Err` fails the call that needed it, with the text as the reason.
#[async_trait]
pub trait CredentialSource: Send + Sync {
    /// The value of `alias`, produced now.
    async fn fetch(&self, alias: &str) -> Result<String, String>;
}

/// A credential source from a Rust closure.
pub struct FnSource<F>(pub F);

#[async_trait]
impl<F, Fut> CredentialSource for FnSource<F>
where
    F: Fn() -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<String, String>> + Send,
{
    async fn fetch(&self, _alias: &str) -> Result<String, String> {
        (self.0)().await
    }
}

/// Where a credential's value comes from.
#[derive(Clone)]
enum Source {
    Value(String),
    Env(String),
    Callback(Arc<dyn CredentialSource>),
}

impl Source {
    fn kind(&self) -> &'static str {
        match self {
            Source::Value(_) => "value",
            Source::Env(_) => "env",
            Source::Callback(_) => "callback",
        }
    }
}

/// `web_fetch` adds `header: <prefix><value>` to every request whose URL's host is `host` (exactly,
/// case-insensitively), redirects included: a redirect to another host goes without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebCredential {
    /// The host the header goes to.
    pub host: String,
    /// The credential whose value it carries.
    pub alias: String,
    /// Default `authorization`.
    #[serde(default = "default_header")]
    pub header: String,
    /// Written before the value; default `Bearer ` (with `authorization`), else nothing.
    #[serde(default)]
    pub prefix: Option<String>,
}

fn default_header() -> String {
    "authorization".into()
}

impl WebCredential {
    /// The header's value for `value`.
    pub fn header_value(&self, value: &str) -> String {
        let prefix = match &self.prefix {
            Some(p) => p.as_str(),
            None if self.header.eq_ignore_ascii_case("authorization") => "Bearer ",
            None => "",
        };
        format!("{prefix}{value}")
    }
}

/// One line of [`Credentials::listing`]: an alias, where its value comes from, and whether it is
/// available now (a value: yes; an environment variable: set; a callback: registered). Never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialListing {
    /// The alias.
    pub alias: String,
    /// `value`, `env` or `callback`.
    pub source: String,
    /// Whether a value is available now.
    pub present: bool,
}

/// The broker: aliases, their sources, the delivery rules, and every value handed out so far (for the
/// redactor). Cheap to clone: clones share the values seen.
#[derive(Clone, Default)]
pub struct Credentials {
    sources: BTreeMap<String, Source>,
    shell_env: BTreeMap<String, String>,
    web: Vec<WebCredential>,
    /// (value, alias) of every value known: registered ones, and each one a source produced.
    seen: Arc<Mutex<Seen>>,
    /// The first registration error, reported when the agent is built.
    problem: Option<String>,
    /// A test switch ([`crate::testing::without_redaction`]): the redactor does nothing.
    pub(crate) redaction_off: bool,
}

#[derive(Default)]
struct Seen {
    values: Vec<(String, String)>,
    redactor: Arc<Redactor>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("aliases", &self.sources.keys().collect::<Vec<_>>())
            .field("shell_env", &self.shell_env)
            .field("web_fetch", &self.web)
            .finish()
    }
}

fn check_alias(alias: &str) -> Result<(), String> {
    if alias.is_empty() || !alias.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Err(format!("credential alias '{alias}' must be non-empty ASCII letters, digits, '_', '-' or '.'"));
    }
    Ok(())
}

fn check_value(alias: &str, value: &str) -> Result<(), String> {
    if value.len() < MIN_VALUE_LEN {
        return Err(format!(
            "credential '{alias}': the value is shorter than {MIN_VALUE_LEN} bytes, too short to redact reliably"
        ));
    }
    Ok(())
}

impl Credentials {
    /// An empty broker.
    pub fn new() -> Credentials {
        Credentials::default()
    }

    fn add(mut self, alias: &str, source: Source) -> Self {
        let checked = check_alias(alias).and_then(|()| match &source {
            Source::Value(v) => check_value(alias, v),
            Source::Env(var) if var.is_empty() || var.contains('=') || var.contains('\0') => {
                Err(format!("credential '{alias}': '{var}' is not an environment variable name"))
            }
            _ => Ok(()),
        });
        if let Err(e) = checked {
            self.problem.get_or_insert(e);
            return self;
        }
        if self.sources.contains_key(alias) {
            self.problem.get_or_insert(format!("credential alias '{alias}' is registered twice"));
            return self;
        }
        if let Source::Value(v) = &source {
            self.remember(alias, v);
        }
        self.sources.insert(alias.to_string(), source);
        self
    }

    /// A credential with a fixed value (at least [`MIN_VALUE_LEN`] bytes).
    pub fn value(self, alias: &str, value: impl Into<String>) -> Self {
        self.add(alias, Source::Value(value.into()))
    }

    /// A credential read from the environment variable `var` each time it is needed.
    pub fn env(self, alias: &str, var: impl Into<String>) -> Self {
        self.add(alias, Source::Env(var.into()))
    }

    /// A credential the host produces on demand, each time a tool needs it.
    pub fn callback(self, alias: &str, source: impl CredentialSource + 'static) -> Self {
        self.add(alias, Source::Callback(Arc::new(source)))
    }

    /// [`Credentials::callback`] with a shared source.
    pub fn callback_arc(self, alias: &str, source: Arc<dyn CredentialSource>) -> Self {
        self.add(alias, Source::Callback(source))
    }

    /// `shell_execute` runs with the environment variable `var` set to the credential `alias`.
    pub fn shell_env(mut self, var: impl Into<String>, alias: impl Into<String>) -> Self {
        self.shell_env.insert(var.into(), alias.into());
        self
    }

    /// `web_fetch` adds the credential to requests for a host.
    pub fn web_fetch(mut self, rule: WebCredential) -> Self {
        self.web.push(rule);
        self
    }

    /// Checks what was registered: the first bad alias or value, and every alias a delivery rule names.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(p) = &self.problem {
            return Err(p.clone());
        }
        let named = self.shell_env.values().chain(self.web.iter().map(|w| &w.alias));
        for alias in named {
            self.require(alias)?;
        }
        for var in self.shell_env.keys() {
            if var.is_empty() || var.contains('=') || var.contains('\0') {
                return Err(format!("credentials: '{var}' is not an environment variable name"));
            }
        }
        Ok(())
    }

    /// An error naming `alias` when it is not registered.
    pub fn require(&self, alias: &str) -> Result<(), String> {
        if self.sources.contains_key(alias) {
            return Ok(());
        }
        let known: Vec<&str> = self.sources.keys().map(String::as_str).collect();
        Err(format!("credential '{alias}' is not registered (registered: {})", known.join(", ")))
    }

    /// The aliases, their sources and whether each is available now. Never a value.
    pub fn listing(&self) -> Vec<CredentialListing> {
        self.sources
            .iter()
            .map(|(alias, source)| CredentialListing {
                alias: alias.clone(),
                source: source.kind().to_string(),
                present: match source {
                    Source::Env(var) => std::env::var(var).is_ok_and(|v| !v.is_empty()),
                    _ => true,
                },
            })
            .collect()
    }

    fn remember(&self, alias: &str, value: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.values.iter().any(|(v, a)| v == value && a == alias) {
            return;
        }
        seen.values.push((value.to_string(), alias.to_string()));
        let redactor = Redactor::new(seen.values.iter().map(|(v, a)| (v.as_str(), a.as_str())));
        seen.redactor = Arc::new(redactor);
    }

    /// A value obtained elsewhere (an MCP server's OAuth token) to redact as `[credential:alias]`.
    pub(crate) fn remember_value(&self, alias: &str, value: &str) {
        if value.len() >= MIN_VALUE_LEN {
            self.remember(alias, value);
        }
    }

    /// The value of `alias` now: the fixed value, the environment variable, or the callback's answer.
    /// Every value produced is remembered for the redactor before it is handed out.
    pub async fn resolve(&self, alias: &str) -> Result<String, String> {
        self.require(alias)?;
        let source = self.sources.get(alias).cloned();
        let value = match source {
            Some(Source::Value(v)) => v,
            Some(Source::Env(var)) => match std::env::var(&var) {
                Ok(v) if !v.is_empty() => v,
                _ => return Err(format!("credential '{alias}': the environment variable {var} is not set")),
            },
            Some(Source::Callback(cb)) => {
                cb.fetch(alias).await.map_err(|e| format!("credential '{alias}': the host's callback failed: {e}"))?
            }
            None => return Err(format!("credential '{alias}' is not registered")),
        };
        check_value(alias, &value)?;
        self.remember(alias, &value);
        Ok(value)
    }

    /// The environment `shell_execute` runs with: each variable [`Credentials::shell_env`] names.
    pub async fn shell_environment(&self) -> Result<BTreeMap<String, String>, String> {
        let mut env = BTreeMap::new();
        for (var, alias) in &self.shell_env {
            env.insert(var.clone(), self.resolve(alias).await?);
        }
        Ok(env)
    }

    /// The environment variables `env` credentials are read from: removed from the environment of the
    /// processes the agent starts (the shell, MCP stdio servers), which get only what their rules name.
    pub fn source_variables(&self) -> Vec<String> {
        self.sources
            .values()
            .filter_map(|s| match s {
                Source::Env(var) => Some(var.clone()),
                _ => None,
            })
            .collect()
    }

    /// The headers `web_fetch` adds for a request to `host`.
    pub async fn web_headers(&self, host: &str) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        for rule in self.web.iter().filter(|w| w.host.eq_ignore_ascii_case(host)) {
            out.push((rule.header.clone(), rule.header_value(&self.resolve(&rule.alias).await?)));
        }
        Ok(out)
    }

    /// The redactor over every value known so far.
    pub fn redactor(&self) -> Arc<Redactor> {
        if self.redaction_off {
            return Arc::new(Redactor::default());
        }
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).redactor.clone()
    }

    /// `text` with every known value and its encodings replaced by `[credential:alias]`.
    pub fn redact(&self, text: &str) -> String {
        let r = self.redactor();
        if r.is_empty() { text.to_string() } else { r.redact(text) }
    }
}

/// The credentials as data, the form every binding passes (JSON): `credentials` maps each alias to
/// `{"value": text}`, `{"env": name}` or `{"callback": true}` (the binding hands the callables over
/// by alias); `shell_env` maps variable names to aliases; `web_fetch` lists [`WebCredential`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    #[serde(default)]
    /// Each alias and where its value comes from.
    pub credentials: BTreeMap<String, SourceConfig>,
    #[serde(default)]
    /// Environment variables of `shell_execute`, each the value of an alias.
    pub shell_env: BTreeMap<String, String>,
    #[serde(default)]
    /// Headers `web_fetch` adds per host.
    pub web_fetch: Vec<WebCredential>,
}

/// Where one credential comes from, as data. Its `Debug` never shows a value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// A fixed value.
    Value(String),
    /// The environment variable the value is read from, when needed.
    Env(String),
    /// Always `true`: the binding gives the callable.
    Callback(bool),
}

impl std::fmt::Debug for SourceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceConfig::Value(_) => f.write_str("Value(<redacted>)"),
            SourceConfig::Env(var) => f.debug_tuple("Env").field(var).finish(),
            SourceConfig::Callback(_) => f.write_str("Callback"),
        }
    }
}

impl CredentialsConfig {
    /// Reads the credentials from JSON; an unknown field is an error naming it.
    pub fn from_json(text: &str) -> Result<CredentialsConfig, crate::Error> {
        serde_json::from_str(text).map_err(|e| crate::Error::Config(format!("credentials: {e}")))
    }

    /// The broker, with `callbacks` by alias for the `callback` sources.
    pub fn into_credentials(
        self,
        mut callbacks: BTreeMap<String, Arc<dyn CredentialSource>>,
    ) -> Result<Credentials, crate::Error> {
        let mut c = Credentials::new();
        for (alias, source) in self.credentials {
            c = match source {
                SourceConfig::Value(v) => c.value(&alias, v),
                SourceConfig::Env(var) => c.env(&alias, var),
                SourceConfig::Callback(_) => match callbacks.remove(&alias) {
                    Some(cb) => c.callback_arc(&alias, cb),
                    None => {
                        return Err(crate::Error::Config(format!("credential '{alias}': no callback was given")));
                    }
                },
            };
        }
        if let Some(alias) = callbacks.keys().next() {
            return Err(crate::Error::Config(format!("credential '{alias}': a callback for an alias not declared")));
        }
        for (var, alias) in self.shell_env {
            c = c.shell_env(var, alias);
        }
        for rule in self.web_fetch {
            c = c.web_fetch(rule);
        }
        c.validate().map_err(crate::Error::Config)?;
        Ok(c)
    }
}
