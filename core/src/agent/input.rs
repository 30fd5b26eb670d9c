//! What a run starts from: one user message, or a message history the host keeps itself (the
//! provider-neutral [`Message`] form, the same JSON in every language, that [`crate::RunResult::messages`]
//! returns). A history is checked before anything is sent: a bad entry is an
//! [`Error::InvalidMessage`] naming its index and field.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::Error;
use crate::model::Message;
use crate::tools::args::kind as type_name;

/// A run's input: [`Agent::run`](crate::Agent::run) takes a string or a message list.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// One user message.
    Text(String),
    /// A conversation the host holds (an earlier run's [`crate::RunResult::messages`], a new user message
    /// after it): sent as it is; the run's result holds it followed by what the run added.
    Messages(Vec<Message>),
}

impl From<String> for Input {
    fn from(s: String) -> Self {
        Input::Text(s)
    }
}

impl From<&str> for Input {
    fn from(s: &str) -> Self {
        Input::Text(s.to_string())
    }
}

impl From<&String> for Input {
    fn from(s: &String) -> Self {
        Input::Text(s.clone())
    }
}

impl From<Vec<Message>> for Input {
    fn from(m: Vec<Message>) -> Self {
        Input::Messages(m)
    }
}

impl From<&[Message]> for Input {
    fn from(m: &[Message]) -> Self {
        Input::Messages(m.to_vec())
    }
}

impl Input {
    /// One user message made of parts: text, images and files ([`crate::content::Part`]), sent in each
    /// wire's own content blocks. Each part is checked when the run starts: one over its byte cap, or
    /// whose bytes are not the media type it names, fails the run with [`Error::InvalidMessage`] naming
    /// it (`messages[0].parts[1]`).
    pub fn parts(parts: impl IntoIterator<Item = crate::content::Part>) -> Input {
        Input::Messages(vec![Message::user_parts(parts.into_iter().collect())])
    }

    /// The input as the bindings hand it over: a JSON string (one user message) or a JSON array of
    /// messages in the core's serde form (`{"role": "user", "content": …}`, `{"role": "assistant",
    /// "content": …, "tool_calls": [{"id", "name", "arguments"}]}`, `{"role": "tool", "call_id", "name",
    /// "content", "is_error"}`). A bad entry is an [`Error::InvalidMessage`] naming its index and field.
    pub fn from_json(value: Value) -> Result<Input, Error> {
        match value {
            Value::String(s) => Ok(Input::Text(s)),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.into_iter().enumerate() {
                    out.push(decode(index, item)?);
                }
                validate(&out)?;
                Ok(Input::Messages(out))
            }
            other => Err(Error::Config(format!(
                "a run's input is a string or a list of messages, not {}",
                type_name(&other)
            ))),
        }
    }

    /// A session run's input as the user messages it adds to the session: text is one message, parts
    /// ([`Input::parts`]) one message made of them. The session holds the conversation, so a history
    /// (an assistant or tool message) is refused with [`Error::Config`], and each part is checked
    /// ([`Error::InvalidMessage`] naming it) before anything is stored.
    pub(crate) fn into_session_messages(self) -> Result<Vec<Message>, Error> {
        match self {
            Input::Text(s) => Ok(vec![Message::user(s)]),
            Input::Messages(messages) => {
                if messages.is_empty() {
                    return Err(Error::Config(
                        "a session run's input is text or a list of parts, not an empty list".into(),
                    ));
                }
                for (index, m) in messages.iter().enumerate() {
                    if !matches!(m, Message::User { .. }) {
                        return Err(Error::Config(format!(
                            "a session keeps its own history: a session run takes the next user message (text or a \
                             list of parts), not a history (messages[{index}] is not a user message); to pass a \
                             history of your own, run the agent without a session"
                        )));
                    }
                    check_parts(index, m)?;
                }
                Ok(messages)
            }
        }
    }

    /// The text `run_started` reports: the input, or the history's last user message.
    pub(crate) fn summary(&self) -> String {
        match self {
            Input::Text(s) => s.clone(),
            Input::Messages(m) => m
                .iter()
                .rev()
                .find_map(|m| match m {
                    Message::User { content, .. } => Some(content.clone()),
                    _ => None,
                })
                .unwrap_or_default(),
        }
    }
}

