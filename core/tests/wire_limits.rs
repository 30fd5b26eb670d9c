//! A hostile model provider on a real loopback socket, against the public model API (issue 12, item 6):
//! a 32 MB SSE line, endless streams and bodies, tool-call and content-block indices of 2e9 and 3e9,
//! wrong-shaped Anthropic blocks, and usage counts near `u64::MAX` under a token budget. Each attack
//! ends in a typed error (`model_response`) naming the limit it went past; each has a negative control
//! (the same answer at or just under the limit is read). Each test runs in a child process of its own
//! (this binary, run again for that one test) so its peak RSS (`VmHWM`) is its own; the figure is
//! printed and held under [`RSS_CAP_KIB`].

use std::future::Future;
use std::process::Command;
use std::time::Instant;

use ambit::model::limits::{MAX_CONTENT_BLOCKS, MAX_LINE_BYTES, MAX_TOOL_CALLS};
use ambit::model::{Model, ModelRequest};
use ambit::{Agent, Anthropic, Budget, Error, Message, ModelError, OpenAiChat, OpenAiResponses};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The most a hostile answer may raise a test process's peak RSS to (512 MiB).
const RSS_CAP_KIB: u64 = 512 << 10;

// ---------------------------------------------------------------------------------------------------
// Running each test in a child process, for its own peak RSS.

#[path = "support/rss.rs"]
mod rss;
use rss::peak_rss_kib as vm_hwm_kib;

/// Runs `body` in a child process (this test binary, for the test `name` only) and checks its peak RSS.
fn in_child<F: Future<Output = ()>>(name: &str, body: impl FnOnce() -> F) {
    if std::env::var("AMBIT_WIRE_LIMITS_CHILD").as_deref() == Ok(name) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(body());
        // On a line of its own: the test harness has written `test <name> ... ` without a newline.
        println!("\nVmHWM_KIB={}", vm_hwm_kib());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("AMBIT_WIRE_LIMITS_CHILD", name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} failed in its child:\n{stdout}\n{stderr}");
    let hwm: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM_KIB="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name}: the child did not report its peak RSS:\n{stdout}\n{stderr}"));
    for line in stdout.lines().filter(|l| l.starts_with("measured:")) {
        eprintln!("{name}: {line}");
    }
    eprintln!("{name}: peak RSS {:.1} MiB", hwm as f64 / 1024.0);
    assert!(hwm < RSS_CAP_KIB, "{name}: peak RSS {hwm} KiB, past {RSS_CAP_KIB} KiB");
}

// ---------------------------------------------------------------------------------------------------
// The hostile provider: a raw HTTP/1.1 server that writes `head`, then `unit` `count` times, then `tail`,
// generated as it goes (the server's memory stays small). `count: None` never ends.

#[derive(Clone)]
struct Answer {
    content_type: &'static str,
    /// Sent as `content-length` when set (else the body ends when the connection closes).
    length: Option<u64>,
    head: Vec<u8>,
    unit: Vec<u8>,
    count: Option<usize>,
    tail: Vec<u8>,
}

impl Answer {
    fn sse(body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            content_type: "text/event-stream",
            length: None,
            head: body.into(),
            unit: Vec::new(),
            count: Some(0),
            tail: Vec::new(),
        }
    }
    fn json(body: &Value) -> Answer {
        let bytes = body.to_string().into_bytes();
        Answer { content_type: "application/json", length: Some(bytes.len() as u64), ..Answer::sse(bytes) }
    }
    fn repeat(mut self, unit: impl Into<Vec<u8>>, count: Option<usize>, tail: impl Into<Vec<u8>>) -> Answer {
        self.unit = unit.into();
        self.count = count;
        self.tail = tail.into();
        self
    }
}

/// Serves `answer` to every request on a fresh loopback port; returns the base URL.
async fn serve(answer: Answer) -> String {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(answer_one(conn, answer.clone()));
        }
    });
    format!("http://{addr}/v1")
}

