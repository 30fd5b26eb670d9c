//! Permissions in the Swift binding: levels, the policy, the Swift approval handler as an
//! [`ambit::ApprovalHandler`], the built-in tools by name, a host tool's declarations and the listing
//! API. It only translates between UniFFI types and the core's; every rule lives in the core.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::{CoreAgent, CoreError, HostToolError};

/// What a session may do, in order: `none < read < workspace < unrestricted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum Level {
    /// No tool at all: the agent can only answer with text.
    None,
    /// Reads anywhere in reach; the shell runs write-protected.
    Read,
    /// Writes under the workspace roots.
    Workspace,
    /// Everything; nothing is confined.
    Unrestricted,
}

impl From<Level> for ambit::Level {
    fn from(l: Level) -> Self {
        match l {
            Level::None => ambit::Level::None,
            Level::Read => ambit::Level::Read,
            Level::Workspace => ambit::Level::Workspace,
            Level::Unrestricted => ambit::Level::Unrestricted,
        }
    }
}

impl From<ambit::Level> for Level {
    fn from(l: ambit::Level) -> Self {
        match l {
            ambit::Level::None => Level::None,
            ambit::Level::Read => Level::Read,
            ambit::Level::Workspace => Level::Workspace,
            ambit::Level::Unrestricted => Level::Unrestricted,
        }
    }
}

/// What the shell and web_fetch may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum Network {
    /// No shell network, no web_fetch.
    None,
    /// Other machines only: loopback and this host's own addresses are refused.
    Remote,
    /// Anything.
    Unrestricted,
}

impl From<Network> for ambit::Network {
    fn from(n: Network) -> Self {
        match n {
            Network::None => ambit::Network::None,
            Network::Remote => ambit::Network::Remote,
            Network::Unrestricted => ambit::Network::Unrestricted,
        }
    }
}

impl From<ambit::Network> for Network {
    fn from(n: ambit::Network) -> Self {
        match n {
            ambit::Network::None => Network::None,
            ambit::Network::Remote => Network::Remote,
            ambit::Network::Unrestricted => Network::Unrestricted,
        }
    }
}

/// What the listing API says of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum ToolStatus {
    /// Sent to the model.
    Offered,
    /// Filtered out by the allow-list or the block list.
    Blocked,
    /// Requires more than the session holds, and approvals are off (or the session is at `none`).
    AboveLevel,
    /// Offered, but deferred: listed in the catalog, its schema sent once the model loads it.
    Deferred,
    /// Hidden by the deferral setting: not registered at all.
    Hidden,
    /// Needs the network, and the session's network setting is `none`: withheld.
    NoNetwork,
}

/// Why a call is put to the approval handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum ApprovalReason {
    /// The tool requires more than the session's level.
    AboveLevel,
    /// The tool is marked `requires_approval`: every call goes to a person.
    RequiresApproval,
}

/// One line of the listing API.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Record)]
pub struct ToolListing {
    pub name: String,
    /// The level the tool requires after overrides.
    pub level: Level,
    /// The level the tool declares.
    pub declared_level: Level,
    pub status: ToolStatus,
    /// Whether a call goes to the approval handler.
    pub approval: bool,
    /// What confines the tool's calls on this machine (the shell: the kernel's sandbox layers).
    #[uniffi(default = None)]
    pub confinement: Option<String>,
}

impl From<ambit::ToolListing> for ToolListing {
    fn from(t: ambit::ToolListing) -> Self {
        ToolListing {
            name: t.name,
            level: t.level.into(),
            declared_level: t.declared_level.into(),
            status: match t.status {
                ambit::ToolStatus::Offered => ToolStatus::Offered,
                ambit::ToolStatus::Blocked => ToolStatus::Blocked,
                ambit::ToolStatus::AboveLevel => ToolStatus::AboveLevel,
                ambit::ToolStatus::Deferred => ToolStatus::Deferred,
                ambit::ToolStatus::Hidden => ToolStatus::Hidden,
                ambit::ToolStatus::NoNetwork => ToolStatus::NoNetwork,
            },
            approval: t.approval,
            confinement: t.confinement,
        }
    }
}

/// What the approval handler is asked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Record)]
pub struct ApprovalRequest {
    /// The call id the model gave.
    pub call_id: String,
    /// The tool's whole name.
    pub tool: String,
    /// The arguments (already read by the argument rule), as JSON text.
    pub arguments_json: String,
    /// The level the tool requires (after overrides).
    pub tool_level: Level,
    pub session_level: Level,
    pub reason: ApprovalReason,
}

