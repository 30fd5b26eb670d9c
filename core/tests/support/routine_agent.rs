//! The agent the routine tests run: a scripted model (the fake of a hosted model) that reads what to do
//! from the routine's instructions, one directive a word:
//! - `work=MS`: call `sim_work`, which returns once the test's clock is MS past the run's start;
//! - `park`: call `escalate_to_human` (the run parks in its session);
//! - `report=STATUS`: call `report_outcome` with that status;
//! - `ask=TOOL`: call TOOL (e.g. `list_my_routines`) and put its result in the final answer;
//! - `claim=N`: `claim_work` on PO-0 … PO-9, at most N granted;
//! - `backlog=K/B`: `report_backlog` of PO-0 … PO-(K-1) with batch size B.
//!
//! Then it answers "done". A run of instructions without `report=` never reports.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use ambit::ModelError;
use ambit::ledger::Clock;
use ambit::model::{Message, ModelRequest, ModelResponse, StopReason, ToolCall, Usage};
use ambit::permission::approval::FnApproval;
use ambit::routine::RunContext;
use ambit::{Agent, ApprovalDecision, Level, Model, Policy, tool_fn};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

struct RoutineModel;

fn directives(input: &str) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    for (i, word) in input.split_whitespace().enumerate() {
        let (name, args) = match word.split_once('=') {
            Some(("work", ms)) => ("sim_work", json!({"ms": ms.parse::<i64>().unwrap_or(0)})),
            Some(("report", status)) => (
                "report_outcome",
                json!({"status": status, "summary": format!("The run ended with {status}."), "tool_calls": 1}),
            ),
            Some(("ask", tool)) => (tool, json!({"include_runs": true})),
            Some(("claim", n)) => {
                let keys: Vec<String> = (0..10).map(|k| format!("PO-{k}")).collect();
                ("claim_work", json!({"candidates": keys, "limit": n.parse::<u64>().unwrap_or(1)}))
            }
            Some(("backlog", kb)) => {
                let (k, b) = kb.split_once('/').unwrap_or(("0", "1"));
                let keys: Vec<String> = (0..k.parse::<usize>().unwrap_or(0)).map(|k| format!("PO-{k}")).collect();
                ("report_backlog", json!({"subject_keys": keys, "batch_size": b.parse::<u64>().unwrap_or(1)}))
            }
            None if word == "park" => ("escalate_to_human", json!({"question": "Go ahead?"})),
            _ => continue,
        };
        calls.push(ToolCall {
            id: format!("c{i}"),
            name: name.to_string(),
            arguments: args.to_string(),
            from_text: false,
        });
    }
    calls
}

#[async_trait]
impl Model for RoutineModel {
    fn name(&self) -> &str {
        "routine-scripted"
    }
    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let input = request
            .messages
            .iter()
            .find_map(|m| match m {
                Message::User { content, .. } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let results: Vec<String> = request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect();
        let calls = directives(&input);
        let usage = Usage { requests: 1, input_tokens: 100, output_tokens: 10, ..Usage::default() };
        Ok(match calls.get(results.len()) {
            Some(call) => ModelResponse {
                id: "r".into(),
                text: None,
                tool_calls: vec![call.clone()],
                stop: StopReason::ToolCalls,
                usage,
            },
            None => ModelResponse {
                id: "r".into(),
                text: Some(format!("done {}", results.join(" | "))),
                tool_calls: vec![],
                stop: StopReason::End,
                usage,
            },
        })
    }
}

/// The times the `sim_work` calls of this process wait for (one entry a call, while it waits).
static WAITING: std::sync::Mutex<Vec<i64>> = std::sync::Mutex::new(Vec::new());

/// How many `sim_work` calls wait for the clock to pass `now`: a call whose time has come is on its way
/// out and not counted. A runner whose runs in flight all wait here does nothing until the clock moves.
pub fn waiting_past(now: i64) -> usize {
    WAITING.lock().map_or(0, |w| w.iter().filter(|u| **u > now).count())
}

/// How many `sim_work` calls wait for the clock to reach exactly `until` (a run started at `t` working
/// `ms` waits for `t + ms`): one test's calls, apart from another's running beside it.
pub fn waiting_for(until: i64) -> usize {
    WAITING.lock().map_or(0, |w| w.iter().filter(|u| **u == until).count())
}

/// One entry of [`WAITING`], removed when the wait ends or its future is dropped.
struct Waiting(i64);
impl Waiting {
    fn enter(until: i64) -> Waiting {
        if let Ok(mut w) = WAITING.lock() {
            w.push(until);
        }
        Waiting(until)
    }
}
impl Drop for Waiting {
    fn drop(&mut self) {
        if let Ok(mut w) = WAITING.lock()
            && let Some(i) = w.iter().position(|u| *u == self.0)
        {
            w.swap_remove(i);
        }
    }
}

#[derive(Deserialize)]
struct Work {
    ms: i64,
}

/// The agent for one run: the run's routine tools, `sim_work` on `clock`, and `escalate_to_human`.
pub fn agent(ctx: &RunContext, clock: Arc<dyn Clock>) -> Result<Agent, ambit::Error> {
    let started = ctx.run.started_at;
    let work = tool_fn(
        "sim_work",
        "Work for a while of the test's clock.",
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
        move |w: Work| {
            let clock = clock.clone();
            async move {
                // Measured from the run's start, so when the call happens does not matter.
                let until = started + w.ms;
                // The test's clock moves when the test says; this waits on that, not on time.
                let _waiting = Waiting::enter(until);
                while clock.now_ms() < until {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Ok::<_, String>(Value::String("worked".into()))
            }
        },
    );
    Agent::builder()
        .model(RoutineModel)
        .tools(ctx.tools())
        .tool(work)
        .tools(ambit::tools::builtin::by_name("escalate_to_human"))
        // A person answers later: the run parks.
        .policy(Policy::level(Level::Unrestricted).approvals(FnApproval(|_| async { ApprovalDecision::Later })))
        .build()
}
