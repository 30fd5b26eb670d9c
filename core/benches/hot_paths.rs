//! The core's hot paths, once per model request or per tool call:
//!
//! - `request/<wire>`: one model request's body with 500 realistic MCP tools registered (about 860
//!   bytes of JSON each: name, description and a schema of 3 to 9 parameters), built (`request`) and
//!   serialized to the bytes sent, for Chat Completions, Anthropic Messages and OpenAI Responses, as
//!   the wires do. The conversation is a run's second request: instructions, the user's message, the
//!   assistant's tool call and its result. `request_clone` is the copy of the request the loop makes
//!   per model request (the tool specs share their schemas).
//! - `stream/<wire>/<answer>`: a streamed answer read from its bytes, as the wire receives it: the SSE
//!   parser fed one chunk per event, then the wire's event decoding (`StreamDecoder`) into the response.
//!   `tool_call` is a call with six arguments, `text` a 600-character answer; both streamed a few
//!   characters per event, as models stream. `sse_parse/<answer>` is the SSE parser alone (Chat wire).
//! - `args/*`: the argument rule (SPEC §2) on one call against a six-property schema, from the parsed
//!   value, and from the JSON text the model wrote.
//!
//!   cargo bench -p ambit-sdk --bench hot_paths

#[path = "support/mcp_tools.rs"]
mod mcp_tools;

use std::hint::black_box;

use ambit::model::sse::SseParser;
use ambit::model::{Message, ModelRequest, ModelResponse, ToolCall, anthropic, openai_chat, openai_responses};
use ambit::tools::ToolSpec;
use ambit::tools::args::read_arguments;
use ambit::{ModelError, StopReason};
use ambit_test_provider::wires::{self, Sse};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

const TOOLS: usize = 500;
const CALL_ARGS: &str = r#"{"owner":"ambit","repo":"core","state":"open","per_page":30,"labels":["needs-review","bug"],"since":"2026-11-01T00:00:00Z"}"#;
const ANSWER: &str = "Three pull requests in ambit/core are waiting for your review. #412 \"Stream decoding \
    without a copy\" by mara changes the SSE parser and the three wires' decoders; CI is green and it has \
    one approval. #409 \"Ledger: claim in batches\" by tobias touches the PostgreSQL plan and adds a \
    migration; one check is still running. #405 \"Docs: deferral guide\" by li only changes the docs and \
    is the quickest to review. The oldest, #405, has been waiting for four days; the other two were \
    opened yesterday. Shall I open any of them or list their changed files?";

/// A run's second request: the user's question, the model's call, the call's result, 500 tools.
fn second_request() -> ModelRequest {
    let tools: Vec<ToolSpec> =
        mcp_tools::tools(TOOLS).into_iter().map(|t| ToolSpec::new(t.exposed(), t.description, t.parameters)).collect();
    let result = json!([
        {"number": 412, "title": "Stream decoding without a copy", "author": "mara", "state": "open", "updated_at": "2026-12-01T17:02:11Z"},
        {"number": 409, "title": "Ledger: claim in batches", "author": "tobias", "state": "open", "updated_at": "2026-12-01T09:45:40Z"},
        {"number": 405, "title": "Docs: deferral guide", "author": "li", "state": "open", "updated_at": "2026-11-28T14:20:03Z"}
    ]);
    ModelRequest {
        instructions: Some(
            "You are a helpful engineering assistant working in the user's GitHub, Jira and Slack workspaces. \
             Answer briefly and name the items you refer to."
                .into(),
        ),
        messages: vec![
            Message::user("Which pull requests in ambit/core are waiting for my review?"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_7Yq2mZ".into(),
                    name: "mcp__github__list_pull_requests".into(),
                    arguments: CALL_ARGS.into(),
                    from_text: false,
                }],
            },
            Message::Tool {
                call_id: "call_7Yq2mZ".into(),
                name: "mcp__github__list_pull_requests".into(),
                content: result.to_string(),
                is_error: false,
                parts: Vec::new(),
            },
        ],
        tools,
        ..Default::default()
    }
}