impl From<&ambit::ApprovalRequest> for ApprovalRequest {
    fn from(r: &ambit::ApprovalRequest) -> Self {
        ApprovalRequest {
            call_id: r.call_id.clone(),
            tool: r.tool.clone(),
            arguments_json: r.arguments.to_string(),
            tool_level: r.tool_level.into(),
            session_level: r.session_level.into(),
            reason: match r.reason {
                ambit::ApprovalReason::AboveLevel => ApprovalReason::AboveLevel,
                ambit::ApprovalReason::RequiresApproval => ApprovalReason::RequiresApproval,
            },
        }
    }
}

/// The handler's answer: approve, deny with a reason the model sees, or revise (replacement arguments,
/// as JSON text, read by the argument rule again), or later: in a session run the run then parks until
/// `Sessions.resume` brings the answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum ApprovalDecision {
    Approve,
    Deny { reason: String },
    Revise { arguments_json: String },
    Later,
}

impl TryFrom<ApprovalDecision> for ambit::ApprovalDecision {
    type Error = String;
    fn try_from(d: ApprovalDecision) -> Result<Self, String> {
        Ok(match d {
            ApprovalDecision::Approve => ambit::ApprovalDecision::Approve,
            ApprovalDecision::Deny { reason } => ambit::ApprovalDecision::Deny { reason },
            ApprovalDecision::Revise { arguments_json } => {
                let arguments: Value = serde_json::from_str(&arguments_json)
                    .map_err(|e| format!("the revised arguments are not JSON ({e}): {arguments_json}"))?;
                ambit::ApprovalDecision::Revise { arguments }
            }
            ApprovalDecision::Later => ambit::ApprovalDecision::Later,
        })
    }
}

/// An approval handler implemented in Swift. A thrown error denies the call with the error's message.
#[uniffi::export(foreign)]
#[async_trait]
pub trait HostApprovalHandler: Send + Sync {
    async fn decide(&self, request: ApprovalRequest) -> Result<ApprovalDecision, HostToolError>;
}

/// Adapts a Swift handler to the core's [`ambit::ApprovalHandler`]; every failure is an `Err`, which the
/// core turns into a denial naming it.
struct SwiftApproval(Arc<dyn HostApprovalHandler>);

#[async_trait]
impl ambit::ApprovalHandler for SwiftApproval {
    async fn decide(&self, request: &ambit::ApprovalRequest) -> Result<ambit::ApprovalDecision, String> {
        match self.0.decide(request.into()).await {
            Ok(decision) => decision.try_into(),
            Err(HostToolError::Failed { message }) => Err(message),
        }
    }
}

/// A session's policy: the core's `PolicyConfig` as a record, with the Swift approval handler. The
/// Swift facade's `Policy` fills every field.
#[derive(uniffi::Record)]
pub struct PolicySettings {
    pub level: Level,
    /// With a handler, calls above the level (and every call of a `requires_approval` tool) go to it.
    pub approvals: Option<Arc<dyn HostApprovalHandler>>,
    /// Only these tools exist for the agent; absent: every tool.
    pub allow_tools: Option<Vec<String>>,
    pub block_tools: Vec<String>,
    pub level_overrides: HashMap<String, Level>,
    /// absent: the process's current directory.
    pub working_directory: Option<String>,
    pub workspace_directories: Vec<String>,
    pub readable_directories: Vec<String>,
    pub confine_reads: bool,
    pub network: Network,
    /// Addresses or CIDR ranges of this machine or link-local (169.254.0.0/16, fe80::/10: cloud metadata
    /// services) that web_fetch may still reach under network `remote`.
    #[uniffi(default = [])]
    pub allow_local_addresses: Vec<String>,
}

impl PolicySettings {
    fn into_policy(self) -> Result<ambit::Policy, ambit::Error> {
        let config = ambit::PolicyConfig {
            level: Some(self.level.into()),
            allow_tools: self.allow_tools,
            block_tools: self.block_tools,
            level_overrides: self.level_overrides.into_iter().map(|(k, v)| (k, v.into())).collect(),
            working_directory: self.working_directory.map(Into::into),
            workspace_directories: self.workspace_directories.into_iter().map(Into::into).collect(),
            readable_directories: self.readable_directories.into_iter().map(Into::into).collect(),
            confine_reads: self.confine_reads,
            network: self.network.into(),
            allow_local_addresses: self.allow_local_addresses,
        };
        let handler = self.approvals.map(|h| Arc::new(SwiftApproval(h)) as Arc<dyn ambit::ApprovalHandler>);
        config.into_policy(handler)
    }
}