async fn answer_one(mut conn: TcpStream, a: Answer) {
    // The request: headers, then content-length bytes of body.
    let mut req = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        let Ok(n) = conn.read(&mut buf).await else { return };
        if n == 0 {
            return;
        }
        req.extend_from_slice(&buf[..n]);
        if let Some(i) = req.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&req[..head_end]).to_ascii_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while req.len() - head_end < length {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let mut response = format!("HTTP/1.1 200 OK\r\ncontent-type: {}\r\nconnection: close\r\n", a.content_type);
    if let Some(n) = a.length {
        response.push_str(&format!("content-length: {n}\r\n"));
    }
    response.push_str("\r\n");
    if conn.write_all(response.as_bytes()).await.is_err() || conn.write_all(&a.head).await.is_err() {
        return;
    }
    if !a.unit.is_empty() {
        // Units in blocks of about 64 KiB.
        let per = (65536 / a.unit.len()).max(1);
        let block = a.unit.repeat(per);
        let mut left = a.count.unwrap_or(usize::MAX);
        while left > 0 {
            let n = per.min(left);
            if conn.write_all(&block[..n * a.unit.len()]).await.is_err() {
                return;
            }
            if a.count.is_some() {
                left -= n;
            }
        }
    }
    let _ = conn.write_all(&a.tail).await;
    let _ = conn.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------
// The three wires, pointed at the hostile provider.

fn request() -> ModelRequest {
    ModelRequest { messages: vec![Message::user("hi")], ..Default::default() }
}

fn chat(url: &str, stream: bool) -> OpenAiChat {
    OpenAiChat::new("m").base_url(url).api_key("k").max_retries(0).stream(stream)
}

fn anthropic(url: &str) -> Anthropic {
    Anthropic::new("claude").base_url(url).api_key("k").max_retries(0).stream(true)
}

/// The error of a request that must fail, checked to be the typed `model_response` naming `limit`.
fn refused(result: Result<ambit::ModelResponse, ModelError>, limit: &str) -> String {
    let e = result.expect_err("the hostile answer was read as a good one");
    assert_eq!(e.code(), "model_response", "{e}");
    let text = e.to_string();
    assert!(text.contains(limit), "the error does not name {limit}: {text}");
    text
}

fn sse_event(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

const CHAT_DONE: &str =
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

// ---------------------------------------------------------------------------------------------------
// One line: 32 MB refused at the line limit; a line exactly at the limit read; linear time.

const LINE_HEAD: &str = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"";
const LINE_TAIL: &str = "\"}}]}";

/// A Chat Completions text chunk whose `data:` line is `line_len` bytes long (without its `\n`).
fn one_long_line(line_len: usize) -> Answer {
    let fill = line_len - LINE_HEAD.len() - LINE_TAIL.len();
    Answer::sse(LINE_HEAD).repeat(b"a".to_vec(), Some(fill), format!("{LINE_TAIL}\n\n{CHAT_DONE}"))
}

#[test]
fn a_32_mb_sse_line_is_refused_at_the_line_limit() {
    in_child("a_32_mb_sse_line_is_refused_at_the_line_limit", || async {
        let url = serve(one_long_line(32 << 20)).await;
        let t = Instant::now();
        let text = refused(chat(&url, true).respond(&request()).await, "max_line_bytes");
        println!("\nmeasured: 32 MiB line refused in {:.2} s: {text}", t.elapsed().as_secs_f64());
    });
}

#[test]
fn a_line_one_byte_past_the_limit_is_refused() {
    in_child("a_line_one_byte_past_the_limit_is_refused", || async {
        let url = serve(one_long_line(MAX_LINE_BYTES + 1)).await;
        refused(chat(&url, true).respond(&request()).await, "max_line_bytes");
    });
}

/// The negative control: the line exactly at the limit is read, in time linear in its length.
#[test]
fn a_line_at_the_limit_is_read_in_linear_time() {
    in_child("a_line_at_the_limit_is_read_in_linear_time", || async {
        let mut secs = Vec::new();
        for len in [MAX_LINE_BYTES / 4, MAX_LINE_BYTES] {
            let url = serve(one_long_line(len)).await;
            let t = Instant::now();
            let r = chat(&url, true).respond(&request()).await.expect("a line at the limit is read");
            secs.push(t.elapsed().as_secs_f64());
            assert_eq!(
                r.text.map(|t| t.len()),
                Some(len - LINE_HEAD.len() - LINE_TAIL.len()),
                "the whole text came through"
            );
        }
        println!(
            "\nmeasured: a {} MiB line read in {:.2} s, a {} MiB line in {:.2} s (ratio {:.1} for 4x the bytes)",
            (MAX_LINE_BYTES / 4) >> 20,
            secs[0],
            MAX_LINE_BYTES >> 20,
            secs[1],
            secs[1] / secs[0]
        );
    });
}

// ---------------------------------------------------------------------------------------------------
// Endless streams and bodies.

fn chat_delta(text: &str) -> String {
    sse_event(None, &json!({"id": "c", "choices": [{"index": 0, "delta": {"content": text}}]}))
}

#[test]
fn an_endless_stream_of_events_stops_at_the_event_limit() {
    in_child("an_endless_stream_of_events_stops_at_the_event_limit", || async {
        let url = serve(Answer::sse("").repeat(chat_delta("a"), None, "")).await;
        let t = Instant::now();
        let text = refused(chat(&url, true).respond(&request()).await, "max_events");
        println!("\nmeasured: endless events refused in {:.2} s: {text}", t.elapsed().as_secs_f64());
    });
}

#[test]
fn an_endless_stream_of_comments_stops_at_the_byte_limit() {
    in_child("an_endless_stream_of_comments_stops_at_the_byte_limit", || async {
        let url = serve(Answer::sse("").repeat(b": keep-alive\n".to_vec(), None, "")).await;
        let t = Instant::now();
        let text = refused(chat(&url, true).respond(&request()).await, "max_stream_bytes");
        println!("\nmeasured: endless comments refused in {:.2} s: {text}", t.elapsed().as_secs_f64());
    });
}

/// The negative control: a long stream that ends is read whole, in time linear in its events.
#[test]
fn a_long_stream_that_ends_is_read_whole_in_linear_time() {
    in_child("a_long_stream_that_ends_is_read_whole_in_linear_time", || async {
        let mut secs = Vec::new();
        for n in [50_000, 200_000] {
            let url = serve(Answer::sse("").repeat(chat_delta("ab"), Some(n), CHAT_DONE)).await;
            let t = Instant::now();
            let r = chat(&url, true).respond(&request()).await.expect("a stream that ends is read");
            secs.push(t.elapsed().as_secs_f64());
            assert_eq!(r.text.map(|t| t.len()), Some(2 * n));
        }
        println!(
            "\nmeasured: 50,000 events in {:.2} s, 200,000 in {:.2} s (ratio {:.1} for 4x the events)",
            secs[0],
            secs[1],
            secs[1] / secs[0]
        );
    });
}

#[test]
fn an_endless_body_stops_at_the_body_limit() {
    in_child("an_endless_body_stops_at_the_body_limit", || async {
        let endless =
            Answer { content_type: "application/json", ..Answer::sse("{\"a\":\"") }.repeat(b"a".to_vec(), None, "");
        let url = serve(endless).await;
        refused(chat(&url, false).respond(&request()).await, "max_body_bytes");
        // A length past the limit is refused before the body is read.
        let mut long = Answer::json(&json!({}));
        long.length = Some(1 << 40);
        let url = serve(long).await;
        refused(chat(&url, false).respond(&request()).await, "max_body_bytes");
        // The control: a 1 MiB answer is read.
        let text = "a".repeat(1 << 20);
        let body = json!({"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"}]});
        let url = serve(Answer::json(&body)).await;
        let r = chat(&url, false).respond(&request()).await.expect("a 1 MiB answer is read");
        assert_eq!(r.text.map(|t| t.len()), Some(1 << 20));
    });
}

