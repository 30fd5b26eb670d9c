//! An outside attacker's regression (attack1) on a model's extra query parameters and headers: a
//! secret carried in the query (`?key=…`, as some OpenAI-compatible endpoints take their key) must not
//! be echoed by the error a failed connection or a timeout gives, which reaches logs and events; a
//! header value that could split the request is refused without echoing it. Each with its control.

use ambit::model::{Message, ModelConfig, ModelRequest};

const SECRET: &str = "sk-SECRET-9f8e7d";

fn model_at(base_url: &str, timeout_secs: f64) -> std::sync::Arc<dyn ambit::Model> {
    let config = serde_json::json!({"wire": "openai_chat", "model": "m", "base_url": base_url, "api_key": "k",
        "max_retries": 0, "timeout_secs": timeout_secs, "query": {"key": SECRET, "api-version": "2024-10-21"}});
    ModelConfig::from_json(&config.to_string()).unwrap().build().unwrap()
}

fn request() -> ModelRequest {
    ModelRequest { messages: vec![Message::user("hi")], ..Default::default() }
}

/// Hole (fixed): reqwest names the URL, query included, in a connection error, and the timeout message
/// named it too, so the secret in the query reached the error's text.
#[tokio::test]
async fn a_query_secret_is_not_echoed_by_a_connection_error_or_a_timeout() {
    // A port nothing listens on: connection refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let e = model_at(&format!("http://127.0.0.1:{port}/v1"), 30.0).respond(&request()).await.unwrap_err();
    let shown = e.to_string();
    assert!(!shown.contains(SECRET), "the secret was echoed: {shown}");
    // Control: the error still names where it tried.
    assert!(shown.contains(&format!("127.0.0.1:{port}")), "{shown}");

    // A server that accepts and never answers: the per-request timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let e = model_at(&format!("http://127.0.0.1:{port}/v1"), 0.3).respond(&request()).await.unwrap_err();
    let shown = e.to_string();
    assert!(shown.contains("timeout"), "{shown}");
    assert!(!shown.contains(SECRET), "the secret was echoed: {shown}");
    drop(silent);
}

/// Held: a header value holding CR/LF is refused at build, naming the header and not echoing the value;
/// reserved headers are refused.
#[test]
fn header_injection_is_refused_without_echoing_the_value() {
    for value in [format!("{SECRET}\r\nX-Evil: 1"), format!("{SECRET}\nHost: evil"), format!("{SECRET}\0")] {
        let config = serde_json::json!({"wire": "openai_chat", "model": "m", "headers": {"api-key": value}});
        let e = ModelConfig::from_json(&config.to_string()).and_then(|c| c.build().map(|_| ())).unwrap_err();
        assert!(e.to_string().contains("api-key") && !e.to_string().contains(SECRET), "{e}");
    }
    for name in ["Content-Length", "TRANSFER-ENCODING", "host", "x-evil\r\nhost", "Connection"] {
        let config = serde_json::json!({"wire": "anthropic", "model": "m", "headers": {name: "v"}});
        assert!(ModelConfig::from_json(&config.to_string()).and_then(|c| c.build().map(|_| ())).is_err(), "{name}");
    }
    // Control: an ordinary header builds.
    let config = serde_json::json!({"wire": "openai_chat", "model": "m", "headers": {"api-key": SECRET}});
    ModelConfig::from_json(&config.to_string()).unwrap().build().unwrap();
}

/// Hole (fixed): a model's and a model config's `Debug` printed the API key and the extra headers' and
/// query parameters' values, so a host logging `{:?}` of its model wrote its secrets to the log.
#[test]
fn debug_output_never_shows_a_secret() {
    let config = serde_json::json!({"wire": "openai_chat", "model": "m", "api_key": SECRET,
        "headers": {"api-key": SECRET}, "query": {"key": SECRET}});
    let config = ModelConfig::from_json(&config.to_string()).unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains(SECRET), "{shown}");
    // Control: the rest is shown, names included.
    assert!(shown.contains("\"m\"") && shown.contains("api-key") && shown.contains("key"), "{shown}");
    let model = ambit::OpenAiChat::new("m").api_key(SECRET).header("api-key", SECRET).unwrap();
    let shown = format!("{model:?}");
    assert!(!shown.contains(SECRET), "{shown}");
    let model = ambit::Anthropic::new("m").api_key(SECRET);
    let shown = format!("{model:?}");
    assert!(!shown.contains(SECRET), "{shown}");
}

/// Hole (fixed, outside review attack8): a password in the base URL (`https://user:pass@gateway/v1`, which
/// reqwest sends as basic auth) was named, with the URL, in every transport error and in the `Debug` of a
/// model and a model config. Control: the error and the `Debug` still name the host and the path.
#[tokio::test]
async fn a_password_in_the_base_url_is_not_echoed_by_an_error_or_a_debug() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let base = format!("http://gateway-user:{SECRET}@127.0.0.1:{port}/v1");
    let e = model_at(&base, 30.0).respond(&request()).await.unwrap_err();
    let shown = e.to_string();
    assert!(!shown.contains(SECRET) && !shown.contains("gateway-user"), "the password was echoed: {shown}");
    assert!(shown.contains(&format!("127.0.0.1:{port}/v1")), "{shown}");
    let config = serde_json::json!({"wire": "openai_chat", "model": "m", "base_url": base});
    let config = ModelConfig::from_json(&config.to_string()).unwrap();
    let shown = format!("{config:?} {:?}", ambit::OpenAiChat::new("m").base_url(base.clone()));
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(shown.contains(&format!("127.0.0.1:{port}/v1")), "{shown}");
}