fn invalid(index: usize, field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::InvalidMessage { index, field: field.into(), message: message.into() }
}

/// One entry of a JSON history, its fields checked one by one so the error names the one that is wrong.
fn decode(index: usize, item: Value) -> Result<Message, Error> {
    let Value::Object(map) = &item else {
        return Err(invalid(index, "", format!("a message is an object, not {}", type_name(&item))));
    };
    let role = match map.get("role") {
        Some(Value::String(r)) => r.clone(),
        None => return Err(invalid(index, "role", "missing (user, assistant, tool or provider)")),
        Some(v) => {
            return Err(invalid(index, "role", format!("must be a string, not {}", type_name(v))));
        }
    };
    let string = |field: &str| -> Result<(), Error> {
        match map.get(field) {
            Some(Value::String(_)) => Ok(()),
            None => Err(invalid(index, field, "missing (a string)")),
            Some(v) => Err(invalid(index, field, format!("must be a string, not {}", type_name(v)))),
        }
    };
    match role.as_str() {
        "user" => match map.get("content") {
            Some(Value::Array(_)) => return decode_parts(index, map),
            _ => string("content")?,
        },
        "assistant" => {
            match map.get("content") {
                None | Some(Value::Null) | Some(Value::String(_)) => {}
                Some(v) => {
                    return Err(invalid(index, "content", format!("must be a string or null, not {}", type_name(v))));
                }
            }
            match map.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) => {
                    for (n, call) in calls.iter().enumerate() {
                        let Value::Object(c) = call else {
                            return Err(invalid(
                                index,
                                format!("tool_calls[{n}]"),
                                format!("a tool call is an object, not {}", type_name(call)),
                            ));
                        };
                        for field in ["id", "name", "arguments"] {
                            match c.get(field) {
                                Some(Value::String(_)) => {}
                                None => {
                                    return Err(invalid(
                                        index,
                                        format!("tool_calls[{n}].{field}"),
                                        "missing (a string)",
                                    ));
                                }
                                Some(v) => {
                                    return Err(invalid(
                                        index,
                                        format!("tool_calls[{n}].{field}"),
                                        format!("must be a string, not {}", type_name(v)),
                                    ));
                                }
                            }
                        }
                        if let Some(v) = c.get("from_text").filter(|v| !v.is_boolean()) {
                            return Err(invalid(
                                index,
                                format!("tool_calls[{n}].from_text"),
                                format!("must be a boolean, not {}", type_name(v)),
                            ));
                        }
                    }
                }
                Some(v) => {
                    return Err(invalid(index, "tool_calls", format!("must be a list, not {}", type_name(v))));
                }
            }
        }
        "tool" => {
            for field in ["call_id", "name", "content"] {
                string(field)?;
            }
            match map.get("is_error") {
                None | Some(Value::Bool(_)) => {}
                Some(v) => {
                    return Err(invalid(index, "is_error", format!("must be a boolean, not {}", type_name(v))));
                }
            }
        }
        "provider" => {
            string("wire")?;
            if !matches!(map.get("items"), Some(Value::Array(_))) {
                return Err(invalid(index, "items", "must be a list"));
            }
        }
        other => {
            return Err(invalid(
                index,
                "role",
                format!("unknown role '{other}' (expected user, assistant, tool or provider)"),
            ));
        }
    }
    let mut item = item;
    // Optional fields the serde form requires.
    if let Value::Object(m) = &mut item {
        match role.as_str() {
            "assistant" => {
                m.entry("content").or_insert(Value::Null);
                if m.get("tool_calls").is_none_or(Value::is_null) {
                    m.insert("tool_calls".into(), Value::Array(Vec::new()));
                }
            }
            "tool" => {
                m.entry("is_error").or_insert(Value::Bool(false));
            }
            _ => {}
        }
    }
    serde_json::from_value(item).map_err(|e| invalid(index, "", e.to_string()))
}

