//! Model settings as data (issue 14, item 1): the sampling and tool-use settings every request of a model
//! carries, read and checked in one place, and written as each wire spells them.
//!
//! | setting | Chat Completions | Responses | Anthropic Messages |
//! |---|---|---|---|
//! | `max_output_tokens` | `max_completion_tokens` | `max_output_tokens` | `max_tokens` |
//! | `temperature` (0..=2) | `temperature` | `temperature` | refused |
//! | `top_p` (0..=1) | `top_p` | `top_p` | refused |
//! | `stop` (1 to 4 non-empty texts) | `stop` | refused | `stop_sequences` |
//! | `seed` | `seed` | refused | refused |
//! | `tool_choice` | `"auto"`, `"required"`, `"none"`, `{"type": "function", "function": {"name"}}` | `"auto"`, `"required"`, `"none"`, `{"type": "function", "name"}` | `{"type": "auto" \| "any" \| "none" \| "tool", "name"}` |
//! | `parallel_tool_calls` | `parallel_tool_calls` | `parallel_tool_calls` | `tool_choice.disable_parallel_tool_use` (the negation) |
//! | `text_tool_calls` (`off`, `auto`, `constrained`) | read by the client; `constrained` sends `response_format` | refused | refused |
//! | `reasoning_effort` (`none` … `max`) | `reasoning_effort` | `reasoning.effort` | `output_config.effort` (`low` … `max`) |
//! | `thinking_budget` (≥ 1024 tokens, < `max_tokens`) | refused | refused | `thinking: {"type": "enabled", "budget_tokens"}` |
//! | `prompt_caching` (default on) | refused (automatic) | refused (automatic) | `cache_control` on the last tool and on the system prompt, each where its prefix reaches the model's cacheable minimum |
//! | `strict` (default on) | `strict: true` on a function tool / `json_schema` whose schema qualifies ([`super::strict`]) | the same | refused |
//! | `store` | refused | `store`; `false` also asks for `include: ["reasoning.encrypted_content"]` | refused |
//!
//! The reference for each wire is the official `openai` (3.60) and `anthropic` (2.16) Python packages'
//! request types: the Messages API of that package has no `temperature`, `top_p` or `seed`, the
//! Responses API no `stop` or `seed`, so those are refused on those wires, naming the setting and wire.
//!
//! `tool_choice` and `parallel_tool_calls` are sent only with a request that offers tools (the wires
//! refuse them otherwise). A named tool is sent by its wire name (SPEC §3).
//!
//! `required` and a named tool bind the model's first answer to each user message only: once the model
//! has asked for a tool call since the conversation's last user message, the requests that follow send
//! `auto` (else the model could never end its turn, and the run would loop to `max_turns`);
//! [`ModelSettings::tool_choice_for`]. On Anthropic, extended thinking (`thinking_budget`) takes only
//! `auto` and `none`: `required` or a named tool beside it is refused naming `tool_choice`.
//!
//! On Anthropic, `max_output_tokens` is the wire's `max_tokens`; the older Anthropic-only `max_tokens`
//! setting of [`ModelConfig`](super::ModelConfig) is the same number: giving both with different values is
//! refused, and giving `max_tokens` on another wire is refused pointing to `max_output_tokens`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::Message;
use super::config::Wire;
use super::text_calls::TextToolCalls;
use crate::error::Error;

/// Which tool use the model is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (every wire's default).
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call a tool.
    None,
    /// The model must call this tool (by its name as declared, not as sent).
    Tool(String),
}

impl ToolChoice {
    /// Reads `auto`, `required`, `none`, or `{"name": tool}`.
    fn from_value(v: &Value) -> Result<ToolChoice, String> {
        match v {
            Value::String(s) if s == "auto" => Ok(ToolChoice::Auto),
            Value::String(s) if s == "required" => Ok(ToolChoice::Required),
            Value::String(s) if s == "none" => Ok(ToolChoice::None),
            Value::Object(o) if o.len() == 1 => match o.get("name").and_then(Value::as_str) {
                Some(n) if !n.trim().is_empty() => Ok(ToolChoice::Tool(n.to_string())),
                _ => Err(format!("tool_choice names a tool as {{\"name\": text}}, got {v}")),
            },
            _ => Err(format!("tool_choice must be \"auto\", \"required\", \"none\" or {{\"name\": tool}}, got {v}")),
        }
    }

