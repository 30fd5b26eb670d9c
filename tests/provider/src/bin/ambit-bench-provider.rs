//! `ambit-bench-provider`: the loopback model for the side-by-side benchmark (bench/peers). It answers
//! all three wires on one port, streamed (SSE) or not as each request asks, without a script: a
//! conversation that holds no tool result yet is answered with a call `get_weather({"city": "Paris"})`,
//! one that holds a result with the text "It is sunny in Paris.". It keeps no conversation, so any
//! number of runs go through it, and counts the requests and their body bytes:
//! `GET /__bench/stats` → `{"requests": N, "bytes": B}`, `POST /__bench/reset` zeroes them.
//!
//! It prints its base URL (`http://127.0.0.1:PORT/v1`) as the first line of standard output and serves
//! until its standard input closes. One thread: it must never be what a benchmark measures.
//!
//! `BENCH_LATENCY_MS` (default 0) delays every model answer by that many milliseconds, as a real model
//! would, so that many runs pile up in flight (bench/peers `--phase concurrent`). It takes as many
//! connections as its open-file limit allows (raised to the hard limit at start); when accepting fails
//! (the limit reached) it waits 10 ms and tries again rather than spinning.
//!
//! `--tls [--ca-file PATH]` serves HTTPS as the hosted APIs do: a CA and a certificate for 127.0.0.1 and
//! localhost made at start, HTTP/2 or HTTP/1.1 chosen by ALPN, up to 100,000 streams at once on one
//! HTTP/2 connection. The base URL is then `https://127.0.0.1:PORT/v1`; the CA's PEM is written to PATH
//! (by default a file in the temporary directory) and its path printed as the second line,
//! `ca=PATH`, for the clients to trust (`SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS`). Without `--tls`,
//! plain HTTP/1.1 as before.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ambit_test_provider::tls::Tls;
use ambit_test_provider::wires;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// The marker a wire's request carries once the conversation holds a tool result.
fn has_result(wire: &str, body: &[u8]) -> bool {
    let marker: &[u8] = match wire {
        "anthropic" => b"tool_result",
        "openai_responses" => b"function_call_output",
        _ => b"tool_call_id",
    };
    body.windows(marker.len()).any(|w| w == marker)
}

