//! Profiles and named agents (issue #21).
//!
//! A **profile** is a named model (with its settings) an agent may run a sub-agent on: `agent_spawn`
//! gains `profile`, whose schema lists the configured names; the name is kept in the spawn's terms, so
//! every follow-up (also after a restart, from the child session's record) runs on the same model. A
//! profile changes the model only: the narrowing rules never read it.
//!
//! A **named agent** is an agent the host built (its own instructions, tools, model and policy),
//! registered on another agent by name with a description of when and how to use it. The caller sees
//! them through `agent_list_named` and hands work over with `agent_delegate {agent, prompt}`; the callee
//! runs inside the caller's reach at that moment (level, scope and network are the intersection,
//! [`crate::permission::reach::intersect`]) and reports back like a sub-agent: one text report headed by
//! its name and the reach it held. With background calls on, `background: true` makes the delegation a
//! background task like any other call.
//!
//! Why a tool of its own rather than `agent_spawn` with `agent: name`: a spawn's terms (tool lists,
//! `instructions: inherit`, `memory`, `max_depth`, `profile`) describe a narrowed copy of the caller and
//! mean nothing for an agent with its own tools and instructions, and a spawn's follow-up machinery
//! replays them against the caller's configuration. A separate tool keeps `agent_spawn` unchanged, and
//! exists exactly when named agents are configured (sub-agents on or not).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Agent, AgentBuilder, Inner};
use crate::error::{Error, ToolError};
use crate::model::Model;
use crate::permission::reach::{self, Reach};
use crate::permission::{ApprovalDecision, ApprovalHandler, ApprovalRequest, Filters, Level, Policy};
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The tool that lists the named agents.
pub const LIST_TOOL: &str = "agent_list_named";
/// The tool that hands a task to a named agent.
pub const DELEGATE_TOOL: &str = "agent_delegate";

/// An agent another agent may delegate to, with the host's description of when and how to use it.
#[derive(Debug, Clone)]
pub struct NamedAgent {
    agent: Agent,
    description: String,
}

impl NamedAgent {
    /// `agent`, registered with a description of when and how to use it (the caller's listing shows it).
    pub fn new(agent: Agent, description: impl Into<String>) -> NamedAgent {
        NamedAgent { agent, description: description.into() }
    }

    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// When and how to use it.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl AgentBuilder {
    /// A profile sub-agents may be spawned on: `agent_spawn`'s `profile` lists it by name, and a
    /// sub-agent spawned on it runs on `model` (with the settings the model was made with) on every
    /// follow-up. Names are letters, digits, `_` and `-`, at most 64, each given once.
    pub fn profile(mut self, name: impl Into<String>, model: Arc<dyn Model>) -> Self {
        self.profiles.push((name.into(), model));
        self
    }

    /// An agent this one may delegate to by `name` (`agent_list_named`, `agent_delegate`). Names follow
    /// the profiles' rule; the description must not be blank.
    pub fn named_agent(mut self, name: impl Into<String>, agent: NamedAgent) -> Self {
        self.named_agents.push((name.into(), agent));
        self
    }
}

/// A profile's or named agent's name: letters, digits, `_` and `-`, 1 to 64 of them. The error names
/// the field (`profiles.<name>`, `named_agents.<name>`).
fn check_name(field: &str, name: &str) -> Result<(), Error> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!("{field}: '{name}' is not a valid name (1 to 64 letters, digits, '_' or '-')")))
    }
}

/// The configured profiles by name, each checked.
pub(crate) fn profiles(given: Vec<(String, Arc<dyn Model>)>) -> Result<BTreeMap<String, Arc<dyn Model>>, Error> {
    let mut out = BTreeMap::new();
    for (name, model) in given {
        check_name("profiles", &name)?;
        if out.insert(name.clone(), model).is_some() {
            return Err(Error::Config(format!("profiles.{name}: the profile is given twice")));
        }
    }
    Ok(out)
}

/// The model of the profile `name`, or the error the model sees: the name and the configured ones.
pub(super) fn profile_model(agent: &Inner, name: &str) -> Result<Arc<dyn Model>, ToolError> {
    agent.profiles.get(name).cloned().ok_or_else(|| {
        let known: Vec<&str> = agent.profiles.keys().map(String::as_str).collect();
        let listed = if known.is_empty() {
            "this agent has no profiles".to_string()
        } else {
            format!("the configured profiles are: {}", known.join(", "))
        };
        ToolError::Failed(format!("unknown profile '{name}': {listed}"))
    })
}

