//! `escalate_to_human`: the agent hands a blocking decision to a person. Every call goes to the
//! approval handler (it is `requires_approval`); a handler that answers later parks the session until
//! `Sessions::resume` brings the person's answer: approve, deny with a reason, or revise with
//! `{"answer": "..."}`, which is what the model then reads.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolSpec};

pub(crate) struct Escalate(ToolSpec);

impl Escalate {
    pub(crate) fn new() -> Escalate {
        Escalate(
            ToolSpec::new(
                "escalate_to_human",
                "Hand a decision you must not take alone to a person, and wait for the answer. The work is parked \
                 until they answer; nothing times out.",
                json!({"type": "object", "properties": {
                    "question": {"type": "string", "description": "The decision, with what the person needs to take it."}
                }, "required": ["question"]}),
            )
            .with_level(Level::Read)
            .with_requires_approval(true)
            // The person does the work, and the run parks on the call: nothing to detach.
            .with_inline(true),
        )
    }
}

#[async_trait]
impl Tool for Escalate {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        Ok(Value::String(match arguments.get("answer").and_then(Value::as_str) {
            Some(a) => format!("The person answered: {a}"),
            None => "The person approved, without a comment.".to_string(),
        }))
    }
}
