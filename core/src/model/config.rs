//! A model described as plain data, for the bindings: which wire, which model, where, and how.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Model;
use super::anthropic::Anthropic;
use super::openai_chat::OpenAiChat;
use super::openai_responses::OpenAiResponses;
use super::settings::ModelSettings;
use crate::error::Error;

/// The three wires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    /// OpenAI Chat Completions (`/chat/completions`), and the servers that speak it.
    OpenaiChat,
    /// Anthropic Messages (`/messages`).
    Anthropic,
    /// OpenAI Responses (`/responses`).
    OpenaiResponses,
}

impl Wire {
    /// The wire as configured (`openai_chat`, `anthropic`, `openai_responses`).
    pub fn as_str(self) -> &'static str {
        match self {
            Wire::OpenaiChat => "openai_chat",
            Wire::Anthropic => "anthropic",
            Wire::OpenaiResponses => "openai_responses",
        }
    }
}

/// A model as data. Absent fields take each wire's defaults (base URL and key from the environment).
/// Its `Debug` never shows the key, nor the values of the headers and query parameters.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The wire the provider speaks.
    pub wire: Wire,
    /// The model's name as the provider knows it.
    pub model: String,
    #[serde(default)]
    /// The provider's base URL (default: the wire's hosted API).
    pub base_url: Option<String>,
    #[serde(default)]
    /// The API key (default: the wire's environment variable).
    pub api_key: Option<String>,
    /// Stream answers (SSE).
    #[serde(default)]
    pub stream: bool,
    /// The limit on one HTTP request in seconds, retries not included (default 600).
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Attempts after the first on 408, 409, 429, 5xx and connection failures, except errors the same
    /// request gets again (`ambit::model::retry::retryable`; default 2).
    #[serde(default, deserialize_with = "retries_count")]
    pub max_retries: Option<u32>,
    /// Anthropic only: the most tokens one answer may have (default 4096).
    #[serde(default, deserialize_with = "tokens_count")]
    pub max_tokens: Option<u32>,
    /// A limit on tool names smaller than the wire's own (64 bytes on Chat Completions, 128 on the
    /// others), for an endpoint that holds names shorter (SPEC §3); above the wire's limit it is refused.
    #[serde(default, deserialize_with = "bytes_count")]
    pub max_tool_name_bytes: Option<usize>,
    /// The context window in tokens (default: the model family's, [`super::window`]).
    #[serde(default, deserialize_with = "window_count")]
    pub context_window: Option<u64>,
    /// Sampling and tool-use settings every request carries (see [`ModelSettings`]); an unknown setting,
    /// a value out of range, or one the wire lacks is refused naming it.
    #[serde(default, skip_serializing_if = "ModelSettings::is_empty")]
    pub settings: ModelSettings,
    /// Headers every request carries, replacing the wire's own of those names: Azure OpenAI's `api-key`,
    /// `OpenAI-Organization`, `OpenAI-Project`, …
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty", deserialize_with = "headers_map")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Query parameters every request's URL carries: Azure OpenAI's `api-version`, …
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty", deserialize_with = "query_map")]
    pub query: std::collections::BTreeMap<String, String>,
}

/// A count read from the plain-data form: anything but a whole number, 0 or more, that fits is refused
/// naming the field (serde's own message names only the type).
pub(crate) fn count<T: TryFrom<u64>>(field: &str, v: &serde_json::Value) -> Result<T, String> {
    let n = v.as_u64().ok_or_else(|| format!("{field} must be a whole number, 0 or more; got {v}"))?;
    T::try_from(n).map_err(|_| format!("{field} is too large: {n}"))
}

