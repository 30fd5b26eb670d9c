//! A model described as plain data, for the bindings: which wire, which model, where, and how.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Model;
use super::anthropic::Anthropic;
use super::openai_chat::OpenAiChat;
use super::openai_responses::OpenAiResponses;
use crate::error::Error;

/// The three wires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    OpenaiChat,
    Anthropic,
    OpenaiResponses,
}

impl Wire {
    pub fn as_str(self) -> &'static str {
        match self {
            Wire::OpenaiChat => "openai_chat",
            Wire::Anthropic => "anthropic",
            Wire::OpenaiResponses => "openai_responses",
        }
    }
}

/// A model as data. Absent fields take each wire's defaults (base URL and key from the environment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub wire: Wire,
    pub model: String,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
    /// Stream answers (SSE).
    #[serde(default)]
    pub stream: bool,
    /// The limit on one HTTP request in seconds, retries not included (default 600).
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Attempts after the first on 429, 5xx and connection failures (default 2).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// Anthropic only: the most tokens one answer may have (default 4096).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// A limit on tool names smaller than the wire's own (64 bytes on Chat Completions, 128 on the
    /// others), for an endpoint that holds names shorter (SPEC §3); above the wire's limit it is refused.
    #[serde(default, deserialize_with = "bytes_count")]
    pub max_tool_name_bytes: Option<usize>,
}

fn not_a_byte_count(v: &dyn std::fmt::Display) -> String {
    format!("max_tool_name_bytes must be a whole number of bytes, got {v}")
}

/// A count of bytes; anything else is refused naming the field (serde's own message would not).
fn bytes_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) => Ok(Some(n)),
            None => Err(serde::de::Error::custom(not_a_byte_count(&v))),
        },
    }
}

impl ModelConfig {
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
        }
    }

    /// Sets `max_tool_name_bytes` from a binding's signed integer; a negative is refused by name.
    pub fn set_max_tool_name_bytes(&mut self, bytes: Option<i64>) -> Result<(), Error> {
        self.max_tool_name_bytes = match bytes {
            None => None,
            Some(n) => Some(usize::try_from(n).map_err(|_| Error::Config(format!("model: {}", not_a_byte_count(&n))))?),
        };
        Ok(())
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
        if self.max_tokens == Some(0) {
            return Err(Error::Config("model: max_tokens must be at least 1".into()));
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
                m
            }};
        }
        Ok(match self.wire {
            Wire::OpenaiChat => Arc::new(common!(OpenAiChat::new(&self.model))),
            Wire::OpenaiResponses => Arc::new(common!(OpenAiResponses::new(&self.model))),
            Wire::Anthropic => {
                let mut m = common!(Anthropic::new(&self.model));
                if let Some(n) = self.max_tokens {
                    m = m.max_tokens(n);
                }
                Arc::new(m)
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
}
