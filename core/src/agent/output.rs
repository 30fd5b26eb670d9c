//! Typed final output: the run's final answer is JSON matching a schema the host gives (a Pydantic model,
//! a zod schema, a `Codable` type, a serde type; each binding derives the schema, the core checks it).
//!
//! Where the wire has native structured output (Chat Completions `response_format`, Responses
//! `text.format`) the request asks for it; elsewhere (Anthropic Messages) the model is offered a
//! `final_answer` tool whose input schema is the output's, and a call of it is the answer. Either way the
//! answer is read here, by the argument rule (crate::tools::args), the one place JSON is checked against
//! a schema; an answer that does not match goes back to the model, saying what was wrong, up to
//! [`OutputType::retries`] times, then the run fails with [`crate::Error::OutputInvalid`] carrying the last
//! attempt.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::model::StructuredOutput;
use crate::tools::ToolSpec;

/// The tool a model without native structured output answers through.
pub const FINAL_ANSWER_TOOL: &str = "final_answer";

/// How many times, by default, an answer that does not match goes back to the model.
pub const DEFAULT_OUTPUT_RETRIES: u32 = 2;

fn default_retries() -> u32 {
    DEFAULT_OUTPUT_RETRIES
}

/// The type of a run's final answer: a name and a JSON Schema for an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputType {
    /// The schema's name as the wire carries it: 1 to 64 letters, digits, `_` or `-`.
    pub name: String,
    /// A JSON Schema whose `type` is `object` (every wire's structured output wants an object).
    pub schema: Value,
    /// How many answers that do not match go back to the model before the run fails (default
    /// [`DEFAULT_OUTPUT_RETRIES`]).
    #[serde(default = "default_retries")]
    pub retries: u32,
}

impl OutputType {
    /// An output type named `name` with `schema`, and the default retries.
    pub fn new(name: impl Into<String>, schema: Value) -> OutputType {
        OutputType { name: name.into(), schema, retries: DEFAULT_OUTPUT_RETRIES }
    }

    /// The JSON form a binding sends (`name`, `schema`, `retries`), refusing an unknown field by name.
    pub fn from_json(text: &str) -> Result<OutputType, crate::Error> {
        let o: OutputType =
            serde_json::from_str(text).map_err(|e| crate::Error::Config(format!("output type: {e}")))?;
        o.validate().map_err(crate::Error::Config)?;
        Ok(o)
    }

    /// The same with `retries` retries.
    pub fn retries(mut self, retries: u32) -> OutputType {
        self.retries = retries;
        self
    }

    /// Refuses a name a wire would not take and a schema that is not an object's, by name.
    pub fn validate(&self) -> Result<(), String> {
        let n = &self.name;
        if n.is_empty() || n.len() > 64 || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(format!("output type name '{n}' must be 1 to 64 letters, digits, '_' or '-'"));
        }
        if self.schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!("the schema of output type '{n}' must have \"type\": \"object\", got {}", self.schema));
        }
        Ok(())
    }

    /// What the request asks of a wire with native structured output.
    pub fn structured(&self) -> StructuredOutput {
        StructuredOutput { name: self.name.clone(), schema: self.schema.clone() }
    }

    /// The `final_answer` tool a model without native structured output answers through.
    pub fn final_answer_tool(&self) -> ToolSpec {
        ToolSpec::new(
            FINAL_ANSWER_TOOL,
            format!(
                "Give your final answer ({}) by calling this tool once, with the answer as its arguments, when you \
                 are done; do not answer in text.",
                self.name
            ),
            self.schema.clone(),
        )
        .with_level(crate::Level::None)
    }

    /// Reads an answer: JSON text matching the schema. The value the host decodes (as the argument rule
    /// reads it: `2.0` is `2`, a blank optional field is left out), or what is wrong with it.
    pub fn read(&self, text: &str) -> Result<Value, String> {
        let value: Value =
            serde_json::from_str(text.trim()).map_err(|e| format!("the answer is not a JSON object ({e})"))?;
        crate::tools::args::read_arguments(&self.schema, &[], value)
            .map_err(|e| e.replace("argument '", "field '").replace("unknown argument", "unknown field"))
    }

    /// The message that sends a wrong answer back to the model.
    pub fn retry_message(&self, problem: &str, via_tool: bool) -> String {
        let how = if via_tool {
            format!("Call {FINAL_ANSWER_TOOL} again with arguments that match its schema.")
        } else {
            "Answer again with only a JSON object that matches the schema.".to_string()
        };
        format!("Your final answer does not match the output type {}: {problem}. {how}", self.name)
    }
}

/// The JSON text a host decodes for an accepted answer.
pub(crate) fn text_of(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| json!(null).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> OutputType {
        OutputType::new(
            "Weather",
            json!({"type": "object", "properties": {
                "city": {"type": "string"}, "temperature_c": {"type": "integer"},
                "sky": {"type": "string", "enum": ["sunny", "cloudy"]}},
                "required": ["city", "temperature_c"], "additionalProperties": false}),
        )
    }

    #[test]
    fn an_answer_is_read_by_the_argument_rule() {
        let t = weather();
        assert_eq!(
            t.read(r#" {"city": "Paris", "temperature_c": 22.0} "#).unwrap(),
            json!({"city": "Paris", "temperature_c": 22})
        );
        for (answer, named) in [
            ("Sunny in Paris.", "not a JSON object"),
            (r#"{"city": "Paris"}"#, "field 'temperature_c' is required"),
            (r#"{"city": "Paris", "temperature_c": "warm"}"#, "temperature_c"),
            (r#"{"city": "Paris", "temperature_c": 1, "wind": 3}"#, "unknown field 'wind'"),
            (r#"{"city": "Paris", "temperature_c": 1, "sky": "rain"}"#, "sky"),
            ("[1]", "JSON object"),
        ] {
            let e = t.read(answer).unwrap_err();
            assert!(e.contains(named), "{answer}: {e}");
        }
    }

    #[test]
    fn names_and_schemas_a_wire_would_refuse_are_refused() {
        assert!(weather().validate().is_ok());
        let e = OutputType::new("my type", json!({"type": "object"})).validate().unwrap_err();
        assert!(e.contains("'my type'"), "{e}");
        let e = OutputType::new("T", json!({"type": "array"})).validate().unwrap_err();
        assert!(e.contains("\"type\": \"object\""), "{e}");
    }
}
