//! Hooks and guardrails beyond the scenario files: what a hook sees (the run context, the points in
//! order, credentials only as `[credential:alias]`), and that a failing hook stores nothing of its run.

use std::sync::{Arc, Mutex};

use ambit::session::Sessions;
use ambit::test_model::Reply;
use ambit::{Agent, Credentials, GuardrailVerdict, HookAction, HookPoint, TestModel};
use serde_json::{Value, json};

const SECRET: &str = "ghp_hookTestValue0123456789";

fn deploy_tool(seen: Arc<Mutex<Vec<String>>>) -> impl ambit::Tool {
    ambit::tool_fn_in("deploy", "Deploys.", json!({"type": "object", "properties": {}}), move |_: Value, ctx| {
        let seen = seen.clone();
        async move {
            let token = ctx.credential("github").await.map_err(|e| e.to_string())?;
            seen.lock().unwrap().push(token.clone());
            Ok::<_, String>(format!("deployed with {token}"))
        }
    })
    .credentials(["github"])
}

fn script() -> TestModel {
    TestModel::new([Reply::tool_call("deploy", json!({})), Reply::text("Done.")])
}

/// What the recorder keeps of each hook call: the point, the context's user, the payload.
type Log = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// Records every payload of every point, with the point and the context's user.
fn recorder(builder: ambit::AgentBuilder, log: Log) -> ambit::AgentBuilder {
    let mut b = builder;
    for point in HookPoint::ALL {
        let log = log.clone();
        b = b.hook_fn(format!("record_{}", point.as_str()), point, move |ctx, payload| {
            let log = log.clone();
            async move {
                let user = ctx.context::<User>().map(|u| u.0.clone());
                log.lock().unwrap().push((point.as_str().to_string(), user, payload));
                Ok(HookAction::Continue)
            }
        });
    }
    b
}

struct User(String);

#[tokio::test]
async fn hooks_see_every_point_in_order_with_the_run_context_and_credentials_only_redacted() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let tool_saw = Arc::new(Mutex::new(Vec::new()));
    let agent = recorder(Agent::builder().model(script()), log.clone())
        .tool(deploy_tool(tool_saw.clone()))
        .credentials(Credentials::new().value("github", SECRET))
        .build()
        .unwrap();
    let r = agent.run_with_context("Deploy.", ambit::RunContextValue::new(User("ada".into()))).await.unwrap();
    assert_eq!(r.output, "Done.");
    let log = log.lock().unwrap();
    let points: Vec<&str> = log.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(
        points,
        [
            "run_start",
            "before_model_request",
            "after_model_response",
            "before_tool_call",
            "after_tool_call",
            "before_model_request",
            "after_model_response",
            "run_end"
        ]
    );
    assert!(log.iter().all(|(_, user, _)| user.as_deref() == Some("ada")), "every hook reads the run context");
    let everything: String = log.iter().map(|(_, _, p)| p.to_string()).collect();
    assert!(everything.contains("deployed with [credential:github]"), "{everything}");
    assert!(!everything.contains(SECRET), "a hook saw the credential's value: {everything}");
    // Negative control: the value was there to leak: the tool itself read it.
    assert_eq!(tool_saw.lock().unwrap().as_slice(), [SECRET]);
    assert_eq!(log[4].2["result"], "deployed with [credential:github]");
}

#[tokio::test]
async fn a_run_without_a_context_hands_its_hooks_none() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let agent = recorder(Agent::builder().model(TestModel::new([Reply::text("Hi.")])), log.clone()).build().unwrap();
    agent.run("Hello.").await.unwrap();
    assert!(log.lock().unwrap().iter().all(|(_, user, _)| user.is_none()));
}

