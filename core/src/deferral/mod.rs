//! Deferral (SPEC §4): which tools ship their schemas from the first request and which wait in the
//! bounded catalog until the model loads them; `tool_search` and `tool_load`; the note a deferred tool
//! called without loading adds to its result. The rules are pure functions in [`catalog`] and
//! [`search`]; [`Tooling`] applies them to the agent's tools (host, built-in and MCP) before each model
//! request.

pub mod catalog;
pub mod search;
pub(crate) mod tools;
pub mod wire;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::agent::ToolListing;
use crate::model::ModelRequest;
use crate::permission::decision::{CallDecision, SessionFacts, ToolFacts, decide, needs_approval, status};
use crate::permission::{Filters, Level, Network, ToolStatus};
use crate::tools::{Tool, ToolRegistry, ToolSpec};
pub use catalog::{CatalogEntry, CatalogLimits};
pub use search::SearchIndex;
pub use tools::{TOOL_LOAD, TOOL_SEARCH, undocumented_note};

/// How a tool that could be deferred ships (install-wide, or per MCP server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Deferral {
    /// Listed in the catalog; the schema is sent once the model loads it. The default for MCP tools.
    #[default]
    Deferred,
    /// Declared from the first request.
    Eager,
    /// Not registered at all: not in the catalog, the request or the context gauge.
    Hidden,
}

impl std::str::FromStr for Deferral {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "deferred" => Ok(Deferral::Deferred),
            "eager" => Ok(Deferral::Eager),
            "hidden" => Ok(Deferral::Hidden),
            other => Err(format!("unknown deferral setting '{other}' (deferred, eager or hidden)")),
        }
    }
}

/// How a load reaches the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadStrategy {
    /// The local catalog, `tool_search` and `tool_load`; a loaded schema joins the tools array (the
    /// prompt-cache prefix is rewritten once).
    Append,
    /// Every schema from the first request: nothing is left deferred.
    Eager,
    /// The provider's own deferred loading where the model has it ([`Model::native_tool_search`]):
    /// every deferred tool ships whole with `defer_loading: true` beside the provider's search tool,
    /// with no catalog, `tool_search` or `tool_load`; the provider searches and loads. Elsewhere (Chat
    /// Completions, models without it) it is [`LoadStrategy::Append`]. The default.
    ///
    /// [`Model::native_tool_search`]: crate::model::Model::native_tool_search
    #[default]
    Native,
}

impl std::str::FromStr for LoadStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "append" => Ok(LoadStrategy::Append),
            "eager" => Ok(LoadStrategy::Eager),
            "native" => Ok(LoadStrategy::Native),
            other => Err(format!("unknown load strategy '{other}' (append, eager or native)")),
        }
    }
}

/// The agent's deferral settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeferralConfig {
    /// The install-wide setting: MCP servers without their own setting, and host tools declared
    /// deferrable, follow it.
    #[serde(default)]
    pub setting: Deferral,
    #[serde(default)]
    /// How deferred tools are loaded: natively by the provider, or by ambit's `tool_search`/`tool_load`.
    pub strategy: LoadStrategy,
    /// Host functions and built-ins that may be deferred (all others are eager).
    #[serde(default)]
    pub deferrable_tools: BTreeSet<String>,
}

/// How one tool ships once its setting is resolved; `None` from [`resolve`] means hidden.
pub fn resolve(setting: Deferral, eager_listed: bool) -> Option<bool> {
    match (eager_listed, setting) {
        (true, _) | (false, Deferral::Eager) => Some(false),
        (false, Deferral::Deferred) => Some(true),
        (false, Deferral::Hidden) => None,
    }
}

/// One tool of the run-time set.
#[derive(Clone)]
pub struct Entry {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// The catalog heading: the MCP server's name, or `host`.
    pub group: String,
    /// Whether its schema waits for a load.
    pub deferred: bool,
}

