//! The loop's hooks into deferral and MCP (SPEC §3–4): the builder settings, the per-request tools and
//! catalog, and the lookup of a called tool. The rules live in `crate::deferral` and `crate::mcp`.

use std::sync::Arc;

use super::run_state::RunState;
use super::{Agent, AgentBuilder, gate};
use serde::{Deserialize, Serialize};

use crate::deferral::{DeferralConfig, Facts, ToolSource, Tooling};
use crate::error::Error;
use crate::mcp::{McpHub, McpServer};
use crate::model::{Model, ModelRequest};
use crate::tools::{Tool, ToolRegistry};

impl AgentBuilder {
    /// The deferral settings: the install-wide setting, the load strategy, and the host tools that may
    /// be deferred.
    pub fn deferral(mut self, config: DeferralConfig) -> Self {
        self.deferral = config;
        self
    }

    /// Adds an MCP server. It is connected before the first model request of the first run.
    pub fn mcp(mut self, server: McpServer) -> Self {
        self.mcp.push(server);
        self
    }

    /// Applies the MCP servers and deferral settings of `options` (the bindings' plain-data form).
    pub fn tooling(mut self, options: ToolingOptions) -> Self {
        self.mcp.extend(options.mcp_servers);
        if let Some(d) = options.deferral {
            self.deferral = d;
        }
        self
    }
}

/// MCP servers and deferral as plain data, for the bindings: `{"mcp_servers": [McpServer…],
/// "deferral": DeferralConfig}`, every field optional, unknown fields refused by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolingOptions {
    #[serde(default)]
    /// The MCP servers the agent connects to.
    pub mcp_servers: Vec<McpServer>,
    #[serde(default)]
    /// How large tool catalogs are deferred.
    pub deferral: Option<DeferralConfig>,
}

impl ToolingOptions {
    /// Reads the JSON form; a bad field is a configuration error naming it.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let options: ToolingOptions =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("MCP and deferral settings: {e}")))?;
        for s in &options.mcp_servers {
            s.validate().map_err(Error::Config)?;
        }
        Ok(options)
    }
}

/// Makes the run-time tool set; with MCP servers, the model is wrapped so names that change at run
/// time still reach the wire cut to fit.
pub(super) fn build(
    tools: &ToolRegistry,
    session: &gate::Session,
    deferral: DeferralConfig,
    servers: Vec<McpServer>,
    model: Arc<dyn Model>,
) -> (Arc<Tooling>, Arc<dyn Model>) {
    let facts = Facts::of(&session.policy);
    let source: Option<Arc<dyn ToolSource>> = (!servers.is_empty()).then(|| {
        Arc::new(McpHub::with_network(
            servers,
            deferral.setting,
            session.credentials.clone(),
            session.policy.network,
            &session.policy.allow_local_addresses,
        )) as Arc<dyn ToolSource>
    });
    let dynamic = source.is_some();
    let native = model.native_tool_search();
    let tooling = Arc::new(Tooling::new(tools.clone(), deferral, source, facts).with_native_search(native));
    let model = if dynamic { crate::deferral::wire::wrap(model, tooling.clone()) } else { model };
    (tooling, model)
}

impl Agent {
    /// Before each model request: re-list MCP servers that changed, then set the request's tools (eager,
    /// tool_search and tool_load while anything is deferred, the loaded ones) and the catalog.
    pub(super) async fn prepare_request(&self, request: &mut ModelRequest, state: &RunState) {
        let memory = match &self.inner.memory {
            // Boxed: the run's future, which nests sub-agents' runs, stays the size it was.
            Some(access) => Box::pin(crate::memory::baseline_block(access)).await,
            None => None,
        };
        let skills = match &self.inner.skills {
            Some(access) => Box::pin(crate::skills::index_block(access, self.inner.session.scope.clone())).await,
            None => None,
        };
        // The instructions, then the skills index, then the memory baseline, each a bounded block.
        let blocks: Vec<&str> =
            [self.inner.instructions.as_deref(), skills.as_deref(), memory.as_deref()].into_iter().flatten().collect();
        let instructions = (!blocks.is_empty()).then(|| blocks.join("\n\n"));
        self.inner.tooling.prepare(request, instructions.as_deref(), &state.deferral).await;
    }

    /// What a request of a new run carries besides the conversation, as the loop builds it: the
    /// instructions with the catalog, and the tools (the MCP servers' included, deferred and hidden ones
    /// left out, the loop's own parameters added). The context gauge counts this (SPEC §4).
    pub(crate) async fn request_overhead(&self) -> (Option<String>, Vec<crate::tools::ToolSpec>) {
        let mut request = ModelRequest::default();
        let loads = std::sync::Mutex::new(crate::deferral::RunLoads::default());
        self.inner.tooling.prepare(&mut request, self.inner.instructions.as_deref(), &loads).await;
        self.add_loop_params(&mut request.tools);
        if let Some(o) = self.inner.output.as_ref().filter(|_| !self.inner.model.native_structured_output()) {
            // The typed answer's tool rides on every request of a wire without native structured output.
            request.tools.push(o.final_answer_tool());
        }
        (request.instructions, request.tools)
    }

    /// The tool a call names: registered, MCP, or tool_search / tool_load.
    pub(super) fn lookup_tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.inner.tooling.lookup(name)
    }

    /// The run-time tool set (deferral, MCP).
    pub fn tooling(&self) -> &Arc<Tooling> {
        &self.inner.tooling
    }

    /// Connects the MCP servers not yet connected and re-lists those that changed, as a run does
    /// before each model request; [`Agent::list_tools`] then shows their tools.
    pub async fn refresh_tools(&self) {
        self.inner.tooling.refresh().await;
    }
}