/// The two named-agent tools, or none when no named agent is configured.
pub(crate) fn tools(given: Vec<(String, NamedAgent)>) -> Result<Vec<Arc<dyn Tool>>, Error> {
    if given.is_empty() {
        return Ok(Vec::new());
    }
    let mut named = BTreeMap::new();
    for (name, agent) in given {
        check_name("named_agents", &name)?;
        if agent.description.trim().is_empty() {
            return Err(Error::Config(format!(
                "named_agents.{name}.description: say when and how to use the agent; it must not be blank"
            )));
        }
        if named.insert(name.clone(), agent).is_some() {
            return Err(Error::Config(format!("named_agents.{name}: the agent is given twice")));
        }
    }
    let named = Arc::new(named);
    let names: Vec<String> = named.keys().cloned().collect();
    Ok(vec![
        Arc::new(ListTool { spec: list_spec(), named: named.clone() }),
        Arc::new(DelegateTool { spec: delegate_spec(&names), named }),
    ])
}

fn list_spec() -> ToolSpec {
    ToolSpec::new(
        LIST_TOOL,
        "The named agents you can hand work to with agent_delegate, one per line: `- <name>: <when and how to \
         use it>`.",
        json!({"type": "object", "properties": {}}),
    )
    .with_level(Level::Read)
}

fn delegate_spec(names: &[String]) -> ToolSpec {
    ToolSpec::new(
        DELEGATE_TOOL,
        "Hand a task to one of your named agents (agent_list_named says when and how to use each). It runs with \
         its own instructions, tools and model, inside your reach (the level, directories and network you both \
         hold), and returns one text report headed by its name and the reach it held.",
        json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": names, "description": "The named agent."},
                "prompt": {"type": "string", "description": "The task, complete: it starts with a clean slate."}
            },
            "required": ["agent", "prompt"]
        }),
    )
    .with_level(Level::Read)
}

struct ListTool {
    spec: ToolSpec,
    named: Arc<BTreeMap<String, NamedAgent>>,
}

#[async_trait]
impl Tool for ListTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        let lines: Vec<String> =
            self.named.iter().map(|(name, a)| format!("- {name}: {}", a.description.trim())).collect();
        Ok(Value::String(lines.join("\n")))
    }
}

struct DelegateTool {
    spec: ToolSpec,
    named: Arc<BTreeMap<String, NamedAgent>>,
}

fn string_arg(args: &Value, key: &str) -> Result<String, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(ToolError::Failed(format!("'{key}' is required: a non-empty string"))),
    }
}

/// The caller's side of a delegation beyond its reach: its approval handler and its level overrides,
/// set around the delegate tool's call by the gate (agent/gate.rs).
#[derive(Clone)]
pub(crate) struct CallerGate {
    approvals: Option<Arc<dyn ApprovalHandler>>,
    filters: Filters,
}

tokio::task_local! {
    static CALLER: CallerGate;
}

/// Runs `fut` (a delegate tool's call) with the caller's approval handler and overrides at hand.
pub(crate) async fn as_caller<F: std::future::Future>(policy: &Policy, fut: F) -> F::Output {
    let gate = CallerGate { approvals: policy.approvals.clone(), filters: policy.filters.clone() };
    CALLER.scope(gate, fut).await
}

/// While delegated, every approval the callee needs is the caller's to give: the callee's own handler
/// (when it has one) is asked first and may only narrow (a denial stands; a revision is what the
/// caller is then asked about); the caller's answer decides.
struct ThroughCaller {
    own: Option<Arc<dyn ApprovalHandler>>,
    caller: Arc<dyn ApprovalHandler>,
}

#[async_trait]
impl ApprovalHandler for ThroughCaller {
    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalDecision, String> {
        let mut request = request.clone();
        let mut revised = None;
        if let Some(own) = &self.own {
            match own.decide(&request).await? {
                ApprovalDecision::Approve => {}
                ApprovalDecision::Revise { arguments } => {
                    request.arguments = arguments.clone();
                    revised = Some(arguments);
                }
                other => return Ok(other),
            }
        }
        Ok(match (self.caller.decide(&request).await?, revised) {
            (ApprovalDecision::Approve, Some(arguments)) => ApprovalDecision::Revise { arguments },
            (answer, _) => answer,
        })
    }
}

