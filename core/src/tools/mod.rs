//! Tools: the [`Tool`] trait every tool implements (host functions from every language included),
//! the registry that holds them in one namespace, and [`tool_fn`] for Rust closures.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, ToolError};
use crate::permission::{Level, Network, Scope, WriteReach};

pub mod args;
pub mod builtin;
pub mod wire_name;

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name as the model calls it (wire-safe: letters, digits, `_`, `-`; at most 64).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments; always an object schema. Shared: cloning a spec, as every model
    /// request does, does not copy it.
    pub parameters: Schema,
    /// The lowest level the tool may run at; `None` means undeclared (`unrestricted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    /// Every call goes to the approval handler, whatever the level.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_approval: bool,
    /// String arguments whose blank value is itself the value (SPEC §2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_blank: Vec<String>,
    /// The tool reaches the network itself (web_fetch): a session whose network setting is `none`
    /// withholds it, not offered and refused (SPEC §1).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_network: bool,
    /// The tool does no work of its own: it asks the loop for something (a compaction, a load, a
    /// person's answer) or reads the loop's own state. It is not offered `background` (SPEC §5), and a
    /// call always runs inline.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inline: bool,
    /// Running a call twice has the effect of running it once (SPEC §8b): a call a crash interrupted
    /// before its result was recorded is run again on resume, where any other tool's is reported to
    /// the model as of unknown outcome.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    /// The credential aliases the tool receives in its context ([`ToolContext::credential`]); never
    /// in a request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
    /// In a request only: the tool ships with the provider's own deferred loading (`defer_loading:
    /// true`, the `native` load strategy of SPEC §4), and the wire adds its tool-search tool. Set by
    /// the deferral rules, never declared.
    #[serde(skip)]
    pub defer_loading: bool,
}

/// A tool's JSON Schema: a [`Value`] behind an `Arc`, read through `Deref`; a write (`DerefMut`)
/// copies it first when it is shared, so no other spec sees the change. The schema's JSON text and
/// whether it qualifies for strict mode are worked out once, at the first request that needs them, and
/// shared by every request after (a catalog of hundreds of tools is most of every request's bytes).
#[derive(Debug, Clone, Default)]
pub struct Schema(Arc<SchemaInner>);

#[derive(Debug, Default)]
struct SchemaInner {
    value: Value,
    /// The value as JSON text, once written.
    json: OnceLock<Option<Box<serde_json::value::RawValue>>>,
    /// Whether the value qualifies for strict mode ([`crate::model::strict::why_not_strict`]), once asked.
    strict: OnceLock<bool>,
}

impl Clone for SchemaInner {
    fn clone(&self) -> Self {
        SchemaInner { value: self.value.clone(), json: OnceLock::new(), strict: OnceLock::new() }
    }
}

impl Schema {
    /// A schema holding `value`.
    pub fn new(value: Value) -> Self {
        Schema(Arc::new(SchemaInner { value, json: OnceLock::new(), strict: OnceLock::new() }))
    }

    /// The schema as JSON text, written at the first call and kept (the text a request body carries).
    /// None for a schema nested deeper than [`RAW_MAX_DEPTH`], which is written from its value each time:
    /// a body read back as a `Value` (`RequestBody::to_value`) parses the kept text again, and serde_json
    /// refuses to parse nesting past 128 levels.
    pub(crate) fn raw_json(&self) -> Option<&serde_json::value::RawValue> {
        self.0
            .json
            .get_or_init(|| {
                if deeper_than(&self.0.value, RAW_MAX_DEPTH) {
                    return None;
                }
                serde_json::value::to_raw_value(&self.0.value).ok()
            })
            .as_deref()
    }

    /// Whether the schema qualifies for strict mode ([`crate::model::strict::why_not_strict`]), worked
    /// out at the first call and kept.
    pub(crate) fn strict_ok(&self) -> bool {
        *self.0.strict.get_or_init(|| crate::model::strict::why_not_strict(&self.0.value).is_none())
    }
}

/// How deep a schema's kept text may nest (see [`Schema::raw_json`]): well inside serde_json's parse
/// limit of 128 with a body's own levels around it.
const RAW_MAX_DEPTH: usize = 64;