/// Tools a source (an MCP server) contributes, and those it cannot.
#[derive(Clone, Default)]
pub struct SourceListing {
    /// The tools it offers.
    pub entries: Vec<Entry>,
    /// Tools the deferral setting hides: not registered, only reported by the listing API.
    pub hidden: Vec<Entry>,
    /// Servers that failed, with the reason, and the names of the tools they exposed when they last
    /// answered (calls to those are answered with the reason; nothing of them is offered).
    pub unavailable: Vec<Unavailable>,
}

/// A source that does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// The source (an MCP server's name).
    pub group: String,
    /// Why it is unavailable.
    pub reason: String,
    /// The tools it exposed when it last answered.
    pub names: Vec<String>,
}

/// Where tools that change at run time come from (the MCP servers).
#[async_trait::async_trait]
pub trait ToolSource: Send + Sync {
    /// Re-lists what changed since the last call (connecting on the first); `true` when the listing
    /// may differ from the last one.
    async fn refresh(&self) -> bool;
    /// The current listing.
    fn listing(&self) -> SourceListing;
}

/// One snapshot of every tool the agent has, with the search index over them.
pub struct Toolbox {
    entries: Vec<Entry>,
    hidden: Vec<Entry>,
    /// The catalog section, rendered on first use.
    catalog: std::sync::OnceLock<Option<String>>,
    by_name: HashMap<String, usize>,
    index: SearchIndex,
    unavailable: Vec<Unavailable>,
    strategy: LoadStrategy,
}

impl Toolbox {
    /// Builds the snapshot; a name taken twice keeps its first tool.
    pub fn new(entries: Vec<Entry>, unavailable: Vec<Unavailable>, strategy: LoadStrategy) -> Toolbox {
        Toolbox::with_hidden(entries, Vec::new(), unavailable, strategy)
    }

    /// [`Toolbox::new`], with the tools the deferral setting hides (for the listing API only).
    pub fn with_hidden(
        entries: Vec<Entry>,
        hidden: Vec<Entry>,
        unavailable: Vec<Unavailable>,
        strategy: LoadStrategy,
    ) -> Toolbox {
        let mut by_name = HashMap::new();
        let mut kept = Vec::with_capacity(entries.len());
        for e in entries {
            let name = e.tool.spec().name.clone();
            if by_name.contains_key(&name) {
                tracing::warn!(tool = %name, "a second tool with this name is ignored");
                continue;
            }
            let mut e = e;
            if strategy == LoadStrategy::Eager {
                e.deferred = false;
            }
            by_name.insert(name, kept.len());
            kept.push(e);
        }
        let index = SearchIndex::new(
            kept.iter()
                .map(|e| search::Document { name: &e.tool.spec().name, description: &e.tool.spec().description }),
        );
        Toolbox { entries: kept, hidden, catalog: Default::default(), by_name, index, unavailable, strategy }
    }

    /// Every tool of the set, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The tool named `name`, if the set has it.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// The tools the deferral setting hides.
    pub fn hidden(&self) -> &[Entry] {
        &self.hidden
    }

    /// The sources that do not answer.
    pub fn unavailable(&self) -> &[Unavailable] {
        &self.unavailable
    }

    /// How deferred tools are loaded.
    pub fn strategy(&self) -> LoadStrategy {
        self.strategy
    }
}

/// The session's side, owned, as the deferral rules need it.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The session's level.
    pub level: Level,
    /// Whether an approval handler answers calls.
    pub approvals: bool,
    /// The blocks and level overrides.
    pub filters: Arc<Filters>,
    /// The session's network setting.
    pub network: Network,
}

impl Facts {
    /// The facts of a session holding `policy`.
    pub fn of(policy: &crate::permission::Policy) -> Facts {
        Facts {
            level: policy.level,
            approvals: policy.approvals.is_some(),
            filters: Arc::new(policy.filters.clone()),
            network: policy.network,
        }
    }