/// The worst case for memory within the limits: a body just under its limit made of the smallest
/// JSON values, each of which costs a parsed value many times its two bytes. The peak RSS this prints
/// is what a hostile provider can push one request to.
#[test]
fn a_body_of_tiny_json_values_at_the_limit_stays_bounded() {
    in_child("a_body_of_tiny_json_values_at_the_limit_stays_bounded", || async {
        use ambit::model::limits::MAX_BODY_BYTES;
        let head = r#"{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"junk":[0"#;
        let n = (MAX_BODY_BYTES - head.len() - 2) / 2;
        let mut body =
            Answer { content_type: "application/json", ..Answer::sse(head) }.repeat(b",0".to_vec(), Some(n), "]}");
        body.length = Some((head.len() + 2 * n + 2) as u64);
        let url = serve(body).await;
        let r = chat(&url, false).respond(&request()).await.expect("a body under the limit is read");
        assert_eq!(r.text.as_deref(), Some("hi"));
        println!("\nmeasured: a {} MiB body of zeros read", MAX_BODY_BYTES >> 20);
    });
}

/// The same for one SSE line just under its limit.
#[test]
fn a_line_of_tiny_json_values_at_the_limit_stays_bounded() {
    in_child("a_line_of_tiny_json_values_at_the_limit_stays_bounded", || async {
        let head =
            r#"data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],"junk":[0"#;
        let n = (MAX_LINE_BYTES - head.len() - 2) / 2;
        let url = serve(Answer::sse(head).repeat(b",0".to_vec(), Some(n), "]}\n\ndata: [DONE]\n\n")).await;
        let r = chat(&url, true).respond(&request()).await.expect("a line under the limit is read");
        assert_eq!(r.text.as_deref(), Some("hi"));
        println!("\nmeasured: a {} MiB line of zeros read", MAX_LINE_BYTES >> 20);
    });
}

