//! Memory (SPEC §14): what an agent keeps between sessions (facts, preferences, lessons, standing
//! instructions), in a store that outlives every run, SQLite or PostgreSQL, migrated on open, searched
//! through ambit's own full-text index (`index`), the same on both.
//!
//! A store holds one namespace per agent (the host names the agent). A memory may carry a stable `key`
//! (remembering under a key that exists updates that memory in place) and a `subject`: the caller a
//! preference is about (seed 004's `record_org_preference` / `get_caller_context`).
//!
//! [`Memory`] is the host's handle; [`tools`] makes the agent's tools (`memory_remember`,
//! `memory_recall`, `memory_forget`, `memory_record_preference`, `memory_caller_context`), which an agent
//! gets only when memory is configured ([`MemoryConfig`]); [`rules`] holds the bounds, the query terms
//! and the per-turn block.
//!
//! ```no_run
//! use ambit::memory::{Memory, Recall, Remember};
//! # async fn demo() -> Result<(), ambit::memory::MemoryError> {
//! let memory = Memory::open("sqlite:///var/lib/app/memory.db").await?;
//! memory.remember("support-bot", Remember::new("Refunds over 500 EUR need a second approver").title("Refund limit")).await?;
//! let hits = memory.recall("support-bot", &Recall::query("who approves a large refund")).await?;
//! # Ok(()) }
//! ```

mod index;
pub mod rules;
mod store;
pub mod tools;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use crate::ledger::{Clock, ManualClock, SystemClock};
pub use rules::{MAX_RECALL, RenderLimits};

/// A memory call refused or failed. Each has a stable `code`, the same in every language.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryError {
    /// An argument out of bounds or malformed; `field` names it, the message gives the limit.
    #[error("invalid memory argument '{field}': {message}")]
    InvalidArgument {
        /// The argument that is wrong (`title`, `tags[2]`, `limit`, …).
        field: String,
        /// What is wrong with it, with the limit.
        message: String,
    },
    /// No memory with that id or key in the agent's namespace.
    #[error("no memory {0} for this agent")]
    NotFound(String),
    /// A write through read-only access (a sub-agent's grant).
    #[error("memory is read-only here: a sub-agent may recall its parent's memories, never write them")]
    ReadOnly,
    /// The store failed (unreachable, I/O, a migration that does not apply).
    #[error("memory store error: {0}")]
    Store(String),
}

impl MemoryError {
    /// A stable machine-readable code, the same in every language.
    pub fn code(&self) -> &'static str {
        match self {
            MemoryError::InvalidArgument { .. } => "memory_invalid_argument",
            MemoryError::NotFound(_) => "memory_not_found",
            MemoryError::ReadOnly => "memory_read_only",
            MemoryError::Store(_) => "memory_store",
        }
    }

    /// The argument a refusal names, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            MemoryError::InvalidArgument { field, .. } => Some(field),
            _ => None,
        }
    }

    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> MemoryError {
        MemoryError::InvalidArgument { field: field.to_string(), message: message.into() }
    }
}

impl From<sqlx::Error> for MemoryError {
    fn from(e: sqlx::Error) -> Self {
        MemoryError::Store(e.to_string())
    }
}

/// What a memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// Something true about the world the agent works in.
    #[default]
    Fact,
    /// How someone likes things done.
    Preference,
    /// What went wrong or right, to do better next time.
    Lesson,
    /// A standing instruction.
    Instruction,
}

impl MemoryKind {
    /// Every kind, in order.
    pub const ALL: [MemoryKind; 4] =
        [MemoryKind::Fact, MemoryKind::Preference, MemoryKind::Lesson, MemoryKind::Instruction];

    /// The kind as stored and sent (`fact`, `preference`, `lesson`, `instruction`).
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Fact => "fact",
            MemoryKind::Preference => "preference",
            MemoryKind::Lesson => "lesson",
            MemoryKind::Instruction => "instruction",
        }
    }

    /// The kind named `s`, or a refusal naming `field`.
    pub fn parse(field: &str, s: &str) -> Result<MemoryKind, MemoryError> {
        MemoryKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            MemoryError::invalid(field, format!("'{s}' is not one of fact, preference, lesson, instruction"))
        })
    }
}