    fn to_value(&self) -> Value {
        match self {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool(n) => json!({"name": n}),
        }
    }
}

/// The settings every request of a model carries; absent ones are left to the server's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelSettings {
    /// The most tokens one answer may have (at least 1).
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature, 0 to 2. Not on the Anthropic wire.
    pub temperature: Option<f64>,
    /// Nucleus sampling, 0 to 1. Not on the Anthropic wire.
    pub top_p: Option<f64>,
    /// Texts that end the answer when written: 1 to 4, none empty. Not on the Responses wire.
    pub stop: Option<Vec<String>>,
    /// A seed for repeatable sampling. Chat Completions only.
    pub seed: Option<i64>,
    /// Which tool use the model is asked for.
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may ask for several tool calls in one answer.
    pub parallel_tool_calls: Option<bool>,
    /// Whether tool calls a model writes as text are read as calls, and whether the server is asked to
    /// constrain the answer to one (see [`super::text_calls`]). Chat Completions only.
    pub text_tool_calls: Option<TextToolCalls>,
    /// How hard a reasoning model thinks: `none`, `minimal`, `low`, `medium`, `high`, `xhigh` or `max`
    /// (Anthropic: `low` to `max`, its `output_config.effort`).
    pub reasoning_effort: Option<String>,
    /// Anthropic only: extended thinking with this many tokens to think in (at least 1,024, and less than
    /// the answer's `max_tokens`).
    pub thinking_budget: Option<u32>,
    /// Anthropic only: prompt caching of the stable prefix (`cache_control` on the tools and the system
    /// prompt: instructions and catalog). On unless `false`; the OpenAI wires' servers cache by themselves.
    pub prompt_caching: Option<bool>,
    /// OpenAI wires: strict schemas (structured outputs). On unless `false`: a function tool, or a typed
    /// answer's `json_schema`, whose schema qualifies ([`super::strict::why_not_strict`]) is sent with
    /// `strict: true`, so the server decodes only what matches it; one that does not is sent without it.
    pub strict: Option<bool>,
    /// Responses only: whether the server keeps the response (`store`). `false` is stateless use: the
    /// request also asks for the reasoning items' `encrypted_content`, which the next requests send back
    /// (a reasoning model only; OpenAI refuses the `include` for other models).
    pub store: Option<bool>,
}

/// Every `reasoning_effort` value (the official `openai` package's `ReasoningEffort`).
pub const REASONING_EFFORTS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];
/// The `reasoning_effort` values of the Anthropic wire (its `output_config.effort`).
pub const ANTHROPIC_EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];
/// The least thinking budget Anthropic takes.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// Every setting's name, in the order they are documented.
pub const SETTING_NAMES: [&str; 13] = [
    "max_output_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "tool_choice",
    "parallel_tool_calls",
    "text_tool_calls",
    "reasoning_effort",
    "thinking_budget",
    "prompt_caching",
    "strict",
    "store",
];

impl ModelSettings {
    /// Whether no setting is given.
    pub fn is_empty(&self) -> bool {
        *self == ModelSettings::default()
    }