    fn session(&self) -> SessionFacts<'_> {
        SessionFacts { level: self.level, approvals: self.approvals, filters: &self.filters, network: self.network }
    }

    /// The listing API's line for a tool: the policy's status, then `hidden` or `deferred` for a tool
    /// the policy would offer.
    pub fn listing(&self, tool: &dyn Tool, shipping: Option<bool>) -> ToolListing {
        let policy = status(self.tool(tool), self.session());
        let status = match (policy, shipping) {
            (ToolStatus::Offered, None) => ToolStatus::Hidden,
            (ToolStatus::Offered, Some(true)) => ToolStatus::Deferred,
            (other, _) => other,
        };
        ToolListing {
            name: tool.spec().name.clone(),
            level: self.level_of(tool),
            declared_level: tool.level(),
            status,
            approval: needs_approval(self.tool(tool), self.session()),
            confinement: tool.confinement(),
        }
    }

    fn tool<'a>(&self, tool: &'a dyn Tool) -> ToolFacts<'a> {
        ToolFacts::of(tool)
    }

    /// Offered (a call runs, or goes to the approval handler).
    pub fn offered(&self, tool: &dyn Tool) -> bool {
        status(self.tool(tool), self.session()) == ToolStatus::Offered
    }

    /// Whether the policy blocks the tool.
    pub fn blocked(&self, tool: &dyn Tool) -> bool {
        self.filters.is_blocked(&tool.spec().name)
    }

    /// The tool's level after the policy's overrides.
    pub fn level_of(&self, tool: &dyn Tool) -> Level {
        self.filters.effective_level(&tool.spec().name, tool.level())
    }

    /// Whether a call would be allowed now, by the rule dispatch applies, in words.
    pub fn call_verdict(&self, tool: &dyn Tool) -> String {
        match decide(self.tool(tool), self.session()) {
            CallDecision::Run => "allowed".to_string(),
            CallDecision::Ask(crate::permission::ApprovalReason::AboveLevel) => {
                format!("needs approval (requires level {}, this session holds {})", self.level_of(tool), self.level)
            }
            CallDecision::Ask(crate::permission::ApprovalReason::RequiresApproval) => {
                "needs approval (every call of this tool)".to_string()
            }
            CallDecision::Refuse(reason) => format!("refused: {reason}"),
        }
    }
}

/// What one run has loaded and been told (kept in the run's state).
#[derive(Debug, Default)]
pub struct RunLoads {
    /// Loaded tools, in load order.
    pub loaded: Vec<String>,
    /// Tools whose undocumented-parameter note was already given in this run.
    pub noted: BTreeSet<String>,
}

impl RunLoads {
    /// Whether `name` was loaded in this run.
    pub fn is_loaded(&self, name: &str) -> bool {
        self.loaded.iter().any(|n| n == name)
    }

    /// Marks `name` loaded in this run.
    pub fn load(&mut self, name: &str) {
        if !self.is_loaded(name) {
            self.loaded.push(name.to_string());
        }
    }
}

/// The agent's tools at run time: the static registry, the MCP servers, the deferral settings and the
/// session's facts. Before each model request [`Tooling::prepare`] re-lists what changed and sets the
/// request's tools and the catalog.
pub struct Tooling {
    registry: ToolRegistry,
    config: DeferralConfig,
    source: Option<Arc<dyn ToolSource>>,
    facts: Facts,
    snapshot: RwLock<Arc<Toolbox>>,
    /// The provider searches and loads deferred tools itself (the native strategy on a model that
    /// has it).
    native: bool,
}

impl std::fmt::Debug for Tooling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tooling")
            .field("config", &self.config)
            .field("facts", &self.facts)
            .field("native", &self.native)
            .finish()
    }
}

impl Tooling {
    /// The run-time tool set of an agent: its registry, its deferral settings and its MCP sources.
    pub fn new(
        registry: ToolRegistry,
        config: DeferralConfig,
        source: Option<Arc<dyn ToolSource>>,
        facts: Facts,
    ) -> Tooling {
        let t = Tooling {
            registry,
            config,
            source,
            facts,
            snapshot: RwLock::new(Arc::new(Toolbox::new(Vec::new(), Vec::new(), LoadStrategy::Append))),
            native: false,
        };
        t.rebuild();
        t
    }

