//! The Node binding of ambit (napi-rs 3). It only translates: JS values to core types, JS tool
//! functions to [`ambit::Tool`], and core results and errors to JSON envelopes the JS facade
//! (`index.js`) turns into objects and typed errors. Every rule lives in the core.

use std::sync::Arc;

use ambit::{Agent, Error, ModelError, OpenAiChat, RunResult, Tool, ToolError, ToolSpec};
use async_trait::async_trait;
use napi::Status;
use napi::bindgen_prelude::{Either, Promise};
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::{Value, json};

/// A JS tool function as Rust calls it: one JSON string argument (the arguments object), a Promise of
/// a JSON string back. Not callee-handled (called with the value itself), weak (a tool does not keep
/// the process alive; a pending run does).
type JsToolFn = ThreadsafeFunction<String, Promise<String>, String, Status, false, true>;

/// The model settings (the OpenAI Chat Completions wire).
#[napi(object, object_to_js = false)]
pub struct NativeModelConfig {
    pub model: String,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
}

/// The agent settings.
#[napi(object, object_to_js = false)]
pub struct NativeAgentConfig {
    pub model: Option<NativeModelConfig>,
    pub instructions: Option<String>,
    pub max_turns: Option<u32>,
}

/// One host tool. `parameters` is the JSON text of the schema. `call` receives the JSON text of the
/// arguments and resolves to the JSON text of `{"ok": true, "value": ...}` or
/// `{"ok": false, "message": "..."}`.
#[napi(object, object_to_js = false)]
pub struct NativeToolConfig {
    pub name: String,
    pub description: String,
    pub parameters: String,
    #[napi(ts_type = "(argumentsJson: string) => Promise<string>")]
    pub call: JsToolFn,
}

/// A core error as data: the facade throws the matching error class.
#[napi(object)]
pub struct NativeError {
    pub code: String,
    pub message: String,
    /// The HTTP status, for `model_http`.
    pub status: Option<u32>,
}

impl NativeError {
    fn from_core(e: &Error) -> Self {
        let status = match e {
            Error::Model(ModelError::Http { status, .. }) => Some(u32::from(*status)),
            _ => None,
        };
        NativeError { code: e.code().to_string(), message: e.to_string(), status }
    }
}

struct JsTool {
    spec: ToolSpec,
    call: JsToolFn,
}

#[async_trait]
impl Tool for JsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let promise =
            self.call.call_async_catch(arguments.to_string()).await.map_err(|e| ToolError::Failed(e.reason.clone()))?;
        let text = promise.await.map_err(|e| ToolError::Failed(e.reason.clone()))?;
        let mut envelope: Value = serde_json::from_str(&text)
            .map_err(|e| ToolError::Failed(format!("the tool's answer could not be read: {e}")))?;
        if envelope.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok(envelope.get_mut("value").map(Value::take).unwrap_or(Value::Null))
        } else {
            let message = envelope.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            Err(ToolError::Failed(message.to_string()))
        }
    }
}

/// An agent built by the core.
#[napi]
pub struct NativeAgent {
    agent: Agent,
}

#[napi]
impl NativeAgent {
    /// Runs the agent on one user message. Resolves (never rejects for a core error) to the JSON text
    /// of `{"ok": true, "result": RunResult}` or `{"ok": false, "error": {code, message, status}}`.
    #[napi]
    pub async fn run(&self, input: String) -> String {
        let agent = self.agent.clone();
        let handle = ambit::runtime::runtime().spawn(async move { agent.run(input).await });
        let outcome: Result<RunResult, NativeError> = match handle.await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(NativeError::from_core(&e)),
            Err(e) => Err(NativeError {
                code: "internal".to_string(),
                message: format!("the run stopped unexpectedly: {e}"),
                status: None,
            }),
        };
        let envelope = match outcome {
            Ok(result) => match serde_json::to_value(&result) {
                Ok(v) => json!({"ok": true, "result": v}),
                Err(e) => json!({"ok": false, "error": {
                    "code": "internal",
                    "message": format!("the run result could not be serialized: {e}"),
                }}),
            },
            Err(e) => json!({"ok": false, "error": {"code": e.code, "message": e.message, "status": e.status}}),
        };
        envelope.to_string()
    }
}

/// Builds an agent, or returns the core's configuration error as data.
#[napi]
pub fn create_agent(config: NativeAgentConfig, tools: Vec<NativeToolConfig>) -> Either<NativeAgent, NativeError> {
    match build(config, tools) {
        Ok(agent) => Either::A(NativeAgent { agent }),
        Err(e) => Either::B(NativeError::from_core(&e)),
    }
}

fn build(config: NativeAgentConfig, tools: Vec<NativeToolConfig>) -> Result<Agent, Error> {
    let mut builder = Agent::builder();
    if let Some(m) = config.model {
        let mut model = OpenAiChat::new(m.model);
        if let Some(url) = m.base_url {
            model = model.base_url(url);
        }
        if let Some(key) = m.api_key {
            model = model.api_key(key);
        }
        builder = builder.model_arc(Arc::new(model));
    }
    if let Some(instructions) = config.instructions {
        builder = builder.instructions(instructions);
    }
    if let Some(n) = config.max_turns {
        builder = builder.max_turns(n);
    }
    for t in tools {
        let parameters: Value = serde_json::from_str(&t.parameters)
            .map_err(|e| Error::Config(format!("tool '{}': parameters are not valid JSON: {e}", t.name)))?;
        let spec = ToolSpec::new(t.name, t.description, parameters);
        builder = builder.tool_arc(Arc::new(JsTool { spec, call: t.call }));
    }
    builder.build()
}
