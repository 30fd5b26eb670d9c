//! # ambit
//!
//! The core of the ambit agent SDK: the agent loop, host tools, and the model wires. Every rule lives
//! here; the Python, Node and Swift bindings only translate types, errors and async.
//!
//! ```no_run
//! use ambit::{Agent, OpenAiChat, tool_fn};
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! #[derive(Deserialize)]
//! struct WeatherArgs { city: String }
//!
//! # async fn demo() -> Result<(), ambit::Error> {
//! let agent = Agent::builder()
//!     .model(OpenAiChat::new("gpt-4.1").base_url("http://127.0.0.1:8080/v1"))
//!     .instructions("You answer weather questions.")
//!     .tool(tool_fn(
//!         "get_weather",
//!         "Current weather for a city",
//!         json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
//!         |args: WeatherArgs| async move { Ok::<_, String>(format!("sunny in {}", args.city)) },
//!     ))
//!     .build()?;
//! let result = agent.run("Weather in Paris?").await?;
//! println!("{}", result.output);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod agent;
pub mod content;
pub mod credentials;
pub mod deferral;
#[cfg(feature = "schemars")]
pub mod derive;
pub mod error;
pub mod knowledge;
pub mod ledger;
pub mod mcp;
pub mod memory;
mod migrate;
pub mod model;
pub mod permission;
pub mod routine;
pub mod runtime;
pub mod session;
pub mod skills;
pub mod telemetry;
pub mod test_model;
#[doc(hidden)]
pub mod testing;
pub mod tools;

pub use agent::NamedAgent;
pub use agent::hooks::{
    Guardrail, GuardrailKind, GuardrailVerdict, Hook, HookAction, HookContext, HookPoint, guardrail_fn, hook_fn,
};
pub use agent::subagent::SubagentConfig;
pub use agent::{
    Agent, AgentBuilder, AgentOptions, Budget, ChecklistItem, Event, EventFeed, Input, McpCallback, RunContextValue,
    RunResult, RunStream, ToolCallRecord,
};
pub use agent::{ToolListing, ToolingOptions};
pub use content::Part;
pub use credentials::{CredentialSource, Credentials, CredentialsConfig, WebCredential};
pub use error::{Error, ModelError, ToolError};
pub use ledger::{Ledger, LedgerError};
pub use memory::{Memory, MemoryConfig, MemoryError};
pub use model::anthropic::Anthropic;
pub use model::openai_chat::OpenAiChat;
pub use model::openai_responses::OpenAiResponses;
pub use model::text_calls::TextToolCalls;
pub use model::{Message, Model, ModelRequest, ModelResponse, StopReason, ToolCall, Usage};
pub use model::{ModelConfig, ModelSettings, Price, PriceTable, ToolChoice, Wire};
pub use permission::{
    ApprovalDecision, ApprovalHandler, ApprovalReason, ApprovalRequest, Filters, Level, Network, Policy, PolicyConfig,
    Scope, ToolStatus,
};
pub use test_model::{FunctionModel, TestModel};
pub use tools::{FnTool, Schema, Tool, ToolContext, ToolRegistry, ToolSpec, tool_fn, tool_fn_in};