/// Whether `v` nests arrays or objects more than `limit` levels deep (it stops looking at the limit).
fn deeper_than(v: &Value, limit: usize) -> bool {
    match v {
        Value::Array(_) | Value::Object(_) if limit == 0 => true,
        Value::Array(a) => a.iter().any(|x| deeper_than(x, limit - 1)),
        Value::Object(o) => o.values().any(|x| deeper_than(x, limit - 1)),
        _ => false,
    }
}

impl From<Value> for Schema {
    fn from(value: Value) -> Self {
        Schema::new(value)
    }
}

impl std::ops::Deref for Schema {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0.value
    }
}

impl std::ops::DerefMut for Schema {
    fn deref_mut(&mut self) -> &mut Value {
        let inner = Arc::make_mut(&mut self.0);
        // What was worked out from the value no longer holds once it is written.
        inner.json = OnceLock::new();
        inner.strict = OnceLock::new();
        &mut inner.value
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        self.0.value == other.0.value
    }
}

impl PartialEq<Value> for Schema {
    fn eq(&self, other: &Value) -> bool {
        self.0.value == *other
    }
}

impl Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.value.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Schema::new)
    }
}

impl ToolSpec {
    /// A spec of `name`, `description` and the `parameters` schema, every other setting at its default
    /// (no level of its own, no approval required, no credentials, not idempotent).
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: Schema::new(parameters),
            level: None,
            requires_approval: false,
            allow_blank: Vec::new(),
            inline: false,
            needs_network: false,
            idempotent: false,
            credentials: Vec::new(),
            defer_loading: false,
        }
    }

    /// Declares the credential aliases the tool receives in its context (SPEC §15).
    pub fn with_credentials(mut self, aliases: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.credentials = aliases.into_iter().map(Into::into).collect();
        self
    }

    /// Declares the lowest level the tool may run at.
    pub fn with_level(mut self, level: Level) -> Self {
        self.level = Some(level);
        self
    }

    /// Puts every call to the approval handler.
    pub fn with_requires_approval(mut self, yes: bool) -> Self {
        self.requires_approval = yes;
        self
    }

    /// Declares that running a call twice has the effect of running it once (SPEC §8b).
    pub fn with_idempotent(mut self, yes: bool) -> Self {
        self.idempotent = yes;
        self
    }

    /// Names string arguments whose blank value is kept.
    pub fn with_allow_blank(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allow_blank = names.into_iter().map(Into::into).collect();
        self
    }

    /// Declares that the tool reaches the network itself ([`ToolSpec::needs_network`]).
    pub fn with_needs_network(mut self, yes: bool) -> Self {
        self.needs_network = yes;
        self
    }

    /// Declares that the tool does no work of its own ([`ToolSpec::inline`]): never detached.
    pub fn with_inline(mut self, yes: bool) -> Self {
        self.inline = yes;
        self
    }

    /// Checks what the registry relies on: a name, and an object schema.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.trim().is_empty() {
            return Err(Error::Config("a tool needs a non-empty name".into()));
        }
        match &*self.parameters {
            Value::Object(o) if o.get("type").and_then(Value::as_str).is_none_or(|t| t == "object") => Ok(()),
            other => Err(Error::Config(format!(
                "tool '{}': parameters must be a JSON Schema object with \"type\": \"object\", got {other}",
                self.name
            ))),
        }
    }
}

