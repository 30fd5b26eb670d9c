//! Swift binding of ambit, with UniFFI proc-macros. It only translates: configuration records into the
//! core's builder, Swift tools into the core's [`ambit::Tool`] trait, the core's results and errors
//! back into records and one error enum. Every rule lives in the core.
//!
//! The Swift package (`bindings-swift/swift`) wraps the generated code in a small facade (`Agent`,
//! `AmbitTool`); these exported names are the layer under it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

uniffi::setup_scaffolding!();

/// Every failure of a configuration call or a run, one case per code of the core's [`ambit::Error`].
/// `message` is the core's text for the error, the same in every language. The Swift facade rethrows it
/// as its `AmbitError` (lowerCamelCase cases, `code`, `message`).
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum CoreError {
    /// The agent or a tool was configured wrongly (code `config`).
    #[error("{message}")]
    Config { message: String },
    /// The provider answered with an error status (code `model_http`).
    #[error("{message}")]
    ModelHttp { status: u16, message: String },
    /// The provider could not be reached (code `model_transport`).
    #[error("{message}")]
    ModelTransport { message: String },
    /// The provider's answer could not be read (code `model_response`).
    #[error("{message}")]
    ModelResponse { message: String },
    /// The run used its turn budget without a final answer (code `max_turns`).
    #[error("{message}")]
    MaxTurns { max_turns: u32, usage: Usage, message: String },
    /// The run was cancelled (code `cancelled`).
    #[error("{message}")]
    Cancelled { message: String },
}

impl From<ambit::Error> for CoreError {
    fn from(e: ambit::Error) -> Self {
        let message = e.to_string();
        match e {
            ambit::Error::Config(_) => CoreError::Config { message },
            ambit::Error::Model(m) => match m {
                ambit::ModelError::Http { status, .. } => CoreError::ModelHttp { status, message },
                ambit::ModelError::Transport(_) => CoreError::ModelTransport { message },
                ambit::ModelError::InvalidResponse(_) => CoreError::ModelResponse { message },
            },
            ambit::Error::MaxTurns { max_turns, usage } => {
                CoreError::MaxTurns { max_turns, usage: usage.into(), message }
            }
            ambit::Error::Cancelled => CoreError::Cancelled { message },
        }
    }
}

impl From<uniffi::UnexpectedUniFFICallbackError> for CoreError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        CoreError::Config { message: format!("unexpected error in a Swift callback: {}", e.reason) }
    }
}

/// What a Swift tool throws. The message reaches the model as the core formats it
/// ("Error: tool 'x' failed: <message>").
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum HostToolError {
    #[error("{message}")]
    Failed { message: String },
}

impl From<uniffi::UnexpectedUniFFICallbackError> for HostToolError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        HostToolError::Failed { message: e.reason }
    }
}

/// A tool implemented in Swift.
#[uniffi::export(foreign)]
#[async_trait]
pub trait HostTool: Send + Sync {
    /// Runs the tool on the JSON object the model sent (as text); the returned text reaches the model.
    async fn call(&self, arguments_json: String) -> Result<String, HostToolError>;
}

/// A tool as the model is told about it, and its Swift implementation.
#[derive(uniffi::Record)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the arguments, as text; must be an object schema.
    pub parameters_json: String,
    pub implementation: Arc<dyn HostTool>,
}

/// An agent's configuration. The model is reached on the OpenAI Chat Completions wire.
#[derive(uniffi::Record)]
pub struct AgentConfig {
    pub model: String,
    /// The provider's base URL (`…/v1`); absent: `OPENAI_BASE_URL`, else OpenAI's.
    #[uniffi(default = None)]
    pub base_url: Option<String>,
    /// absent: `OPENAI_API_KEY`, else none.
    #[uniffi(default = None)]
    pub api_key: Option<String>,
    #[uniffi(default = None)]
    pub instructions: Option<String>,
    /// The most model requests one run may make; absent: the core's default.
    #[uniffi(default = None)]
    pub max_turns: Option<u32>,
    #[uniffi(default = [])]
    pub tools: Vec<ToolDefinition>,
}

/// Tokens used, summed over the model requests of a run.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Usage {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl From<ambit::Usage> for Usage {
    fn from(u: ambit::Usage) -> Self {
        Usage {
            requests: u.requests,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }
    }
}

/// One tool call made during a run.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text (the raw text when the model did not send JSON).
    pub arguments_json: String,
    /// The text the model received as the result.
    pub result: String,
    /// True when the result is an error (the tool failed, or the call was refused).
    pub is_error: bool,
}

/// What a finished run returns.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RunResult {
    pub output: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub turns: u32,
}

impl From<ambit::RunResult> for RunResult {
    fn from(r: ambit::RunResult) -> Self {
        RunResult {
            output: r.output,
            tool_calls: r
                .tool_calls
                .into_iter()
                .map(|c| ToolCall {
                    id: c.id,
                    name: c.name,
                    arguments_json: match c.arguments {
                        Value::String(raw) => raw,
                        other => other.to_string(),
                    },
                    result: c.result,
                    is_error: c.is_error,
                })
                .collect(),
            usage: r.usage.into(),
            turns: r.turns,
        }
    }
}

/// Adapts a Swift tool to the core's [`ambit::Tool`].
struct SwiftTool {
    spec: ambit::ToolSpec,
    implementation: Arc<dyn HostTool>,
}

#[async_trait]
impl ambit::Tool for SwiftTool {
    fn spec(&self) -> &ambit::ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ambit::ToolError> {
        match self.implementation.call(arguments.to_string()).await {
            Ok(text) => Ok(Value::String(text)),
            Err(HostToolError::Failed { message }) => Err(ambit::ToolError::Failed(message)),
        }
    }
}

/// The agent object under the Swift facade's `Agent`.
#[derive(uniffi::Object)]
pub struct CoreAgent {
    inner: ambit::Agent,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreAgent {
    /// Builds the agent; a bad configuration (duplicate tool names, a schema that is not an object, …)
    /// is a `CoreError::Config`.
    #[uniffi::constructor]
    pub fn new(config: AgentConfig) -> Result<Arc<Self>, CoreError> {
        let mut model = ambit::OpenAiChat::new(config.model);
        if let Some(url) = config.base_url {
            model = model.base_url(url);
        }
        if let Some(key) = config.api_key {
            model = model.api_key(key);
        }
        let mut builder = ambit::Agent::builder().model_arc(Arc::new(model));
        if let Some(instructions) = config.instructions {
            builder = builder.instructions(instructions);
        }
        if let Some(n) = config.max_turns {
            builder = builder.max_turns(n);
        }
        for tool in config.tools {
            let parameters: Value = serde_json::from_str(&tool.parameters_json)
                .map_err(|e| ambit::Error::Config(format!("tool '{}': parameters are not JSON: {e}", tool.name)))?;
            let spec = ambit::ToolSpec::new(tool.name, tool.description, parameters);
            builder = builder.tool_arc(Arc::new(SwiftTool { spec, implementation: tool.implementation }));
        }
        Ok(Arc::new(CoreAgent { inner: builder.build()? }))
    }

    /// The names of the agent's tools, in registration order.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.tools().specs().into_iter().map(|s| s.name).collect()
    }

    /// Runs the agent from one user message to the final answer.
    pub async fn run(&self, input: String) -> Result<RunResult, CoreError> {
        Ok(self.inner.run(input).await?.into())
    }
}
