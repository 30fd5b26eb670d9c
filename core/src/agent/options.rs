//! The loop's settings as plain data, for the bindings: one JSON object instead of one argument per
//! setting, so a new setting reaches every language the same way.

use serde::{Deserialize, Serialize};

use super::{AgentBuilder, Budget};
use crate::error::Error;
use crate::model::PriceTable;

/// Loop settings; absent fields keep the builder's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentOptions {
    #[serde(default)]
    /// The most model requests in a run (default 10).
    pub max_turns: Option<u32>,
    #[serde(default)]
    /// The most tool calls run at once (default 8).
    pub max_concurrency: Option<usize>,
    #[serde(default)]
    /// A hard token or cost budget for the run.
    pub budget: Option<Budget>,
    #[serde(default)]
    /// Prices per model, for costs and a cost budget.
    pub prices: Option<PriceTable>,
    /// The checklist tools and gate (SPEC §6).
    #[serde(default)]
    pub checklist: Option<bool>,
    /// How many nudges about open items before the run ends anyway (default 3).
    #[serde(default)]
    pub checklist_nudge_cap: Option<u32>,
    /// Background calls (SPEC §5).
    #[serde(default)]
    pub background: Option<bool>,
    /// How long a background task may stay silent before it is failed as dead, in seconds (default 300).
    #[serde(default)]
    pub heartbeat_secs: Option<f64>,
    /// The scratchpad parameter and tools (SPEC §5).
    #[serde(default)]
    pub scratchpad: Option<bool>,
    /// The model takes images: the `image_render` tool.
    #[serde(default)]
    pub vision: Option<bool>,
    /// MCP servers (SPEC §3), added to those of the builder.
    #[serde(default)]
    pub mcp_servers: Option<Vec<crate::mcp::McpServer>>,
    /// Deferral settings (SPEC §4).
    #[serde(default)]
    pub deferral: Option<crate::deferral::DeferralConfig>,
    /// The agent tools and their depth (SPEC §7).
    #[serde(default)]
    pub subagents: Option<super::subagent::SubagentConfig>,
    /// A memory store by URL and the agent's name in it (SPEC §14).
    #[serde(default)]
    pub memory: Option<crate::memory::MemorySettings>,
    /// The final answer's type: a name, a JSON Schema for an object, and the retries
    /// ([`super::output::OutputType`]).
    #[serde(default)]
    pub output: Option<super::output::OutputType>,
    /// Skills directories, and whether the agent manages them (SPEC §14).
    #[serde(default)]
    pub skills: Option<crate::skills::SkillsConfig>,
    /// A knowledge directory (SPEC §14).
    #[serde(default)]
    pub knowledge: Option<crate::knowledge::KnowledgeConfig>,
    /// The credential broker as data (crate::credentials): a binding hands the callbacks over by
    /// alias ([`AgentBuilder::credential_callback`]).
    #[serde(default)]
    pub credentials: Option<crate::credentials::CredentialsConfig>,
}

/// A host callback of an MCP server, as a binding hands it over: the OAuth consent step, the OAuth token
/// store, or the elicitation handler.
pub enum McpCallback {
    /// The OAuth consent step.
    Authorize(std::sync::Arc<dyn crate::mcp::Authorize>),
    /// The OAuth token store.
    TokenStore(std::sync::Arc<dyn crate::mcp::TokenStore>),
    /// The elicitation handler.
    Elicit(std::sync::Arc<dyn crate::mcp::Elicit>),
}

