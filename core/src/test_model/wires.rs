//! What a provider answers on each wire (the users' test model, [`super::TestModel`], and the loopback
//! provider of ambit's own suites both render through it), field for field as the real APIs do: whole bodies,
//! and the server-sent events of a streamed answer (event names, ids, stop reasons, usage fields).
//!
//! A scripted answer (`respond`) is wire-neutral: `content`, `tool_calls[]` (`id`, `name`,
//! `arguments`), an optional wire-specific stop override (`finish_reason` on Chat Completions,
//! `stop_reason` on Anthropic, `incomplete_reason` on Responses), `usage`, and `native_search` (`query`, `tools[]`): the provider's own
//! tool search, answered before the rest (Anthropic `server_tool_use` + `tool_search_tool_result`
//! blocks, Responses `tool_search_call` + `tool_search_output` items; nothing on Chat Completions), and
//! `thinking[]`: the model's reasoning, first in the answer (Anthropic `thinking` blocks from `thinking`
//! and `signature`, or `redacted_thinking` from `redacted`; Responses `reasoning` items from `summary` and
//! `encrypted_content`; nothing on Chat Completions).

use serde_json::{Value, json};

/// A fixed creation time, so answers are reproducible.
pub const CREATED: u64 = 1_764_633_600;

/// One server-sent event: the `event:` name (absent on Chat Completions) and its JSON data.
#[derive(Debug, Clone, PartialEq)]
pub struct Sse {
    /// The `event:` name.
    pub event: Option<String>,
    /// The event's data.
    pub data: Value,
}

impl Sse {
    fn named(event: &str, data: Value) -> Sse {
        Sse { event: Some(event.to_string()), data }
    }

    /// The bytes on the wire.
    pub fn to_bytes(&self) -> String {
        match &self.event {
            Some(e) => format!("event: {e}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// Token counts of a scripted answer, wire-neutral. `input` excludes cached tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Input tokens, cached ones excluded.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens read from the prompt cache.
    pub cache_read: u64,
    /// Tokens written to the prompt cache.
    pub cache_write: u64,
}

impl Tokens {
    /// Reads `usage`: `input_tokens` (uncached), `output_tokens`, `cache_read_tokens`,
    /// `cache_write_tokens`, or the Chat Completions names `prompt_tokens` (cached included),
    /// `completion_tokens`, `cached_tokens`.
    pub fn read(respond: &Value) -> Tokens {
        let u = respond.get("usage").cloned().unwrap_or(json!({}));
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        let cache_read = n("cache_read_tokens").or(n("cached_tokens")).unwrap_or(0);
        let cache_write = n("cache_write_tokens").unwrap_or(0);
        let input = n("input_tokens").unwrap_or_else(|| n("prompt_tokens").unwrap_or(0).saturating_sub(cache_read));
        let output = n("output_tokens").or(n("completion_tokens")).unwrap_or(0);
        Tokens { input, output, cache_read, cache_write }
    }
}

/// A scripted tool call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments' JSON text.
    pub arguments: String,
}

fn calls(respond: &Value) -> Vec<Call> {
    respond
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| Call {
                    id: c.get("id").and_then(Value::as_str).unwrap_or("call_0").to_string(),
                    name: c.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                    arguments: match c.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                        None => "{}".to_string(),
                    },
                })
                .collect()
        })
        .unwrap_or_default()
}

fn content(respond: &Value) -> Option<String> {
    respond.get("content").and_then(Value::as_str).map(str::to_string)
}

/// A scripted native tool search: the query and the names of the tools it finds.
struct NativeSearch {
    query: String,
    tools: Vec<String>,
}

fn native_search(respond: &Value) -> Option<NativeSearch> {
    let s = respond.get("native_search")?;
    Some(NativeSearch {
        query: s.get("query").and_then(Value::as_str).unwrap_or("").to_string(),
        tools: s
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| t.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
    })
}

/// Cuts a text into up to three pieces on character boundaries, as a streaming model sends it.
pub fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 3 {
        return vec![text.to_string()];
    }
    let third = chars.len() / 3;
    vec![chars[..third].iter().collect(), chars[third..2 * third].iter().collect(), chars[2 * third..].iter().collect()]
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