/// Cuts every text or argument delta into pieces of about four bytes (a token or so), one event each,
/// as models stream; the loopback provider's events cut an answer into three pieces only.
fn token_sized(events: Vec<Sse>) -> Vec<Sse> {
    const DELTAS: [&str; 5] = [
        "/choices/0/delta/content",
        "/choices/0/delta/tool_calls/0/function/arguments",
        "/delta/text",
        "/delta/partial_json",
        "/delta",
    ];
    let mut out = Vec::new();
    for e in events {
        let found = DELTAS.iter().find_map(|p| e.data.pointer(p).and_then(Value::as_str).map(|s| (*p, s.to_string())));
        let Some((pointer, text)) = found.filter(|(_, s)| s.len() > 4) else {
            out.push(e);
            continue;
        };
        let mut piece = String::new();
        for c in text.chars() {
            piece.push(c);
            if piece.len() >= 4 {
                let mut one = e.clone();
                *one.data.pointer_mut(pointer).expect("the pointer was found") = json!(std::mem::take(&mut piece));
                out.push(one);
            }
        }
        if !piece.is_empty() {
            let mut one = e.clone();
            *one.data.pointer_mut(pointer).expect("the pointer was found") = json!(piece);
            out.push(one);
        }
    }
    out
}

/// The body's chunks as they arrive: one per event.
fn chunks(wire: &str, events: Vec<Sse>) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = token_sized(events).iter().map(|e| e.to_bytes().into_bytes()).collect();
    if wire == "chat" {
        out.push(b"data: [DONE]\n\n".to_vec());
    }
    out
}

/// The streamed answers of one wire: (`tool_call`, `text`).
fn streams(wire: &str) -> [(&'static str, Vec<Vec<u8>>); 2] {
    let call = json!({"tool_calls": [{"id": "call_7Yq2mZ", "name": "mcp__github__list_pull_requests", "arguments": CALL_ARGS}],
                      "usage": {"input_tokens": 61_250, "output_tokens": 48}});
    let text = json!({"content": ANSWER, "usage": {"input_tokens": 61_480, "output_tokens": 141}});
    // The Responses wire echoes the request's instructions and tools in three events; one tool here.
    let request = json!({"instructions": "You are a helpful engineering assistant.",
                         "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]});
    let events = |answer: &Value| match wire {
        "chat" => wires::chat_chunks("chatcmpl-BzQ8x", "gpt-4.1", answer),
        "anthropic" => wires::anthropic_events("msg_01XFDUDYJgAACzvnptvVoYEL", "claude-sonnet-4-5", answer),
        _ => wires::responses_events("resp_68af4c", "gpt-4.1", answer, &request),
    };
    [("tool_call", chunks(wire, events(&call))), ("text", chunks(wire, events(&text)))]
}

/// Reads a streamed answer the way the wire does: the SSE parser, then the wire's decoder.
fn decode(wire: &str, chunks: &[Vec<u8>]) -> Result<ModelResponse, ModelError> {
    macro_rules! run {
        ($decoder:ty) => {{
            let mut decoder = <$decoder>::default();
            let mut parser = SseParser::default();
            let sink = |t: &str| {
                black_box(t);
            };
            'read: for chunk in chunks {
                for e in parser.push(chunk)? {
                    if !decoder.push(&e, &sink)? {
                        break 'read;
                    }
                }
            }
            decoder.finish()
        }};
    }
    match wire {
        "chat" => run!(openai_chat::StreamDecoder),
        "anthropic" => run!(anthropic::StreamDecoder),
        _ => run!(openai_responses::StreamDecoder),
    }
}

fn request_benches(c: &mut Criterion) {
    let req = second_request();
    let per_tool: usize = req
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}).to_string().len())
        .sum::<usize>()
        / req.tools.len();
    let per_schema: usize = req.tools.iter().map(|t| t.parameters.to_string().len()).sum::<usize>() / req.tools.len();
    let sizes: Vec<String> = [
        ("chat", openai_chat::request_body("gpt-4.1", &req, true)),
        ("anthropic", anthropic::request_body("claude-sonnet-4-5", 4096, &req, true)),
        ("responses", openai_responses::request_body("gpt-4.1", &req, true)),
    ]
    .iter()
    .map(|(w, b)| format!("{w} {} B", serde_json::to_vec(b).expect("a body serializes").len()))
    .collect();
    println!("request bodies, {TOOLS} tools of {per_tool} B on average (schema {per_schema} B): {}", sizes.join(", "));
    let mut g = c.benchmark_group("request");
    g.bench_function("chat", |b| {
        b.iter(|| serde_json::to_vec(&openai_chat::request("gpt-4.1", black_box(&req), true)))
    });
    g.bench_function("anthropic", |b| {
        b.iter(|| serde_json::to_vec(&anthropic::request("claude-sonnet-4-5", 4096, black_box(&req), true)))
    });
    g.bench_function("responses", |b| {
        b.iter(|| serde_json::to_vec(&openai_responses::request("gpt-4.1", black_box(&req), true)))
    });
    g.finish();
    c.bench_function("request_clone", |b| b.iter(|| black_box(&req).clone()));
}

