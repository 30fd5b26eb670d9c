//! The four ledger tools given to an agent bound to a routine, through the agent loop against the
//! loopback provider: the model names subjects and outcomes only; the SDK fills in the scope, the
//! routine id, the run id and the claim tokens. On both stores.

mod ledger_support;

use std::sync::Arc;

use ambit::ledger::tools::{RoutineRun, ledger_tools};
use ambit::ledger::*;
use ambit::{Agent, OpenAiChat};
use ambit_test_provider::{Provider, Script};
use ledger_support::*;
use serde_json::{Value, json};

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

fn script() -> Script {
    serde_json::from_value(json!({
        "name": "ledger_tools",
        "wire": "openai_chat",
        "exchanges": [
            {"expect": {"tool_names": ["claim_work", "record_work", "list_work_ledger", "report_backlog"]},
             "respond": {"tool_calls": [call("c1", "claim_work", json!({"candidates": ["PO-1", {"subject_key": "PO-2", "fingerprint": "no tracking"}, "PO-3"]}))]}},
            {"respond": {"tool_calls": [call("c2", "record_work", json!({"records": [
                {"subject_key": "PO-1", "outcome": "empty"}, {"subject_key": "PO-2", "outcome": "productive"}]}))]}},
            {"respond": {"tool_calls": [
                call("c3", "list_work_ledger", json!({"state": "suppressed"})),
                call("c4", "report_backlog", json!({"subject_keys": ["PO-1", "PO-2", "PO-3", "PO-4"], "batch_size": 1}))]}},
            {"respond": {"tool_calls": [call("c5", "record_work", json!({"records": [{"subject_key": "PO-3", "outcome": "done"}]}))]}},
            {"respond": {"content": "Chased PO-1 and PO-2; PO-3 and PO-4 are left for the next runs."}}
        ]
    }))
    .unwrap()
}

#[tokio::test]
async fn an_agent_bound_to_a_routine_claims_records_lists_and_reports() {
    for s in stores().await {
        let ledger = s.open(Arc::new(ManualClock::new(T0))).await;
        let provider = Provider::start(script()).await.unwrap();
        let run = RoutineRun::new("po.tracking", "run-42").routine_id("chase-po").limit(2).limits(RoutineLimits {
            parallel_limit: 3,
            daily_cap: None,
            running: 1,
            started_today: 1,
        });
        let agent = Agent::builder()
            .model(OpenAiChat::new("gpt-4.1").base_url(provider.base_url()).api_key("sk-test"))
            .tools(ledger_tools(ledger.clone(), run))
            .build()
            .unwrap();
        let result = agent.run("Chase the oldest POs.").await.unwrap();
        assert_eq!(provider.report().1, Vec::<String>::new(), "{}: the provider saw what it expected", s.name);
        assert_eq!(result.output, "Chased PO-1 and PO-2; PO-3 and PO-4 are left for the next runs.");
        let calls = &result.tool_calls;
        let body = |i: usize| -> Value { serde_json::from_str(&calls[i].result).unwrap_or(Value::Null) };

        let claim = body(0);
        assert!(!calls[0].is_error, "{}: {}", s.name, calls[0].result);
        assert_eq!(
            claim["candidates"][0],
            json!({"subject_key": "PO-1", "status": "granted", "grant_reason": "fresh"})
        );
        assert_eq!(claim["candidates"][1]["grant_reason"], "fresh");
        assert_eq!(
            claim["candidates"][2],
            json!({"subject_key": "PO-3", "status": "skipped", "skip_reason": "over_limit", "eligible_at": null})
        );
        assert!(!calls[0].result.contains("token"), "{}: the model never sees tokens", s.name);

        assert!(!calls[1].is_error, "{}: the SDK filled in the tokens: {}", s.name, calls[1].result);
        let recorded = body(1);
        assert_eq!(recorded["recorded"][0]["misses"], 1);
        assert_eq!(recorded["recorded"][1]["outcome"], "productive");

        let listed = body(2);
        let keys: Vec<&str> =
            listed["entries"].as_array().unwrap().iter().map(|e| e["subject_key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["PO-1", "PO-2"], "{}", s.name);
        assert_eq!(listed["entries"][0]["state"], "cooling_down");
        let report = body(3);
        assert_eq!((report["workable"].clone(), report["extra_runs"].clone()), (json!(2), json!(2)), "{}", s.name);
        assert_eq!(report["scope"], "po.tracking");

        assert!(calls[4].is_error, "{}", s.name);
        // An unknown outcome is refused by the argument rule, by the argument's name, before the ledger
        // is touched (the batch writes nothing).
        assert!(
            calls[4].result.contains(
                "argument 'records[0].outcome' must be one of productive, empty, failed, released, got the string \"done\""
            ),
            "{}",
            calls[4].result
        );

        // In the ledger: the routine is pinned to its scope, the grants carry the run id.
        assert_eq!(ledger.pinned_scope("chase-po").await.unwrap().as_deref(), Some("po.tracking"));
        let entries =
            ledger.list(&ListQuery { routine_id: Some("chase-po".into()), ..Default::default() }).await.unwrap();
        assert!(entries.iter().all(|e| e.routine_id.as_deref() == Some("chase-po")));
        assert_eq!(
            ledger
                .drain_decision("chase-po", "run-42", &RoutineLimits { parallel_limit: 3, ..Default::default() })
                .await
                .unwrap(),
            DrainDecision { stop: None, start_runs: 1 }
        );
    }
}