fn chat_usage(t: Tokens) -> Value {
    let prompt = t.input + t.cache_read + t.cache_write;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": t.output,
        "total_tokens": prompt + t.output,
        "prompt_tokens_details": {"cached_tokens": t.cache_read, "cache_write_tokens": t.cache_write, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    })
}

fn chat_finish(respond: &Value, has_calls: bool) -> String {
    respond
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or(if has_calls { "tool_calls" } else { "stop" })
        .to_string()
}

/// A Chat Completions response body.
pub fn chat_completion(id: &str, model: &str, respond: &Value) -> Value {
    let calls = calls(respond);
    let finish = chat_finish(respond, !calls.is_empty());
    let mut message = json!({"role": "assistant", "content": content(respond), "refusal": null, "annotations": []});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": chat_usage(Tokens::read(respond)),
        "service_tier": "default",
        "system_fingerprint": "fp_ambit_loopback"
    })
}

/// The `chat.completion.chunk` events of a streamed answer (`stream_options.include_usage` on: a last
/// chunk with empty `choices` carries the usage), then `[DONE]` (not included here).
pub fn chat_chunks(id: &str, model: &str, respond: &Value) -> Vec<Sse> {
    let chunk = |choices: Value, usage: Value| Sse {
        event: None,
        data: json!({
            "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "service_tier": "default", "system_fingerprint": "fp_ambit_loopback",
            "choices": choices, "usage": usage
        }),
    };
    let choice =
        |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
    let mut out =
        vec![chunk(choice(json!({"role": "assistant", "content": "", "refusal": null}), Value::Null), Value::Null)];
    if let Some(text) = content(respond) {
        for p in pieces(&text) {
            out.push(chunk(choice(json!({"content": p}), Value::Null), Value::Null));
        }
    }
    let calls = calls(respond);
    for (i, c) in calls.iter().enumerate() {
        out.push(chunk(
            choice(
                json!({"tool_calls": [{"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}]}),
                Value::Null,
            ),
            Value::Null,
        ));
        for p in pieces(&c.arguments) {
            out.push(chunk(
                choice(json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}), Value::Null),
                Value::Null,
            ));
        }
    }
    out.push(chunk(choice(json!({}), json!(chat_finish(respond, !calls.is_empty()))), Value::Null));
    out.push(chunk(json!([]), chat_usage(Tokens::read(respond))));
    out
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages

fn anthropic_usage(t: Tokens, output: u64) -> Value {
    json!({
        "input_tokens": t.input,
        "cache_creation_input_tokens": t.cache_write,
        "cache_read_input_tokens": t.cache_read,
        "cache_creation": {"ephemeral_5m_input_tokens": t.cache_write, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output,
        "service_tier": "standard"
    })
}

fn anthropic_stop(respond: &Value, has_calls: bool) -> String {
    respond
        .get("stop_reason")
        .and_then(Value::as_str)
        .unwrap_or(if has_calls { "tool_use" } else { "end_turn" })
        .to_string()
}

/// The scripted `thinking` entries.
fn thinking(respond: &Value) -> &[Value] {
    respond.get("thinking").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn anthropic_blocks(id: &str, respond: &Value) -> Vec<Value> {
    let mut blocks = Vec::new();
    for t in thinking(respond) {
        blocks.push(match t.get("redacted") {
            Some(data) => json!({"type": "redacted_thinking", "data": data}),
            None => json!({"type": "thinking", "thinking": t["thinking"], "signature": t["signature"]}),
        });
    }
    if let Some(search) = native_search(respond) {
        // The server's tool search (`tool_search_tool_bm25`), run and answered inside this answer.
        let use_id = format!("srvtoolu_{}", id.trim_start_matches("msg_"));
        blocks.push(json!({
            "type": "server_tool_use", "id": use_id, "name": "tool_search_tool_bm25",
            "input": {"query": search.query}
        }));
        let references: Vec<Value> =
            search.tools.iter().map(|n| json!({"type": "tool_reference", "tool_name": n})).collect();
        blocks.push(json!({
            "type": "tool_search_tool_result", "tool_use_id": use_id,
            "content": {"type": "tool_search_tool_search_result", "tool_references": references}
        }));
    }
    if let Some(t) = content(respond) {
        blocks.push(json!({"type": "text", "text": t}));
    }
    for c in calls(respond) {
        let input: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
        blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
    }
    blocks
}

/// A Messages response body.
pub fn anthropic_message(id: &str, model: &str, respond: &Value) -> Value {
    let has_calls = !calls(respond).is_empty();
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": anthropic_blocks(id, respond),
        "stop_reason": anthropic_stop(respond, has_calls),
        "stop_sequence": null,
        "usage": anthropic_usage(Tokens::read(respond), Tokens::read(respond).output)
    })
}

/// The events of a streamed Messages answer, `message_start` to `message_stop`.
pub fn anthropic_events(id: &str, model: &str, respond: &Value) -> Vec<Sse> {
    let t = Tokens::read(respond);
    let has_calls = !calls(respond).is_empty();
    let mut out = vec![
        Sse::named(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": null, "stop_sequence": null, "usage": anthropic_usage(t, 1)
            }}),
        ),
        Sse::named("ping", json!({"type": "ping"})),
    ];
    for (index, block) in anthropic_blocks(id, respond).into_iter().enumerate() {
        if block["type"] == "thinking" {
            // Thinking streams as thinking deltas, then its signature.
            out.push(Sse::named(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ));
            for p in pieces(block["thinking"].as_str().unwrap_or("")) {
                out.push(Sse::named(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": p}}),
                ));
            }
            out.push(Sse::named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "signature_delta", "signature": block["signature"]}}),
            ));
        } else if block["type"] == "tool_search_tool_result" || block["type"] == "redacted_thinking" {
            // A server tool's result, or redacted thinking, arrives whole in its start event.
            out.push(Sse::named(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            ));
        } else if block["type"] == "text" {
            out.push(Sse::named(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
            ));
            for p in pieces(block["text"].as_str().unwrap_or("")) {
                out.push(Sse::named(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}),
                ));
            }
        } else {
            out.push(Sse::named(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": block["type"], "id": block["id"], "name": block["name"], "input": {}
                }}),
            ));
            let mut parts = vec![String::new()];
            parts.extend(pieces(&block["input"].to_string()));
            for p in parts {
                out.push(Sse::named(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}}),
                ));
            }
        }
        out.push(Sse::named("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    out.push(Sse::named(
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": anthropic_stop(respond, has_calls), "stop_sequence": null},
            "usage": {"input_tokens": t.input, "cache_creation_input_tokens": t.cache_write,
                      "cache_read_input_tokens": t.cache_read, "output_tokens": t.output}}),
    ));
    out.push(Sse::named("message_stop", json!({"type": "message_stop"})));
    out
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses

