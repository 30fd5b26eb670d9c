//! The two parameters the loop itself reads on every call (SPEC §5): `background` and `scratchpad`.
//! They are offered on every tool of the request (host, built-in and MCP tools, `tool_search`,
//! `tool_load`, the MCP meta-tools; `background` not on a tool that does no work of its own,
//! [`ToolSpec::inline`]), type-checked here (`null` is absent), taken out of the arguments before the
//! tool (or its MCP server) sees them, and acted on around [`Agent::dispatch`], which stays the one
//! place a call is executed.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::events::{Emitter, Event};
use super::run_state::RunState;
use super::{Agent, background, scratchpad};
use crate::model::ToolCall;
use crate::tools::ToolSpec;

const BACKGROUND_DOC: &str =
    "Run this call in the background: a task id comes back at once and the result arrives later as its own turn.";
const SCRATCHPAD_DOC: &str =
    "Save this call's output to the scratchpad under this name instead of returning it (errors stay inline).";

fn has_own(spec: &ToolSpec, param: &str) -> bool {
    spec.parameters.pointer(&format!("/properties/{param}")).is_some()
}

impl Agent {
    /// Adds `background` and `scratchpad` to the schemas offered, where they are on and the tool has no
    /// parameter of that name of its own; `background` not to a tool that does no work of its own.
    pub(crate) fn add_loop_params(&self, specs: &mut [ToolSpec]) {
        let inner = &self.inner;
        if inner.heartbeat.is_none() && !inner.scratchpad {
            // Nothing to add: keep the schemas shared (a write would copy each one, per request).
            return;
        }
        for spec in specs {
            let inline = spec.inline;
            let Some(props) = spec
                .parameters
                .as_object_mut()
                .map(|o| o.entry("properties").or_insert_with(|| Value::Object(Map::new())))
            else {
                continue;
            };
            let Some(props) = props.as_object_mut() else { continue };
            if inner.heartbeat.is_some() && !inline && !props.contains_key("background") {
                props.insert("background".into(), json!({"type": "boolean", "description": BACKGROUND_DOC}));
            }
            if inner.scratchpad && !props.contains_key("scratchpad") {
                props.insert("scratchpad".into(), json!({"type": "string", "description": SCRATCHPAD_DOC}));
            }
        }
    }

