//! Sessions on both stores: SQLite in a temp dir and PostgreSQL from `AMBIT_TEST_POSTGRES_URL` (started
//! by scripts/test.sh; the test fails without it rather than skipping). Runs go to the loopback
//! provider.

use ambit::session::{Item, SessionConfig, SessionState, Sessions};
use ambit::{Agent, OpenAiChat};
use ambit_test_provider::{Provider, Script};
use serde_json::{Value, json};

#[path = "support/session_stores.rs"]
mod session_stores;
use session_stores::stores;

async fn provider(exchanges: Value) -> Provider {
    let script: Script = serde_json::from_value(json!({"name": "sessions", "exchanges": exchanges})).unwrap();
    Provider::start(script).await.unwrap()
}

fn check(p: &Provider, n: usize) {
    let (served, mismatches) = p.report();
    assert!(mismatches.is_empty(), "{mismatches:?}");
    assert_eq!(served, n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_append_only_and_numbered_on_both_stores() {
    for s in stores().await {
        let sessions = Sessions::open(&s.url).await.unwrap();
        // Opening again applies nothing twice.
        let again = Sessions::open(&s.url).await.unwrap();
        let id = sessions.create().await.unwrap();
        let msg = |t: &str| Item::Message { message: ambit::Message::user(t) };
        let idx = sessions.store().append(&id, &[msg("one"), msg("two")], 1).await.unwrap();
        assert_eq!(idx, [1, 2], "{}", s.name);
        assert_eq!(again.store().append(&id, &[msg("three")], 2).await.unwrap(), [3], "{}", s.name);
        let entries = sessions.entries(&id).await.unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[2].item, msg("three"));
        assert_eq!(sessions.store().state(&id).await.unwrap().state, "idle");
        let parked = SessionState { state: "awaiting_approval".into(), parked: Some(json!({"call_id": "c1"})) };
        sessions.store().set_state(&id, &parked, 3).await.unwrap();
        assert_eq!(again.store().state(&id).await.unwrap(), parked, "{}", s.name);
        let e = sessions.entries("nope").await.unwrap_err();
        assert_eq!(e.code(), "session_not_found", "{}", s.name);
        assert!(sessions.store().append("nope", &[msg("x")], 4).await.is_err());
    }
    let e = Sessions::open("mysql://x").await.unwrap_err();
    assert!(e.to_string().contains("starts with sqlite:// or postgres://"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_continue_the_log_and_compaction_summarises_without_deleting() {
    for s in stores().await {
        let p = provider(json!([
            // Run 1.
            {"expect": {"messages_count": 1}, "respond": {"content": "Noted: the auth token is in vault/ops."}},
            // Run 2 continues it.
            {"expect": {"messages_count": 3, "messages_tail": [{"role": "user", "content": "Deploy now."}]},
             "respond": {"content": "Deployed."}},
            // The compaction's summariser (keep_recent 1: the second round stays verbatim).
            {"expect": {"messages_count": 2, "tool_names": []}, "respond": {"content": "The user said where the auth token is."}},
            // Run 3: the summary, the kept round, the new words; the agent searches the archive.
            {"expect": {"messages_count": 4, "messages_tail": [{"role": "user", "content": "Deploy now."}, {"role": "assistant"}, {"role": "user", "content": "Where was the token?"}]},
             "respond": {"tool_calls": [
                {"id": "s", "name": "conversation_search", "arguments": {"query": "VAULT"}},
                {"id": "r", "name": "conversation_read", "arguments": {"start": 1, "limit": 2}},
                {"id": "c", "name": "context_check", "arguments": {}}
             ]}},
            {"respond": {"content": "In vault/ops."}}
        ]))
        .await;
        let sessions = Sessions::open(&s.url)
            .await
            .unwrap()
            .with_config(SessionConfig {
                context_window: Some(100_000),
                compact_at: 0.85,
                keep_recent: 1,
                ..SessionConfig::default()
            })
            .unwrap();
        let agent = Agent::builder()
            .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .tools(ambit::session::tools())
            .build()
            .unwrap();
        let id = sessions.create().await.unwrap();
        sessions.run(&agent, &id, "The auth token is in vault/ops.").await.unwrap();
        sessions.run(&agent, &id, "Deploy now.").await.unwrap();
        assert!(sessions.compact(&agent, &id).await.unwrap(), "{}", s.name);
        let r = sessions.run(&agent, &id, "Where was the token?").await.unwrap();
        assert_eq!(r.output, "In vault/ops.");
        let search = &r.tool_calls[0].result;
        assert!(
            search.starts_with("#1 user: The auth token is in vault/ops.\n#2 assistant: Noted"),
            "{}: {search}",
            s.name
        );
        assert_eq!(
            r.tool_calls[1].result,
            "#1 user:\nThe auth token is in vault/ops.\n\n#2 assistant:\nNoted: the auth token is in vault/ops."
        );
        assert!(
            r.tool_calls[2].result.contains("of 100000 tokens")
                && r.tool_calls[2].result.contains("Compactions so far: 1;"),
            "{}",
            r.tool_calls[2].result
        );
        let entries = sessions.entries(&id).await.unwrap();
        let kinds: Vec<&str> = entries.iter().map(|e| e.item.kind()).collect();
        assert_eq!(
            kinds,
            [
                "message", "message", "message", "message", "boundary", "summary", "message", "message", "message",
                "message", "message", "message"
            ],
            "{}",
            s.name
        );
        assert_eq!(entries[4].item, Item::Boundary { keep_from: 3 });
        check(&p, 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_compaction_fires_at_the_ceiling_and_context_compact_asks_for_one() {
    for s in stores().await {
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "k", "name": "context_compact", "arguments": {"keep_recent": false, "instructions": "keep the ids"}}]}},
            {"respond": {"content": "ok"}},
            // The requested compaction, at the end of the run: everything summarised, with the instructions.
            {"expect": {"messages_tail": [{"role": "user"}]}, "respond": {"content": "summary one"}},
            // A window that is only a summary is not compacted again, however full.
            {"expect": {"messages_count": 2}, "respond": {"content": "fresh"}},
            // The next run starts past the (tiny) ceiling: auto-compaction first.
            {"respond": {"content": "summary two"}},
            {"expect": {"messages_count": 2}, "respond": {"content": "done"}}
        ]))
        .await;
        let sessions = Sessions::open(&s.url)
            .await
            .unwrap()
            .with_config(SessionConfig {
                context_window: Some(60),
                compact_at: 0.85,
                keep_recent: 0,
                ..SessionConfig::default()
            })
            .unwrap();
        let agent = Agent::builder()
            .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .tools(ambit::session::tools())
            .build()
            .unwrap();
        let id = sessions.create().await.unwrap();
        let r = sessions.run(&agent, &id, "Squeeze it.").await.unwrap();
        // Nothing precedes the round in flight, so the compaction waits for the run's end.
        assert_eq!(
            r.tool_calls[0].result,
            "Compaction requested: older turns are summarised before the next model request, or when this run ends."
        );
        sessions.run(&agent, &id, "Again.").await.unwrap();
        assert_eq!(sessions.run(&agent, &id, "Once more.").await.unwrap().output, "done");
        let entries = sessions.entries(&id).await.unwrap();
        let boundaries = entries.iter().filter(|e| matches!(e.item, Item::Boundary { .. })).count();
        assert_eq!(boundaries, 2, "{}", s.name);
        check(&p, 6);
    }
}