#[tokio::test]
async fn a_tripped_input_guardrail_stops_the_run_before_any_tool_runs() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let build = |trip: bool| {
        Agent::builder()
            .model(script())
            .tool(deploy_tool(ran.clone()))
            .credentials(Credentials::new().value("github", SECRET))
            .input_guardrail(ambit::guardrail_fn("stop", move |_, payload| async move {
                assert_eq!(payload["input"], "Deploy.");
                Ok(if trip { GuardrailVerdict::trip(json!({"why": "no deploys"})) } else { GuardrailVerdict::pass() })
            }))
            .build()
            .unwrap()
    };
    let e = build(true).run("Deploy.").await.unwrap_err();
    assert_eq!(e.code(), "guardrail_tripped");
    match &e {
        ambit::Error::GuardrailTripped { guardrail, kind, verdict, .. } => {
            assert_eq!((guardrail.as_str(), kind.as_str()), ("stop", "input"));
            assert_eq!(verdict, &json!({"why": "no deploys"}));
        }
        other => panic!("{other}"),
    }
    assert!(ran.lock().unwrap().is_empty(), "the tool ran after the guardrail tripped");
    // Negative control: a guardrail that passes lets the tool run.
    build(false).run("Deploy.").await.unwrap();
    assert_eq!(ran.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn hooks_are_checked_when_built_and_answer_what_their_point_takes() {
    let named =
        |name: &'static str| ambit::hook_fn(name, HookPoint::RunStart, |_, _| async { Ok(HookAction::Continue) });
    let e = Agent::builder().model(script()).hook(named("a")).hook(named("a")).build().unwrap_err();
    assert!(e.to_string().contains("two hooks or guardrails are named 'a'"), "{e}");
    let e = HookPoint::parse("before_everything").unwrap_err();
    assert!(e.to_string().contains("before_tool_call"), "{e}");
    // A refusal where no call is asked for is the hook's failure, naming it.
    let agent = Agent::builder()
        .model(TestModel::new([Reply::text("Hi.")]))
        .hook_fn("sulky", HookPoint::BeforeModelRequest, |_, _| async { Ok(HookAction::Refuse("no".into())) })
        .build()
        .unwrap();
    let e = agent.run("Hello.").await.unwrap_err();
    assert_eq!(e.code(), "hook_failed");
    assert!(e.to_string().contains("hook 'sulky' (before_model_request) failed: only a before_tool_call"), "{e}");
    // A replacement of the wrong shape, too.
    let agent = Agent::builder()
        .model(TestModel::new([Reply::text("Hi.")]))
        .hook_fn("bad", HookPoint::BeforeModelRequest, |_, _| async {
            Ok(HookAction::Replace(json!({"messages": [{"role": "wizard"}]})))
        })
        .build()
        .unwrap();
    let e = agent.run("Hello.").await.unwrap_err();
    assert!(e.to_string().contains("hook 'bad' (before_model_request) failed: messages"), "{e}");
}

/// A hook that raises before any tool ran ends the run and the session stores nothing of it: the log is
/// what it was before the run. Negative control: the same run without the raising hook adds its turn to
/// the log.
#[tokio::test]
async fn a_hook_raising_before_any_tool_ran_leaves_the_session_store_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Sessions::open(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let build = |raising: bool| {
        let mut b = Agent::builder()
            .model(script())
            .tool(deploy_tool(ran.clone()))
            .credentials(Credentials::new().value("github", SECRET));
        if raising {
            b = b.hook_fn("exploding", HookPoint::BeforeToolCall, |_, _| async { Err("boom".to_string()) });
        }
        b.build().unwrap()
    };
    let id = sessions.create().await.unwrap();
    let quiet = Agent::builder().model(TestModel::new([Reply::text("Hello.")])).build().unwrap();
    sessions.run(&quiet, &id, "Hi.").await.unwrap();
    let before = sessions.entries(&id).await.unwrap();
    let e = sessions.run(&build(true), &id, "Deploy.").await.unwrap_err();
    assert_eq!(e.code(), "hook_failed", "{e}");
    assert!(e.to_string().contains("hook 'exploding' (before_tool_call) failed: boom"), "{e}");
    assert_eq!(format!("{:?}", sessions.entries(&id).await.unwrap()), format!("{before:?}"));
    assert!(ran.lock().unwrap().is_empty(), "the tool never ran");
    // Negative control.
    sessions.run(&build(false), &id, "Deploy.").await.unwrap();
    let after = sessions.entries(&id).await.unwrap();
    assert_eq!(after.len(), before.len() + 4, "user, call, result, answer");
}

/// A model that calls `deploy` until the conversation holds a result of it, then answers: what a sound
/// model does with a session's log.
fn deploy_until_done() -> ambit::FunctionModel {
    ambit::FunctionModel::new(|r| {
        let done = r.messages.iter().any(|m| matches!(m, ambit::Message::Tool { name, .. } if name == "deploy"));
        Ok(if done { Reply::text("Done.") } else { Reply::tool_call("deploy", json!({})) })
    })
}

/// Issue 21: an `after_tool_call` hook that fails ends the run, but the tool ran. The session (durable,
/// with its call journal) keeps the turn with the tool's result as run and the hook's error, so the
/// next run of the session does not deploy again. Without the fix the log held nothing of the failed
/// run and the next run deployed a second time (the count below was 2).
#[tokio::test]
async fn a_failing_after_tool_call_hook_keeps_the_call_as_run_so_the_next_run_does_not_repeat_it() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = Sessions::open(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let model = deploy_until_done();
    let build = |raising: bool| {
        let mut b = Agent::builder()
            .model(model.clone())
            .tool(deploy_tool(ran.clone()))
            .credentials(Credentials::new().value("github", SECRET));
        if raising {
            b = b.hook_fn("audit", HookPoint::AfterToolCall, |_, _| async {
                Err(format!("the audit log refused token {SECRET}"))
            });
        }
        b.build().unwrap()
    };
    let id = sessions.create().await.unwrap();
    let e = sessions.run(&build(true), &id, "Deploy.").await.unwrap_err();
    assert_eq!(e.code(), "hook_failed", "{e}");
    assert_eq!(ran.lock().unwrap().len(), 1, "the tool ran once before the hook failed");
    // The next run of the session, the hook fixed: the model sees the deploy ran and does not repeat it.
    let r = sessions.run(&build(false), &id, "Go on.").await.unwrap();
    assert_eq!(r.output, "Done.");
    assert_eq!(ran.lock().unwrap().len(), 1, "the deploy was repeated");
    let kept = format!("{:?}", sessions.entries(&id).await.unwrap());
    assert!(kept.contains("deployed with [credential:github]"), "the result is kept as run: {kept}");
    assert!(kept.contains("the tool ran; then hook 'audit' (after_tool_call) failed"), "{kept}");
    let sent: String = model.requests().iter().map(|r| r.body.to_string()).collect();
    assert!(!sent.contains(SECRET), "a credential value reached the model");
    // Negative control: a fresh session without the kept turn deploys (the model is not lazy).
    let other = sessions.create().await.unwrap();
    sessions.run(&build(false), &other, "Deploy.").await.unwrap();
    assert_eq!(ran.lock().unwrap().len(), 2);
}

/// Issue 21: a hook's error text passes the credential redactor before it reaches the host's error (and
/// through it a parent's model or a session's log). Without the fix each assertion below saw the value.
#[tokio::test]
async fn a_hook_quoting_a_credential_value_reaches_nobody_unredacted() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let build = |credentials: Credentials, point: HookPoint| {
        Agent::builder()
            .model(script())
            .tool(deploy_tool(ran.clone()))
            .credentials(credentials)
            .hook_fn("leaky", point, |_, _| async { Err(format!("rejected token {SECRET}")) })
            .build()
            .unwrap()
    };
    for point in [HookPoint::AfterToolCall, HookPoint::AfterModelResponse, HookPoint::RunEnd] {
        let e = build(Credentials::new().value("github", SECRET), point).run("Deploy.").await.unwrap_err();
        assert_eq!(e.code(), "hook_failed", "{e}");
        let text = e.to_string();
        assert!(!text.contains(SECRET), "{point:?}: {text}");
        assert!(text.contains("rejected token [credential:github]"), "{point:?}: {text}");
    }
    // A guardrail's failure too.
    let e = Agent::builder()
        .model(script())
        .credentials(Credentials::new().value("github", SECRET))
        .input_guardrail(ambit::guardrail_fn("leaky", |_, _| async {
            Err::<GuardrailVerdict, _>(format!("bad {SECRET}"))
        }))
        .build()
        .unwrap()
        .run("Deploy.")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("bad [credential:github]") && !e.to_string().contains(SECRET), "{e}");
}
