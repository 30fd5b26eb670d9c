//! The run context (issue 21, item 4): a host value passed to one run reaches that run's tools and no
//! other run's, and never a request. The shared scenario `run_context.json` covers one run in every
//! language; this file covers two runs at once, with the negative control that the check catches a
//! context that leaks between runs.

use std::sync::{Arc, Mutex};

use ambit::test_model::{FunctionModel, Reply, TestRequest};
use ambit::{Agent, Message, RunContextValue, Tool, ToolContext, tool_fn_in};
use serde_json::{Value, json};

/// The host's value: the current user.
struct User(String);

/// Asks for `whoami` until the conversation holds its result, then answers with it.
fn model(requests: Arc<Mutex<Vec<TestRequest>>>) -> FunctionModel {
    FunctionModel::new(move |r: &TestRequest| {
        requests.lock().unwrap().push(r.clone());
        Ok(match r.messages.last() {
            Some(Message::Tool { content, .. }) => Reply::text(format!("you are {content}")),
            _ => Reply::tool_call("whoami", json!({})),
        })
    })
}

/// Both runs' tool calls wait for each other, so the two runs are in flight together when each reads
/// its user.
fn agent(tool: impl Tool + 'static, requests: Arc<Mutex<Vec<TestRequest>>>) -> Agent {
    Agent::builder().model(model(requests)).tool(tool).build().unwrap()
}

/// Runs two runs at once, as users "ada" and "bob"; the outputs in that order.
async fn two_runs(agent: &Agent) -> (String, String) {
    let a = agent.run_with_context("who am I?", RunContextValue::new(User("ada".into())));
    let b = agent.run_with_context("who am I?", RunContextValue::new(User("bob".into())));
    let (a, b) = tokio::join!(a, b);
    (a.unwrap().output, b.unwrap().output)
}

fn barrier() -> Arc<tokio::sync::Barrier> {
    Arc::new(tokio::sync::Barrier::new(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_runs_each_see_their_own_context() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let gate = barrier();
    let tool =
        tool_fn_in("whoami", "The current user.", json!({"type": "object"}), move |_: Value, ctx: ToolContext| {
            let gate = gate.clone();
            async move {
                gate.wait().await;
                ctx.context::<User>().map(|u| u.0.clone()).ok_or("no context")
            }
        });
    let agent = agent(tool, requests.clone());
    assert_eq!(two_runs(&agent).await, ("you are ada".to_string(), "you are bob".to_string()));
    // The value itself never reaches a request: only what the tool answered from it.
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 4);
    for r in requests.iter() {
        assert!(!r.body.to_string().contains("User"), "{}", r.body);
    }
}

/// The negative control: a tool that reads the user from a place the runs share (the last one set)
/// instead of its own run's context gives both runs one user, and the same check sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_catches_a_context_shared_between_runs() {
    let shared: Arc<Mutex<Option<String>>> = Arc::default();
    let gate = barrier();
    let last = shared.clone();
    let tool =
        tool_fn_in("whoami", "The current user.", json!({"type": "object"}), move |_: Value, ctx: ToolContext| {
            let (gate, last) = (gate.clone(), last.clone());
            async move {
                // Each run "publishes" its user where both can see it, then reads the shared slot.
                *last.lock().unwrap() = ctx.context::<User>().map(|u| u.0.clone());
                gate.wait().await;
                let user = last.lock().unwrap().clone();
                user.ok_or("no context")
            }
        });
    let agent = agent(tool, Arc::new(Mutex::new(Vec::new())));
    let (a, b) = two_runs(&agent).await;
    assert_eq!(a, b, "a shared slot gives both runs the same user");
    assert_ne!((a, b), ("you are ada".to_string(), "you are bob".to_string()));
}

#[tokio::test]
async fn a_run_without_context_gives_its_tools_none() {
    let tool =
        tool_fn_in("whoami", "The current user.", json!({"type": "object"}), |_: Value, ctx: ToolContext| async move {
            Ok::<_, String>(match ctx.context::<User>() {
                Some(u) => u.0.clone(),
                None => "nobody".to_string(),
            })
        });
    let agent = agent(tool, Arc::new(Mutex::new(Vec::new())));
    assert_eq!(agent.run("who am I?").await.unwrap().output, "you are nobody");
    // A context of another type is not this one.
    let run = agent.run_with_context("who am I?", RunContextValue::new(42u32)).await.unwrap();
    assert_eq!(run.output, "you are nobody");
}

