//! The loop's features that need more than a scenario file: the scratchpad lifting a built-in's output
//! cap (501 files on disk), and retries on every wire (a 429 with `retry-after`, then the answer).

use ambit::{Agent, Anthropic, OpenAiChat, OpenAiResponses};
use ambit_test_provider::{Provider, Script};
use serde_json::{Value, json};

fn script(wire: &str, exchanges: Value) -> Script {
    serde_json::from_value(json!({"name": format!("loop_features_{wire}"), "wire": wire, "exchanges": exchanges}))
        .unwrap()
}

#[tokio::test]
async fn a_scratchpad_save_lifts_the_file_find_cap() {
    let dir = std::env::temp_dir().join(format!("ambit-scratchpad-cap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..501 {
        std::fs::write(dir.join(format!("f{i:03}.txt")), "x").unwrap();
    }
    let path = dir.display().to_string();
    let provider = Provider::start(script(
        "openai_chat",
        json!([
            {"respond": {"tool_calls": [
                {"id": "inline", "name": "file_find", "arguments": {"pattern": "*.txt", "path": path}},
                {"id": "saved", "name": "file_find", "arguments": {"pattern": "*.txt", "path": path, "scratchpad": "all"}},
                {"id": "limited", "name": "file_find", "arguments": {"pattern": "*.txt", "path": path, "limit": 3, "scratchpad": "three"}}
            ]}},
            {"respond": {"tool_calls": [
                {"id": "r1", "name": "scratchpad_read", "arguments": {"name": "all", "limit": 100000}},
                {"id": "r2", "name": "scratchpad_read", "arguments": {"name": "three"}}
            ]}},
            {"respond": {"content": "done"}}
        ]),
    ))
    .await
    .unwrap();
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k").max_retries(0))
        .tool_arc(ambit::tools::builtin::by_name("file_find").unwrap())
        .scratchpad(true)
        .build()
        .unwrap();
    let result = agent.run("list them").await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let calls = &result.tool_calls;
    assert!(calls[0].result.ends_with("[… 1 more matches not shown; the cap is 500]"), "{}", calls[0].result);
    assert_eq!(calls[0].result.lines().count(), 501, "500 paths and the note");
    assert!(
        calls[1].result.starts_with("Saved ") && calls[1].result.contains("scratchpad 'all'"),
        "{}",
        calls[1].result
    );
    assert_eq!(calls[3].result.lines().count(), 501, "every path, no note: {}", calls[3].result);
    assert!(!calls[3].result.contains("more matches"));
    assert_eq!(calls[4].result.lines().count(), 4, "an explicit limit still applies: {}", calls[4].result);
    assert_eq!(result.output, "done");
}

#[tokio::test]
async fn every_wire_retries_a_429_honouring_retry_after() {
    for wire in ["openai_chat", "anthropic", "openai_responses"] {
        let provider = Provider::start(script(
            wire,
            json!([
                {"respond": {"error": {"status": 429, "message": "slow down", "retry_after": "0"}}},
                {"respond": {"error": {"status": 503, "message": "overloaded", "retry_after": "0"}}},
                {"respond": {"content": "hello"}}
            ]),
        ))
        .await
        .unwrap();
        let url = provider.base_url();
        let builder = Agent::builder();
        let builder = match wire {
            "anthropic" => builder.model(Anthropic::new("m").base_url(url).api_key("k").max_retries(2)),
            "openai_responses" => builder.model(OpenAiResponses::new("m").base_url(url).api_key("k").max_retries(2)),
            _ => builder.model(OpenAiChat::new("m").base_url(url).api_key("k").max_retries(2)),
        };
        let result = builder.build().unwrap().run("hi").await.unwrap_or_else(|e| panic!("{wire}: {e}"));
        assert_eq!(result.output, "hello", "{wire}");
        assert_eq!(provider.report(), (3, vec![]), "{wire}");
    }
}

/// Issue 14 item 6: an error the same request would get again is not retried, on every wire, streamed
/// and not: a 4xx other than 408/409/429, and llama.cpp's 500s about the request itself. A 500 with
/// another message still is (the negative control: the same script with a transient message passes).
#[tokio::test]
async fn errors_the_same_request_gets_again_are_not_retried_on_any_wire() {
    let llama = "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error";
    let cases = [
        (400, "Expected 'messages' to be an array", false),
        (401, "Incorrect API key provided", false),
        (404, "model not found", false),
        (422, "unprocessable", false),
        (500, llama, false),
        (500, "The model output does not match the expected format", false),
        (500, "internal hiccup", true),
        (408, "request timeout", true),
    ];
    for wire in ["openai_chat", "anthropic", "openai_responses"] {
        for stream in [false, true] {
            for (status, message, retried) in cases {
                let mut script = script(
                    wire,
                    json!([
                        {"respond": {"error": {"status": status, "message": message, "retry_after": "0"}}},
                        {"respond": {"content": "hello"}}
                    ]),
                );
                script.stream = stream;
                let provider = Provider::start(script).await.unwrap();
                let url = provider.base_url();
                let builder = Agent::builder();
                let builder = match wire {
                    "anthropic" => builder.model(Anthropic::new("m").base_url(url).api_key("k").stream(stream)),
                    "openai_responses" => {
                        builder.model(OpenAiResponses::new("m").base_url(url).api_key("k").stream(stream))
                    }
                    _ => builder.model(OpenAiChat::new("m").base_url(url).api_key("k").stream(stream)),
                };
                let outcome = builder.build().unwrap().run("hi").await;
                let case = format!("{wire} stream={stream} {status} {message:?}");
                if retried {
                    assert_eq!(outcome.map(|r| r.output).map_err(|e| e.to_string()), Ok("hello".into()), "{case}");
                    assert_eq!(provider.report(), (2, vec![]), "{case}");
                } else {
                    let err = outcome.expect_err(&case);
                    assert_eq!(err.code(), "model_http", "{case}");
                    assert!(err.to_string().contains(&format!("HTTP {status}: {message}")), "{case}: {err}");
                    assert_eq!(provider.report(), (1, vec![]), "{case}: retried");
                }
            }
        }
    }
}

/// An error a stream reports in place of its answer (HTTP 200, then an error event) gets the same rule as
/// the same error as a status, on every wire: a transient one (529 overloaded, 500, 429) is retried
/// while no text has been shown, a repeatable one (llama.cpp's 500 about the output's format) is not,
/// and either way the run fails with `model_http` and the status, as unstreamed.
#[tokio::test]
async fn a_streamed_error_event_gets_the_same_retry_rule_on_every_wire() {
    let repeatable = "The model output does not match the expected format";
    for wire in ["openai_chat", "anthropic", "openai_responses"] {
        let transient = if wire == "anthropic" {
            529
        } else if wire == "openai_responses" {
            429
        } else {
            500
        };
        for (status, message, retried) in [(transient, "overloaded", true), (500, repeatable, false)] {
            let mut script = script(
                wire,
                json!([
                    {"respond": {"stream_error": {"status": status, "message": message}}},
                    {"respond": {"content": "hello"}}
                ]),
            );
            script.stream = true;
            let provider = Provider::start(script).await.unwrap();
            let url = provider.base_url();
            let builder = Agent::builder();
            let builder = match wire {
                "anthropic" => builder.model(Anthropic::new("m").base_url(url).api_key("k").stream(true)),
                "openai_responses" => builder.model(OpenAiResponses::new("m").base_url(url).api_key("k").stream(true)),
                _ => builder.model(OpenAiChat::new("m").base_url(url).api_key("k").stream(true)),
            };
            let outcome = builder.build().unwrap().run("hi").await;
            let case = format!("{wire} {status} {message:?}");
            if retried {
                assert_eq!(outcome.map(|r| r.output).map_err(|e| e.to_string()), Ok("hello".into()), "{case}");
                assert_eq!(provider.report(), (2, vec![]), "{case}");
            } else {
                let err = outcome.expect_err(&case);
                assert_eq!(err.code(), "model_http", "{case}");
                assert!(err.to_string().contains(&format!("HTTP {status}: {message}")), "{case}: {err}");
                assert_eq!(provider.report(), (1, vec![]), "{case}: retried");
            }
        }
    }
}

#[tokio::test]
async fn retries_stop_at_max_retries_with_the_last_error() {
    let provider = Provider::start(script(
        "anthropic",
        json!([
            {"respond": {"error": {"status": 529, "message": "overloaded", "retry_after": "0"}}},
            {"respond": {"error": {"status": 529, "message": "still overloaded", "retry_after": "0"}}}
        ]),
    ))
    .await
    .unwrap();
    let agent = Agent::builder()
        .model(Anthropic::new("m").base_url(provider.base_url()).api_key("k").max_retries(1))
        .build()
        .unwrap();
    let err = agent.run("hi").await.unwrap_err();
    assert_eq!(err.code(), "model_http");
    assert!(err.to_string().contains("529: still overloaded"), "{err}");
}

#[tokio::test]
async fn parallel_calls_never_exceed_max_concurrency_and_keep_the_models_order() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let calls: Vec<Value> =
        (0..6).map(|i| json!({"id": format!("c{i}"), "name": "work", "arguments": {"n": i}})).collect();
    let provider = Provider::start(script(
        "openai_chat",
        json!([{"respond": {"tool_calls": calls}}, {"respond": {"content": "done"}}]),
    ))
    .await
    .unwrap();
    #[derive(serde::Deserialize)]
    struct Args {
        n: u32,
    }
    let (r, p) = (running.clone(), peak.clone());
    let tool = ambit::tool_fn("work", "works", json!({"type": "object"}), move |a: Args| {
        let (r, p) = (r.clone(), p.clone());
        async move {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            for _ in 0..(10 - a.n) {
                tokio::task::yield_now().await;
            }
            r.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, String>(format!("done {}", a.n))
        }
    });
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k").max_retries(0))
        .tool(tool)
        .max_concurrency(2)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    let results: Vec<&str> = result.tool_calls.iter().map(|c| c.result.as_str()).collect();
    assert_eq!(results, ["done 0", "done 1", "done 2", "done 3", "done 4", "done 5"]);
    assert!(peak.load(Ordering::SeqCst) <= 2, "peak {}", peak.load(Ordering::SeqCst));
    assert_eq!(running.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_config_with_zero_concurrency_or_an_unpriced_cost_budget_is_refused() {
    let e = Agent::builder().model(OpenAiChat::new("m")).max_concurrency(0).build().unwrap_err();
    assert_eq!(e.code(), "config");
    let e = Agent::builder()
        .model(OpenAiChat::new("m"))
        .budget(ambit::Budget { max_tokens: None, max_cost: Some(1.0) })
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("no price for the model 'm'"), "{e}");
}

/// A background tool that reports progress, then never finishes: it is failed as dead once silent for
/// longer than the heartbeat window, and the model gets that as its own turn.
#[tokio::test]
async fn a_silent_background_task_is_failed_as_dead_after_its_progress_notes() {
    use futures::StreamExt;
    let provider = Provider::start(script(
        "openai_chat",
        json!([
            {"respond": {"tool_calls": [{"id": "c1", "name": "stuck", "arguments": {"background": true}}]}},
            {"respond": {"content": "waiting"}},
            {"respond": {"content": "it died"}}
        ]),
    ))
    .await
    .unwrap();
    let tool = ambit::tool_fn("stuck", "never ends", json!({"type": "object"}), |_: Value| async move {
        let task = ambit::agent::background::TaskHandle::current().expect("a background call sees its task");
        task.progress("halfway");
        std::future::pending::<()>().await;
        Ok::<_, String>("unreachable")
    });
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k").max_retries(0))
        .tool(tool)
        .background(true)
        .heartbeat(std::time::Duration::from_millis(50))
        .build()
        .unwrap();
    let mut progress = Vec::new();
    let mut reported = Vec::new();
    let mut output = None;
    let mut stream = agent.stream("go");
    while let Some(e) = stream.next().await {
        match e.unwrap() {
            ambit::Event::BackgroundTaskProgress { task_id, note } => progress.push((task_id, note)),
            ambit::Event::BackgroundTaskReported { result, is_error, .. } => reported.push((result, is_error)),
            ambit::Event::RunFinished { result, .. } => output = Some(result.output),
            _ => {}
        }
    }
    assert_eq!(progress, vec![("task_1".to_string(), "halfway".to_string())]);
    assert_eq!(reported.len(), 1);
    assert!(reported[0].1 && reported[0].0.contains("task_1 (stuck) was failed as dead"), "{reported:?}");
    assert_eq!(output.as_deref(), Some("it died"));
    assert_eq!(provider.report().0, 3);
}

#[tokio::test]
async fn cost_is_reported_per_request_and_per_run_from_the_price_table() {
    use futures::StreamExt;
    let provider = Provider::start(script(
        "anthropic",
        json!([{"respond": {"content": "hi", "usage": {"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 2000, "cache_write_tokens": 400}}}]),
    ))
    .await
    .unwrap();
    let price = ambit::Price {
        input_per_mtok: 3.0,
        output_per_mtok: 15.0,
        cache_read_per_mtok: 0.3,
        cache_write_per_mtok: 3.75,
    };
    let agent = Agent::builder()
        .model(Anthropic::new("claude").base_url(provider.base_url()).api_key("k").max_retries(0))
        .prices([("claude".to_string(), price)].into())
        .build()
        .unwrap();
    let want = (1000.0 * 3.0 + 100.0 * 15.0 + 2000.0 * 0.3 + 400.0 * 3.75) / 1e6;
    let mut per_request = Vec::new();
    let mut run_cost = None;
    let mut stream = agent.stream("hi");
    while let Some(e) = stream.next().await {
        match e.unwrap() {
            ambit::Event::ModelResponse { cost, .. } => per_request.push(cost.unwrap()),
            ambit::Event::RunFinished { result, .. } => run_cost = result.cost,
            _ => {}
        }
    }
    assert_eq!(per_request.len(), 1);
    assert!((per_request[0] - want).abs() < 1e-12, "{per_request:?} vs {want}");
    assert!((run_cost.unwrap() - want).abs() < 1e-12);
}