fn lookup() -> impl ambit::tools::Tool {
    ambit::tool_fn(
        "lookup",
        "Looks a key up.",
        json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
        |a: Value| async move {
            let key = a["key"].as_str().unwrap_or_default().to_string();
            Ok::<_, String>(if key == "alpha" { "alpha is 7431".to_string() } else { format!("{key} is 2.9") })
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_compacts_between_rounds_once_the_reported_usage_crosses_the_ceiling() {
    for s in stores().await {
        let p = provider(json!([
            {"expect": {"messages_count": 1},
             "respond": {"tool_calls": [{"id": "a", "name": "lookup", "arguments": {"key": "alpha"}}],
                         "usage": {"input_tokens": 3000, "output_tokens": 10}}},
            // 3000 counted plus the round since: under the ceiling (5000), no compaction.
            {"expect": {"messages_count": 3},
             "respond": {"tool_calls": [{"id": "b", "name": "lookup", "arguments": {"key": "beta"}}],
                         "usage": {"input_tokens": 4000, "cache_read_tokens": 600, "cache_write_tokens": 400}}},
            // 5000 counted: past it. Before the next request the session compacts: the first round is
            // summarised, the round in flight (the call for beta and its result) stays with keep_recent 1.
            {"expect": {"messages_count": 2, "tool_names": [], "messages_tail": [{"role": "user", "content": {"$contains": [
                "#1 user: Find the launch code.",
                "#2 assistant: [call lookup {\"key\":\"alpha\"}]",
                "#3 tool: [result of lookup] alpha is 7431"]}}]},
             "respond": {"content": "Alpha is 7431."}},
            // The same run goes on from the summary and the round kept, not the rounds summarised.
            {"expect": {"messages_count": 3, "messages_tail": [
                {"role": "user", "content": {"$contains": "Alpha is 7431."}},
                {"role": "assistant", "tool_calls": [{"id": "b"}]},
                {"role": "tool", "tool_call_id": "b", "content": "beta is 2.9"}]},
             "respond": {"tool_calls": [
                {"id": "s", "name": "conversation_search", "arguments": {"query": "ALPHA"}},
                {"id": "c", "name": "context_check", "arguments": {}}],
                         "usage": {"input_tokens": 1000}}},
            {"expect": {"messages_count": 6}, "respond": {"content": "The code is 7431."}}
        ]))
        .await;
        let sessions = Sessions::open(&s.url)
            .await
            .unwrap()
            .with_config(SessionConfig {
                context_window: Some(10_000),
                compact_at: 0.5,
                keep_recent: 1,
                ..SessionConfig::default()
            })
            .unwrap();
        let agent = Agent::builder()
            .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .tool(lookup())
            .tools(ambit::session::tools())
            .build()
            .unwrap();
        let id = sessions.create().await.unwrap();
        let r = sessions.run(&agent, &id, "Find the launch code.").await.unwrap();
        assert_eq!(r.output, "The code is 7431.", "{}", s.name);
        // The summary's request is the run's: five requests, four of them turns.
        assert_eq!((r.usage.requests, r.turns), (5, 4), "{}", s.name);
        // What the compaction summarised is still found, by #N.
        let search = &r.tool_calls[2].result;
        assert!(search.contains("#3 tool: [result of lookup] alpha is 7431"), "{}: {search}", s.name);
        assert!(search.contains("#7 summary: Alpha is 7431."), "{}: {search}", s.name);
        let gauge = &r.tool_calls[3].result;
        assert!(gauge.contains("Measured: the provider counted 1000 tokens for the last request"), "{gauge}");
        assert!(gauge.contains("Compactions so far: 1;"), "{gauge}");
        let entries = sessions.entries(&id).await.unwrap();
        let kinds: Vec<&str> = entries.iter().map(|e| e.item.kind()).collect();
        assert_eq!(
            kinds,
            [
                "message", "message", "message", "message", "message", "boundary", "summary", "message", "message",
                "message", "message"
            ],
            "{}",
            s.name
        );
        assert_eq!(entries[5].item, Item::Boundary { keep_from: 4 });
        // Every message of the run is in the log once, in order.
        let said: Vec<String> = entries
            .iter()
            .filter_map(|e| match &e.item {
                Item::Message { message } => {
                    let (role, text) = ambit::session::rules::render(message);
                    Some(format!("{role}: {text}"))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            said[..5],
            [
                "user: Find the launch code.",
                "assistant: [call lookup {\"key\":\"alpha\"}]",
                "tool: [result of lookup] alpha is 7431",
                "assistant: [call lookup {\"key\":\"beta\"}]",
                "tool: [result of lookup] beta is 2.9",
            ],
            "{}",
            s.name
        );
        assert_eq!(said[5], "assistant: [call conversation_search {\"query\":\"ALPHA\"}]\n[call context_check {}]");
        assert!(
            said[6].starts_with("tool: [result of conversation_search]")
                && said[7].starts_with("tool: [result of context_check]")
        );
        assert_eq!(said[8], "assistant: The code is 7431.");
        assert_eq!(said.len(), 9, "{}: {said:?}", s.name);
        check(&p, 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_check_reports_the_providers_count_and_estimates_without_one() {
    for s in stores().await {
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "c", "name": "context_check", "arguments": {}}],
                         "usage": {"input_tokens": 1234, "cache_read_tokens": 100, "cache_write_tokens": 66}}},
            {"respond": {"content": "ok"}},
            // A provider that reports no count: the window is estimated.
            {"respond": {"tool_calls": [{"id": "c2", "name": "context_check", "arguments": {}}]}},
            {"respond": {"content": "ok"}}
        ]))
        .await;
        let sessions = Sessions::open(&s.url).await.unwrap();
        let agent = Agent::builder()
            .model(OpenAiChat::new("m").context_window(200_000).base_url(p.base_url()).max_retries(0))
            .tools(ambit::session::tools())
            .build()
            .unwrap();
        let id = sessions.create().await.unwrap();
        let r = sessions.run(&agent, &id, "How full is it?").await.unwrap();
        // 1234 + 100 + 66 counted for the request, and the reply since ("[call context_check {}]", 23
        // characters: 6 tokens and 4 for the message) estimated.
        let report = &r.tool_calls[0].result;
        assert!(report.starts_with("Using 1410 of 200000 tokens (0%)."), "{}: {report}", s.name);
        assert!(
            report.contains(
                "\nMeasured: the provider counted 1400 tokens for the last request; about 10 tokens added since are \
                 estimated.\n"
            ),
            "{report}"
        );
        let r = sessions.run(&agent, &id, "And now?").await.unwrap();
        let report = &r.tool_calls[0].result;
        assert!(report.contains("\nEstimated: no token count reported by the provider yet"), "{}: {report}", s.name);
        check(&p, 4);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_compact_compacts_at_the_next_round_boundary() {
    for s in stores().await {
        let p = provider(json!([
            {"respond": {"content": "Noted."}},
            {"expect": {"messages_count": 3},
             "respond": {"tool_calls": [{"id": "k", "name": "context_compact", "arguments": {"keep_recent": false, "instructions": "keep where the key is"}}]}},
            // Before the next request of the same run: the earlier run is summarised, the round in flight
            // (this run's input, the call and its result) kept.
            {"expect": {"messages_count": 2, "tool_names": [], "messages_tail": [{"role": "user", "content": {"$contains": [
                "#1 user: Remember: the deploy key is in vault/ops.", "#2 assistant: Noted.", "When summarising: keep where the key is"]}}]},
             "respond": {"content": "The deploy key is in vault/ops."}},
            {"expect": {"messages_count": 4, "messages_tail": [
                {"role": "user", "content": {"$contains": "The deploy key is in vault/ops."}},
                {"role": "user", "content": "Compact, then deploy."},
                {"role": "assistant"},
                {"role": "tool", "tool_call_id": "k"}]},
             "respond": {"content": "Deployed."}}
        ]))
        .await;
        let sessions = Sessions::open(&s.url).await.unwrap();
        let agent = Agent::builder()
            .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .tools(ambit::session::tools())
            .build()
            .unwrap();
        let id = sessions.create().await.unwrap();
        sessions.run(&agent, &id, "Remember: the deploy key is in vault/ops.").await.unwrap();
        let r = sessions.run(&agent, &id, "Compact, then deploy.").await.unwrap();
        assert_eq!(r.output, "Deployed.");
        let entries = sessions.entries(&id).await.unwrap();
        let kinds: Vec<&str> = entries.iter().map(|e| e.item.kind()).collect();
        assert_eq!(
            kinds,
            ["message", "message", "message", "message", "message", "boundary", "summary", "message"],
            "{}",
            s.name
        );
        assert_eq!(entries[5].item, Item::Boundary { keep_from: 3 }, "{}", s.name);
        check(&p, 4);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compactions_requests_are_the_runs_in_usage_cost_and_budget() {
    // SPEC §8b: a compaction's summary is a model request made for the run: in its usage and cost, and
    // held to its budget; before the run, between its rounds, and after it.
    let long = "x".repeat(400);
    for s in stores().await {
        let p = provider(json!([
            {"respond": {"content": "Noted.", "usage": {"input_tokens": 10, "output_tokens": 5}}},
            // Run 2: the window (100 tokens, compacting at 50) is past its ceiling: the summary first.
            {"expect": {"tool_names": []}, "respond": {"content": "Summary.", "usage": {"input_tokens": 1000, "output_tokens": 100}}},
            {"respond": {"content": "Done.", "usage": {"input_tokens": 20, "output_tokens": 2}}},
            // Run 3, with a budget of 500 tokens: the summary alone is past it, so the run stops there.
            {"expect": {"tool_names": []}, "respond": {"content": "Summary again.", "usage": {"input_tokens": 600, "output_tokens": 1}}}
        ]))
        .await;
        let price = ambit::Price { input_per_mtok: 1.0, output_per_mtok: 10.0, ..Default::default() };
        let agent = |budget: ambit::Budget| {
            Agent::builder()
                .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
                .prices([("m".to_string(), price)].into())
                .budget(budget)
                .build()
                .unwrap()
        };
        let sessions = Sessions::open(&s.url).await.unwrap();
        let id = sessions.create().await.unwrap();
        sessions.run(&agent(ambit::Budget::default()), &id, &long).await.unwrap();
        let small = sessions
            .clone()
            .with_config(SessionConfig {
                context_window: Some(100),
                compact_at: 0.5,
                keep_recent: 0,
                ..SessionConfig::default()
            })
            .unwrap();
        let r = small.run(&agent(ambit::Budget::default()), &id, "next").await.unwrap();
        assert_eq!(r.output, "Done.", "{}", s.name);
        assert_eq!((r.usage.requests, r.usage.input_tokens, r.usage.output_tokens), (2, 1020, 102), "{}", s.name);
        let cost = r.cost.unwrap();
        assert!((cost - (1020.0 + 1020.0) / 1e6).abs() < 1e-12, "{}: {cost}", s.name);
        assert_eq!(r.turns, 1, "{}: the summary is not one of the run's turns", s.name);
        let budget = ambit::Budget { max_tokens: Some(500), max_cost: None };
        let err = small.run(&agent(budget), &id, &long).await.unwrap_err();
        assert_eq!(err.code(), "budget_exceeded", "{}: {err}", s.name);
        check(&p, 4);
        // A run stopped by its budget lets the session go.
        assert_eq!(sessions.store().state(&id).await.unwrap().state, "idle", "{}", s.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_window_comes_from_the_model_unless_overridden() {
    // SPEC §8b / issue 13 item 7: the window is the model's (its family's default, or its own
    // setting); a session configuration that names one overrides it.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("w.db").display());
    let check_then_answer = || {
        json!([
            {"respond": {"tool_calls": [{"id": "c", "name": "context_check", "arguments": {}}]}},
            {"respond": {"content": "ok"}}
        ])
    };
    let cases: Vec<(OpenAiChat, Option<u64>, u64)> = vec![
        (OpenAiChat::new("gpt-4"), None, 8_192),
        (OpenAiChat::new("claude-sonnet-4-5"), None, 200_000),
        (OpenAiChat::new("my-local-llama"), None, ambit::model::window::DEFAULT_CONTEXT_WINDOW),
        (OpenAiChat::new("gpt-4").context_window(50_000), None, 50_000),
        (OpenAiChat::new("gpt-4").context_window(50_000), Some(7_000), 7_000),
    ];
    for (model, session_window, expected) in cases {
        let p = provider(check_then_answer()).await;
        let agent = Agent::builder()
            .model(model.base_url(p.base_url()).max_retries(0))
            .tools(ambit::session::tools())
            .build()
            .unwrap();
        let config = SessionConfig { context_window: session_window, ..SessionConfig::default() };
        let sessions = Sessions::open(&url).await.unwrap().with_config(config).unwrap();
        let id = sessions.create().await.unwrap();
        let r = sessions.run(&agent, &id, "how full?").await.unwrap();
        let report = &r.tool_calls[0].result;
        assert!(report.contains(&format!(" of {expected} tokens")), "{expected}: {report}");
    }
    // And it is the window auto-compaction fires at: a model of 100 tokens compacts a log that a
    // 200,000-token window (the old fixed setting) would not.
    let p = provider(json!([
        {"respond": {"content": "Noted."}},
        {"expect": {"tool_names": [], "messages_tail": [{"role": "user", "content": {"$contains": "Summarise"}}]},
         "respond": {"content": "Summary."}},
        {"respond": {"content": "Done."}}
    ]))
    .await;
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").context_window(100).base_url(p.base_url()).max_retries(0))
        .build()
        .unwrap();
    let sessions = Sessions::open(&url).await.unwrap();
    let id = sessions.create().await.unwrap();
    sessions.run(&agent, &id, &"y".repeat(400)).await.unwrap();
    sessions.run(&agent, &id, "next").await.unwrap();
    check(&p, 3);
    let entries = sessions.entries(&id).await.unwrap();
    assert!(entries.iter().any(|e| e.item.kind() == "boundary"), "{entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_answer_through_final_answer_leaves_a_conversation_the_next_run_continues() {
    // On Anthropic the typed answer is a call of final_answer: the log keeps its tool_result, so the
    // next run's request pairs every tool_use with a result (the wire refuses one without).
    for s in stores().await {
        let script = json!({"name": "sessions_typed", "wire": "anthropic", "exchanges": [
            {"respond": {"tool_calls": [{"id": "toolu_1", "name": "final_answer", "arguments": {"city": "Paris"}}]}},
            {"expect": {"messages_count": 3, "messages_tail": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "final_answer"}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "The final answer was recorded."},
                    {"type": "text", "text": "And Lyon?"}]}]},
             "respond": {"tool_calls": [{"id": "toolu_2", "name": "final_answer", "arguments": {"city": "Lyon"}}]}},
        ]});
        let p = Provider::start(serde_json::from_value::<Script>(script).unwrap()).await.unwrap();
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let agent = Agent::builder()
            .model(ambit::Anthropic::new("claude-sonnet-4-5").base_url(p.base_url()).api_key("k"))
            .output(ambit::agent::output::OutputType::new("Place", schema))
            .build()
            .unwrap();
        let sessions = Sessions::open(&s.url).await.unwrap();
        let id = sessions.create().await.unwrap();
        let first = sessions.run(&agent, &id, "Where?").await.unwrap();
        assert_eq!(first.structured_output, Some(json!({"city": "Paris"})), "{}", s.name);
        let second = sessions.run(&agent, &id, "And Lyon?").await.unwrap();
        assert_eq!(second.output_as::<Value>().unwrap(), json!({"city": "Lyon"}), "{}", s.name);
        check(&p, 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_gauge_counts_the_final_answer_tool_the_request_carries() {
    // SPEC §4: the gauge counts what the request carries; on Anthropic that includes final_answer.
    let script = json!({"name": "gauge_final_answer", "wire": "anthropic", "exchanges": [
        {"respond": {"tool_calls": [{"id": "toolu_1", "name": "context_check", "arguments": {}}]}},
        {"respond": {"tool_calls": [{"id": "toolu_2", "name": "final_answer", "arguments": {"city": "Paris"}}]}},
    ]});
    let p = Provider::start(serde_json::from_value::<Script>(script).unwrap()).await.unwrap();
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let agent = Agent::builder()
        .model(ambit::Anthropic::new("claude-sonnet-4-5").base_url(p.base_url()).api_key("k"))
        .tool_arc(ambit::tools::builtin::by_name("context_check").unwrap())
        .output(ambit::agent::output::OutputType::new("Place", schema))
        .build()
        .unwrap();
    let store = tempfile::tempdir().unwrap();
    let sessions = Sessions::open(&format!("sqlite://{}", store.path().join("s.db").display())).await.unwrap();
    let id = sessions.create().await.unwrap();
    let result = sessions.run(&agent, &id, "how full is the window?").await.unwrap();
    let report = &result.tool_calls[0].result;
    let state: Value = reqwest::get(format!("{}/__ambit/state", p.base_url().trim_end_matches("/v1")))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sent: Vec<&str> =
        state["requests"][0]["body"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(sent, ["context_check", "final_answer"]);
    let fixed = report.split(" tokens of instructions and the ").nth(1).unwrap_or_else(|| panic!("{report}"));
    let counted: usize = fixed.split_once(' ').unwrap().0.parse().unwrap_or_else(|_| panic!("{report}"));
    assert_eq!(counted, sent.len(), "{report}");
}

/// An agent on the loopback provider with the session tools.
fn session_agent(p: &Provider) -> Agent {
    Agent::builder()
        .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .tools(ambit::session::tools())
        .build()
        .unwrap()
}

/// Sets one stored entry's body to text that is not an entry, straight in the store.
async fn spoil_entry(url: &str, session_id: &str, index: i64) {
    use sqlx::Connection;
    let sql = "UPDATE ambit_session_entries SET body = 'not an entry' WHERE session_id = $1 AND idx = $2";
    if url.starts_with("sqlite://") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query(sql).bind(session_id).bind(index).execute(&mut c).await.unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query(sql).bind(session_id).bind(index).execute(&mut c).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reads_the_live_window_and_never_the_log_before_it() {
    // Issue 18: a turn of a long session costs what its live window costs, not its whole history. The
    // proof is in the store: an entry before the last compaction's first kept entry is made unreadable,
    // and the next run does not notice, while reading the whole log fails on it.
    for s in stores().await {
        let sessions = Sessions::open(&s.url).await.unwrap();
        let id = sessions.create().await.unwrap();
        let turn = |i: usize| {
            let message = if i % 2 == 1 {
                ambit::Message::user(format!("question {i}"))
            } else {
                ambit::Message::Assistant { content: Some(format!("answer {i}")), tool_calls: Vec::new() }
            };
            Item::Message { message }
        };
        let first: Vec<Item> = (1..=40).map(turn).collect();
        sessions.store().append(&id, &first, 1).await.unwrap();
        // Two compactions: the first kept from #21, the second from #37.
        sessions.store().append(&id, &[Item::Boundary { keep_from: 21 }], 2).await.unwrap();
        sessions.store().append(&id, &[Item::Summary { text: "old summary".into() }], 2).await.unwrap();
        sessions
            .store()
            .append(&id, &[Item::Boundary { keep_from: 37 }, Item::Summary { text: "Summary so far.".into() }], 3)
            .await
            .unwrap();
        sessions.store().append(&id, &[turn(45), turn(46)], 4).await.unwrap();

        let live = sessions.store().live(&id).await.unwrap();
        let indices: Vec<i64> = live.entries.iter().map(|e| e.index).collect();
        assert_eq!(indices, (37..=46).collect::<Vec<_>>(), "{}", s.name);
        assert_eq!(live.compactions, 2, "{}", s.name);

        spoil_entry(&s.url, &id, 36).await;
        spoil_entry(&s.url, &id, 5).await;
        // Control: the whole log cannot be read any more, so a run that read it would fail.
        let e = sessions.entries(&id).await.unwrap_err();
        assert_eq!(e.code(), "session_store", "{}: {e}", s.name);

        // The run sends the summary, the kept messages #37-#40, #45, #46 and the new input: 8.
        let p = provider(json!([
            {"expect": {"messages_count": 8, "messages_tail": [{"role": "assistant", "content": "answer 46"},
                                                             {"role": "user", "content": "And now?"}]},
             "respond": {"content": "Carry on."}}
        ]))
        .await;
        let r = sessions.run(&session_agent(&p), &id, "And now?").await.unwrap();
        assert_eq!(r.output, "Carry on.", "{}", s.name);
        check(&p, 1);
        let live = sessions.store().live(&id).await.unwrap();
        assert_eq!(live.entries.last().map(|e| e.index), Some(48), "{}", s.name);

        // This process keeps the window it read; another process (here another handle on the store)
        // compacts the session, and this one's next run starts from that compaction: the summary, #47
        // and #48, and the new input.
        let other = Sessions::open(&s.url).await.unwrap();
        other
            .store()
            .append(&id, &[Item::Boundary { keep_from: 47 }, Item::Summary { text: "Newer summary.".into() }], 5)
            .await
            .unwrap();
        let p = provider(json!([
            {"expect": {"messages_count": 4, "messages_tail": [{"role": "user", "content": "And now?"},
                                                             {"role": "assistant", "content": "Carry on."},
                                                             {"role": "user", "content": "Still there?"}]},
             "respond": {"tool_calls": [{"id": "c", "name": "context_check", "arguments": {}}]}},
            {"respond": {"content": "Yes."}}
        ]))
        .await;
        let r = sessions.run(&session_agent(&p), &id, "Still there?").await.unwrap();
        assert_eq!(r.output, "Yes.", "{}", s.name);
        // The three compactions: two read from the store, one appended since by the other handle.
        assert!(r.tool_calls[0].result.contains("Compactions so far: 3;"), "{}: {}", s.name, r.tool_calls[0].result);
        check(&p, 2);
    }
}

/// A session turn of parts (issue 17): stored in the log as the wire gets them, so the next turn through
/// a fresh store handle (as another process) sends the same bytes; a refused part, or a history, fails
/// before anything is stored (the log stays empty: the control).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_of_parts_is_sent_again_from_a_new_handle_and_a_refused_one_stores_nothing() {
    use ambit::content::Part;
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
    let image = json!({"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}
    ]});
    for s in stores().await {
        let p = provider(json!([
            {"expect": {"messages_count": 1, "messages_tail": [image]}, "respond": {"content": "A dot."}},
            {"expect": {"messages_count": 3, "messages_tail": [image, {"role": "assistant"}, {"role": "user", "content": "Which colour?"}]},
             "respond": {"content": "Green."}}
        ]))
        .await;
        let agent = session_agent(&p);
        let sessions = Sessions::open(&s.url).await.unwrap();
        let id = sessions.create().await.unwrap();
        let png = Part::Image { media_type: "image/png".into(), data: PNG.into() };
        let mislabelled = Part::Image { media_type: "image/jpeg".into(), data: PNG.into() };
        let e = sessions.run(&agent, &id, ambit::Input::parts([Part::text("hi"), mislabelled])).await.unwrap_err();
        assert_eq!(e.code(), "invalid_message", "{}", s.name);
        assert!(e.to_string().contains("parts[1]: labelled image/jpeg, but the bytes are image/png"), "{e}");
        let history = vec![
            ambit::Message::user("hi"),
            ambit::Message::Assistant { content: Some("yo".into()), tool_calls: vec![] },
            ambit::Message::user("again"),
        ];
        let e = sessions.run(&agent, &id, history).await.unwrap_err();
        assert!(e.to_string().contains("a session keeps its own history"), "{e}");
        assert!(sessions.entries(&id).await.unwrap().is_empty(), "{}: a refused turn stored nothing", s.name);
        let r = sessions.run(&agent, &id, ambit::Input::parts([Part::text("What is this?"), png.clone()])).await;
        assert_eq!(r.unwrap().output, "A dot.");
        let fresh = Sessions::open(&s.url).await.unwrap();
        assert_eq!(fresh.run(&agent, &id, "Which colour?").await.unwrap().output, "Green.");
        check(&p, 2);
        let first = &fresh.entries(&id).await.unwrap()[0].item;
        let Item::Message { message: ambit::Message::User { parts, .. } } = first else { panic!("{first:?}") };
        assert_eq!(parts[1], png, "{}", s.name);
    }
}

/// A background task's image result that lands after its session run ended (SPEC §8b) is stored as
/// parts, so the session's next turn shows the model the image (not a text note of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_image_that_lands_after_the_run_reaches_the_next_turn_as_an_image() {
    use ambit::content::Part;
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
    let report = json!({"role": "user", "content": [
        {"type": "text", "text": "[background task task_1 (chart) finished]"},
        {"type": "text", "text": "the chart"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}
    ]});
    for s in stores().await {
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "c", "name": "chart", "arguments": {"background": true}}]}},
            {"respond": {"content": "Rendering."}},
            {"expect": {"messages_count": 6, "messages_tail": [report, {"role": "user", "content": "Show me."}]},
             "respond": {"content": "One green pixel."}}
        ]))
        .await;
        let (release, held) = tokio::sync::watch::channel(false);
        let chart = ambit::tool_fn(
            "chart",
            "Renders the chart (slow).",
            json!({"type": "object", "properties": {}}),
            move |_: Value| {
                let mut held = held.clone();
                async move {
                    let _ = held.wait_for(|r| *r).await;
                    let image = Part::Image { media_type: "image/png".into(), data: PNG.into() };
                    Ok::<_, String>(ambit::content::tool_content(vec![Part::text("the chart"), image]))
                }
            },
        );
        let agent = Agent::builder()
            .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .tool(chart)
            .background(true)
            .build()
            .unwrap();
        let sessions = Sessions::open(&s.url).await.unwrap();
        let mut deliveries = sessions.deliveries();
        let id = sessions.create().await.unwrap();
        assert_eq!(sessions.run(&agent, &id, "Render the chart.").await.unwrap().output, "Rendering.");
        release.send_replace(true);
        let landed =
            tokio::time::timeout(std::time::Duration::from_secs(60), deliveries.next()).await.unwrap().unwrap();
        assert_eq!(landed.result.as_str(), "the chart\n[image image/png, 69 bytes]", "{}", s.name);
        let entries = sessions.entries(&id).await.unwrap();
        let Some(Item::Message { message: ambit::Message::User { parts, .. } }) = entries.last().map(|e| &e.item)
        else {
            panic!("{}: {entries:?}", s.name)
        };
        assert!(ambit::content::has_media(parts), "{}: the landed result kept its image", s.name);
        assert_eq!(sessions.run(&agent, &id, "Show me.").await.unwrap().output, "One green pixel.");
        check(&p, 3);
    }
}
