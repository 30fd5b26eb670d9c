//! A model for users' own tests: [`TestModel`] answers from a script of replies, [`FunctionModel`]
//! answers with a function of the request. Neither reaches a network, yet both speak a real wire: each
//! request is written as that wire's request body (the one a hosted model would get), and each reply is
//! rendered as the wire's answer — a whole JSON body, or the server-sent events of a streamed one — and
//! read back by the same decoder the hosted models' answers go through (`openai_chat`, `anthropic`,
//! `openai_responses`). A test of an agent on a test model exercises ambit's real decoding, its stop
//! reasons, usage counts and streamed text deltas.
//!
//! ```
//! # async fn demo() -> Result<(), ambit::Error> {
//! use ambit::test_model::{Reply, TestModel};
//! let model = TestModel::new([
//!     Reply::tool_call("get_weather", serde_json::json!({"city": "Paris"})),
//!     Reply::text("Sunny in Paris."),
//! ]);
//! let agent = ambit::Agent::builder().model(model.clone()).build()?;
//! # let _ = agent;
//! # Ok(()) }
//! ```
//!
//! The bindings build them from plain data ([`build_model`]): `{"test_model": {"wire", "model",
//! "stream", "replies"}}`, with the host's function beside it for a [`FunctionModel`].

pub mod wires;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, ModelError};
use crate::model::sse::SseParser;
use crate::model::{
    Message, Model, ModelReply, ModelRequest, ModelResponse, TextSink, Wire, WireLimits, anthropic, openai_chat,
    openai_responses,
};
use crate::tools::{Tool, ToolSpec};

/// The model name a test model reports when none is given.
pub const DEFAULT_NAME: &str = "test-model";

/// One scripted answer, wire-neutral: text, tool calls, or both, and the token counts to report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The answer's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tool calls the model asks for, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ReplyCall>,
    /// The token counts the answer reports (zero when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ReplyUsage>,
}

/// A tool call in a [`Reply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyCall {
    /// The call's id; absent: `call_<request>_<index>`, unique in the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name as the model sees it.
    pub name: String,
    /// The arguments: a JSON object, sent as its text as the wires do.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    json!({})
}

/// Token counts a [`Reply`] reports: input (without cached tokens) and output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyUsage {
    #[serde(default)]
    /// Input tokens the reply reports.
    pub input_tokens: u64,
    #[serde(default)]
    /// Output tokens the reply reports.
    pub output_tokens: u64,
}

impl Reply {
    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Reply { content: Some(text.into()), ..Reply::default() }
    }

    /// An answer asking for one tool call.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Reply::default().with_tool_call(name, arguments)
    }

    /// This answer with one more tool call.
    pub fn with_tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls.push(ReplyCall { id: None, name: name.into(), arguments });
        self
    }

    /// This answer reporting these token counts.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(ReplyUsage { input_tokens, output_tokens });
        self
    }

    /// Reads a reply's JSON form, refusing unknown fields and a call without a name, naming them.
    pub fn from_value(value: Value) -> Result<Self, String> {
        let reply: Reply = serde_json::from_value(value).map_err(|e| format!("a test model reply: {e}"))?;
        reply.check()?;
        Ok(reply)
    }

    /// A reply a wire can carry: every call named, with object arguments.
    fn check(&self) -> Result<(), String> {
        for (i, c) in self.tool_calls.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(format!("a test model reply: tool_calls[{i}] has an empty name"));
            }
            if !c.arguments.is_object() {
                return Err(format!(
                    "a test model reply: tool_calls[{i}] ({}) has arguments that are not a JSON object: {}",
                    c.name, c.arguments
                ));
            }
        }
        Ok(())
    }

    /// The wire-neutral answer [`wires`] renders; `request` numbers the generated call ids.
    fn respond(&self, request: usize) -> Value {
        let calls: Vec<Value> = self
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let id = c.id.clone().unwrap_or_else(|| format!("call_{request}_{i}"));
                json!({"id": id, "name": c.name, "arguments": c.arguments})
            })
            .collect();
        let usage = self.usage.unwrap_or_default();
        let mut respond = json!({
            "tool_calls": calls,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        });
        if let Some(t) = &self.content {
            respond["content"] = json!(t);
        }
        respond
    }
}

/// What a test model was asked: the provider-neutral request, and the body the wire carried.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestRequest {
    /// The request's number in the model's life, from 1.
    pub index: usize,
    /// The wire the request was written for.
    pub wire: Wire,
    /// The model's name.
    pub model: String,
    /// The system prompt.
    pub instructions: Option<String>,
    /// The conversation so far, provider-neutral.
    pub messages: Vec<Message>,
    /// The tools offered, as the model is told about them.
    pub tools: Vec<ToolSpec>,
    /// The wire's request body, as a hosted model would get it: what reached "the provider".
    pub body: Value,
}