macro_rules! count_field {
    ($name:ident, $field:literal, $ty:ty) => {
        fn $name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
            match Option::<serde_json::Value>::deserialize(d)? {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => count($field, &v).map(Some).map_err(serde::de::Error::custom),
            }
        }
    };
}
macro_rules! text_map_field {
    ($name:ident, $field:literal) => {
        /// Names to texts; anything else is refused naming the field and the entry.
        fn $name<'de, D: serde::Deserializer<'de>>(
            d: D,
        ) -> Result<std::collections::BTreeMap<String, String>, D::Error> {
            let v = Option::<serde_json::Value>::deserialize(d)?.unwrap_or(serde_json::Value::Null);
            let map = match v {
                serde_json::Value::Null => return Ok(Default::default()),
                serde_json::Value::Object(m) => m,
                other => {
                    return Err(serde::de::Error::custom(format!("{} must map names to texts, got {other}", $field)));
                }
            };
            map.into_iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(t) => Ok((k, t)),
                    _ => Err(serde::de::Error::custom(format!("{}: the value of {k} must be a text", $field))),
                })
                .collect()
        }
    };
}
text_map_field!(headers_map, "headers");
text_map_field!(query_map, "query");
count_field!(retries_count, "max_retries", u32);
count_field!(tokens_count, "max_tokens", u32);
count_field!(bytes_count, "max_tool_name_bytes", usize);
count_field!(window_count, "context_window", u64);

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::http::REDACTED;
        let names = |m: &std::collections::BTreeMap<String, String>| {
            m.keys().map(|k| (k.clone(), REDACTED)).collect::<Vec<_>>()
        };
        f.debug_struct("ModelConfig")
            .field("wire", &self.wire)
            .field("model", &self.model)
            .field("base_url", &self.base_url.as_deref().map(super::http::shown_url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("stream", &self.stream)
            .field("timeout_secs", &self.timeout_secs)
            .field("max_retries", &self.max_retries)
            .field("max_tokens", &self.max_tokens)
            .field("max_tool_name_bytes", &self.max_tool_name_bytes)
            .field("context_window", &self.context_window)
            .field("settings", &self.settings)
            .field("headers", &names(&self.headers))
            .field("query", &names(&self.query))
            .finish()
    }
}

impl ModelConfig {
    /// A model on `wire` named `model`, every setting at its default.
    pub fn new(wire: Wire, model: impl Into<String>) -> Self {
        ModelConfig {
            wire,
            model: model.into(),
            base_url: None,
            api_key: None,
            stream: false,
            timeout_secs: None,
            max_retries: None,
            max_tokens: None,
            max_tool_name_bytes: None,
            context_window: None,
            settings: ModelSettings::default(),
            headers: Default::default(),
            query: Default::default(),
        }
    }