fn responses_usage(t: Tokens) -> Value {
    let input = t.input + t.cache_read + t.cache_write;
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": t.cache_read, "cache_write_tokens": t.cache_write},
        "output_tokens": t.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + t.output
    })
}

/// The output items of a scripted answer; `n` makes the item ids unique per response. A native search
/// loads the request's own definitions of the tools it finds.
fn responses_items(id: &str, respond: &Value, request: &Value) -> Vec<Value> {
    let mut items = Vec::new();
    for (i, t) in thinking(respond).iter().enumerate() {
        let summary: Vec<Value> = t
            .get("summary")
            .and_then(Value::as_str)
            .map(|s| vec![json!({"type": "summary_text", "text": s})])
            .unwrap_or_default();
        let mut item = json!({"id": format!("rs_{}{i}", &id[5..]), "type": "reasoning", "summary": summary});
        if let Some(e) = t.get("encrypted_content") {
            item["encrypted_content"] = e.clone();
        }
        items.push(item);
    }
    if let Some(search) = native_search(respond) {
        let offered = request.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        let loaded: Vec<Value> = search
            .tools
            .iter()
            .filter_map(|n| offered.iter().find(|t| t.get("name").and_then(Value::as_str) == Some(n.as_str())))
            .cloned()
            .collect();
        items.push(json!({
            "id": format!("tsc_{}", &id[5..]), "type": "tool_search_call", "status": "completed",
            "execution": "server", "call_id": null, "arguments": {"paths": search.tools}
        }));
        items.push(json!({
            "id": format!("tso_{}", &id[5..]), "type": "tool_search_output", "status": "completed",
            "execution": "server", "call_id": null, "tools": loaded
        }));
    }
    if let Some(t) = content(respond) {
        items.push(json!({
            "id": format!("msg_{}", &id[5..]), "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": t, "annotations": [], "logprobs": []}]
        }));
    }
    for (i, c) in calls(respond).iter().enumerate() {
        items.push(json!({
            "id": format!("fc_{}{i}", &id[5..]), "type": "function_call", "status": "completed",
            "call_id": c.id, "name": c.name, "arguments": c.arguments
        }));
    }
    items
}

