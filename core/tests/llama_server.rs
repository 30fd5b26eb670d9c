//! Against llama.cpp's real OpenAI-compatible server (the `xllamacpp` wheel) on 127.0.0.1, with the
//! suite's tiny model (tests/llama/serve.py --tiny, the helper every language starts): one server for the
//! whole file, stopped when the test process ends (its standard input closes). The Python interpreter is
//! `$AMBIT_PY`, else the suite's virtualenv `$AMBIT_CACHE/venv` (scripts/llama-env.sh makes it).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use ambit::{Agent, Event, ModelSettings, OpenAiChat, StopReason, TextToolCalls, tool_fn};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;

/// The server: its base URL, and the pipe whose closing stops it.
struct Llama {
    url: String,
    _child: Child,
    _stdin: ChildStdin,
}

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("AMBIT_PY").filter(|p| !p.is_empty()) {
        return p.into();
    }
    let cache = std::env::var_os("AMBIT_CACHE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ambit"));
    cache.join("venv/bin/python")
}

fn llama() -> &'static str {
    static SERVER: OnceLock<Llama> = OnceLock::new();
    &SERVER
        .get_or_init(|| {
            let py = python();
            let serve = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/llama/serve.py");
            let mut child = Command::new(&py)
                .arg(&serve)
                .arg("--tiny")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{}: {e} (run scripts/llama-env.sh for the virtualenv)", py.display()));
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the server's URL");
            let url = line.trim().to_string();
            assert!(
                url.starts_with("http://127.0.0.1:"),
                "llama.cpp's server did not start ({url:?}; is xllamacpp in {}?)",
                py.display()
            );
            let stdin = child.stdin.take().expect("stdin");
            Llama { url, _child: child, _stdin: stdin }
        })
        .url
}

#[derive(Deserialize)]
struct City {
    city: String,
}

fn agent(stream: bool, text: Option<TextToolCalls>, calls: Arc<Mutex<Vec<String>>>) -> Agent {
    let settings = ModelSettings { text_tool_calls: text, ..Default::default() };
    let model = OpenAiChat::new("tiny").base_url(llama()).api_key("none").stream(stream).settings(settings).unwrap();
    let weather = tool_fn(
        "get_weather",
        "Current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |a: City| {
            let calls = calls.clone();
            async move {
                calls.lock().unwrap().push(a.city.clone());
                Ok::<_, String>(format!("sunny in {}", a.city))
            }
        },
    );
    Agent::builder().model(model).tool(weather).max_turns(4).build().unwrap()
}

async fn events(agent: &Agent, input: &str) -> (Vec<Event>, ambit::RunResult) {
    let mut seen = Vec::new();
    let mut stream = agent.stream(input);
    while let Some(e) = stream.next().await {
        seen.push(e.expect("the run failed"));
    }
    let Some(Event::RunFinished { result, .. }) = seen.last().cloned() else { panic!("no run_finished: {seen:?}") };
    (seen, result)
}

#[tokio::test]
async fn a_tool_call_of_the_real_server_reaches_a_rust_tool() {
    for stream in [false, true] {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let result = agent(stream, None, calls.clone()).run("Weather in Paris?").await.unwrap();
        // The server's grammar wrote the call ({"city": "P"}); the model's answer to the result is "OK".
        assert_eq!(*calls.lock().unwrap(), ["P"]);
        assert_eq!(result.output, "OK");
        assert_eq!((result.turns, result.stop_reason), (2, StopReason::End));
        assert_eq!(result.usage.requests, 2);
        assert!(result.usage.output_tokens > 2);
    }
}

#[tokio::test]
async fn constrained_decoding_makes_the_real_server_write_a_valid_call_as_text() {
    for stream in [false, true] {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let a = agent(stream, Some(TextToolCalls::Constrained), calls.clone());
        let (seen, result) = events(&a, "Weather in Paris, as json?").await;
        assert_eq!(*calls.lock().unwrap(), ["P"], "stream {stream}");
        let read: Vec<(&str, bool)> = seen
            .iter()
            .filter_map(|e| match e {
                Event::ToolCallRequested { name, from_text, .. } => Some((name.as_str(), *from_text)),
                _ => None,
            })
            .collect();
        assert_eq!(read, [("get_weather", true)]);
        assert_eq!((result.output.as_str(), result.stop_reason), ("P", StopReason::End));
        let shown: String = seen
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(shown, "P", "the call's JSON is never shown as text");
    }
}

#[tokio::test]
async fn without_the_constraint_the_same_model_writes_no_call() {
    // Negative control: auto reads calls but asks for no grammar; the bigram table's text is no JSON.
    let calls = Arc::new(Mutex::new(Vec::new()));
    let result =
        agent(false, Some(TextToolCalls::Auto), calls.clone()).run("Weather in Paris, as json?").await.unwrap();
    assert!(calls.lock().unwrap().is_empty());
    assert!(result.tool_calls.is_empty());
    assert!(result.output.starts_with('{'), "{:?}", result.output);
    assert_eq!(result.stop_reason, StopReason::Length);
}
