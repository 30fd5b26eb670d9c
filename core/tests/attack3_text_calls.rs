//! An outside attacker's regression (attack1) on text tool calls: a hostile server streams an answer of
//! white space in thousands of deltas to an agent with `text_tool_calls = "auto"`. The text held back
//! while it might still open a call was scanned whole on every delta (quadratic); it must be read in
//! time linear in the answer. A raw server on a real socket, since the loopback provider cuts an answer
//! into three deltas only.

use std::time::{Duration, Instant};

use ambit::{Agent, ModelSettings, OpenAiChat, TextToolCalls, tool_fn};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves one streamed Chat Completions answer: `deltas` chunks of `each` spaces, then `tail`.
async fn serve(deltas: usize, each: usize, tail: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut seen = Vec::new();
        // Read the request head and its body (content-length).
        loop {
            let n = sock.read(&mut buf).await.unwrap();
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some(head_end) = text.find("\r\n\r\n") {
                let len = text[..head_end]
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if seen.len() >= head_end + 4 + len {
                    break;
                }
            }
            if n == 0 {
                return;
            }
        }
        let chunk = |delta: Value, finish: Value| {
            let v = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {v}\n\n")
        };
        let mut body = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
        let spaces = " ".repeat(each);
        for _ in 0..deltas {
            body.push_str(&chunk(json!({"content": spaces}), Value::Null));
        }
        body.push_str(&chunk(json!({"content": tail}), Value::Null));
        body.push_str(&chunk(json!({}), json!("stop")));
        body.push_str("data: [DONE]\n\n");
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        sock.write_all(body.as_bytes()).await.unwrap();
        let _ = sock.shutdown().await;
    });
    format!("http://{addr}/v1")
}

async fn run(base_url: String) -> (String, Duration) {
    let weather = tool_fn(
        "get_weather",
        "Current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        |_: Value| async { Ok::<_, String>("sunny".to_string()) },
    );
    let settings = ModelSettings { text_tool_calls: Some(TextToolCalls::Auto), ..Default::default() };
    let model =
        OpenAiChat::new("m").base_url(base_url).api_key("k").max_retries(0).stream(true).settings(settings).unwrap();
    let agent = Agent::builder().model(model).tool(weather).max_turns(1).build().unwrap();
    // Streaming with events on: the held text is what the deltas go through.
    let started = Instant::now();
    let mut stream = agent.stream("Weather?");
    let mut output = String::new();
    use futures::StreamExt;
    while let Some(e) = stream.next().await {
        if let ambit::Event::RunFinished { result, .. } = e.unwrap() {
            output = result.output.clone();
        }
    }
    (output, started.elapsed())
}

/// Hole (fixed): 16,000 deltas of 512 spaces (8 MiB) took quadratic time in the held text (each delta
/// trimmed everything held so far). The bound is generous (a minute on a loaded machine); the
/// quadratic reading took far longer than the linear one, measured below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_white_space_is_read_in_linear_time() {
    let (output, took) = run(serve(16_000, 512, "It is sunny.").await).await;
    assert_eq!(output.trim(), "It is sunny.");
    eprintln!("16,000 deltas of white space read in {took:?}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}