/// One stored memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// The store's id, unique in the store, assigned in the order memories were first saved.
    pub id: i64,
    /// The agent whose namespace holds it.
    pub agent: String,
    /// The stable key it is saved under, if any.
    #[serde(default)]
    pub key: Option<String>,
    /// The caller a preference is about, if any.
    #[serde(default)]
    pub subject: Option<String>,
    /// What kind of memory it is.
    pub kind: MemoryKind,
    /// A short title (searched with weight 10).
    pub title: String,
    /// The memory itself (searched with weight 1).
    pub body: String,
    /// Tags, lower case (searched with weight 5, and filtered on).
    pub tags: Vec<String>,
    /// 1 (trivia) to 10 (essential).
    pub salience: u8,
    /// Pinned memories come first in the baseline.
    pub pinned: bool,
    /// The session that last wrote it, if it was written in one.
    #[serde(default)]
    pub source: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Milliseconds since the Unix epoch.
    pub updated_at: i64,
}

/// A memory to save, or the fields to change of the one saved under `key`. Fields left `None` keep
/// their stored values on an update and take the defaults on a create (kind `fact`, salience 5, not
/// pinned, no tags; a missing title is the body's first line, clipped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remember {
    #[serde(default)]
    /// A stable key: a second remember under it updates this memory in place.
    pub key: Option<String>,
    #[serde(default)]
    /// The caller a preference is about.
    pub subject: Option<String>,
    #[serde(default)]
    /// The kind (default `fact`).
    pub kind: Option<MemoryKind>,
    #[serde(default)]
    /// A short title (default: the body's first line, clipped).
    pub title: Option<String>,
    #[serde(default)]
    /// The memory itself (required to create one).
    pub body: Option<String>,
    #[serde(default)]
    /// Tags (replacing the stored ones on an update).
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    /// 1 (trivia) to 10 (essential); default 5.
    pub salience: Option<i64>,
    #[serde(default)]
    /// Whether it comes first in the baseline.
    pub pinned: Option<bool>,
    /// The session writing it (the tools fill it in).
    #[serde(default)]
    pub source: Option<String>,
}

impl Remember {
    /// A memory with this body; everything else by default.
    pub fn new(body: impl Into<String>) -> Self {
        Remember { body: Some(body.into()), ..Remember::default() }
    }
    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    /// Sets the stable key (a later remember under it updates in place).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    /// Sets the caller the memory is about.
    pub fn subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }
    /// Sets the kind.
    pub fn kind(mut self, kind: MemoryKind) -> Self {
        self.kind = Some(kind);
        self
    }
    /// Sets the tags.
    pub fn tags(mut self, tags: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tags = Some(tags.into_iter().map(Into::into).collect());
        self
    }
    /// Sets the salience (1 to 10).
    pub fn salience(mut self, salience: i64) -> Self {
        self.salience = Some(salience);
        self
    }
    /// Pins or unpins it.
    pub fn pinned(mut self, pinned: bool) -> Self {
        self.pinned = Some(pinned);
        self
    }
    /// Sets the session that writes it.
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }
}

/// A recall: with a query, ranked by relevance over title, body and tags; without, the baseline
/// (pinned first, then highest salience, then most recently updated). Filters narrow either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recall {
    #[serde(default)]
    /// The text to rank by (none: the baseline order).
    pub query: Option<String>,
    /// Only memories carrying every one of these tags.
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    /// Only memories of this kind.
    pub kind: Option<MemoryKind>,
    /// Only memories about one of these callers (empty: any memory).
    #[serde(default)]
    pub subjects: Vec<String>,
    /// At most this many (1 to [`MAX_RECALL`], default 10).
    #[serde(default = "default_limit")]
    pub limit: usize,
}

fn default_limit() -> usize {
    10
}

impl Default for Recall {
    fn default() -> Self {
        Recall { query: None, tags: Vec::new(), kind: None, subjects: Vec::new(), limit: default_limit() }
    }
}