    /// Reads the JSON form, refusing unknown fields and wires by name.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        serde_json::from_str(text).map_err(|e| Error::Config(format!("model: {e}")))
    }

    /// Builds the model.
    pub fn build(&self) -> Result<Arc<dyn Model>, Error> {
        if self.model.trim().is_empty() {
            return Err(Error::Config("model: the model name is empty".into()));
        }
        let timeout = match self.timeout_secs {
            Some(t) => match Duration::try_from_secs_f64(t) {
                Ok(d) if !d.is_zero() => Some(d),
                _ => return Err(Error::Config(format!("model: timeout_secs must be a positive number, got {t}"))),
            },
            None => None,
        };
        if self.context_window == Some(0) {
            return Err(Error::Config("model: context_window must be at least 1".into()));
        }
        if self.max_tokens == Some(0) {
            return Err(Error::Config("model: max_tokens must be at least 1".into()));
        }
        // `max_tokens` is the Anthropic wire's own name for `max_output_tokens` (see `settings`).
        if self.max_tokens.is_some() && self.wire != Wire::Anthropic {
            return Err(Error::Config(format!(
                "model: max_tokens is an Anthropic setting; on the {} wire use max_output_tokens",
                self.wire.as_str()
            )));
        }
        if let (Some(a), Some(b)) = (self.max_tokens, self.settings.max_output_tokens)
            && a != b
        {
            return Err(Error::Config(format!(
                "model: max_tokens ({a}) and max_output_tokens ({b}) are the same setting on the anthropic wire; give one"
            )));
        }
        macro_rules! common {
            ($m:expr) => {{
                let mut m = $m.stream(self.stream);
                if let Some(u) = &self.base_url {
                    m = m.base_url(u.clone());
                }
                if let Some(k) = &self.api_key {
                    m = m.api_key(k.clone());
                }
                if let Some(t) = timeout {
                    m = m.timeout(t);
                }
                if let Some(n) = self.max_retries {
                    m = m.max_retries(n);
                }
                if let Some(n) = self.max_tool_name_bytes {
                    m = m
                        .with_max_tool_name_bytes(n)
                        .map_err(|e| Error::Config(format!("model: {}", config_text(e))))?;
                }
                if let Some(n) = self.context_window {
                    m = m.context_window(n);
                }
                for (k, v) in &self.headers {
                    m = m.header(k, v)?;
                }
                for (k, v) in &self.query {
                    m = m.query(k, v)?;
                }
                m.settings(self.settings.clone())?
            }};
        }
        Ok(match self.wire {
            Wire::OpenaiChat => Arc::new(common!(OpenAiChat::new(&self.model))),
            Wire::OpenaiResponses => Arc::new(common!(OpenAiResponses::new(&self.model))),
            Wire::Anthropic => {
                // max_tokens first: the settings' thinking budget is checked against it.
                let mut m = Anthropic::new(&self.model);
                if let Some(n) = self.max_tokens {
                    m = m.max_tokens(n);
                }
                Arc::new(common!(m))
            }
        })
    }
}