/// A tool the agent can call. Implemented by Rust types, and by each binding for its language's
/// functions.
#[async_trait]
pub trait Tool: Send + Sync {
    /// What the model is told about the tool.
    fn spec(&self) -> &ToolSpec;
    /// Runs the tool. `arguments` is the JSON object the model sent, already read by the argument rule
    /// ([`args::read_arguments`]). The returned value reaches the model as text: a string as it is,
    /// anything else as JSON.
    async fn call(&self, arguments: Value) -> Result<Value, ToolError>;
    /// Runs the tool with the session's context (level, scope, network). The loop calls this; tools
    /// that need the context (the built-ins) implement it, the rest keep the default.
    async fn call_in(&self, arguments: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        self.call(arguments).await
    }
    /// The lowest level at which the tool may run. Undeclared, `unrestricted`: the SDK cannot know what
    /// a host function does.
    fn level(&self) -> Level {
        self.spec().level.unwrap_or(Level::Unrestricted)
    }
    /// Whether every call goes to a person, whatever the level.
    fn requires_approval(&self) -> bool {
        self.spec().requires_approval
    }
    /// What confines the tool's calls on this machine, shown by the listing API; `None` for a tool that
    /// runs no sandbox of its own.
    fn confinement(&self) -> Option<String> {
        None
    }
}

/// What a tool call knows of the session it runs in.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call id the model gave.
    pub call_id: String,
    /// The session's level. An approved call still runs at this level: approval never widens reach.
    pub level: Level,
    /// The directories the session reaches.
    pub scope: std::sync::Arc<Scope>,
    /// The session's network setting.
    pub network: Network,
    /// Local and link-local addresses the policy lets through under network `remote`.
    pub allow_local_addresses: std::sync::Arc<[crate::permission::network::AddrRange]>,
    /// The agent's credential broker, if it has one (crate::credentials).
    pub credentials: Option<crate::credentials::Credentials>,
    /// The aliases the tool declared: the only ones [`ToolContext::credential`] hands it.
    pub declared: std::sync::Arc<[String]>,
    /// The host value the run was given ([`crate::Agent::run_with_context`]); `None` without one.
    pub context: Option<crate::agent::RunContextValue>,
}

impl ToolContext {
    /// The run's host value as `T`, when the run has one of that type.
    pub fn context<T: std::any::Any>(&self) -> Option<&T> {
        self.context.as_ref().and_then(|c| c.get::<T>())
    }

    /// Where writes may land at this level: anywhere at `unrestricted`, under the workspace roots at
    /// `workspace`, nowhere below.
    pub fn write_reach(&self) -> WriteReach {
        match self.level {
            Level::Unrestricted => WriteReach::Anywhere,
            Level::Workspace => WriteReach::WorkspaceRoots,
            Level::Read | Level::None => WriteReach::Nowhere,
        }
    }

    /// The value of a credential the tool declared, produced now (a host callback runs each time). An
    /// alias the tool did not declare, or one not registered, is an error naming it.
    pub async fn credential(&self, alias: &str) -> Result<String, ToolError> {
        if !self.declared.iter().any(|a| a == alias) {
            return Err(ToolError::Failed(format!(
                "credential '{alias}' was not declared by the tool (declared: {})",
                self.declared.join(", ")
            )));
        }
        let broker = self
            .credentials
            .as_ref()
            .ok_or_else(|| ToolError::Failed(format!("credential '{alias}': the agent has no credentials")))?;
        broker.resolve(alias).await.map_err(ToolError::Failed)
    }

    /// Every declared credential by alias, produced now: what a binding hands its language's tool.
    pub async fn declared_credentials(&self) -> Result<BTreeMap<String, String>, ToolError> {
        let mut out = BTreeMap::new();
        for alias in self.declared.iter() {
            out.insert(alias.clone(), self.credential(alias).await?);
        }
        Ok(out)
    }
}