/// A function a [`FunctionModel`] answers with.
#[async_trait]
pub trait ReplyFunction: Send + Sync {
    /// The reply to `request`; an error fails the run (code `model_response`, naming the function).
    async fn reply(&self, request: &TestRequest) -> Result<Reply, String>;
}

/// A plain closure as a [`ReplyFunction`].
struct Closure<F>(F);

#[async_trait]
impl<F> ReplyFunction for Closure<F>
where
    F: Fn(&TestRequest) -> Result<Reply, String> + Send + Sync,
{
    async fn reply(&self, request: &TestRequest) -> Result<Reply, String> {
        (self.0)(request)
    }
}

/// A host-language function reached through the tool machinery a binding already has: called with the
/// request's JSON (as a [`TestRequest`] serializes), it answers a reply's JSON, as text or as the value.
/// The bindings translate their function this way; nothing here is a tool the model sees.
pub struct HostReplyFunction(pub Arc<dyn Tool>);

#[async_trait]
impl ReplyFunction for HostReplyFunction {
    async fn reply(&self, request: &TestRequest) -> Result<Reply, String> {
        let arguments = serde_json::to_value(request).map_err(|e| e.to_string())?;
        let answer = self.0.call(arguments).await.map_err(|e| e.to_string())?;
        let value = match answer {
            Value::String(text) => {
                serde_json::from_str(&text).map_err(|e| format!("the function's answer is not a reply's JSON: {e}"))?
            }
            other => other,
        };
        Reply::from_value(value)
    }
}

/// What the two test models share: the wire, the name, streaming, and the requests seen.
#[derive(Debug)]
struct Core {
    wire: Wire,
    name: String,
    stream: bool,
    requests: Mutex<Vec<TestRequest>>,
}

impl Core {
    fn new() -> Self {
        Core { wire: Wire::OpenaiChat, name: DEFAULT_NAME.into(), stream: false, requests: Mutex::new(Vec::new()) }
    }

    /// A copy with the requests so far, changed by `f` (a setting of the model's builder).
    fn changed(&self, f: impl FnOnce(&mut Core)) -> Core {
        let mut core = Core {
            wire: self.wire,
            name: self.name.clone(),
            stream: self.stream,
            requests: Mutex::new(self.requests()),
        };
        f(&mut core);
        core
    }

    /// Writes the request as the wire would send it and records it.
    fn record(&self, request: &ModelRequest) -> TestRequest {
        let body = match self.wire {
            Wire::OpenaiChat => openai_chat::request_body(&self.name, request, self.stream),
            Wire::Anthropic => anthropic::request_body(&self.name, anthropic::DEFAULT_MAX_TOKENS, request, self.stream),
            Wire::OpenaiResponses => openai_responses::request_body(&self.name, request, self.stream),
        };
        let mut seen = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        let recorded = TestRequest {
            index: seen.len() + 1,
            wire: self.wire,
            model: self.name.clone(),
            instructions: request.instructions.clone(),
            messages: request.messages.clone(),
            tools: request.tools.clone(),
            body,
        };
        seen.push(recorded.clone());
        recorded
    }