impl Recall {
    /// The baseline: pinned, then highest salience.
    pub fn baseline() -> Self {
        Recall::default()
    }
    /// Ranked by relevance to `text`.
    pub fn query(text: impl Into<String>) -> Self {
        Recall { query: Some(text.into()), ..Recall::default() }
    }
    /// At most this many (1 to [`MAX_RECALL`]).
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
    /// Only memories of this kind.
    pub fn kind(mut self, kind: MemoryKind) -> Self {
        self.kind = Some(kind);
        self
    }
    /// Only memories carrying every one of these tags.
    pub fn tags(mut self, tags: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }
    /// Only memories about one of these callers.
    pub fn subjects(mut self, subjects: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.subjects = subjects.into_iter().map(Into::into).collect();
        self
    }
}

/// Which memory to forget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// The memory with this id.
    Id(i64),
    /// The memory saved under this key.
    Key(String),
}

/// What a remember did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    /// The memory as stored now.
    pub memory: MemoryRecord,
    /// `false` when a memory under the same key was updated in place.
    pub created: bool,
}

/// Memory read by a query, after validation: the search terms and the filters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Search {
    /// Normalised query terms (empty: the baseline order).
    pub terms: Vec<String>,
    /// Only memories carrying every one of these tags.
    pub tags: Vec<String>,
    /// Only memories of this kind.
    pub kind: Option<MemoryKind>,
    /// Only memories about one of these callers (empty: any).
    pub subjects: Vec<String>,
    /// Leave out memories about a caller (the per-turn baseline).
    pub no_subject: bool,
    /// At most this many.
    pub limit: usize,
}

/// A memory store. The SQL is shared by both stores; each dialect supplies what differs.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Saves a validated memory: creates it, or updates the one under its key in place.
    async fn save(&self, agent: &str, memory: &Remember, now: i64) -> Result<Saved, MemoryError>;
    /// Deletes one memory; whether it existed.
    async fn forget(&self, agent: &str, target: &Target) -> Result<bool, MemoryError>;
    /// Ranked by relevance when `search.terms` is not empty, else in baseline order.
    async fn search(&self, agent: &str, search: &Search) -> Result<Vec<MemoryRecord>, MemoryError>;
    /// Every memory of an agent (or of every agent), oldest first.
    async fn list(&self, agent: Option<&str>) -> Result<Vec<MemoryRecord>, MemoryError>;
}

/// Options of [`Memory::open_with`].
#[derive(Clone)]
pub struct MemoryOptions {
    /// Where `created_at` and `updated_at` come from.
    pub clock: Arc<dyn Clock>,
    /// Connections in the pool (default 4).
    pub max_connections: u32,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions { clock: Arc::new(SystemClock), max_connections: 4 }
    }
}

impl std::fmt::Debug for MemoryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryOptions").field("max_connections", &self.max_connections).finish_non_exhaustive()
    }
}

/// A memory store, open. Cheap to clone.
#[derive(Clone)]
pub struct Memory {
    store: Arc<dyn MemoryStore>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory").finish_non_exhaustive()
    }
}

impl Memory {
    /// Opens `sqlite://<path>` (created if missing) or `postgres://…`, applying the migrations.
    pub async fn open(url: &str) -> Result<Memory, MemoryError> {
        Self::open_with(url, MemoryOptions::default()).await
    }

