//! A session's policy: its level, approval handler, tool filters, scope and network.

use std::sync::Arc;

use super::network::{self, AddrRange};
use super::{ApprovalHandler, Filters, Level, Network, Scope};

/// What a session may do. Without one, an agent runs at `unrestricted` with approvals off, so a plain
/// agent behaves as in any other SDK; setting a level is what turns the checks on.
#[derive(Clone)]
pub struct Policy {
    /// The session's level (`none`, `read`, `workspace`, `unrestricted`).
    pub level: Level,
    /// Who answers calls that need approval (none: such calls are refused).
    pub approvals: Option<Arc<dyn ApprovalHandler>>,
    /// Tool allow and block lists and per-tool level overrides.
    pub filters: Filters,
    /// `None`: the process's current directory when the agent is built, reads not confined.
    pub scope: Option<Scope>,
    /// The network setting for the shell and `web_fetch`.
    pub network: Network,
    /// Local and link-local addresses (or ranges) reachable under network `remote` all the same.
    pub allow_local_addresses: Arc<[AddrRange]>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("level", &self.level)
            .field("approvals", &self.approvals.is_some())
            .field("filters", &self.filters)
            .field("scope", &self.scope)
            .field("network", &self.network)
            .field("allow_local_addresses", &self.allow_local_addresses)
            .finish()
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy::level(Level::Unrestricted)
    }
}

impl Policy {
    /// A policy at `level`, approvals off, no filters, the current directory, network unrestricted.
    pub fn level(level: Level) -> Policy {
        Policy {
            level,
            approvals: None,
            filters: Filters::default(),
            scope: None,
            network: Network::Unrestricted,
            allow_local_addresses: Arc::from([]),
        }
    }

    /// Puts calls above the level (and every call of a `requires_approval` tool) to `handler`.
    pub fn approvals(mut self, handler: impl ApprovalHandler + 'static) -> Self {
        self.approvals = Some(Arc::new(handler));
        self
    }

    /// [`Policy::approvals`] with a shared handler.
    pub fn approvals_arc(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approvals = Some(handler);
        self
    }

    /// Only these tools exist for the agent.
    pub fn allow_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.filters.allow = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// These tools never exist for the agent (a block wins over an allow).
    pub fn block_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.filters.block.extend(names.into_iter().map(Into::into));
        self
    }

    /// Replaces the level `tool` requires.
    pub fn override_level(mut self, tool: impl Into<String>, level: Level) -> Self {
        self.filters.overrides.insert(tool.into(), level);
        self
    }

    /// Sets the directories the session reaches.
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Sets the network setting.
    pub fn network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// Addresses or CIDR ranges of this machine or link-local (169.254.0.0/16, fe80::/10) that stay
    /// reachable by web_fetch under network `remote`; an entry that is not one is an error naming it.
    pub fn allow_local_addresses(
        mut self,
        entries: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, crate::Error> {
        let entries: Vec<String> = entries.into_iter().map(Into::into).collect();
        let ranges = network::parse_ranges(&entries).map_err(|e| crate::Error::Config(format!("policy: {e}")))?;
        self.allow_local_addresses = ranges.into();
        Ok(self)
    }
}

/// A policy as plain data, the form every binding passes (JSON): everything but the approval
/// handler, which is a callable of the host's language.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Default `unrestricted`.
    #[serde(default)]
    pub level: Option<Level>,
    #[serde(default)]
    /// Only these tools (none: every tool).
    pub allow_tools: Option<Vec<String>>,
    #[serde(default)]
    /// These tools refused.
    pub block_tools: Vec<String>,
    #[serde(default)]
    /// Per tool, the level a call requires instead of the tool's own.
    pub level_overrides: std::collections::BTreeMap<String, Level>,
    /// Default: the process's current directory.
    #[serde(default)]
    pub working_directory: Option<std::path::PathBuf>,
    #[serde(default)]
    /// Directories writable at `workspace` (the working directory is one).
    pub workspace_directories: Vec<std::path::PathBuf>,
    #[serde(default)]
    /// Directories readable besides the workspace.
    pub readable_directories: Vec<std::path::PathBuf>,
    #[serde(default)]
    /// Whether reads are confined to the workspace and readable directories (at `read` and `workspace`).
    pub confine_reads: bool,
    #[serde(default)]
    /// The network setting.
    pub network: Network,
    /// Local or link-local addresses (or CIDR ranges) reachable under network `remote` all the same.
    #[serde(default)]
    pub allow_local_addresses: Vec<String>,
}

impl PolicyConfig {
    /// Reads a policy from JSON; an unknown field or value is an error naming it.
    pub fn from_json(text: &str) -> Result<PolicyConfig, crate::Error> {
        serde_json::from_str(text).map_err(|e| crate::Error::Config(format!("policy: {e}")))
    }

    /// The policy, with `approvals` as its handler. Directories must exist.
    pub fn into_policy(self, approvals: Option<Arc<dyn ApprovalHandler>>) -> Result<Policy, crate::Error> {
        if self.allow_tools.as_ref().is_some_and(Vec::is_empty) {
            return Err(crate::Error::Config(
                "policy: allow_tools is empty, which would allow nothing; leave it out to allow every tool".into(),
            ));
        }
        let scoped = self.working_directory.is_some()
            || !self.workspace_directories.is_empty()
            || !self.readable_directories.is_empty()
            || self.confine_reads;
        let scope = if scoped {
            let wd = match self.working_directory {
                Some(d) => d,
                None => std::env::current_dir()
                    .map_err(|e| crate::Error::Config(format!("policy: the current directory: {e}")))?,
            };
            Some(
                Scope::new(wd, self.workspace_directories, self.readable_directories, self.confine_reads)
                    .map_err(|e| crate::Error::Config(format!("policy: {e}")))?,
            )
        } else {
            None
        };
        let allow_local_addresses = network::parse_ranges(&self.allow_local_addresses)
            .map_err(|e| crate::Error::Config(format!("policy: {e}")))?;
        Ok(Policy {
            level: self.level.unwrap_or(Level::Unrestricted),
            approvals,
            filters: super::Filters {
                allow: self.allow_tools.map(|a| a.into_iter().collect()),
                block: self.block_tools.into_iter().collect(),
                overrides: self.level_overrides,
            },
            scope,
            network: self.network,
            allow_local_addresses: allow_local_addresses.into(),
        })
    }
}