/// Reads a policy from JSON (the core's `PolicyConfig`, snake_case, the form every language shares);
/// an unknown field or value is a `CoreError::Config` naming it. The approval handler is not part of
/// the JSON: the result has none.
#[uniffi::export]
pub fn policy_from_json(json: String) -> Result<PolicySettings, CoreError> {
    crate::guard(|| policy_settings(&json))
}

fn policy_settings(json: &str) -> Result<PolicySettings, CoreError> {
    let c = ambit::PolicyConfig::from_json(json)?;
    Ok(PolicySettings {
        level: c.level.unwrap_or(ambit::Level::Unrestricted).into(),
        approvals: None,
        allow_tools: c.allow_tools,
        block_tools: c.block_tools,
        level_overrides: c.level_overrides.into_iter().map(|(k, v)| (k, v.into())).collect(),
        working_directory: c.working_directory.map(|p| p.to_string_lossy().into_owned()),
        workspace_directories: c.workspace_directories.iter().map(|p| p.to_string_lossy().into_owned()).collect(),
        readable_directories: c.readable_directories.iter().map(|p| p.to_string_lossy().into_owned()).collect(),
        confine_reads: c.confine_reads,
        network: c.network.into(),
        allow_local_addresses: c.allow_local_addresses,
    })
}

/// Reads a level by its name (`none`, `read`, `workspace`, `unrestricted`); anything else is a
/// `CoreError::Config` naming it.
#[uniffi::export]
pub fn parse_level(name: String) -> Result<Level, CoreError> {
    crate::guard(|| name.parse::<ambit::Level>().map(Into::into).map_err(|e| ambit::Error::Config(e).into()))
}

/// The names of the built-in tools, in a stable order.
#[uniffi::export]
pub fn builtin_names() -> Result<Vec<String>, CoreError> {
    crate::guard(|| Ok(ambit::tools::builtin::NAMES.iter().map(|n| n.to_string()).collect()))
}

/// A host tool's declarations on its spec: permission, blank arguments, idempotence.
pub(crate) fn declare(
    spec: ambit::ToolSpec,
    level: Option<Level>,
    requires_approval: bool,
    allow_blank: Vec<String>,
    idempotent: bool,
) -> ambit::ToolSpec {
    let spec = match level {
        Some(l) => spec.with_level(l.into()),
        None => spec,
    };
    spec.with_requires_approval(requires_approval).with_allow_blank(allow_blank).with_idempotent(idempotent)
}

/// Registers the built-ins named and applies the policy.
pub(crate) fn apply(
    mut builder: ambit::AgentBuilder,
    builtins: Vec<String>,
    policy: Option<PolicySettings>,
) -> Result<ambit::AgentBuilder, ambit::Error> {
    for name in builtins {
        let tool = ambit::tools::builtin::by_name(&name).ok_or_else(|| {
            ambit::Error::Config(format!(
                "there is no built-in tool named '{name}' (built-ins: {})",
                ambit::tools::builtin::NAMES.join(", ")
            ))
        })?;
        builder = builder.tool_arc(tool);
    }
    if let Some(p) = policy {
        builder = builder.policy(p.into_policy()?);
    }
    Ok(builder)
}

#[uniffi::export]
impl CoreAgent {
    /// Every registered tool with its effective level, declared level, status and whether its calls go
    /// to the approval handler, in registration order.
    pub fn list_tools(&self) -> Result<Vec<ToolListing>, CoreError> {
        crate::guard(|| Ok(self.inner.list_tools().into_iter().map(Into::into).collect()))
    }

    /// The same agent under another policy, keeping its sub-agents: a follow-up is re-admitted against
    /// this policy's reach. A bad policy is a `CoreError::Config`.
    pub fn with_policy(&self, policy: PolicySettings) -> Result<Arc<CoreAgent>, CoreError> {
        crate::guard(|| {
            let inner = self.inner.with_policy(policy.into_policy()?)?;
            Ok(Arc::new(CoreAgent { inner }))
        })
    }
}