    /// Opens the store with `options` (the clock, the pool's size); see [`Memory::open`].
    pub async fn open_with(url: &str, options: MemoryOptions) -> Result<Memory, MemoryError> {
        let now = options.clock.now_ms();
        let store: Arc<dyn MemoryStore> = if let Some(path) = url.strip_prefix("sqlite://") {
            Arc::new(store::SqliteMemories::open(path, &options, now).await?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Arc::new(store::PgMemories::open(url, &options, now).await?)
        } else {
            return Err(MemoryError::invalid(
                "url",
                format!("a memory URL starts with sqlite:// or postgres://, got '{url}'"),
            ));
        };
        Ok(Memory { store, clock: options.clock })
    }

    /// A memory over any store.
    pub fn with_store(store: Arc<dyn MemoryStore>, clock: Arc<dyn Clock>) -> Memory {
        Memory { store, clock }
    }

    /// Saves a memory in `agent`'s namespace, or updates the one under its key in place.
    pub async fn remember(&self, agent: &str, memory: Remember) -> Result<Saved, MemoryError> {
        rules::check_agent(agent)?;
        let memory = rules::validate_remember(memory)?;
        self.store.save(agent, &memory, self.clock.now_ms()).await
    }

    /// [`Memory::remember`] with the memory as JSON (what the bindings send); unknown fields are refused.
    pub async fn remember_json(&self, agent: &str, memory: &serde_json::Value) -> Result<Saved, MemoryError> {
        self.remember(agent, read_json(memory, "memory")?).await
    }

    /// Memories of `agent`: ranked by relevance to the query, or the baseline without one.
    pub async fn recall(&self, agent: &str, recall: &Recall) -> Result<Vec<MemoryRecord>, MemoryError> {
        rules::check_agent(agent)?;
        let search = rules::validate_recall(recall)?;
        if recall.query.is_some() && search.terms.is_empty() {
            // A query of stop words and punctuation alone matches nothing.
            return Ok(Vec::new());
        }
        self.store.search(agent, &search).await
    }

    /// [`Memory::recall`] with the recall as JSON; unknown fields are refused.
    pub async fn recall_json(&self, agent: &str, recall: &serde_json::Value) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.recall(agent, &read_json(recall, "recall")?).await
    }

    /// Deletes one memory of `agent` by id or key; whether it existed.
    pub async fn forget(&self, agent: &str, target: &Target) -> Result<bool, MemoryError> {
        rules::check_agent(agent)?;
        if let Target::Key(k) = target {
            rules::check_text("key", k, rules::MAX_KEY_BYTES)?;
        }
        self.store.forget(agent, target).await
    }

    /// Every memory of `agent`, oldest first.
    pub async fn list(&self, agent: &str) -> Result<Vec<MemoryRecord>, MemoryError> {
        rules::check_agent(agent)?;
        self.store.list(Some(agent)).await
    }

    /// Every memory of `agent` (or of every agent with `None`) as JSON: `{"version": 1, "memories": [...]}`,
    /// oldest first.
    pub async fn export_json(&self, agent: Option<&str>) -> Result<String, MemoryError> {
        if let Some(a) = agent {
            rules::check_agent(a)?;
        }
        let memories = self.store.list(agent).await?;
        serde_json::to_string(&serde_json::json!({"version": 1, "memories": memories}))
            .map_err(|e| MemoryError::Store(e.to_string()))
    }

    /// The per-turn block of `agent`'s baseline, or `None` when there is nothing to show.
    pub async fn render_baseline(&self, agent: &str, limits: &RenderLimits) -> Result<Option<String>, MemoryError> {
        rules::check_agent(agent)?;
        let search = Search { no_subject: true, limit: limits.entries + 1, ..Search::default() };
        let memories = self.store.search(agent, &search).await?;
        Ok(rules::render_baseline(&memories, limits))
    }
}

/// `value` (a JSON object of optional fields) read as `T`. A refusal names the field that does not fit,
/// found by reading each field alone, or `what` when the value is not an object: `salience` for a
/// salience of 2^80, `limit` for a limit of -1, `kind` for an unknown kind, never the whole memory.
fn read_json<T: serde::de::DeserializeOwned>(value: &serde_json::Value, what: &str) -> Result<T, MemoryError> {
    serde_json::from_value(value.clone()).map_err(|e| {
        let bad = value.as_object().and_then(|fields| {
            fields.iter().find(|(k, v)| {
                let alone = serde_json::Value::Object([((*k).clone(), (*v).clone())].into_iter().collect());
                serde_json::from_value::<T>(alone).is_err()
            })
        });
        match bad {
            Some((field, serde_json::Value::Number(n))) if n.as_i64().is_none() && n.as_u64().is_none() => {
                MemoryError::invalid(field, format!("{n} is not an integer within the 64-bit range"))
            }
            Some((field, serde_json::Value::Number(n))) if n.as_i64().is_some_and(|i| i < 0) => {
                MemoryError::invalid(field, format!("{n} is negative; a count is 1 or more"))
            }
            Some((field, _)) => MemoryError::invalid(field, e.to_string()),
            None => MemoryError::invalid(what, e.to_string()),
        }
    })
}

/// How an agent reaches a memory store: the store (open, or a URL opened at first use), the agent's
/// name in it, and what the per-turn block shows.
#[derive(Clone)]
pub struct MemoryConfig {
    source: Source,
    agent: String,
    /// What the per-turn block shows.
    pub render: RenderLimits,
}