fn respond(done: bool) -> Value {
    if done {
        json!({"content": "It is sunny in Paris.", "usage": {"input_tokens": 60, "output_tokens": 8}})
    } else {
        json!({"tool_calls": [{"id": "call_weather_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}],
               "usage": {"input_tokens": 50, "output_tokens": 12}})
    }
}

fn reply(content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::builder()
        .header("content-type", content_type)
        .header("x-request-id", "req_ambit_bench")
        .body(Full::new(body.into()))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

async fn handle(
    req: Request<Incoming>,
    stats: Arc<Stats>,
    latency: std::time::Duration,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    let post = req.method() == hyper::Method::POST;
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    if path == "/__bench/stats" {
        let s =
            json!({"requests": stats.requests.load(Ordering::Relaxed), "bytes": stats.bytes.load(Ordering::Relaxed)});
        return Ok(reply("application/json", s.to_string()));
    }
    if path == "/__bench/reset" {
        stats.requests.store(0, Ordering::Relaxed);
        stats.bytes.store(0, Ordering::Relaxed);
        return Ok(reply("application/json", "{}"));
    }
    let wire = if path.ends_with("/chat/completions") {
        "openai_chat"
    } else if path.ends_with("/messages") {
        "anthropic"
    } else if path.ends_with("/responses") {
        "openai_responses"
    } else {
        let mut r = reply("application/json", format!("{{\"error\":{{\"message\":\"no route for {path}\"}}}}"));
        *r.status_mut() = hyper::StatusCode::NOT_FOUND;
        return Ok(r);
    };
    if !post {
        let mut r = reply("application/json", "{\"error\":{\"message\":\"POST only\"}}");
        *r.status_mut() = hyper::StatusCode::METHOD_NOT_ALLOWED;
        return Ok(r);
    }
    stats.requests.fetch_add(1, Ordering::Relaxed);
    stats.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    let done = has_result(wire, &body);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let answer = respond(done);
    // The Responses wire echoes the request's instructions and tools; the others need only two fields.
    let request: Value = if wire == "openai_responses" {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    } else {
        let model = field(&body, b"\"model\"").unwrap_or_else(|| "gpt-4.1".into());
        let stream = field_is_true(&body, b"\"stream\"");
        json!({"model": model, "stream": stream})
    };
    let model = request.get("model").and_then(Value::as_str).unwrap_or("gpt-4.1").to_string();
    let streamed = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let n = if done { "2" } else { "1" };
    if !streamed {
        let json = match wire {
            "anthropic" => wires::anthropic_message(&format!("msg_bench{n}"), &model, &answer),
            "openai_responses" => wires::responses_response(&format!("resp_bench{n}"), &model, &answer, &request, true),
            _ => wires::chat_completion(&format!("chatcmpl-bench{n}"), &model, &answer),
        };
        return Ok(reply("application/json", json.to_string()));
    }
    let events = match wire {
        "anthropic" => wires::anthropic_events(&format!("msg_bench{n}"), &model, &answer),
        "openai_responses" => wires::responses_events(&format!("resp_bench{n}"), &model, &answer, &request),
        _ => wires::chat_chunks(&format!("chatcmpl-bench{n}"), &model, &answer),
    };
    let mut text: String = events.iter().map(wires::Sse::to_bytes).collect();
    if wire == "openai_chat" {
        text.push_str("data: [DONE]\n\n");
    }
    Ok(reply("text/event-stream; charset=utf-8", text))
}

/// The string value of a top-level key, found without parsing the (possibly large) body: enough for
/// `"model"`, which every client sends before or after the tools but never inside a schema here.
fn field(body: &[u8], key: &[u8]) -> Option<String> {
    let at = body.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &body[at..];
    let open = rest.iter().position(|&b| b == b'"')? + 1;
    let close = rest[open..].iter().position(|&b| b == b'"')? + open;
    String::from_utf8(rest[open..close].to_vec()).ok()
}

fn field_is_true(body: &[u8], key: &[u8]) -> bool {
    let Some(at) = body.windows(key.len()).position(|w| w == key) else { return false };
    let rest = &body[at + key.len()..];
    let value: Vec<u8> = rest.iter().copied().skip_while(|b| *b == b':' || b.is_ascii_whitespace()).take(4).collect();
    value == b"true"
}

/// Raises the soft open-file limit to the hard one: one connection per in-flight run.
fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write the struct passed, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    raise_fd_limit();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tls = args.iter().any(|a| a == "--tls");
    let ca_file =
        args.iter().position(|a| a == "--ca-file").and_then(|i| args.get(i + 1)).map(std::path::PathBuf::from);
    let tls = if tls {
        let tls = Tls::generate().unwrap_or_else(|e| {
            eprintln!("ambit-bench-provider: {e}");
            std::process::exit(1);
        });
        let path = ca_file.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("ambit-bench-provider-{}-ca.pem", std::process::id()))
        });
        if let Err(e) = std::fs::write(&path, &tls.ca_pem) {
            eprintln!("ambit-bench-provider: cannot write the CA to {}: {e}", path.display());
            std::process::exit(1);
        }
        Some((tls, path))
    } else {
        None
    };
    let listener = match TcpListener::bind(("127.0.0.1", 0)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ambit-bench-provider: cannot listen on 127.0.0.1: {e}");
            std::process::exit(1);
        }
    };
    let addr = listener.local_addr().expect("a bound listener has an address");
    let mut out = std::io::stdout();
    match &tls {
        Some((_, path)) => {
            let _ = writeln!(out, "https://{addr}/v1\nca={}", path.display());
        }
        None => {
            let _ = writeln!(out, "http://{addr}/v1");
        }
    }
    let _ = out.flush();
    std::thread::spawn(|| {
        let mut buf = [0u8; 256];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        std::process::exit(0);
    });
    let tls = tls.map(|(tls, _)| tls);
    let stats = Arc::new(Stats::default());
    let latency = std::time::Duration::from_millis(
        std::env::var("BENCH_LATENCY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0),
    );
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                eprintln!("ambit-bench-provider: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let stats = stats.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = move |req| handle(req, stats.clone(), latency);
            match tls {
                Some(tls) => tls.serve(stream, service).await,
                None => {
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service_fn(service)).await;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_top_level_fields_without_parsing() {
        let body = br#"{"model": "gpt-4.1", "messages": [], "stream":true}"#;
        assert_eq!(field(body, b"\"model\"").as_deref(), Some("gpt-4.1"));
        assert!(field_is_true(body, b"\"stream\""));
        assert!(!field_is_true(br#"{"stream": false}"#, b"\"stream\""));
        assert!(has_result("openai_chat", br#"{"role": "tool", "tool_call_id": "x"}"#));
        assert!(!has_result("openai_chat", br#"{"role": "user"}"#));
    }
}
