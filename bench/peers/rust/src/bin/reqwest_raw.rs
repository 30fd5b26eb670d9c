//! The Rust floor of bench/peers: raw reqwest doing the weather job's two requests by hand (Chat
//! Completions or Responses, streamed or not), parsing just what the job needs.

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

/// The answer's JSON objects: the body, or every SSE `data:` payload.
async fn post(client: &reqwest::Client, url: &str, body: &Value, stream: bool) -> Vec<Value> {
    let resp = client
        .post(url)
        .bearer_auth("bench-key")
        .json(body)
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

async fn run(client: &reqwest::Client, s: &Settings, tools: &[Value]) -> String {
    let question = "weather in Paris?";
    if s.wire == "responses" {
        let url = format!("{}/responses", s.base_url);
        let mut input = vec![json!({"role": "user", "content": question})];
        let body = json!({"model": "gpt-4.1", "input": input, "tools": tools, "stream": s.stream});
        let output = responses_output(&post(client, &url, &body, s.stream).await);
        let Some(call) = output.iter().find(|i| i["type"] == "function_call").cloned() else { fail("no call") };
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap_or("{}")).unwrap_or_default();
        let result = get_weather(args["city"].as_str().unwrap_or(""));
        input.push(call.clone());
        input.push(json!({"type": "function_call_output", "call_id": call["call_id"], "output": result}));
        let body = json!({"model": "gpt-4.1", "input": input, "tools": tools, "stream": s.stream});
        let output = responses_output(&post(client, &url, &body, s.stream).await);
        return output
            .iter()
            .filter(|i| i["type"] == "message")
            .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["text"].as_str().map(str::to_string))
            .collect();
    }
    let url = format!("{}/chat/completions", s.base_url);
    let mut messages = vec![json!({"role": "user", "content": question})];
    let body = json!({"model": "gpt-4.1", "messages": messages, "tools": tools, "stream": s.stream});
    let (call, _) = chat_answer(&post(client, &url, &body, s.stream).await);
    let Some((id, name, arguments)) = call else { fail("no call") };
    let args: Value = serde_json::from_str(&arguments).unwrap_or_default();
    let result = get_weather(args["city"].as_str().unwrap_or(""));
    messages.push(json!({"role": "assistant", "content": null,
        "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
    let body = json!({"model": "gpt-4.1", "messages": messages, "tools": tools, "stream": s.stream});
    chat_answer(&post(client, &url, &body, s.stream).await).1
}

#[tokio::main]
async fn main() {
    let s = Settings::from_env();
    // reqwest is built with rustls and no default crypto provider (as in ambit): install ring's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let tools = tools(&s);
    measure(&s, || CALLS.load(Ordering::Relaxed), || run(&client, &s, &tools)).await;
}