fn stream_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("stream");
    for wire in ["chat", "anthropic", "responses"] {
        for (answer, chunks) in streams(wire) {
            // The decoders must read what the benchmark feeds them.
            let r = decode(wire, &chunks).unwrap_or_else(|e| panic!("{wire}/{answer}: {e}"));
            match answer {
                "tool_call" => {
                    assert_eq!(r.stop, StopReason::ToolCalls, "{wire}");
                    let args: Value = serde_json::from_str(&r.tool_calls[0].arguments).expect("arguments are JSON");
                    assert_eq!(args, serde_json::from_str::<Value>(CALL_ARGS).expect("CALL_ARGS is JSON"), "{wire}");
                }
                _ => assert_eq!(r.text.as_deref(), Some(ANSWER), "{wire}"),
            }
            let bytes: usize = chunks.iter().map(Vec::len).sum();
            println!("stream/{wire}/{answer}: {} events, {bytes} B", chunks.len());
            g.bench_function(format!("{wire}/{answer}"), |b| b.iter(|| decode(wire, black_box(&chunks))));
        }
    }
    g.finish();
    let mut g = c.benchmark_group("sse_parse");
    for (answer, chunks) in streams("chat") {
        g.bench_function(answer, |b| {
            b.iter(|| {
                let mut parser = SseParser::default();
                let mut n = 0;
                for chunk in black_box(&chunks) {
                    n += parser.push(chunk).map_or(0, |e| e.len());
                }
                n
            })
        });
    }
    g.finish();
}

fn args_benches(c: &mut Criterion) {
    let schema = json!({
        "type": "object",
        "properties": {
            "owner": {"type": "string", "description": "The account or organization that owns the repository."},
            "repo": {"type": "string", "description": "The name of the repository, without the owner."},
            "state": {"type": "string", "enum": ["open", "closed", "all"], "default": "open", "description": "Only pull requests in this state."},
            "per_page": {"type": "integer", "minimum": 1, "maximum": 100, "default": 30, "description": "Results per page (max 100)."},
            "labels": {"type": "array", "items": {"type": "string"}, "description": "Label names to filter by; every label must match."},
            "since": {"type": "string", "format": "date-time", "description": "Only pull requests updated at or after this time (ISO 8601)."}
        },
        "required": ["owner", "repo"],
        "additionalProperties": false
    });
    let args: Value = serde_json::from_str(CALL_ARGS).expect("CALL_ARGS is JSON");
    let read = read_arguments(&schema, &[], args.clone()).expect("the call's arguments are valid");
    assert_eq!(read, args);
    let mut g = c.benchmark_group("args");
    g.bench_function("read", |b| {
        b.iter_batched(|| args.clone(), |a| read_arguments(black_box(&schema), &[], a), BatchSize::SmallInput)
    });
    g.bench_function("parse_and_read", |b| {
        b.iter(|| {
            let a: Value = serde_json::from_str(black_box(CALL_ARGS)).expect("CALL_ARGS is JSON");
            read_arguments(&schema, &[], a)
        })
    });
    g.finish();
}

criterion_group! {
    name = hot_paths;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = request_benches, stream_benches, args_benches
}
criterion_main!(hot_paths);