/// A Responses response object; `request` is echoed where the API echoes it (instructions, tools).
pub fn responses_response(id: &str, model: &str, respond: &Value, request: &Value, done: bool) -> Value {
    // `incomplete_reason` (`max_output_tokens`, `content_filter`) makes the finished answer incomplete.
    let incomplete = if done { respond.get("incomplete_reason").and_then(Value::as_str) } else { None };
    json!({
        "id": id,
        "object": "response",
        "created_at": CREATED,
        "status": match (done, incomplete) {
            (false, _) => "in_progress",
            (true, None) => "completed",
            (true, Some(_)) => "incomplete",
        },
        "background": false,
        "error": null,
        "incomplete_details": incomplete.map(|r| json!({"reason": r})),
        "instructions": request.get("instructions").cloned().unwrap_or(Value::Null),
        "max_output_tokens": null,
        "model": model,
        "output": if done { Value::Array(responses_items(id, respond, request)) } else { json!([]) },
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "service_tier": "default",
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": request.get("tools").cloned().unwrap_or(json!([])),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": if done { responses_usage(Tokens::read(respond)) } else { Value::Null },
        "user": null,
        "metadata": {}
    })
}

/// The events of a streamed Responses answer, `response.created` to `response.completed`, each with
/// its `sequence_number`.
pub fn responses_events(id: &str, model: &str, respond: &Value, request: &Value) -> Vec<Sse> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let start = responses_response(id, model, respond, request, false);
    out.push(("response.created".into(), json!({"response": start})));
    out.push(("response.in_progress".into(), json!({"response": start})));
    for (output_index, item) in responses_items(id, respond, request).into_iter().enumerate() {
        let item_id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        if item["type"] == "tool_search_call" || item["type"] == "tool_search_output" || item["type"] == "reasoning" {
            // The server's search, or the model's reasoning: added, then done, with nothing streamed between.
            out.push(("response.output_item.added".into(), json!({"output_index": output_index, "item": added})));
        } else if item["type"] == "message" {
            added["content"] = json!([]);
            out.push(("response.output_item.added".into(), json!({"output_index": output_index, "item": added})));
            let text = item["content"][0]["text"].as_str().unwrap_or("").to_string();
            let part = |t: &str| json!({"type": "output_text", "text": t, "annotations": [], "logprobs": []});
            out.push((
                "response.content_part.added".into(),
                json!({"item_id": item_id, "output_index": output_index, "content_index": 0, "part": part("")}),
            ));
            for p in pieces(&text) {
                out.push((
                    "response.output_text.delta".into(),
                    json!({"item_id": item_id, "output_index": output_index, "content_index": 0, "delta": p, "logprobs": []}),
                ));
            }
            out.push((
                "response.output_text.done".into(),
                json!({"item_id": item_id, "output_index": output_index, "content_index": 0, "text": text, "logprobs": []}),
            ));
            out.push((
                "response.content_part.done".into(),
                json!({"item_id": item_id, "output_index": output_index, "content_index": 0, "part": part(&text)}),
            ));
        } else {
            added["arguments"] = json!("");
            out.push(("response.output_item.added".into(), json!({"output_index": output_index, "item": added})));
            let args = item["arguments"].as_str().unwrap_or("").to_string();
            for p in pieces(&args) {
                out.push((
                    "response.function_call_arguments.delta".into(),
                    json!({"item_id": item_id, "output_index": output_index, "delta": p}),
                ));
            }
            out.push((
                "response.function_call_arguments.done".into(),
                json!({"item_id": item_id, "output_index": output_index, "arguments": args}),
            ));
        }
        out.push(("response.output_item.done".into(), json!({"output_index": output_index, "item": item})));
    }
    let last = if respond.get("incomplete_reason").is_some() { "response.incomplete" } else { "response.completed" };
    out.push((last.into(), json!({"response": responses_response(id, model, respond, request, true)})));
    out.into_iter()
        .enumerate()
        .map(|(seq, (event, mut data))| {
            let mut obj = serde_json::Map::new();
            obj.insert("type".into(), json!(event));
            if let Some(d) = data.as_object_mut() {
                obj.extend(std::mem::take(d));
            }
            obj.insert("sequence_number".into(), json!(seq));
            Sse::named(&event, Value::Object(obj))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_has_the_wire_fields() {
        let r = chat_completion("id1", "m", &json!({"tool_calls": [{"id": "c", "name": "f", "arguments": {"x": 1}}]}));
        assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"x\":1}");
        assert_eq!(r["choices"][0]["message"]["content"], Value::Null);
        let r = chat_completion(
            "id2",
            "m",
            &json!({"content": "hi", "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        );
        assert_eq!(r["choices"][0]["finish_reason"], "stop");
        assert_eq!(r["usage"]["total_tokens"], 5);
    }

    #[test]
    fn chat_chunks_end_with_usage() {
        let c = chat_chunks(
            "id",
            "m",
            &json!({"content": "hello", "usage": {"input_tokens": 3, "output_tokens": 2, "cache_read_tokens": 1}}),
        );
        assert_eq!(c.last().unwrap().data["choices"], json!([]));
        assert_eq!(c.last().unwrap().data["usage"]["prompt_tokens"], 4);
        let text: String =
            c.iter().filter_map(|e| e.data.pointer("/choices/0/delta/content").and_then(Value::as_str)).collect();
        assert_eq!(text, "hello");
    }

    #[test]
    fn anthropic_stream_names_and_stop() {
        let e = anthropic_events(
            "msg_1",
            "m",
            &json!({"tool_calls": [{"id": "toolu_1", "name": "f", "arguments": {"a": 1}}]}),
        );
        let names: Vec<_> = e.iter().map(|e| e.event.clone().unwrap()).collect();
        assert_eq!(names.first().unwrap(), "message_start");
        assert_eq!(names.last().unwrap(), "message_stop");
        let delta = e.iter().find(|e| e.event.as_deref() == Some("message_delta")).unwrap();
        assert_eq!(delta.data["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn native_search_blocks_and_items() {
        let respond = json!({"native_search": {"query": "forecast", "tools": ["get_forecast"]},
            "tool_calls": [{"id": "toolu_1", "name": "get_forecast", "arguments": {"city": "Oslo"}}]});
        let m = anthropic_message("msg_ambit01", "m", &respond);
        assert_eq!(m["content"][0]["type"], "server_tool_use");
        assert_eq!(m["content"][0]["input"], json!({"query": "forecast"}));
        assert_eq!(m["content"][1]["tool_use_id"], m["content"][0]["id"]);
        assert_eq!(m["content"][1]["content"]["tool_references"][0]["tool_name"], "get_forecast");
        assert_eq!(m["content"][2]["type"], "tool_use");
        let e = anthropic_events("msg_ambit01", "m", &respond);
        let starts: Vec<_> = e
            .iter()
            .filter(|e| e.event.as_deref() == Some("content_block_start"))
            .map(|e| e.data["content_block"]["type"].clone())
            .collect();
        assert_eq!(starts, vec![json!("server_tool_use"), json!("tool_search_tool_result"), json!("tool_use")]);

        let request = json!({"tools": [{"type": "tool_search"},
            {"type": "function", "name": "get_forecast", "parameters": {}, "defer_loading": true}]});
        let r = responses_response("resp_abc", "m", &respond, &request, true);
        assert_eq!(r["output"][0]["type"], "tool_search_call");
        assert_eq!(r["output"][1]["type"], "tool_search_output");
        assert_eq!(r["output"][1]["tools"][0]["name"], "get_forecast");
        assert_eq!(r["output"][2]["type"], "function_call");
        let e = responses_events("resp_abc", "m", &respond, &request);
        let done: Vec<_> = e
            .iter()
            .filter(|e| e.event.as_deref() == Some("response.output_item.done"))
            .map(|e| e.data["item"]["type"].clone())
            .collect();
        assert_eq!(done, vec![json!("tool_search_call"), json!("tool_search_output"), json!("function_call")]);
    }

    #[test]
    fn responses_events_are_numbered() {
        let e = responses_events("resp_abc", "m", &json!({"content": "hi there"}), &json!({}));
        assert_eq!(e[0].event.as_deref(), Some("response.created"));
        assert!(e.iter().enumerate().all(|(i, e)| e.data["sequence_number"] == i));
        assert_eq!(e.last().unwrap().data["response"]["output"][0]["content"][0]["text"], "hi there");
    }
}