    /// Whether the model searches and loads deferred tools itself
    /// ([`crate::model::Model::native_tool_search`]); with the native strategy, it then does (without,
    /// the strategy works as `append`).
    pub fn with_native_search(mut self, supported: bool) -> Tooling {
        self.native = supported && self.config.strategy == LoadStrategy::Native;
        self
    }

    /// Whether deferred tools go to the provider's own search (no catalog, tool_search or tool_load).
    pub fn native(&self) -> bool {
        self.native
    }

    /// The registry's tools: those that ship, and those the setting hides.
    fn static_entries(&self) -> (Vec<Entry>, Vec<Entry>) {
        let mut entries = Vec::new();
        let mut hidden = Vec::new();
        for t in self.registry.iter() {
            let deferrable = self.config.deferrable_tools.contains(&t.spec().name);
            let shipping = if deferrable { resolve(self.config.setting, false) } else { Some(false) };
            match shipping {
                Some(deferred) => entries.push(Entry { tool: t.clone(), group: "host".to_string(), deferred }),
                None => hidden.push(Entry { tool: t.clone(), group: "host".to_string(), deferred: false }),
            }
        }
        (entries, hidden)
    }

    fn rebuild(&self) {
        let (mut entries, mut hidden) = self.static_entries();
        let mut unavailable = Vec::new();
        if let Some(src) = &self.source {
            let listing = src.listing();
            entries.extend(listing.entries);
            hidden.extend(listing.hidden);
            unavailable = listing.unavailable;
        }
        let toolbox = Arc::new(Toolbox::with_hidden(entries, hidden, unavailable, self.config.strategy));
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = toolbox;
    }

    /// The deferral settings (a sub-agent's tooling is made with its parent's).
    pub fn config(&self) -> &DeferralConfig {
        &self.config
    }