    /// Renders `reply` as the wire's answer bytes and reads them back with the wire's decoder.
    fn answer(
        &self,
        request: &TestRequest,
        reply: &Reply,
        sink: Option<&TextSink<'_>>,
    ) -> Result<ModelReply, ModelError> {
        reply.check().map_err(ModelError::InvalidResponse)?;
        let respond = reply.respond(request.index);
        let limits = WireLimits::default();
        let tag = format!("test{:04}", request.index);
        if !self.stream {
            let body = match self.wire {
                Wire::OpenaiChat => wires::chat_completion(&format!("chatcmpl-{tag}"), &self.name, &respond),
                Wire::Anthropic => wires::anthropic_message(&format!("msg_{tag}"), &self.name, &respond),
                Wire::OpenaiResponses => {
                    wires::responses_response(&format!("resp_{tag}"), &self.name, &respond, &request.body, true)
                }
            };
            // The bytes a provider would send, read as a client reads them.
            let bytes = body.to_string();
            let body: Value = serde_json::from_str(&bytes).map_err(|e| ModelError::InvalidResponse(e.to_string()))?;
            let reply = match self.wire {
                Wire::OpenaiChat => ModelReply {
                    response: openai_chat::parse_response_within(&body, &limits)?,
                    wire: "",
                    provider_items: Vec::new(),
                },
                Wire::Anthropic => anthropic::parse_reply_within(&body, &limits)?,
                Wire::OpenaiResponses => openai_responses::parse_reply_within(&body, &limits)?,
            };
            if let (Some(sink), Some(t)) = (sink, reply.response.text.as_deref().filter(|t| !t.is_empty())) {
                sink(t);
            }
            return Ok(reply);
        }
        let events = match self.wire {
            Wire::OpenaiChat => wires::chat_chunks(&format!("chatcmpl-{tag}"), &self.name, &respond),
            Wire::Anthropic => wires::anthropic_events(&format!("msg_{tag}"), &self.name, &respond),
            Wire::OpenaiResponses => {
                wires::responses_events(&format!("resp_{tag}"), &self.name, &respond, &request.body)
            }
        };
        let mut bytes: String = events.iter().map(wires::Sse::to_bytes).collect();
        if self.wire == Wire::OpenaiChat {
            bytes.push_str("data: [DONE]\n\n");
        }
        let noop = |_: &str| {};
        let sink: &TextSink<'_> = sink.unwrap_or(&noop);
        let mut parser = SseParser::new(limits);
        let mut events = parser.push(bytes.as_bytes())?;
        events.extend(parser.finish()?);
        match self.wire {
            Wire::OpenaiChat => {
                let mut decoder = openai_chat::StreamDecoder::new(limits);
                for e in &events {
                    if !decoder.push(e, sink)? {
                        break;
                    }
                }
                Ok(ModelReply { response: decoder.finish()?, wire: "", provider_items: Vec::new() })
            }
            Wire::Anthropic => {
                let mut decoder = anthropic::StreamDecoder::new(limits);
                for e in &events {
                    if !decoder.push(e, sink)? {
                        break;
                    }
                }
                decoder.finish_reply()
            }
            Wire::OpenaiResponses => {
                let mut decoder = openai_responses::StreamDecoder::new(limits);
                for e in &events {
                    if !decoder.push(e, sink)? {
                        break;
                    }
                }
                decoder.finish_reply()
            }
        }
    }

    fn requests(&self) -> Vec<TestRequest> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

macro_rules! settings {
    () => {
        /// This model on `wire` (default `openai_chat`).
        pub fn wire(self, wire: Wire) -> Self {
            self.with_core(|c| c.wire = wire)
        }

        /// This model named `name` (default [`DEFAULT_NAME`]).
        pub fn name(self, name: impl Into<String>) -> Self {
            let name = name.into();
            self.with_core(|c| c.name = name)
        }

        /// This model streaming its answers as server-sent events (default off).
        pub fn stream(self, on: bool) -> Self {
            self.with_core(|c| c.stream = on)
        }

        /// Every request so far, in order.
        pub fn requests(&self) -> Vec<TestRequest> {
            self.core.requests()
        }
    };
}

/// A model answering from a script: the n-th request gets the n-th reply; a request past the script
/// fails the run (`model_response`, naming how many replies there were). Cloning shares the script and
/// the record of requests.
#[derive(Debug, Clone)]
pub struct TestModel {
    core: Arc<Core>,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    scripted: usize,
}

impl TestModel {
    /// A model answering `replies` in order.
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        let replies: VecDeque<Reply> = replies.into_iter().collect();
        TestModel { core: Arc::new(Core::new()), scripted: replies.len(), replies: Arc::new(Mutex::new(replies)) }
    }

    fn with_core(self, f: impl FnOnce(&mut Core)) -> Self {
        TestModel { core: Arc::new(self.core.changed(f)), ..self }
    }

    settings!();

    /// How many scripted replies are left.
    pub fn remaining(&self) -> usize {
        self.replies.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// A model answering with a function of each request ([`TestRequest`]: the conversation, the tools,
/// and the wire body that carried them). Cloning shares the function and the record of requests.
#[derive(Clone)]
pub struct FunctionModel {
    core: Arc<Core>,
    function: Arc<dyn ReplyFunction>,
}

impl std::fmt::Debug for FunctionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionModel").field("core", &self.core).finish_non_exhaustive()
    }
}

impl FunctionModel {
    /// A model answering with `f`, a plain function; an `Err` fails the run.
    pub fn new(f: impl Fn(&TestRequest) -> Result<Reply, String> + Send + Sync + 'static) -> Self {
        Self::from_function(Arc::new(Closure(f)))
    }

    /// A model answering with an async [`ReplyFunction`].
    pub fn from_function(function: Arc<dyn ReplyFunction>) -> Self {
        FunctionModel { core: Arc::new(Core::new()), function }
    }

    fn with_core(self, f: impl FnOnce(&mut Core)) -> Self {
        FunctionModel { core: Arc::new(self.core.changed(f)), ..self }
    }

    settings!();
}