/// One namespace of tools, in registration order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    by_name: BTreeMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. A second tool with a name already taken is a configuration error.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), Error> {
        let spec = tool.spec();
        spec.validate()?;
        if self.by_name.contains_key(&spec.name) {
            return Err(Error::Config(format!("a tool named '{}' is already registered", spec.name)));
        }
        self.by_name.insert(spec.name.clone(), self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    /// The tool named `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// The tools in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// Every tool's spec, in registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec().clone()).collect()
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// A tool made from an async Rust closure over typed arguments.
pub struct FnTool<F, A, Fut> {
    spec: ToolSpec,
    f: F,
    _types: std::marker::PhantomData<fn(A) -> Fut>,
}

impl<F, A, Fut> FnTool<F, A, Fut> {
    /// Declares the lowest level the tool may run at (undeclared: `unrestricted`).
    pub fn level(mut self, level: Level) -> Self {
        self.spec.level = Some(level);
        self
    }

    /// Puts every call to the approval handler, whatever the level.
    pub fn requires_approval(mut self) -> Self {
        self.spec.requires_approval = true;
        self
    }

    /// Declares the credential aliases the tool receives in its context (SPEC §15).
    pub fn credentials(mut self, aliases: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.spec.credentials = aliases.into_iter().map(Into::into).collect();
        self
    }

    /// Declares the tool idempotent: a call a crash interrupted is run again on resume (SPEC §8b).
    pub fn idempotent(mut self) -> Self {
        self.spec.idempotent = true;
        self
    }

    /// Names string arguments whose blank value is kept (SPEC §2).
    pub fn allow_blank(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.spec.allow_blank = names.into_iter().map(Into::into).collect();
        self
    }
}

/// Makes a tool from an async closure. The closure takes the arguments deserialized into `A`;
/// arguments that do not fit `A` are refused with a message naming the problem, and the closure does
/// not run.
pub fn tool_fn<A, R, E, Fut, F>(
    name: impl Into<String>,
    description: impl Into<String>,
    parameters: Value,
    f: F,
) -> FnTool<F, A, Fut>
where
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    A: DeserializeOwned + Send + 'static,
    R: Serialize,
    E: std::fmt::Display,
{
    FnTool { spec: ToolSpec::new(name, description, parameters), f, _types: std::marker::PhantomData }
}

#[async_trait]
impl<A, R, E, Fut, F> Tool for FnTool<F, A, Fut>
where
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    A: DeserializeOwned + Send + 'static,
    R: Serialize,
    E: std::fmt::Display,
{
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let args: A =
            serde_json::from_value(arguments).map_err(|e| ToolError::Failed(format!("invalid arguments: {e}")))?;
        let out = (self.f)(args).await.map_err(ToolError::failed)?;
        serde_json::to_value(out).map_err(|e| ToolError::Failed(format!("the result is not JSON: {e}")))
    }
}

/// A tool made from an async closure that also takes the call's [`ToolContext`]: for a tool that needs
/// its declared credentials ([`ToolContext::credential`]) or the session's scope.
pub struct FnCtxTool<F, A, Fut> {
    spec: ToolSpec,
    f: F,
    _types: std::marker::PhantomData<fn(A) -> Fut>,
}

impl<F, A, Fut> FnCtxTool<F, A, Fut> {
    /// Declares the credential aliases the tool receives in its context (SPEC §15).
    pub fn credentials(mut self, aliases: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.spec.credentials = aliases.into_iter().map(Into::into).collect();
        self
    }

    /// Declares the lowest level the tool may run at (undeclared: `unrestricted`).
    pub fn level(mut self, level: Level) -> Self {
        self.spec.level = Some(level);
        self
    }
}

/// [`tool_fn`] for a closure that takes the call's context too.
pub fn tool_fn_in<A, R, E, Fut, F>(
    name: impl Into<String>,
    description: impl Into<String>,
    parameters: Value,
    f: F,
) -> FnCtxTool<F, A, Fut>
where
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    A: DeserializeOwned + Send + 'static,
    R: Serialize,
    E: std::fmt::Display,
{
    FnCtxTool { spec: ToolSpec::new(name, description, parameters), f, _types: std::marker::PhantomData }
}

#[async_trait]
impl<A, R, E, Fut, F> Tool for FnCtxTool<F, A, Fut>
where
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    A: DeserializeOwned + Send + 'static,
    R: Serialize,
    E: std::fmt::Display,
{
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Err(ToolError::Failed(format!("tool '{}' runs inside an agent", self.spec.name)))
    }

    async fn call_in(&self, arguments: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let args: A =
            serde_json::from_value(arguments).map_err(|e| ToolError::Failed(format!("invalid arguments: {e}")))?;
        let out = (self.f)(args, ctx.clone()).await.map_err(ToolError::failed)?;
        serde_json::to_value(out).map_err(|e| ToolError::Failed(format!("the result is not JSON: {e}")))
    }
}