    /// Reads the plain-data form, refusing an unknown setting or a value of the wrong kind by name.
    pub fn from_map(map: &Map<String, Value>) -> Result<ModelSettings, String> {
        let mut s = ModelSettings::default();
        for (key, v) in map {
            if v.is_null() {
                continue;
            }
            match key.as_str() {
                "max_output_tokens" => s.max_output_tokens = Some(super::config::count(key, v)?),
                "temperature" => s.temperature = Some(number(key, v)?),
                "top_p" => s.top_p = Some(number(key, v)?),
                "stop" => {
                    let list = v.as_array().ok_or_else(|| format!("stop must be a list of texts, got {v}"))?;
                    let texts = list
                        .iter()
                        .map(|t| {
                            t.as_str().map(str::to_string).ok_or_else(|| format!("stop entries are texts, got {t}"))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    s.stop = Some(texts);
                }
                "seed" => s.seed = Some(v.as_i64().ok_or_else(|| format!("seed must be a whole number, got {v}"))?),
                "tool_choice" => s.tool_choice = Some(ToolChoice::from_value(v)?),
                "parallel_tool_calls" => {
                    s.parallel_tool_calls =
                        Some(v.as_bool().ok_or_else(|| format!("parallel_tool_calls must be true or false, got {v}"))?)
                }
                "text_tool_calls" => s.text_tool_calls = Some(TextToolCalls::from_value(v)?),
                "reasoning_effort" => {
                    s.reasoning_effort =
                        Some(v.as_str().ok_or_else(|| format!("reasoning_effort must be a text, got {v}"))?.to_string())
                }
                "thinking_budget" => s.thinking_budget = Some(super::config::count(key, v)?),
                "prompt_caching" => s.prompt_caching = Some(flag(key, v)?),
                "strict" => s.strict = Some(flag(key, v)?),
                "store" => s.store = Some(flag(key, v)?),
                other => {
                    return Err(format!("unknown setting `{other}`; the settings are {}", SETTING_NAMES.join(", ")));
                }
            }
        }
        s.check(None)?;
        Ok(s)
    }

    /// The one check of every setting: ranges, and, given a wire, what that wire lacks.
    pub fn check(&self, wire: Option<Wire>) -> Result<(), String> {
        if self.max_output_tokens == Some(0) {
            return Err("max_output_tokens must be at least 1".into());
        }
        if let Some(t) = self.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
            return Err(format!("temperature must be between 0 and 2, got {t}"));
        }
        if let Some(p) = self.top_p.filter(|p| !(0.0..=1.0).contains(p)) {
            return Err(format!("top_p must be between 0 and 1, got {p}"));
        }
        if let Some(stop) = &self.stop {
            if stop.is_empty() || stop.len() > 4 {
                return Err(format!("stop takes 1 to 4 texts, got {}", stop.len()));
            }
            if stop.iter().any(String::is_empty) {
                return Err("stop entries must not be empty".into());
            }
        }
        if let Some(e) = self.reasoning_effort.as_deref().filter(|e| !REASONING_EFFORTS.contains(e)) {
            return Err(format!("reasoning_effort must be one of {}, got {e:?}", REASONING_EFFORTS.join(", ")));
        }
        if let Some(b) = self.thinking_budget.filter(|b| *b < MIN_THINKING_BUDGET) {
            return Err(format!("thinking_budget must be at least {MIN_THINKING_BUDGET} tokens, got {b}"));
        }
        if wire == Some(Wire::Anthropic)
            && let Some(e) = self.reasoning_effort.as_deref().filter(|e| !ANTHROPIC_EFFORTS.contains(e))
        {
            return Err(format!(
                "reasoning_effort {e:?} is not a value of the anthropic wire ({})",
                ANTHROPIC_EFFORTS.join(", ")
            ));
        }
        let lacks = |name: &str, w: Wire| format!("{name} is not a setting of the {} wire", w.as_str());
        match wire {
            Some(w @ Wire::OpenaiResponses) if self.stop.is_some() => Err(lacks("stop", w)),
            Some(w @ (Wire::OpenaiResponses | Wire::Anthropic)) if self.seed.is_some() => Err(lacks("seed", w)),
            Some(w @ Wire::Anthropic) if self.temperature.is_some() => Err(lacks("temperature", w)),
            Some(w @ Wire::Anthropic) if self.top_p.is_some() => Err(lacks("top_p", w)),
            Some(w @ (Wire::OpenaiResponses | Wire::Anthropic)) if self.text_tool_calls.is_some() => {
                Err(lacks("text_tool_calls", w))
            }
            Some(w @ (Wire::OpenaiChat | Wire::OpenaiResponses)) if self.thinking_budget.is_some() => {
                Err(format!("{}; use reasoning_effort", lacks("thinking_budget", w)))
            }
            Some(w @ (Wire::OpenaiChat | Wire::OpenaiResponses)) if self.prompt_caching.is_some() => {
                Err(format!("{} (its servers cache prompts by themselves)", lacks("prompt_caching", w)))
            }
            Some(w @ Wire::Anthropic) if self.strict.is_some() => Err(lacks("strict", w)),
            Some(w @ (Wire::OpenaiChat | Wire::Anthropic)) if self.store.is_some() => Err(lacks("store", w)),
            Some(Wire::Anthropic)
                if self.thinking_budget.is_some()
                    && matches!(self.tool_choice, Some(ToolChoice::Required | ToolChoice::Tool(_))) =>
            {
                Err(format!(
                    "tool_choice {} cannot be used with thinking_budget: extended thinking takes only tool_choice \"auto\" or \"none\"",
                    self.tool_choice.as_ref().map(ToolChoice::to_value).unwrap_or_default()
                ))
            }
            _ => Ok(()),
        }
    }

    /// The tool choice a request with this conversation is sent with: `required` and a named tool hold
    /// until the model has asked for a tool call since the last user message, then `auto` (a model made
    /// to call a tool on every answer could never end its turn).
    pub fn tool_choice_for(&self, messages: &[Message]) -> Option<ToolChoice> {
        match &self.tool_choice {
            Some(ToolChoice::Required | ToolChoice::Tool(_)) if called_since_user(messages) => Some(ToolChoice::Auto),
            other => other.clone(),
        }
    }

    /// Whether strict schemas are asked for (the OpenAI wires; on unless `strict: false`).
    pub fn strict_schemas(&self) -> bool {
        self.strict != Some(false)
    }

    /// Writes the settings into a request body of `wire`. `has_tools`: the request offers tools;
    /// `messages`: the request's conversation (for [`ModelSettings::tool_choice_for`]); `wire_name` maps a
    /// declared tool name to the name the wire sees.
    pub(crate) fn apply(
        &self,
        wire: Wire,
        fields: &mut Map<String, Value>,
        has_tools: bool,
        messages: &[Message],
        wire_name: &dyn Fn(&str) -> String,
    ) {
        let mut put = |k: &str, v: Value| {
            fields.insert(k.to_string(), v);
        };
        if let Some(n) = self.max_output_tokens {
            let key = match wire {
                Wire::OpenaiChat => "max_completion_tokens",
                Wire::OpenaiResponses => "max_output_tokens",
                Wire::Anthropic => "max_tokens",
            };
            put(key, json!(n));
        }
        if let Some(t) = self.temperature {
            put("temperature", json!(t));
        }
        if let Some(p) = self.top_p {
            put("top_p", json!(p));
        }
        if let Some(stop) = &self.stop {
            put(if wire == Wire::Anthropic { "stop_sequences" } else { "stop" }, json!(stop));
        }
        if let Some(seed) = self.seed {
            put("seed", json!(seed));
        }
        if let Some(effort) = &self.reasoning_effort {
            match wire {
                Wire::OpenaiChat => put("reasoning_effort", json!(effort)),
                Wire::OpenaiResponses => put("reasoning", json!({"effort": effort})),
                Wire::Anthropic => put("output_config", json!({"effort": effort})),
            }
        }
        if let Some(budget) = self.thinking_budget {
            put("thinking", json!({"type": "enabled", "budget_tokens": budget}));
        }
        if let Some(store) = self.store {
            put("store", json!(store));
            if !store {
                // Stateless: the server keeps no reasoning items, so each comes back encrypted, and is
                // sent back so (`Message::Provider`, verbatim).
                put("include", json!(["reasoning.encrypted_content"]));
            }
        }
        if !has_tools {
            return;
        }
        let tool_choice = self.tool_choice_for(messages);
        let named = |n: &str| wire_name(n);
        match wire {
            Wire::OpenaiChat | Wire::OpenaiResponses => {
                if let Some(choice) = &tool_choice {
                    put(
                        "tool_choice",
                        match choice {
                            ToolChoice::Tool(n) if wire == Wire::OpenaiChat => {
                                json!({"type": "function", "function": {"name": named(n)}})
                            }
                            ToolChoice::Tool(n) => json!({"type": "function", "name": named(n)}),
                            other => other.to_value(),
                        },
                    );
                }
                if let Some(p) = self.parallel_tool_calls {
                    put("parallel_tool_calls", json!(p));
                }
            }
            Wire::Anthropic => {
                let mut choice = match &tool_choice {
                    None if self.parallel_tool_calls.is_none() => return,
                    None | Some(ToolChoice::Auto) => json!({"type": "auto"}),
                    Some(ToolChoice::Required) => json!({"type": "any"}),
                    Some(ToolChoice::None) => json!({"type": "none"}),
                    Some(ToolChoice::Tool(n)) => json!({"type": "tool", "name": named(n)}),
                };
                // `none` has no parallel flag: no tool is called at all.
                if let Some(p) = self.parallel_tool_calls
                    && choice["type"] != "none"
                {
                    choice["disable_parallel_tool_use"] = json!(!p);
                }
                put("tool_choice", choice);
            }
        }
    }

    /// The plain-data form (what [`ModelSettings::from_map`] reads).
    pub fn to_map(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.to_string(), v);
            }
        };
        put("max_output_tokens", self.max_output_tokens.map(|n| json!(n)));
        put("temperature", self.temperature.map(|n| json!(n)));
        put("top_p", self.top_p.map(|n| json!(n)));
        put("stop", self.stop.as_ref().map(|s| json!(s)));
        put("seed", self.seed.map(|n| json!(n)));
        put("tool_choice", self.tool_choice.as_ref().map(ToolChoice::to_value));
        put("parallel_tool_calls", self.parallel_tool_calls.map(|b| json!(b)));
        put("text_tool_calls", self.text_tool_calls.map(|t| json!(t.as_str())));
        put("reasoning_effort", self.reasoning_effort.as_ref().map(|e| json!(e)));
        put("thinking_budget", self.thinking_budget.map(|n| json!(n)));
        put("prompt_caching", self.prompt_caching.map(|b| json!(b)));
        put("strict", self.strict.map(|b| json!(b)));
        put("store", self.store.map(|b| json!(b)));
        m
    }
}