impl McpCallback {
    /// Attaches the callback to the server named `server` among `servers`; `kind` names it in errors.
    pub fn attach<'a>(
        self,
        mut servers: impl Iterator<Item = &'a mut crate::mcp::McpServer>,
        server: &str,
        kind: &str,
    ) -> Result<(), Error> {
        let s = servers
            .find(|s| s.name == server)
            .ok_or_else(|| Error::Config(format!("no MCP server named '{server}' for its {kind} callback")))?;
        let oauth = || Error::Config(format!("MCP server '{server}': a {kind} callback without oauth"));
        match self {
            McpCallback::Authorize(f) => s.oauth.as_mut().ok_or_else(oauth)?.on_authorize = Some(crate::mcp::Hook(f)),
            McpCallback::TokenStore(f) => s.oauth.as_mut().ok_or_else(oauth)?.token_store = Some(crate::mcp::Hook(f)),
            McpCallback::Elicit(f) => s.on_elicit = Some(crate::mcp::Hook(f)),
        }
        Ok(())
    }
}

impl AgentOptions {
    /// Attaches a host callback to the MCP server named `server` (a binding's callbacks arrive apart from
    /// the settings' JSON); `kind` (`authorize`, `token_store` or `elicit`) names it in errors.
    pub fn attach_mcp_callback(&mut self, server: &str, kind: &str, callback: McpCallback) -> Result<(), Error> {
        callback.attach(self.mcp_servers.iter_mut().flatten(), server, kind)
    }

    /// Reads the JSON form, refusing unknown fields by name.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let options: AgentOptions =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("agent options: {e}")))?;
        for s in options.mcp_servers.iter().flatten() {
            s.validate().map_err(Error::Config)?;
        }
        if let Some(m) = &options.memory {
            crate::memory::MemoryConfig::from_settings(m).map_err(|e| Error::Config(e.to_string()))?;
        }
        if let Some(s) = &options.skills {
            s.validate().map_err(Error::Config)?;
        }
        if let Some(k) = &options.knowledge {
            k.validate().map_err(Error::Config)?;
        }
        Ok(options)
    }
}

impl AgentBuilder {
    /// Applies every setting `options` holds.
    pub fn options(mut self, options: AgentOptions) -> Self {
        if let Some(c) = options.credentials {
            self.credentials_config = Some(c);
        }
        if let Some(n) = options.max_turns {
            self = self.max_turns(n);
        }
        if let Some(n) = options.max_concurrency {
            self = self.max_concurrency(n);
        }
        if let Some(b) = options.budget {
            self = self.budget(b);
        }
        if let Some(p) = options.prices {
            self = self.prices(p);
        }
        if let Some(on) = options.checklist {
            self = self.checklist(on);
        }
        if let Some(n) = options.checklist_nudge_cap {
            self = self.checklist_nudge_cap(n);
        }
        if let Some(on) = options.background {
            self = self.background(on);
        }
        if let Some(s) = options.heartbeat_secs {
            // A bad number becomes a zero window, which `build` refuses by name.
            let window = std::time::Duration::try_from_secs_f64(s).unwrap_or(std::time::Duration::ZERO);
            self = self.heartbeat(window);
        }
        if let Some(on) = options.scratchpad {
            self = self.scratchpad(on);
        }
        if let Some(on) = options.vision {
            self = self.vision(on);
        }
        if let Some(m) = options.memory {
            self.memory = Some(crate::memory::MemoryConfig::from_settings(&m));
        }
        if let Some(s) = options.skills {
            self = self.skills(s);
        }
        if let Some(k) = options.knowledge {
            self = self.knowledge(k);
        }
        if let Some(s) = options.subagents {
            self = self.subagents(s);
        }
        if let Some(o) = options.output {
            self = self.output(o);
        }
        self = self.tooling(super::ToolingOptions {
            mcp_servers: options.mcp_servers.unwrap_or_default(),
            deferral: options.deferral,
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_refused() {
        let o = AgentOptions::from_json(r#"{"max_concurrency": 2, "budget": {"max_tokens": 10}}"#).unwrap();
        assert_eq!(o.budget.unwrap().max_tokens, Some(10));
        let e = AgentOptions::from_json(r#"{"max_concurency": 2}"#).unwrap_err();
        assert!(e.to_string().contains("max_concurency"), "{e}");
    }
}
