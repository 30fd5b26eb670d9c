//! The Rust floor of bench/peers: raw reqwest doing the weather job's two requests by hand (Chat
//! Completions or Responses, streamed or not), parsing just what the job needs.
//!
//! With `BENCH_MINIMAL=1` it is the minimal floor (issue 18, item 4): a current-thread runtime, and the
//! tool list written to JSON once, its text copied into each body, instead of a multi-thread runtime and
//! the tools copied into a `Value` and written again for every request.

use std::sync::atomic::{AtomicUsize, Ordering};

use ambit_bench_runners::{Settings, fail, measure};
use serde_json::{Value, json};

static CALLS: AtomicUsize = AtomicUsize::new(0);

fn get_weather(city: &str) -> String {
    CALLS.fetch_add(1, Ordering::Relaxed);
    format!("sunny in {city}")
}

fn tools(s: &Settings) -> Vec<Value> {
    let weather = json!({"name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}});
    std::iter::once(&weather)
        .chain(s.extra.iter())
        .map(|t| {
            if s.wire == "responses" {
                json!({"type": "function", "name": t["name"], "description": t["description"], "parameters": t["parameters"], "strict": false})
            } else {
                json!({"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]}})
            }
        })
        .collect()
}

/// How a runner writes its request bodies.
enum Bodies {
    /// Each body a `Value` holding a copy of the tools, written out per request.
    Values(Vec<Value>),
    /// The tools written to JSON once; each body copies the text.
    Written(String),
}

impl Bodies {
    /// The body `{"model", key: list, "tools", "stream"}`, as JSON text.
    fn body(&self, key: &str, list: &[Value], stream: bool) -> String {
        match self {
            Bodies::Values(tools) => {
                json!({"model": "gpt-4.1", key: list, "tools": tools, "stream": stream}).to_string()
            }
            Bodies::Written(tools) => {
                let list = serde_json::to_string(list).unwrap_or_default();
                format!(r#"{{"model":"gpt-4.1","{key}":{list},"tools":{tools},"stream":{stream}}}"#)
            }
        }
    }
}

/// The answer's JSON objects: the body, or every SSE `data:` payload.
async fn post(client: &reqwest::Client, url: &str, body: String, stream: bool) -> Vec<Value> {
    let resp = client
        .post(url)
        .bearer_auth("bench-key")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| fail(&format!("request: {e}")));
    let text = resp.text().await.unwrap_or_else(|e| fail(&format!("body: {e}")));
    if !stream {
        return vec![serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("answer: {e}")))];
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// One call `(id, name, arguments)` or the final text, from a Chat Completions answer.
fn chat_answer(parts: &[Value]) -> (Option<(String, String, String)>, String) {
    let (mut call, mut text) = (None::<(String, String, String)>, String::new());
    for p in parts {
        let choice = &p["choices"][0];
        let m = if choice.get("message").is_some() { &choice["message"] } else { &choice["delta"] };
        if let Some(t) = m["content"].as_str() {
            text.push_str(t);
        }
        if let Some(c) = m["tool_calls"].get(0) {
            let entry = call.get_or_insert_with(Default::default);
            if let Some(id) = c["id"].as_str() {
                entry.0 = id.to_string();
            }
            if let Some(n) = c["function"]["name"].as_str() {
                entry.1 = n.to_string();
            }
            entry.2.push_str(c["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    (call, text)
}

/// The output items of a Responses answer (from `response.completed` when streamed).
fn responses_output(parts: &[Value]) -> Vec<Value> {
    parts
        .iter()
        .find_map(|p| match p.get("type").and_then(Value::as_str) {
            Some("response.completed") => p["response"]["output"].as_array().cloned(),
            None => p["output"].as_array().cloned(),
            _ => None,
        })
        .unwrap_or_default()
}

async fn run(client: &reqwest::Client, s: &Settings, bodies: &Bodies) -> String {
    let question = "weather in Paris?";
    if s.wire == "responses" {
        let url = format!("{}/responses", s.base_url);
        let mut input = vec![json!({"role": "user", "content": question})];
        let output = responses_output(&post(client, &url, bodies.body("input", &input, s.stream), s.stream).await);
        let Some(call) = output.iter().find(|i| i["type"] == "function_call").cloned() else { fail("no call") };
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap_or("{}")).unwrap_or_default();
        let result = get_weather(args["city"].as_str().unwrap_or(""));
        input.push(call.clone());
        input.push(json!({"type": "function_call_output", "call_id": call["call_id"], "output": result}));
        let output = responses_output(&post(client, &url, bodies.body("input", &input, s.stream), s.stream).await);
        return output
            .iter()
            .filter(|i| i["type"] == "message")
            .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["text"].as_str().map(str::to_string))
            .collect();
    }
    let url = format!("{}/chat/completions", s.base_url);
    let mut messages = vec![json!({"role": "user", "content": question})];
    let (call, _) = chat_answer(&post(client, &url, bodies.body("messages", &messages, s.stream), s.stream).await);
    let Some((id, name, arguments)) = call else { fail("no call") };
    let args: Value = serde_json::from_str(&arguments).unwrap_or_default();
    let result = get_weather(args["city"].as_str().unwrap_or(""));
    messages.push(json!({"role": "assistant", "content": null,
        "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
    chat_answer(&post(client, &url, bodies.body("messages", &messages, s.stream), s.stream).await).1
}

fn main() {
    let s = Settings::from_env();
    let minimal = std::env::var("BENCH_MINIMAL").is_ok_and(|v| v == "1");
    let runtime = if minimal {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    }
    .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    // reqwest is built with rustls and no default crypto provider (as in ambit): install ring's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bodies = if minimal {
        Bodies::Written(serde_json::to_string(&tools(&s)).unwrap_or_default())
    } else {
        Bodies::Values(tools(&s))
    };
    runtime.block_on(async {
        let client = reqwest::Client::new();
        measure(&s, || CALLS.load(Ordering::Relaxed), || run(&client, &s, &bodies)).await;
    });
}
