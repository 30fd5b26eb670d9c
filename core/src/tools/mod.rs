//! Tools: the [`Tool`] trait every tool implements (host functions from every language included),
//! the registry that holds them in one namespace, and [`tool_fn`] for Rust closures.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, ToolError};

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments; always an object schema.
    pub parameters: Value,
}

impl ToolSpec {
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec { name: name.into(), description: description.into(), parameters }
    }

    /// Checks what the registry relies on: a name, and an object schema.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.trim().is_empty() {
            return Err(Error::Config("a tool needs a non-empty name".into()));
        }
        match &self.parameters {
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
    fn spec(&self) -> &ToolSpec;
    /// Runs the tool. `arguments` is the JSON object the model sent. The returned value reaches the
    /// model as text: a string as it is, anything else as JSON.
    async fn call(&self, arguments: Value) -> Result<Value, ToolError>;
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

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec().clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

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