/// A true-or-false read from the plain-data form, refused naming the setting.
fn flag(key: &str, v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| format!("{key} must be true or false, got {v}"))
}

/// A number read from the plain-data form, refused naming the setting.
fn number(key: &str, v: &Value) -> Result<f64, String> {
    v.as_f64().ok_or_else(|| format!("{key} must be a number, got {v}"))
}

impl<'de> Deserialize<'de> for ModelSettings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(d)?;
        ModelSettings::from_map(&map).map_err(serde::de::Error::custom)
    }
}

impl Serialize for ModelSettings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

/// Whether the model has asked for a tool call since the conversation's last user message.
fn called_since_user(messages: &[Message]) -> bool {
    messages
        .iter()
        .rev()
        .take_while(|m| !matches!(m, Message::User { .. }))
        .any(|m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()))
}

/// A configuration error for a setting, naming the model's wire.
pub(crate) fn config_error(e: String) -> Error {
    Error::Config(format!("model: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: Value) -> Result<ModelSettings, String> {
        ModelSettings::from_map(v.as_object().unwrap())
    }

    #[test]
    fn each_bad_value_and_unknown_setting_is_refused_by_name() {
        for (v, words) in [
            (json!({"temprature": 1}), "unknown setting `temprature`"),
            (json!({"max_output_tokens": 0}), "max_output_tokens must be at least 1"),
            (json!({"max_output_tokens": -1}), "max_output_tokens must be a whole number, 0 or more; got -1"),
            (json!({"max_output_tokens": 4294967296u64}), "max_output_tokens is too large: 4294967296"),
            (json!({"temperature": 2.5}), "temperature must be between 0 and 2, got 2.5"),
            (json!({"temperature": "hot"}), "temperature must be a number"),
            (json!({"top_p": 1.5}), "top_p must be between 0 and 1, got 1.5"),
            (json!({"stop": []}), "stop takes 1 to 4 texts, got 0"),
            (json!({"stop": ["a", "b", "c", "d", "e"]}), "stop takes 1 to 4 texts, got 5"),
            (json!({"stop": [""]}), "stop entries must not be empty"),
            (json!({"stop": "END"}), "stop must be a list of texts"),
            (json!({"seed": 1.5}), "seed must be a whole number"),
            (json!({"tool_choice": "any"}), "tool_choice must be \"auto\""),
            (json!({"tool_choice": {"name": " "}}), "tool_choice names a tool"),
            (json!({"parallel_tool_calls": "no"}), "parallel_tool_calls must be true or false"),
            (json!({"text_tool_calls": "on"}), "text_tool_calls must be \"off\", \"auto\" or \"constrained\""),
            (json!({"reasoning_effort": "extreme"}), "reasoning_effort must be one of none, minimal"),
            (json!({"reasoning_effort": 3}), "reasoning_effort must be a text"),
            (json!({"thinking_budget": 1023}), "thinking_budget must be at least 1024 tokens, got 1023"),
            (json!({"thinking_budget": -1}), "thinking_budget must be a whole number"),
            (json!({"prompt_caching": "yes"}), "prompt_caching must be true or false"),
        ] {
            let e = read(v.clone()).unwrap_err();
            assert!(e.contains(words), "{v}: {e}");
        }
        // Negative control: the same settings in range are read.
        let s = read(json!({"max_output_tokens": 1, "temperature": 2, "top_p": 0, "stop": ["a", "b", "c", "d"],
                            "seed": -7, "tool_choice": {"name": "f"}, "parallel_tool_calls": false}))
        .unwrap();
        assert_eq!(s.seed, Some(-7));
        assert_eq!(read(Value::Object(s.to_map())).unwrap(), s);
    }

    #[test]
    fn a_setting_the_wire_lacks_is_refused_naming_it_and_the_wire() {
        let seed = ModelSettings { seed: Some(1), ..Default::default() };
        assert_eq!(seed.check(Some(Wire::Anthropic)).unwrap_err(), "seed is not a setting of the anthropic wire");
        assert!(seed.check(Some(Wire::OpenaiResponses)).unwrap_err().contains("openai_responses"));
        assert!(seed.check(Some(Wire::OpenaiChat)).is_ok());
        let stop = ModelSettings { stop: Some(vec!["x".into()]), ..Default::default() };
        assert_eq!(
            stop.check(Some(Wire::OpenaiResponses)).unwrap_err(),
            "stop is not a setting of the openai_responses wire"
        );
        assert!(stop.check(Some(Wire::Anthropic)).is_ok());
        let hot = ModelSettings { temperature: Some(1.5), ..Default::default() };
        assert_eq!(hot.check(Some(Wire::Anthropic)).unwrap_err(), "temperature is not a setting of the anthropic wire");
        assert!(hot.check(Some(Wire::OpenaiChat)).is_ok());
        let text = ModelSettings { text_tool_calls: Some(TextToolCalls::Auto), ..Default::default() };
        assert_eq!(
            text.check(Some(Wire::Anthropic)).unwrap_err(),
            "text_tool_calls is not a setting of the anthropic wire"
        );
        assert!(text.check(Some(Wire::OpenaiResponses)).unwrap_err().contains("text_tool_calls"));
        assert!(text.check(Some(Wire::OpenaiChat)).is_ok());
        let budget = ModelSettings { thinking_budget: Some(2048), ..Default::default() };
        assert_eq!(
            budget.check(Some(Wire::OpenaiChat)).unwrap_err(),
            "thinking_budget is not a setting of the openai_chat wire; use reasoning_effort"
        );
        assert!(budget.check(Some(Wire::Anthropic)).is_ok());
        let minimal = ModelSettings { reasoning_effort: Some("minimal".into()), ..Default::default() };
        assert!(
            minimal
                .check(Some(Wire::Anthropic))
                .unwrap_err()
                .contains("\"minimal\" is not a value of the anthropic wire")
        );
        assert!(minimal.check(Some(Wire::OpenaiResponses)).is_ok());
        let top_p = ModelSettings { top_p: Some(0.5), ..Default::default() };
        assert_eq!(top_p.check(Some(Wire::Anthropic)).unwrap_err(), "top_p is not a setting of the anthropic wire");
    }

    fn body(s: &ModelSettings, wire: Wire, tools: bool) -> Value {
        let mut m = Map::new();
        s.apply(wire, &mut m, tools, &[], &|n| format!("w_{n}"));
        Value::Object(m)
    }

    #[test]
    fn each_wire_spells_the_settings_its_way() {
        let s = ModelSettings {
            max_output_tokens: Some(64),
            temperature: Some(0.5),
            top_p: Some(0.9),
            stop: Some(vec!["END".into()]),
            seed: Some(3),
            tool_choice: Some(ToolChoice::Tool("f".into())),
            parallel_tool_calls: Some(false),
            text_tool_calls: None,
            reasoning_effort: None,
            thinking_budget: None,
            prompt_caching: None,
            strict: None,
            store: None,
        };
        assert_eq!(
            body(&s, Wire::OpenaiChat, true),
            json!({"max_completion_tokens": 64, "temperature": 0.5, "top_p": 0.9, "stop": ["END"], "seed": 3,
                   "tool_choice": {"type": "function", "function": {"name": "w_f"}}, "parallel_tool_calls": false})
        );
        let r = ModelSettings { stop: None, seed: None, ..s.clone() };
        assert_eq!(
            body(&r, Wire::OpenaiResponses, true),
            json!({"max_output_tokens": 64, "temperature": 0.5, "top_p": 0.9,
                   "tool_choice": {"type": "function", "name": "w_f"}, "parallel_tool_calls": false})
        );
        let a = ModelSettings { temperature: None, top_p: None, stop: Some(vec!["END".into()]), ..r.clone() };
        assert_eq!(
            body(&a, Wire::Anthropic, true),
            json!({"max_tokens": 64, "stop_sequences": ["END"],
                   "tool_choice": {"type": "tool", "name": "w_f", "disable_parallel_tool_use": true}})
        );
        let required = ModelSettings { tool_choice: Some(ToolChoice::Required), ..Default::default() };
        assert_eq!(body(&required, Wire::Anthropic, true), json!({"tool_choice": {"type": "any"}}));
        assert_eq!(body(&required, Wire::OpenaiChat, true), json!({"tool_choice": "required"}));
        let serial = ModelSettings { parallel_tool_calls: Some(false), ..Default::default() };
        assert_eq!(
            body(&serial, Wire::Anthropic, true),
            json!({"tool_choice": {"type": "auto", "disable_parallel_tool_use": true}})
        );
        let think = ModelSettings { reasoning_effort: Some("high".into()), ..Default::default() };
        assert_eq!(body(&think, Wire::OpenaiChat, false), json!({"reasoning_effort": "high"}));
        assert_eq!(body(&think, Wire::OpenaiResponses, false), json!({"reasoning": {"effort": "high"}}));
        assert_eq!(body(&think, Wire::Anthropic, false), json!({"output_config": {"effort": "high"}}));
        let budget = ModelSettings { thinking_budget: Some(2048), ..Default::default() };
        assert_eq!(
            body(&budget, Wire::Anthropic, false),
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})
        );
        // Without tools, no tool setting is sent (the wires refuse them).
        assert_eq!(body(&s, Wire::OpenaiChat, false)["tool_choice"], Value::Null);
        assert_eq!(body(&serial, Wire::Anthropic, false), json!({}));
    }

    fn called() -> Vec<Message> {
        vec![
            Message::user("weather?"),
            Message::Assistant {
                content: None,
                tool_calls: vec![super::super::ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                    from_text: false,
                }],
            },
            Message::Tool {
                call_id: "c1".into(),
                name: "f".into(),
                content: "ok".into(),
                is_error: false,
                parts: Vec::new(),
            },
        ]
    }

    /// `required` and a named tool bind the first answer to each user message: once the model has called
    /// a tool since, the request says `auto` (else the model could never end its turn).
    #[test]
    fn a_forced_tool_choice_binds_only_the_first_answer_to_each_user_message() {
        let opening = vec![Message::user("weather?")];
        let mut again = called();
        again.push(Message::user("and tomorrow?"));
        for (choice, chat, anthropic) in [
            (ToolChoice::Required, json!("required"), json!({"type": "any"})),
            (
                ToolChoice::Tool("f".into()),
                json!({"type": "function", "function": {"name": "w_f"}}),
                json!({"type": "tool", "name": "w_f"}),
            ),
        ] {
            let s = ModelSettings { tool_choice: Some(choice.clone()), ..Default::default() };
            let sent = |wire, messages: &[Message]| {
                let mut m = Map::new();
                s.apply(wire, &mut m, true, messages, &|n| format!("w_{n}"));
                m.remove("tool_choice").unwrap_or_default()
            };
            assert_eq!(sent(Wire::OpenaiChat, &opening), chat);
            assert_eq!(sent(Wire::Anthropic, &opening), anthropic);
            assert_eq!(sent(Wire::OpenaiChat, &called()), json!("auto"), "{choice:?} after a call");
            assert_eq!(sent(Wire::OpenaiResponses, &called()), json!("auto"));
            assert_eq!(sent(Wire::Anthropic, &called()), json!({"type": "auto"}));
            // A new user message binds the next answer again.
            assert_eq!(sent(Wire::OpenaiChat, &again), chat);
        }
        // `none` and `auto` are kept whatever was called (negative control: only the forcing ones change).
        let none = ModelSettings { tool_choice: Some(ToolChoice::None), ..Default::default() };
        assert_eq!(none.tool_choice_for(&called()), Some(ToolChoice::None));
    }

    #[test]
    fn extended_thinking_refuses_a_forced_tool_choice_by_name() {
        for choice in [ToolChoice::Required, ToolChoice::Tool("f".into())] {
            let s = ModelSettings { thinking_budget: Some(2048), tool_choice: Some(choice), ..Default::default() };
            let e = s.check(Some(Wire::Anthropic)).unwrap_err();
            assert!(e.starts_with("tool_choice ") && e.contains("cannot be used with thinking_budget"), "{e}");
        }
        for choice in [ToolChoice::Auto, ToolChoice::None] {
            let s = ModelSettings { thinking_budget: Some(2048), tool_choice: Some(choice), ..Default::default() };
            assert_eq!(s.check(Some(Wire::Anthropic)), Ok(()));
        }
        // Without thinking, `required` is fine on Anthropic (negative control).
        let s = ModelSettings { tool_choice: Some(ToolChoice::Required), ..Default::default() };
        assert_eq!(s.check(Some(Wire::Anthropic)), Ok(()));
    }

    #[test]
    fn strict_and_store_are_read_and_refused_on_wires_without_them() {
        let s = read(json!({"strict": false, "store": false})).unwrap();
        assert_eq!((s.strict, s.store), (Some(false), Some(false)));
        assert!(!s.strict_schemas() && ModelSettings::default().strict_schemas());
        assert!(read(json!({"strict": "no"})).unwrap_err().contains("strict must be true or false"));
        assert!(read(json!({"store": 0})).unwrap_err().contains("store must be true or false"));
        let strict = ModelSettings { strict: Some(true), ..Default::default() };
        assert_eq!(strict.check(Some(Wire::Anthropic)).unwrap_err(), "strict is not a setting of the anthropic wire");
        assert!(strict.check(Some(Wire::OpenaiChat)).is_ok());
        let store = ModelSettings { store: Some(false), ..Default::default() };
        assert_eq!(store.check(Some(Wire::OpenaiChat)).unwrap_err(), "store is not a setting of the openai_chat wire");
        assert!(store.check(Some(Wire::Anthropic)).is_err());
        assert!(store.check(Some(Wire::OpenaiResponses)).is_ok());
        assert_eq!(
            body(&store, Wire::OpenaiResponses, false),
            json!({"store": false, "include": ["reasoning.encrypted_content"]})
        );
        let kept = ModelSettings { store: Some(true), ..Default::default() };
        assert_eq!(body(&kept, Wire::OpenaiResponses, false), json!({"store": true}));
    }
}