// ---------------------------------------------------------------------------------------------------
// Huge indices.

fn chat_calls(indices: impl IntoIterator<Item = u64>) -> String {
    let mut body = String::new();
    for i in indices {
        body += &sse_event(
            None,
            &json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]}}]}),
        );
    }
    body + "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
}

#[test]
fn a_chat_tool_call_index_of_2e9_is_refused() {
    in_child("a_chat_tool_call_index_of_2e9_is_refused", || async {
        let url = serve(Answer::sse(chat_calls([0, 2_000_000_000]))).await;
        let text = refused(chat(&url, true).respond(&request()).await, "max_tool_calls");
        assert!(text.contains("2000000000"), "{text}");
        // One past the last index allowed.
        let url = serve(Answer::sse(chat_calls([MAX_TOOL_CALLS as u64]))).await;
        refused(chat(&url, true).respond(&request()).await, "max_tool_calls");
        // Not a count at all.
        let bad = sse_event(None, &json!({"id": "c", "choices": [{"delta": {"tool_calls": [{"index": -1}]}}]}));
        let url = serve(Answer::sse(bad + CHAT_DONE)).await;
        refused(chat(&url, true).respond(&request()).await, "tool-call index is not a count");
    });
}

/// The negative control: every index up to the last allowed one is read.
#[test]
fn chat_tool_call_indices_up_to_the_limit_are_read() {
    in_child("chat_tool_call_indices_up_to_the_limit_are_read", || async {
        let url = serve(Answer::sse(chat_calls(0..MAX_TOOL_CALLS as u64))).await;
        let r = chat(&url, true).respond(&request()).await.expect("1,024 tool calls are read");
        assert_eq!(r.tool_calls.len(), MAX_TOOL_CALLS);
        assert_eq!(r.tool_calls[MAX_TOOL_CALLS - 1].id, format!("call_{}", MAX_TOOL_CALLS - 1));
    });
}

fn anthropic_stream(blocks: &[(Value, Value)]) -> String {
    let mut body = sse_event(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [], "usage": {"input_tokens": 3, "output_tokens": 1}}}),
    );
    for (index, block) in blocks {
        body += &sse_event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        body += &sse_event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": "hi"}}),
        );
        body += &sse_event(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index}));
    }
    body += &sse_event(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
    );
    body + &sse_event(Some("message_stop"), &json!({"type": "message_stop"}))
}

fn text_block() -> Value {
    json!({"type": "text", "text": ""})
}

#[test]
fn an_anthropic_block_index_of_3e9_is_refused() {
    in_child("an_anthropic_block_index_of_3e9_is_refused", || async {
        let url = serve(Answer::sse(anthropic_stream(&[(json!(3_000_000_000u64), text_block())]))).await;
        let text = refused(anthropic(&url).respond(&request()).await, "max_content_blocks");
        assert!(text.contains("3000000000"), "{text}");
        let url = serve(Answer::sse(anthropic_stream(&[(json!(MAX_CONTENT_BLOCKS), text_block())]))).await;
        refused(anthropic(&url).respond(&request()).await, "max_content_blocks");
    });
}

/// The negative control: the last index allowed is read.
#[test]
fn an_anthropic_block_index_under_the_limit_is_read() {
    in_child("an_anthropic_block_index_under_the_limit_is_read", || async {
        let url = serve(Answer::sse(anthropic_stream(&[(json!(MAX_CONTENT_BLOCKS - 1), text_block())]))).await;
        let r = anthropic(&url).respond(&request()).await.expect("the last index allowed is read");
        assert_eq!(r.text.as_deref(), Some("hi"));
    });
}

// ---------------------------------------------------------------------------------------------------
// Wrong-shaped Anthropic blocks: a typed error, never a panic.