/// The README's message-history example: run 1's `result.messages` and a new user message are run 2's
/// input; the model sees the whole conversation, the tool call and its result included.
#[tokio::test]
async fn a_history_round_trips_through_result_messages() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let tool = tool_fn_in("whoami", "The current user.", json!({"type": "object"}), |_: Value, _: ToolContext| async {
        Ok::<_, String>("ada")
    });
    let agent = agent(tool, requests.clone());
    let first = agent.run("who am I?").await.unwrap();
    let mut history = first.messages.clone();
    history.push(Message::user("and now?"));
    let second = agent.run(history).await.unwrap();
    // Run 2's first request held the whole history, the new message last.
    let before = {
        let seen = requests.lock().unwrap();
        let roles: Vec<&str> = seen[2]
            .messages
            .iter()
            .map(|m| match m {
                Message::User { .. } => "user",
                Message::Assistant { .. } => "assistant",
                Message::Tool { .. } => "tool",
                Message::Provider { .. } => "provider",
            })
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
        seen.len()
    };
    assert_eq!(second.messages[..4], first.messages[..]);
    // A result that answers no call is refused before any request, naming the message and field.
    let orphan = vec![
        Message::user("hi"),
        Message::Tool {
            call_id: "nope".into(),
            name: "whoami".into(),
            content: "x".into(),
            is_error: false,
            parts: Vec::new(),
        },
    ];
    let err = agent.run(orphan).await.unwrap_err();
    assert!(matches!(&err, ambit::Error::InvalidMessage { index: 1, field, .. } if field == "call_id"), "{err}");
    assert_eq!(err.code(), "invalid_message");
    assert_eq!(requests.lock().unwrap().len(), before, "nothing was sent");
}

/// A run started inside another (a sub-agent's, or an agent a tool runs) hands its tools the context
/// of the run that started it; a top-level run without one has none.
#[tokio::test]
async fn a_nested_run_inherits_the_context_of_the_run_it_runs_in() {
    let whoami =
        tool_fn_in("whoami", "The current user.", json!({"type": "object"}), |_: Value, ctx: ToolContext| async move {
            ctx.context::<User>().map(|u| u.0.clone()).ok_or("no context")
        });
    let inner = agent(whoami, Arc::new(Mutex::new(Vec::new())));
    let ask =
        tool_fn_in("ask_inner", "Asks the inner agent.", json!({"type": "object"}), move |_: Value, _: ToolContext| {
            let inner = inner.clone();
            async move { inner.run("who am I?").await.map(|r| r.output).map_err(|e| e.to_string()) }
        });
    let outer = Agent::builder()
        .model(FunctionModel::new(|r: &TestRequest| {
            Ok(match r.messages.last() {
                Some(Message::Tool { content, .. }) => Reply::text(content.clone()),
                _ => Reply::tool_call("ask_inner", json!({})),
            })
        }))
        .tool(ask)
        .build()
        .unwrap();
    let run = outer.run_with_context("go", RunContextValue::new(User("ada".into()))).await.unwrap();
    assert_eq!(run.output, "you are ada");
    // Negative control: without a context at the top, the inner tool has none either.
    let run = outer.run("go").await.unwrap();
    assert!(run.output.contains("no context"), "{}", run.output);
}

/// Issue 21: a session run takes a run context too, and hands it to the run's tools; a session run
/// given none hands them none (the negative control: the check sees the difference). The context is
/// never stored: the session's log holds only what the tool answered.
#[tokio::test]
async fn a_session_run_hands_its_context_to_the_runs_tools() {
    let dir = tempfile::tempdir().unwrap();
    let sessions =
        ambit::session::Sessions::open(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap();
    let whoami =
        tool_fn_in("whoami", "The current user.", json!({"type": "object"}), |_: Value, ctx: ToolContext| async move {
            Ok::<_, String>(ctx.context::<User>().map_or("nobody".to_string(), |u| u.0.clone()))
        });
    let agent = agent(whoami, Arc::new(Mutex::new(Vec::new())));
    let id = sessions.create().await.unwrap();
    let r =
        sessions.run_with_context(&agent, &id, "who am I?", RunContextValue::new(User("ada".into()))).await.unwrap();
    assert_eq!(r.output, "you are ada");
    // Negative control: the same session run without a context.
    let other = sessions.create().await.unwrap();
    assert_eq!(sessions.run(&agent, &other, "who am I?").await.unwrap().output, "you are nobody");
}