/// A user message whose `content` is a list of parts (`{"type": "text" | "image" | "image_url" |
/// "file", …}`), each decoded and checked, the error naming it.
fn decode_parts(index: usize, map: &serde_json::Map<String, Value>) -> Result<Message, Error> {
    let Some(Value::Array(items)) = map.get("content") else { unreachable!("checked by the caller") };
    let mut parts = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let part: crate::content::Part =
            serde_json::from_value(item.clone()).map_err(|e| invalid(index, format!("parts[{n}]"), e.to_string()))?;
        parts.push(part.resolved().map_err(|e| invalid(index, format!("parts[{n}]"), e.0))?);
    }
    Ok(Message::user_parts(parts))
}

/// Every part of a message checked, the error naming it (`parts[n]`).
fn check_parts(index: usize, message: &Message) -> Result<(), Error> {
    if let Message::User { parts, .. } | Message::Tool { parts, .. } = message {
        crate::content::check_all(parts).map_err(|(n, e)| invalid(index, format!("parts[{n}]"), e.0))?;
    }
    Ok(())
}

/// The rules a history keeps so every wire takes it: it is not empty; each tool result answers a call
/// of an earlier assistant message that has no result yet; every call gets its result before the next
/// user or assistant message; and it does not end with an assistant message (the model would have
/// nothing to answer).
pub(crate) fn validate(messages: &[Message]) -> Result<(), Error> {
    if messages.is_empty() {
        return Err(Error::Config("a message history needs at least one message".into()));
    }
    // Calls waiting for their result: id -> (message index, call index).
    let mut open: Vec<(String, usize, usize)> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let unanswered = |open: &[(String, usize, usize)]| -> Result<(), Error> {
        match open.first() {
            Some((id, i, n)) => {
                Err(invalid(*i, format!("tool_calls[{n}].id"), format!("call '{id}' has no tool result")))
            }
            None => Ok(()),
        }
    };
    for (index, m) in messages.iter().enumerate() {
        check_parts(index, m)?;
        match m {
            Message::User { .. } => unanswered(&open)?,
            Message::Assistant { tool_calls, .. } => {
                unanswered(&open)?;
                for (n, c) in tool_calls.iter().enumerate() {
                    if c.id.is_empty() {
                        return Err(invalid(index, format!("tool_calls[{n}].id"), "is empty"));
                    }
                    if !seen.insert(c.id.clone()) {
                        return Err(invalid(
                            index,
                            format!("tool_calls[{n}].id"),
                            format!("call id '{}' is used twice in the history", c.id),
                        ));
                    }
                    open.push((c.id.clone(), index, n));
                }
            }
            Message::Tool { call_id, .. } => match open.iter().position(|(id, _, _)| id == call_id) {
                Some(at) => {
                    open.remove(at);
                }
                None => {
                    return Err(invalid(
                        index,
                        "call_id",
                        format!("no earlier assistant message has a call '{call_id}' waiting for its result"),
                    ));
                }
            },
            Message::Provider { .. } => {}
        }
    }
    unanswered(&open)?;
    if let Some((index, Message::Assistant { .. })) = messages.iter().enumerate().next_back() {
        return Err(invalid(index, "role", "the history ends with an assistant message: add the user's next message"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> String {
        Input::from_json(v).unwrap_err().to_string()
    }

    #[test]
    fn a_round_trip_of_the_serde_form_decodes() {
        let history = vec![
            Message::user("hi"),
            Message::Assistant {
                content: None,
                tool_calls: vec![crate::model::ToolCall {
                    id: "c1".into(),
                    name: "t".into(),
                    arguments: "{}".into(),
                    from_text: false,
                }],
            },
            Message::Tool {
                call_id: "c1".into(),
                name: "t".into(),
                content: "ok".into(),
                is_error: false,
                parts: Vec::new(),
            },
            Message::Assistant { content: Some("done".into()), tool_calls: vec![] },
            Message::user("again"),
        ];
        let json = serde_json::to_value(&history).unwrap();
        assert_eq!(Input::from_json(json).unwrap(), Input::Messages(history));
    }

    #[test]
    fn optional_fields_may_be_left_out() {
        let v = json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                       {"role": "user", "content": "c"}]);
        assert!(matches!(Input::from_json(v).unwrap(), Input::Messages(m) if m.len() == 3));
    }

    #[test]
    fn each_bad_entry_names_its_index_and_field() {
        assert!(err(json!([{"role": "robot", "content": "x"}])).contains("messages[0].role: unknown role 'robot'"));
        assert!(
            err(json!([{"role": "user", "content": 5}]))
                .contains("messages[0].content: must be a string, not a number")
        );
        assert!(err(json!([{"content": "x"}])).contains("messages[0].role: missing"));
        assert!(err(json!(["hi"])).contains("messages[0]: a message is an object"));
        let orphan = json!([{"role": "user", "content": "a"},
                            {"role": "tool", "call_id": "nope", "name": "t", "content": "r"}]);
        assert!(err(orphan).contains("messages[1].call_id: no earlier assistant message has a call 'nope'"));
        let unanswered = json!([{"role": "user", "content": "a"},
                                {"role": "assistant", "tool_calls": [{"id": "c1", "name": "t", "arguments": "{}"}]},
                                {"role": "user", "content": "b"}]);
        assert!(err(unanswered).contains("messages[1].tool_calls[0].id: call 'c1' has no tool result"));
        let bad_call = json!([{"role": "assistant", "tool_calls": [{"id": "c1", "name": "t", "arguments": {}}]}]);
        assert!(err(bad_call).contains("messages[0].tool_calls[0].arguments: must be a string, not an object"));
        let ends = json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]);
        assert!(err(ends).contains("messages[1].role: the history ends with an assistant message"));
        assert!(err(json!([])).contains("at least one message"));
        assert!(err(json!(5)).contains("a string or a list of messages"));
    }

    #[test]
    fn a_user_message_of_parts_decodes_and_each_bad_part_is_named() {
        let png = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b"\x89PNG\r\n\x1a\n....");
        let good = json!([{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                                       {"type": "image", "media_type": "image/png", "data": png}]}]);
        let Input::Messages(m) = Input::from_json(good).unwrap() else { panic!() };
        assert!(matches!(&m[0], Message::User { parts, content } if parts.len() == 2
            && content == "what is this?\n[image image/png, 12 bytes]"));
        let mislabelled = json!([{"role": "user", "content": [{"type": "text", "text": "a"},
                                 {"type": "image", "media_type": "image/jpeg", "data": png}]}]);
        assert!(err(mislabelled).contains("messages[0].parts[1]: labelled image/jpeg, but the bytes are image/png"));
        let unknown = json!([{"role": "user", "content": [{"type": "video", "data": ""}]}]);
        assert!(err(unknown).contains("messages[0].parts[0]: unknown variant `video`"));
    }

    #[test]
    fn a_result_answers_one_call_once() {
        let twice = json!([{"role": "user", "content": "a"},
                           {"role": "assistant", "tool_calls": [{"id": "c1", "name": "t", "arguments": "{}"}]},
                           {"role": "tool", "call_id": "c1", "name": "t", "content": "r"},
                           {"role": "tool", "call_id": "c1", "name": "t", "content": "r"}]);
        assert!(err(twice).contains("messages[3].call_id"));
    }
}