#[test]
fn wrong_shaped_anthropic_blocks_are_refused_not_panicked() {
    in_child("wrong_shaped_anthropic_blocks_are_refused_not_panicked", || async {
        // Each of these panicked the old decoder ("cannot access key text in JSON string") or was read
        // as something else.
        let cases: [(&str, String); 4] = [
            ("without a block object", anthropic_stream(&[(json!(0), json!("text"))])),
            ("without a block object", anthropic_stream(&[(json!(0), json!([1, 2]))])),
            ("text that is not a string", anthropic_stream(&[(json!(0), json!({"type": "text", "text": 5}))])),
            (
                "without a message object",
                sse_event(Some("message_start"), &json!({"message": "hello"}))
                    + &sse_event(Some("message_stop"), &json!({})),
            ),
        ];
        for (what, stream) in cases {
            let url = serve(Answer::sse(stream)).await;
            refused(anthropic(&url).respond(&request()).await, what);
        }
        // The control: the well-shaped block is read.
        let url = serve(Answer::sse(anthropic_stream(&[(json!(0), text_block())]))).await;
        let r = anthropic(&url).respond(&request()).await.expect("a well-shaped stream is read");
        assert_eq!(r.text.as_deref(), Some("hi"));
    });
}

// ---------------------------------------------------------------------------------------------------
// Usage near u64::MAX under a token budget.

/// A non-streamed Chat Completions answer calling the tool `noop`, reporting these counts.
fn calling_noop(prompt: u64, completion: u64) -> Answer {
    Answer::json(&json!({"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]},
        "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}))
}

async fn run_with_budget(url: &str, max_tokens: u64) -> Error {
    let noop =
        ambit::tool_fn(
            "noop",
            "does nothing",
            json!({"type": "object"}),
            |_: Value| async move { Ok::<_, String>("done") },
        );
    let agent = Agent::builder()
        .model(chat(url, false))
        .tool(noop)
        .max_turns(4)
        .budget(Budget { max_tokens: Some(max_tokens), max_cost: None })
        .build()
        .unwrap();
    agent.run("go").await.expect_err("the model never stops calling, so the run must end in an error")
}

#[test]
fn usage_near_u64_max_still_stops_a_token_budget() {
    in_child("usage_near_u64_max_still_stops_a_token_budget", || async {
        // One answer whose counts sum past u64::MAX (wrapping gave 4: under any budget).
        let url = serve(calling_noop(u64::MAX, 5)).await;
        match run_with_budget(&url, 1000).await {
            Error::Budget { budget, spent, usage, .. } => {
                assert_eq!(budget, "tokens");
                assert_eq!(spent, u64::MAX as f64);
                assert_eq!((usage.requests, usage.input_tokens, usage.output_tokens), (1, u64::MAX, 5));
            }
            other => panic!("expected the token budget to stop the run, got {other}"),
        }
        // Two answers of 2^63 each: the run's sum passes u64::MAX on the second (wrapping gave 0).
        let url = serve(calling_noop(1 << 63, 0)).await;
        match run_with_budget(&url, u64::MAX - 1).await {
            Error::Budget { usage, .. } => assert_eq!((usage.requests, usage.input_tokens), (2, u64::MAX)),
            other => panic!("expected the token budget to stop the run, got {other}"),
        }
        // The control: small counts stay under the budget, and the run goes on to its turn limit.
        let url = serve(calling_noop(10, 5)).await;
        match run_with_budget(&url, 1000).await {
            Error::MaxTurns { usage, .. } => assert_eq!(usage.total_tokens(), 4 * 15),
            other => panic!("expected the turn limit, got {other}"),
        }
    });
}

/// Counts past `u64::MAX` (`1e30`) read as `u64::MAX`, not as none, on every wire.
#[test]
fn counts_past_u64_max_read_as_u64_max() {
    in_child("counts_past_u64_max_read_as_u64_max", || async {
        let body = json!({"id": "r", "status": "completed", "output": [{"type": "message", "content": [
            {"type": "output_text", "text": "hi"}]}], "usage": {"input_tokens": 1e30, "output_tokens": 7,
            "input_tokens_details": {"cached_tokens": u64::MAX, "cache_write_tokens": u64::MAX}}});
        let url = serve(Answer::json(&body)).await;
        let model = OpenAiResponses::new("m").base_url(url).api_key("k").max_retries(0);
        let r = model.respond(&request()).await.expect("the answer is read");
        assert_eq!((r.usage.output_tokens, r.usage.cache_read_tokens), (7, u64::MAX));
        // 1e30 saturates to u64::MAX; the cached counts (saturated too) are taken out of it.
        assert_eq!(r.usage.input_tokens, 0);
        assert_eq!(r.usage.total_tokens(), 7);
        assert_eq!(ambit::agent::budget::budget_tokens(&r.usage), u64::MAX);
    });
}
