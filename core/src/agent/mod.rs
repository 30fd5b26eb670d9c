//! The agent loop: model turns, tool dispatch (the calls of one turn in parallel), results back, until
//! the model answers with text or the turn limit is reached.

use std::sync::Arc;

use futures::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use crate::error::{Error, ToolError};
use crate::model::{Message, Model, ModelRequest, ToolCall, Usage};
use crate::tools::{Tool, ToolRegistry};

/// The default limit on model requests in one run.
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// One tool call made during a run, as the model saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The call id the model gave.
    pub id: String,
    /// The tool's whole name.
    pub name: String,
    /// The arguments as the model sent them (the raw text when it was not JSON).
    pub arguments: Value,
    /// The text the model received as the result.
    pub result: String,
    /// True when the result is an error (the tool failed, or the call was refused).
    pub is_error: bool,
}

/// What a finished run returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The model's final text answer.
    pub output: String,
    /// Every tool call made, in the order the model asked for them.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens used, summed over every model request of the run.
    pub usage: Usage,
    /// Model requests made.
    pub turns: u32,
    /// The whole conversation, the input first.
    pub messages: Vec<Message>,
}

/// An agent: a model, instructions and tools. Cheap to clone; runs share nothing but configuration.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    model: Arc<dyn Model>,
    instructions: Option<String>,
    tools: ToolRegistry,
    max_turns: u32,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.inner.model.name())
            .field("tools", &self.inner.tools)
            .field("max_turns", &self.inner.max_turns)
            .finish()
    }
}

/// Configures an [`Agent`].
#[derive(Default)]
pub struct AgentBuilder {
    model: Option<Arc<dyn Model>>,
    instructions: Option<String>,
    tools: Vec<Arc<dyn Tool>>,
    max_turns: Option<u32>,
}

impl AgentBuilder {
    pub fn model(self, model: impl Model + 'static) -> Self {
        self.model_arc(Arc::new(model))
    }

    pub fn model_arc(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// The system instructions sent with every request.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    pub fn tool(self, tool: impl Tool + 'static) -> Self {
        self.tool_arc(Arc::new(tool))
    }

    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The most model requests one run may make (default [`DEFAULT_MAX_TURNS`]).
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = Some(n);
        self
    }

    pub fn build(self) -> Result<Agent, Error> {
        let model = self.model.ok_or_else(|| Error::Config("an agent needs a model".into()))?;
        let max_turns = self.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        if max_turns == 0 {
            return Err(Error::Config("max_turns must be at least 1".into()));
        }
        let mut tools = ToolRegistry::new();
        for t in self.tools {
            tools.register(t)?;
        }
        Ok(Agent { inner: Arc::new(Inner { model, instructions: self.instructions, tools, max_turns }) })
    }
}

impl Agent {
    pub fn builder() -> AgentBuilder {
        AgentBuilder::default()
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// Runs the loop from one user message to the final answer.
    pub async fn run(&self, input: impl Into<String>) -> Result<RunResult, Error> {
        let span = tracing::info_span!("run", model = self.inner.model.name());
        self.run_inner(input.into()).instrument(span).await
    }

    async fn run_inner(&self, input: String) -> Result<RunResult, Error> {
        let inner = &self.inner;
        let mut request = ModelRequest {
            instructions: inner.instructions.clone(),
            messages: vec![Message::User { content: input }],
            tools: inner.tools.specs(),
        };
        let mut usage = Usage::default();
        let mut records = Vec::new();
        for turn in 1..=inner.max_turns {
            let response = inner.model.respond(&request).instrument(tracing::info_span!("turn", turn)).await?;
            usage.add(&response.usage);
            let calls = response.tool_calls;
            request.messages.push(Message::Assistant { content: response.text.clone(), tool_calls: calls.clone() });
            if calls.is_empty() {
                return Ok(RunResult {
                    output: response.text.unwrap_or_default(),
                    tool_calls: records,
                    usage,
                    turns: turn,
                    messages: request.messages,
                });
            }
            // The calls of one turn run together; results go back in the model's order.
            let outcomes = join_all(calls.iter().map(|c| self.dispatch(c))).await;
            for (call, (arguments, result, is_error)) in calls.into_iter().zip(outcomes) {
                request.messages.push(Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: result.clone(),
                    is_error,
                });
                records.push(ToolCallRecord { id: call.id, name: call.name, arguments, result, is_error });
            }
        }
        Err(Error::MaxTurns { max_turns: inner.max_turns, usage })
    }

    /// Runs one call; every failure becomes an error result the model sees.
    async fn dispatch(&self, call: &ToolCall) -> (Value, String, bool) {
        let span = tracing::info_span!("tool_call", tool = %call.name, call_id = %call.id);
        let raw = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
        let arguments = match serde_json::from_str::<Value>(raw) {
            Ok(v) => v,
            Err(e) => {
                let msg = format!("Error: the arguments for tool '{}' are not valid JSON: {e}", call.name);
                return (Value::String(call.arguments.clone()), msg, true);
            }
        };
        let Some(tool) = self.inner.tools.get(&call.name) else {
            return (arguments, format!("Error: there is no tool named '{}'", call.name), true);
        };
        if !arguments.is_object() {
            let msg = format!("Error: the arguments for tool '{}' must be a JSON object", call.name);
            return (arguments, msg, true);
        }
        let outcome = tool.call(arguments.clone()).instrument(span).await;
        match outcome {
            Ok(Value::String(s)) => (arguments, s, false),
            Ok(v) => (arguments, v.to_string(), false),
            Err(ToolError::Failed(m)) => (arguments, format!("Error: tool '{}' failed: {m}", call.name), true),
            Err(ToolError::Cancelled) => (arguments, format!("Error: tool '{}' was cancelled", call.name), true),
        }
    }
}