    /// The current snapshot.
    pub fn toolbox(&self) -> Arc<Toolbox> {
        self.snapshot.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Re-lists the sources that changed (connecting on the first call) and rebuilds the snapshot.
    pub async fn refresh(&self) {
        if let Some(src) = &self.source
            && src.refresh().await
        {
            self.rebuild();
        }
    }

    /// The listing API (SPEC §1, §4): every tool the agent knows, in registration order (the host's,
    /// then each MCP server's as last listed), with the policy's status, or `deferred` / `hidden` for
    /// a tool the policy offers; the tools the setting hides come after those that ship.
    pub fn listing(&self) -> Vec<ToolListing> {
        let toolbox = self.toolbox();
        let shipping = toolbox.entries.iter().map(|e| (e, Some(e.deferred)));
        let hidden = toolbox.hidden.iter().map(|e| (e, None));
        shipping.chain(hidden).map(|(e, s)| self.facts.listing(e.tool.as_ref(), s)).collect()
    }

    /// Whether anything offered is left deferred (then tool_search, tool_load and the catalog are in
    /// the request, or, native, the provider's search tool).
    pub fn any_deferred(&self, toolbox: &Toolbox) -> bool {
        toolbox.entries.iter().any(|e| e.deferred && self.facts.offered(e.tool.as_ref()))
    }

    /// The catalog section for this snapshot, or `None` when nothing offered is deferred.
    /// Rendered once per snapshot (the session's facts are fixed): the same registry, the same bytes.
    pub fn catalog(&self, toolbox: &Toolbox) -> Option<String> {
        toolbox.catalog.get_or_init(|| self.render_catalog(toolbox)).clone()
    }

    fn render_catalog(&self, toolbox: &Toolbox) -> Option<String> {
        // Native: the provider lists and searches the deferred tools; only unavailable servers remain.
        let items: Vec<catalog::CatalogItem<'_>> = toolbox
            .entries
            .iter()
            .filter(|e| !self.native && e.deferred && self.facts.offered(e.tool.as_ref()))
            .map(|e| catalog::CatalogItem {
                name: &e.tool.spec().name,
                group: &e.group,
                level: self.facts.level_of(e.tool.as_ref()),
                description: &e.tool.spec().description,
            })
            .collect();
        let mut text = catalog::render_items(&items, &CatalogLimits::default());
        if !toolbox.unavailable.is_empty() {
            let mut s = text.unwrap_or_default();
            s.push_str("\n## Unavailable tool servers\n");
            for u in &toolbox.unavailable {
                s.push_str(&format!("- {}: {}\n", u.group, u.reason));
            }
            text = Some(s);
        }
        text
    }

    /// The tools a request carries: the eager offered ones in order, then tool_search and tool_load
    /// when anything is deferred, then the loaded ones in load order. Native: the eager offered ones,
    /// then every deferred offered one whole, marked `defer_loading` (the wire adds its search tool).
    pub fn request_tools(&self, toolbox: &Toolbox, loads: &RunLoads) -> Vec<ToolSpec> {
        let mut out: Vec<ToolSpec> = toolbox
            .entries
            .iter()
            .filter(|e| !e.deferred && self.facts.offered(e.tool.as_ref()))
            .map(|e| e.tool.spec().clone())
            .collect();
        if self.native {
            out.extend(toolbox.entries.iter().filter(|e| e.deferred && self.facts.offered(e.tool.as_ref())).map(|e| {
                let mut spec = e.tool.spec().clone();
                spec.defer_loading = true;
                spec
            }));
            return out;
        }
        if self.any_deferred(toolbox) {
            out.push(tools::search_spec());
            out.push(tools::load_spec());
            for name in &loads.loaded {
                if let Some(e) = toolbox.get(name)
                    && e.deferred
                    && self.facts.offered(e.tool.as_ref())
                {
                    out.push(e.tool.spec().clone());
                }
            }
        }
        out
    }

    /// Sets the request's tools and puts the catalog after the instructions. Called before each model
    /// request.
    pub async fn prepare(
        &self,
        request: &mut ModelRequest,
        instructions: Option<&str>,
        loads: &std::sync::Mutex<RunLoads>,
    ) {
        self.refresh().await;
        let toolbox = self.toolbox();
        let loads = loads.lock().unwrap_or_else(|p| p.into_inner());
        request.tools = self.request_tools(&toolbox, &loads);
        request.instructions = match (instructions, self.catalog(&toolbox)) {
            (Some(i), Some(c)) => Some(format!("{i}\n\n{c}")),
            (None, Some(c)) => Some(c),
            (i, None) => i.map(str::to_string),
        };
    }

    /// Every name a request may carry, for the wire-name mapping.
    pub fn names(&self) -> Vec<String> {
        let toolbox = self.toolbox();
        let mut names: Vec<String> = toolbox.entries.iter().map(|e| e.tool.spec().name.clone()).collect();
        names.push(TOOL_SEARCH.to_string());
        names.push(TOOL_LOAD.to_string());
        names
    }

    /// The tool a call names: a registered one (a deferred one wrapped so its result carries the note
    /// on undocumented parameters), tool_search and tool_load while anything is deferred, or a tool of
    /// an unavailable server (which answers with the reason).
    pub fn lookup(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let toolbox = self.toolbox();
        if (name == TOOL_SEARCH || name == TOOL_LOAD) && toolbox.get(name).is_none() {
            if self.native || !self.any_deferred(&toolbox) {
                return None;
            }
            return Some(tools::meta_tool(name, toolbox, self.facts.clone()));
        }
        if let Some(e) = toolbox.get(name) {
            // Native: the provider loaded the whole schema before the model could call it.
            if e.deferred && !self.native {
                return Some(Arc::new(tools::DeferredCall::new(e.tool.clone())));
            }
            return Some(e.tool.clone());
        }
        toolbox.unavailable.iter().find(|u| u.names.iter().any(|n| n == name)).map(|u| tools::unavailable_tool(name, u))
    }
}

#[cfg(test)]
mod tests;