#[derive(Clone)]
enum Source {
    Open(Memory),
    Url(String, Arc<tokio::sync::OnceCell<Memory>>),
}

impl std::fmt::Debug for MemoryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryConfig").field("agent", &self.agent).field("render", &self.render).finish()
    }
}

/// Memory settings as plain data (`AgentOptions::memory`): the store's URL, opened at first use, and
/// the agent's name in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    /// The store's URL (`sqlite://…` or `postgres://…`).
    pub url: String,
    /// The agent's name: its namespace in the store.
    pub agent: String,
    /// Entries in the per-turn block (default 10, at most 50).
    #[serde(default)]
    pub baseline_entries: Option<usize>,
}

impl MemoryConfig {
    /// An open store, and the agent's name in it.
    pub fn new(memory: Memory, agent: impl Into<String>) -> Result<MemoryConfig, MemoryError> {
        let agent = agent.into();
        rules::check_agent(&agent)?;
        Ok(MemoryConfig { source: Source::Open(memory), agent, render: RenderLimits::default() })
    }

    /// The settings' store, opened at the first run that needs it.
    pub fn from_settings(settings: &MemorySettings) -> Result<MemoryConfig, MemoryError> {
        rules::check_agent(&settings.agent)?;
        let url = &settings.url;
        if !(url.starts_with("sqlite://") || url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(MemoryError::invalid(
                "url",
                format!("a memory URL starts with sqlite:// or postgres://, got '{url}'"),
            ));
        }
        let mut render = RenderLimits::default();
        if let Some(n) = settings.baseline_entries {
            if n > MAX_RECALL {
                return Err(MemoryError::invalid(
                    "baseline_entries",
                    format!("{n} is above the limit of {MAX_RECALL}"),
                ));
            }
            render.entries = n;
        }
        Ok(MemoryConfig {
            source: Source::Url(url.clone(), Arc::new(tokio::sync::OnceCell::new())),
            agent: settings.agent.clone(),
            render,
        })
    }

    /// The agent's name in the store.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The store, opened now if it was given by URL.
    pub async fn memory(&self) -> Result<Memory, MemoryError> {
        match &self.source {
            Source::Open(m) => Ok(m.clone()),
            Source::Url(url, cell) => cell.get_or_try_init(|| Memory::open(url)).await.cloned(),
        }
    }
}

/// An agent's access to its memory: the configuration and whether it may write (a sub-agent never may).
#[derive(Debug, Clone)]
pub(crate) struct Access {
    pub config: MemoryConfig,
    pub writable: bool,
}

/// The per-turn block of an agent's baseline; a store that cannot be read is said so in its place.
pub(crate) async fn baseline_block(access: &Access) -> Option<String> {
    let rendered = match access.config.memory().await {
        Ok(memory) => memory.render_baseline(access.config.agent(), &access.config.render).await,
        Err(e) => Err(e),
    };
    match rendered {
        Ok(block) => block,
        Err(e) => Some(format!("{}\nThe memory store could not be read: {e}", rules::BASELINE_HEADING)),
    }
}

/// A sub-agent's memory: its parent's store read-only with a `read` grant, nothing without one. The
/// registry it is handed loses the parent's memory tools and gains the reading ones the grant holds.
pub(crate) fn narrowed(
    tools: crate::tools::ToolRegistry,
    parent: Option<&Arc<Access>>,
    grant: crate::permission::narrow::MemoryGrant,
) -> Result<(crate::tools::ToolRegistry, Option<Arc<Access>>), crate::Error> {
    let access = match (parent, grant) {
        (Some(p), crate::permission::narrow::MemoryGrant::Read) => {
            Some(Arc::new(Access { config: p.config.clone(), writable: false }))
        }
        _ => None,
    };
    let mut out = crate::tools::ToolRegistry::new();
    for t in tools.iter().filter(|t| !tools::NAMES.contains(&t.spec().name.as_str())) {
        out.register(t.clone())?;
    }
    for t in access.iter().flat_map(tools::tools) {
        out.register(t)?;
    }
    Ok((out, access))
}