/// A configuration error's own text, without the `configuration error:` its display adds.
fn config_text(e: Error) -> String {
    match e {
        Error::Config(m) => m,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_names_the_wire() {
        let c = ModelConfig::from_json(r#"{"wire": "anthropic", "model": "claude", "stream": true}"#).unwrap();
        assert_eq!((c.wire, c.stream), (Wire::Anthropic, true));
        assert_eq!(c.build().unwrap().name(), "claude");
        let e = ModelConfig::from_json(r#"{"wire": "gemini", "model": "x"}"#).unwrap_err();
        assert_eq!(e.code(), "config");
        let e = ModelConfig::new(Wire::OpenaiChat, " ").build().err().unwrap();
        assert!(e.to_string().contains("model name is empty"), "{e}");
    }

    /// A bad count is refused naming the field, never taken as the default (serde's own message names
    /// only the type).
    #[test]
    fn a_bad_count_is_refused_by_name() {
        for (field, value, words) in [
            ("max_retries", "-1", "max_retries must be a whole number, 0 or more; got -1"),
            ("max_tokens", "2.5", "max_tokens must be a whole number, 0 or more; got 2.5"),
            ("max_tokens", "\"7\"", "max_tokens must be a whole number, 0 or more; got \"7\""),
            ("max_retries", "4294967296", "max_retries is too large: 4294967296"),
            ("max_tool_name_bytes", "-3", "max_tool_name_bytes must be a whole number, 0 or more; got -3"),
        ] {
            let text = format!(r#"{{"wire": "openai_chat", "model": "m", "{field}": {value}}}"#);
            let e = ModelConfig::from_json(&text).unwrap_err();
            assert_eq!(e.code(), "config");
            assert!(e.to_string().contains(words), "{field}: {e}");
        }
        let c =
            ModelConfig::from_json(r#"{"wire": "openai_chat", "model": "m", "max_retries": 0, "max_tokens": null}"#)
                .unwrap();
        assert_eq!((c.max_retries, c.max_tokens), (Some(0), None));
    }

    /// Extra headers and query parameters: a bad or reserved header name, or a value a header cannot
    /// carry, is refused naming the header and never echoing the value; an unknown option is refused by
    /// name.
    #[test]
    fn headers_and_query_are_checked_by_name() {
        let build = |extra: &str| {
            ModelConfig::from_json(&format!(r#"{{"wire": "openai_chat", "model": "m", {extra}}}"#))
                .and_then(|c| c.build().map(|_| ()))
        };
        for (extra, words) in [
            (
                r#""headers": {"content-type": "text/plain"}"#,
                "headers: content-type is set by the HTTP exchange itself",
            ),
            (r#""headers": {"Host": "evil.example"}"#, "headers: Host is set by the HTTP exchange itself"),
            (r#""headers": {"bad name": "x"}"#, "headers: \"bad name\" is not a header name"),
            (r#""query": {"": "x"}"#, "query: a parameter name is empty"),
            (r#""header": {"api-key": "k"}"#, "unknown field `header`"),
            (r#""headers": {"api-key": 7}"#, "headers: the value of api-key must be a text"),
            (r#""query": ["api-version"]"#, "query must map names to texts"),
        ] {
            let e = build(extra).unwrap_err();
            assert_eq!(e.code(), "config");
            assert!(e.to_string().contains(words), "{extra}: {e}");
        }
        let e = build(r#""headers": {"api-key": "secret\nX-Injected: 1"}"#).unwrap_err();
        assert!(e.to_string().contains("the value of api-key is not a valid header value"), "{e}");
        assert!(!e.to_string().contains("secret"), "the value is never echoed: {e}");
        // Negative control: good ones build.
        build(r#""headers": {"api-key": "k", "OpenAI-Project": "p"}, "query": {"api-version": "2024-10-21"}"#).unwrap();
    }

    /// The settings block is read by name and checked for the wire when the model is built.
    #[test]
    fn settings_are_refused_by_name_and_wire() {
        let read = |extra: &str| ModelConfig::from_json(&format!(r#"{{"wire": "anthropic", "model": "m", {extra}}}"#));
        let e = read(r#""settings": {"temprature": 1}"#).unwrap_err();
        assert!(e.to_string().contains("unknown setting `temprature`"), "{e}");
        let e = read(r#""settings": {"top_p": 3}"#).unwrap_err();
        assert!(e.to_string().contains("top_p must be between 0 and 1, got 3"), "{e}");
        let e = read(r#""settings": {"seed": 1}"#).unwrap().build().err().unwrap();
        assert_eq!(e.to_string(), "invalid configuration: model: seed is not a setting of the anthropic wire");
        let e = read(r#""max_tokens": 10, "settings": {"max_output_tokens": 20}"#).unwrap().build().err().unwrap();
        assert!(e.to_string().contains("max_tokens (10) and max_output_tokens (20) are the same setting"), "{e}");
        assert!(read(r#""max_tokens": 10, "settings": {"max_output_tokens": 10}"#).unwrap().build().is_ok());
        let chat = ModelConfig { max_tokens: Some(5), ..ModelConfig::new(Wire::OpenaiChat, "m") };
        let e = chat.build().err().unwrap();
        assert!(
            e.to_string().contains("max_tokens is an Anthropic setting; on the openai_chat wire use max_output_tokens")
        );
        let e = read(r#""max_tokens": 2048, "settings": {"thinking_budget": 2048}"#).unwrap().build().err().unwrap();
        assert!(e.to_string().contains("thinking_budget (2048) must be less than max_tokens (2048)"), "{e}");
        let e = read(r#""settings": {"thinking_budget": 8000}"#).unwrap().build().err().unwrap();
        assert!(e.to_string().contains("must be less than max_tokens (4096)"), "{e}");
        assert!(read(r#""max_tokens": 2049, "settings": {"thinking_budget": 2048}"#).unwrap().build().is_ok());
        assert!(read(r#""settings": {"thinking_budget": 8000, "max_output_tokens": 16000}"#).unwrap().build().is_ok());
        // Negative control: the same seed on Chat Completions is built.
        let c = ModelConfig::from_json(r#"{"wire": "openai_chat", "model": "m", "settings": {"seed": 1}}"#).unwrap();
        assert!(c.build().is_ok());
    }
}