    /// Runs one call as the model asked: in the background, saved to the scratchpad, or inline.
    pub(crate) async fn dispatch_call(
        &self,
        call: &ToolCall,
        events: &Emitter,
        state: &Arc<RunState>,
    ) -> (Value, String, bool) {
        let inner = &self.inner;
        // Every tool a call may name: registered, MCP (meta-tools included), tool_search and tool_load,
        // or a tool of an unavailable server.
        let spec = self.lookup_tool(&call.name).map(|t| t.spec().clone());
        let parsed =
            serde_json::from_str::<Value>(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments });
        let (Some(spec), Ok(Value::Object(mut args))) = (spec, parsed) else {
            return self.dispatch_observed(call, events).await;
        };
        let refuse = |args: Map<String, Value>, reason: String| {
            events.emit(Event::ToolRefused { id: call.id.clone(), name: call.name.clone(), reason: reason.clone() });
            (Value::Object(args), format!("Error: {reason}"), true)
        };
        let mut background = false;
        if inner.heartbeat.is_some() && !has_own(&spec, "background") {
            match args.remove("background") {
                None | Some(Value::Null) => {}
                // A tool that does no work of its own runs inline: there is nothing to detach.
                Some(Value::Bool(b)) => background = b && !spec.inline,
                Some(other) => {
                    args.insert("background".into(), other.clone());
                    let reason = format!(
                        "the call to '{}' was refused: background must be true or false, got {other}",
                        call.name
                    );
                    return refuse(args, reason);
                }
            }
        }
        let mut save_as = None;
        if inner.scratchpad && !has_own(&spec, "scratchpad") {
            match args.remove("scratchpad") {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s.trim().is_empty() => {}
                Some(Value::String(s)) => save_as = Some(s.trim().to_string()),
                Some(other) => {
                    args.insert("scratchpad".into(), other.clone());
                    let reason = format!(
                        "the call to '{}' was refused: scratchpad must be a string (the entry's name), got {other}",
                        call.name
                    );
                    return refuse(args, reason);
                }
            }
        }
        let call = ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: Value::Object(args).to_string(),
            from_text: call.from_text,
        };
        if background {
            // Background work never waits for a consumer behind (its heartbeat would count the wait).
            let ev = events.in_background();
            let (agent, st, c, save) = (self.clone(), state.clone(), call.clone(), save_as.clone());
            let started = state.tasks.spawn(&call.name, events, async move {
                let (_, result, is_error) =
                    st.clone().scope(scratchpad::with_saving(save.is_some(), agent.dispatch(&c, &ev))).await;
                // A result with images keeps them (as a live call's does), unless a hook replaced its text
                // or the scratchpad took it.
                let media = st.media.lock().unwrap_or_else(|p| p.into_inner()).remove(&c.id);
                let (result, is_error) = finish(&st, save.as_deref(), result, is_error);
                let parts = media.map(|parts| crate::content::with_text(parts, &result)).unwrap_or_default();
                (result, is_error, parts)
            });
            let id = match started.await {
                Ok(id) => id,
                Err(why) => {
                    let reason = format!("the call to '{}' was not started in the background: {why}", call.name);
                    return refuse(args_of(&call), reason);
                }
            };
            events.emit(Event::BackgroundTaskStarted {
                task_id: id.clone(),
                call_id: call.id.clone(),
                name: call.name.clone(),
            });
            let arguments = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
            let note = background::started_note(&id, &call.name);
            events.emit(Event::ToolFinished {
                id: call.id.clone(),
                name: call.name.clone(),
                result: note.clone(),
                is_error: false,
            });
            return (arguments, note, false);
        }
        let (arguments, result, is_error) =
            scratchpad::with_saving(save_as.is_some(), self.dispatch_observed(&call, events)).await;
        let (result, is_error) = finish(state, save_as.as_deref(), result, is_error);
        (arguments, result, is_error)
    }
}

/// The call ids that more than one call of a turn carries, with how many carry each.
pub(crate) fn shared_ids(calls: &[ToolCall]) -> std::collections::HashMap<&str, usize> {
    let mut counts = std::collections::HashMap::new();
    for c in calls {
        *counts.entry(c.id.as_str()).or_insert(0usize) += 1;
    }
    counts.retain(|_, n| *n > 1);
    counts
}

/// The refusal of a call whose id `n` calls of its turn share: none of them runs.
pub(crate) fn refuse_shared_id(call: &ToolCall, n: usize, events: &Emitter) -> (Value, String, bool) {
    let reason = format!(
        "the call to '{}' was not run: {n} tool calls of this turn have the id '{}', and a call id must be \
         unique within a turn; none of them was run",
        call.name, call.id
    );
    events.emit(Event::ToolRefused { id: call.id.clone(), name: call.name.clone(), reason: reason.clone() });
    let arguments = serde_json::from_str(&call.arguments).unwrap_or_else(|_| Value::String(call.arguments.clone()));
    (arguments, format!("Error: {reason}"), true)
}

fn args_of(call: &ToolCall) -> Map<String, Value> {
    match serde_json::from_str(&call.arguments) {
        Ok(Value::Object(o)) => o,
        _ => Map::new(),
    }
}

/// Saves a successful output under `save_as`; the model then sees a note instead. Errors stay inline.
fn finish(state: &RunState, save_as: Option<&str>, result: String, is_error: bool) -> (String, bool) {
    match save_as {
        Some(name) if !is_error => {
            let note = scratchpad::saved_note(name, &result);
            state.scratchpad.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), result);
            (note, false)
        }
        _ => (result, is_error),
    }
}