/// The [`Model`] methods the two share, over their [`Core`].
macro_rules! model_impl {
    ($ty:ty) => {
        #[async_trait]
        impl Model for $ty {
            fn name(&self) -> &str {
                &self.core.name
            }

            fn max_tool_name_bytes(&self) -> usize {
                match self.core.wire {
                    Wire::OpenaiChat => crate::tools::wire_name::CHAT_COMPLETIONS_LIMIT,
                    _ => crate::tools::wire_name::LONG_WIRE_LIMIT,
                }
            }

            fn native_structured_output(&self) -> bool {
                self.core.wire != Wire::Anthropic
            }

            async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
                self.respond_with_items(request, None).await.map(|r| r.response)
            }

            async fn respond_streaming(
                &self,
                request: &ModelRequest,
                sink: &TextSink<'_>,
            ) -> Result<ModelResponse, ModelError> {
                self.respond_with_items(request, Some(sink)).await.map(|r| r.response)
            }

            async fn respond_with_items(
                &self,
                request: &ModelRequest,
                sink: Option<&TextSink<'_>>,
            ) -> Result<ModelReply, ModelError> {
                let recorded = self.core.record(request);
                let reply = self.next_reply(&recorded).await?;
                self.core.answer(&recorded, &reply, sink)
            }
        }
    };
}

impl TestModel {
    /// The next scripted reply.
    async fn next_reply(&self, request: &TestRequest) -> Result<Reply, ModelError> {
        let next = self.replies.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        next.ok_or_else(|| {
            ModelError::InvalidResponse(format!(
                "the test model has no reply left for request {}: it was scripted with {}",
                request.index, self.scripted
            ))
        })
    }
}

impl FunctionModel {
    /// The function's reply.
    async fn next_reply(&self, request: &TestRequest) -> Result<Reply, ModelError> {
        self.function
            .reply(request)
            .await
            .map_err(|e| ModelError::InvalidResponse(format!("the test model's function failed: {e}")))
    }
}

model_impl!(TestModel);
model_impl!(FunctionModel);

/// A test model as plain data, the bindings' form: `{"wire", "model", "stream", "replies"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestModelConfig {
    #[serde(default = "default_wire")]
    /// The wire the model speaks (default `openai_chat`).
    pub wire: Wire,
    #[serde(default = "default_name")]
    /// The name it reports (default `test-model`).
    pub model: String,
    #[serde(default)]
    /// Whether it streams its answers.
    pub stream: bool,
    /// The script; absent for a [`FunctionModel`].
    #[serde(default)]
    pub replies: Option<Vec<Value>>,
}

fn default_wire() -> Wire {
    Wire::OpenaiChat
}

fn default_name() -> String {
    DEFAULT_NAME.into()
}

/// Builds a model from a binding's JSON: `{"test_model": TestModelConfig}` is a [`TestModel`] (with
/// `replies`) or a [`FunctionModel`] (with `function`, the host's function, and no `replies`); anything
/// else is a [`crate::ModelConfig`]. A reply that is not one, a script and a function together, or
/// neither, is a configuration error naming it.
pub fn build_model(text: &str, function: Option<Arc<dyn ReplyFunction>>) -> Result<Arc<dyn Model>, Error> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Config(format!("model: {e}")))?;
    let Some(test) = value.get("test_model") else {
        if function.is_some() {
            return Err(Error::Config("model: a function is given for a model that is not a test model".into()));
        }
        return crate::ModelConfig::from_json(text)?.build();
    };
    if let Some(other) = value.as_object().and_then(|o| o.keys().find(|k| *k != "test_model")) {
        return Err(Error::Config(format!("model: unknown field `{other}` beside test_model")));
    }
    let config: TestModelConfig =
        serde_json::from_value(test.clone()).map_err(|e| Error::Config(format!("test model: {e}")))?;
    if config.model.trim().is_empty() {
        return Err(Error::Config("test model: the model name is empty".into()));
    }
    let model: Arc<dyn Model> = match (config.replies, function) {
        (Some(_), Some(_)) => {
            return Err(Error::Config(
                "test model: give replies (a TestModel) or a function (a FunctionModel), not both".into(),
            ));
        }
        (None, None) => {
            return Err(Error::Config("test model: give replies (a TestModel) or a function (a FunctionModel)".into()));
        }
        (Some(replies), None) => {
            let replies = replies
                .into_iter()
                .enumerate()
                .map(|(i, r)| Reply::from_value(r).map_err(|e| Error::Config(format!("test model: replies[{i}]: {e}"))))
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(TestModel::new(replies).wire(config.wire).name(config.model).stream(config.stream))
        }
        (None, Some(f)) => {
            Arc::new(FunctionModel::from_function(f).wire(config.wire).name(config.model).stream(config.stream))
        }
    };
    Ok(model)
}

#[cfg(test)]
mod tests;