/// The level overrides a callee runs with for a caller: for every tool either overrides, the higher of
/// the two effective levels, so a callee's override never lets a tool run (or run unasked) below what
/// the caller requires of it. A tool whose declared level the callee does not know (an MCP tool not
/// listed yet) is taken as declared `unrestricted`.
fn met_overrides(callee: &Agent, own: &Filters, caller: &Filters) -> BTreeMap<String, Level> {
    let declared = |name: &str| -> Level {
        if let Some(t) = callee.inner.tools.get(name) {
            return t.level();
        }
        let toolbox = callee.inner.tooling.toolbox();
        toolbox
            .entries()
            .iter()
            .chain(toolbox.hidden())
            .find(|e| e.tool.spec().name == name)
            .map_or(Level::Unrestricted, |e| e.tool.level())
    };
    own.overrides
        .keys()
        .chain(caller.overrides.keys())
        .map(|name| {
            let d = declared(name);
            (name.clone(), own.effective_level(name, d).max(caller.effective_level(name, d)))
        })
        .collect()
}

/// The reach an agent's own policy gives it.
pub(crate) fn own_reach(agent: &Agent) -> Reach {
    let session = &agent.inner.session;
    Reach { level: session.policy.level, scope: (*session.scope).clone(), network: session.policy.network }
}

/// The callee as it runs for a caller of reach `caller`: its own configuration under a policy whose
/// level, scope and network are the intersection of both reaches, whose local addresses are those both
/// allow, whose approvals go through the caller's handler (none when the caller has none: a call that
/// needs one is refused, as the caller's would be), and whose level overrides are met with the
/// caller's ([`met_overrides`]). Its tools, MCP servers and credentials stay its own: the caller's
/// credentials never reach it, and it uses only those the host registered on it.
pub(crate) fn for_caller(
    callee: &Agent,
    caller: &Reach,
    caller_local: &[crate::permission::network::AddrRange],
) -> Result<(Agent, Reach), Error> {
    let effective = reach::intersect(caller, &own_reach(callee));
    let own = &callee.inner.session.policy;
    let gate = CALLER.try_with(Clone::clone).unwrap_or(CallerGate { approvals: None, filters: Filters::default() });
    let approvals = gate
        .approvals
        .map(|caller| Arc::new(ThroughCaller { own: own.approvals.clone(), caller }) as Arc<dyn ApprovalHandler>);
    let filters = Filters {
        allow: own.filters.allow.clone(),
        block: own.filters.block.clone(),
        overrides: met_overrides(callee, &own.filters, &gate.filters),
    };
    let policy = Policy {
        level: effective.level,
        approvals,
        filters,
        scope: Some(effective.scope.clone()),
        network: effective.network,
        allow_local_addresses: own.allow_local_addresses.iter().filter(|a| caller_local.contains(a)).cloned().collect(),
    };
    // Its sub-agents are those this delegation spawns: a child of an earlier, wider run of the callee
    // is neither listed, followed up nor steered from here.
    Ok((callee.with_policy_in(policy, true)?, effective))
}

#[async_trait]
impl Tool for DelegateTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Err(ToolError::Failed(format!("{DELEGATE_TOOL} runs only inside an agent's loop")))
    }

    async fn call_in(&self, arguments: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let name = string_arg(&arguments, "agent")?;
        let prompt = string_arg(&arguments, "prompt")?;
        let Some(named) = self.named.get(&name) else {
            let known: Vec<&str> = self.named.keys().map(String::as_str).collect();
            return Err(ToolError::Failed(format!(
                "unknown named agent '{name}': the named agents are: {}",
                known.join(", ")
            )));
        };
        // The caller's reach is the session this call runs in: a sub-agent's, when a sub-agent delegates.
        let caller = Reach { level: ctx.level, scope: (*ctx.scope).clone(), network: ctx.network };
        let (agent, effective) = for_caller(&named.agent, &caller, &ctx.allow_local_addresses)
            .map_err(|e| ToolError::Failed(format!("named agent '{name}' could not start: {e}")))?;
        let result = super::subagent::run_delegated(&name, agent, prompt)
            .await
            .map_err(|e| ToolError::Failed(format!("named agent '{name}' failed: {e}")))?;
        Ok(Value::String(format!("{}\n{}", header(&name, &effective), result.output)))
    }
}

/// The lines a delegation's report opens with, in the words of a sub-agent's.
fn header(name: &str, r: &Reach) -> String {
    let grant = crate::permission::narrow::Grant {
        level: r.level,
        scope: r.scope.clone(),
        network: r.network,
        tools: Default::default(),
        depth_left: 0,
        depth: 0,
        memory: Default::default(),
        instructions: None,
    };
    crate::permission::narrow::header(name, &grant)
}
