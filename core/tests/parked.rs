//! Parked approvals on both stores: a handler answers "later", the run stops in `awaiting_approval`,
//! and `resume` — from another `Sessions` on the same store, with another agent, as another process
//! would — continues the conversation exactly as a live answer would have.

use std::sync::atomic::{AtomicU32, Ordering};

use ambit::permission::approval::FnApproval;
use ambit::session::{SessionError, Sessions};
use ambit::{Agent, ApprovalDecision, Level, OpenAiChat, Policy, tool_fn};
use ambit_test_provider::{Provider, Script};
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::Connection;

static COUNTER: AtomicU32 = AtomicU32::new(0);

async fn urls() -> Vec<(String, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("p.db").display());
    let admin = std::env::var("AMBIT_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!("AMBIT_TEST_POSTGRES_URL is not set: the parked-approval tests run on PostgreSQL too. Run `bash scripts/test.sh`.")
    });
    let db = format!("ambit_p_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
    let mut c = sqlx::PgConnection::connect(&admin).await.expect("connect to the test PostgreSQL server");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&mut c).await.unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
    vec![(sqlite, Some(dir)), (format!("{base}/{db}"), None)]
}

#[derive(Deserialize)]
struct Email {
    to: String,
}

/// An agent whose handler answers every request with `answer`.
fn agent(base_url: &str, answer: ApprovalDecision) -> Agent {
    let send = tool_fn(
        "send_email",
        "Send the drafted email.",
        json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
        |e: Email| async move { Ok::<_, String>(format!("sent to {}", e.to)) },
    )
    .level(Level::Read)
    .requires_approval();
    let handler = FnApproval(move |_| {
        let a = answer.clone();
        async move { a }
    });
    Agent::builder()
        .model(OpenAiChat::new("m").base_url(base_url).max_retries(0))
        .tool(send)
        .tools(ambit::tools::builtin::by_name("escalate_to_human"))
        .policy(Policy::level(Level::Read).approvals(handler))
        .build()
        .unwrap()
}

fn exchanges() -> Value {
    json!([
        {"respond": {"tool_calls": [
            {"id": "a", "name": "send_email", "arguments": {"to": "ops@example.com"}},
            {"id": "b", "name": "escalate_to_human", "arguments": {"question": "Refund 40 EUR?"}}
        ]}},
        {"expect": {"messages_count": 4, "messages_tail": [
            {"role": "tool", "tool_call_id": "a", "content": "sent to ops@example.com"},
            {"role": "tool", "tool_call_id": "b", "content": "The person answered: yes, refund"}
        ]}, "respond": {"content": "Sent, and the refund is approved."}}
    ])
}

async fn provider(exchanges: Value) -> Provider {
    Provider::start(serde_json::from_value::<Script>(json!({"name": "parked", "exchanges": exchanges})).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_resumed_elsewhere_ends_as_a_live_answer_would() {
    // The live run, for comparison: the handler approves the email and revises the escalation.
    let live_p = provider(exchanges()).await;
    let live_sessions =
        Sessions::open(&format!("sqlite://{}", tempfile::tempdir().unwrap().keep().join("live.db").display()))
            .await
            .unwrap();
    let revise = ApprovalDecision::Revise { arguments: json!({"question": "Refund 40 EUR?", "answer": "yes, refund"}) };
    // One handler for both calls: approve the email, revise the escalation.
    let both = FnApproval(move |r: ambit::ApprovalRequest| {
        let revise = revise.clone();
        async move { if r.tool == "send_email" { ApprovalDecision::Approve } else { revise } }
    });
    let live_agent = {
        let a = agent(&live_p.base_url(), ApprovalDecision::Approve);
        a.with_policy(Policy::level(Level::Read).approvals(both)).unwrap()
    };
    let live_sid = live_sessions.create().await.unwrap();
    let live = live_sessions.run(&live_agent, &live_sid, "Send it and ask about the refund.").await.unwrap();

    for (url, _dir) in urls().await {
        let p = provider(exchanges()).await;
        let here = Sessions::open(&url).await.unwrap();
        let sid = here.create().await.unwrap();
        let parking = agent(&p.base_url(), ApprovalDecision::Later);
        let err = here.run(&parking, &sid, "Send it and ask about the refund.").await.unwrap_err();
        let SessionError::AwaitingApproval { request, .. } = &err else { panic!("{url}: {err}") };
        assert_eq!(err.code(), "awaiting_approval");
        assert_eq!(request.tool, "send_email");
        assert_eq!(here.store().state(&sid).await.unwrap().state, "awaiting_approval");
        // A new run on a parked session is refused; nothing timed out.
        assert!(here.run(&parking, &sid, "hello?").await.unwrap_err().to_string().contains("resume it first"));

        // "Another process": another store handle and another agent, whose handler would deny.
        let there = Sessions::open(&url).await.unwrap();
        let other = agent(&p.base_url(), ApprovalDecision::Deny { reason: "not this one".into() });
        assert_eq!(there.pending(&sid).await.unwrap().unwrap().tool, "send_email");
        let again = there.resume(&other, &sid, ApprovalDecision::Approve).await.unwrap_err();
        let SessionError::AwaitingApproval { request, .. } = &again else { panic!("{url}: {again}") };
        assert_eq!(request.tool, "escalate_to_human", "the second waiting call of the turn parks it again");
        let answer =
            ApprovalDecision::Revise { arguments: json!({"question": "Refund 40 EUR?", "answer": "yes, refund"}) };
        let done = there.resume(&other, &sid, answer).await.unwrap();
        assert_eq!(done.output, live.output, "{url}");
        assert_eq!(there.store().state(&sid).await.unwrap().state, "idle");
        assert!(
            there
                .resume(&other, &sid, ApprovalDecision::Approve)
                .await
                .unwrap_err()
                .to_string()
                .contains("not awaiting")
        );
        // The log is the conversation the live run had.
        let parked_log: Vec<Value> =
            there.entries(&sid).await.unwrap().into_iter().map(|e| serde_json::to_value(e.item).unwrap()).collect();
        let live_log: Vec<Value> = live_sessions
            .entries(&live_sid)
            .await
            .unwrap()
            .into_iter()
            .map(|e| serde_json::to_value(e.item).unwrap())
            .collect();
        assert_eq!(parked_log, live_log, "{url}");
        let (served, mismatches) = p.report();
        assert!(mismatches.is_empty(), "{mismatches:?}");
        assert_eq!(served, 2);
    }
}

#[tokio::test]
async fn later_outside_a_session_is_refused() {
    let p = provider(json!([
        {"respond": {"tool_calls": [{"id": "a", "name": "send_email", "arguments": {"to": "x"}}]}},
        {"expect": {"messages_tail": [{"role": "tool", "content": "Error: the approval handler answered later for tool 'send_email', and this run has no session to park in"}]},
         "respond": {"content": "ok"}}
    ]))
    .await;
    let r = agent(&p.base_url(), ApprovalDecision::Later).run("send").await.unwrap();
    assert_eq!(r.output, "ok");
}

/// A 1x1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

/// An agent whose `render_chart` (approval required) returns an image, whose handler answers `answer`.
fn chart_agent(base_url: &str, answer: ApprovalDecision) -> Agent {
    let chart = tool_fn(
        "render_chart",
        "Render the chart.",
        json!({"type": "object", "properties": {}}),
        |_: Value| async move {
            let image = ambit::Part::Image { media_type: "image/png".into(), data: PNG.into() };
            Ok::<_, String>(ambit::content::tool_content(vec![ambit::Part::text("the chart"), image]))
        },
    )
    .level(Level::Read)
    .requires_approval();
    let handler = FnApproval(move |_| {
        let a = answer.clone();
        async move { a }
    });
    Agent::builder()
        .model(OpenAiChat::new("m").base_url(base_url).max_retries(0))
        .tool(chart)
        .policy(Policy::level(Level::Read).approvals(handler))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_parked_call_that_returns_an_image_resumes_with_the_image_as_parts() {
    // The model must get the image as an image after the resume, exactly as after a live approval (the
    // control), never the content value's JSON as text.
    let script = || {
        json!([
            {"respond": {"tool_calls": [{"id": "c", "name": "render_chart", "arguments": {}}]}},
            {"expect": {"messages_count": 4, "messages_tail": [
                {"role": "tool", "tool_call_id": "c", "content": "the chart\n[image image/png, 69 bytes]"},
                {"role": "user", "content": [
                    {"type": "text", "text": "[tool output, not the user's words] The images tool render_chart returned (call c):"},
                    {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}
                ]}
            ]}, "respond": {"content": "A green pixel."}}
        ])
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("img.db").display());
    let sessions = Sessions::open(&url).await.unwrap();
    let logs = |sid: String| {
        let sessions = &sessions;
        async move {
            let entries = sessions.entries(&sid).await.unwrap();
            entries.into_iter().map(|e| serde_json::to_value(e.item).unwrap()).collect::<Vec<Value>>()
        }
    };

    let live_p = provider(script()).await;
    let live_sid = sessions.create().await.unwrap();
    let live = sessions.run(&chart_agent(&live_p.base_url(), ApprovalDecision::Approve), &live_sid, "Chart?").await;
    assert_eq!(live.unwrap().output, "A green pixel.");
    assert!(live_p.report().1.is_empty(), "{:?}", live_p.report().1);

    let p = provider(script()).await;
    let sid = sessions.create().await.unwrap();
    let err = sessions.run(&chart_agent(&p.base_url(), ApprovalDecision::Later), &sid, "Chart?").await.unwrap_err();
    assert_eq!(err.code(), "awaiting_approval");
    let done = Sessions::open(&url)
        .await
        .unwrap()
        .resume(
            &chart_agent(&p.base_url(), ApprovalDecision::Deny { reason: "-".into() }),
            &sid,
            ApprovalDecision::Approve,
        )
        .await
        .unwrap();
    assert_eq!(done.output, "A green pixel.");
    let (served, mismatches) = p.report();
    assert!(mismatches.is_empty(), "{mismatches:?}");
    assert_eq!(served, 2);
    let (parked_log, live_log) = (logs(sid).await, logs(live_sid).await);
    assert_eq!(parked_log, live_log);
    let tool = parked_log.iter().find(|m| m["message"]["role"] == "tool").expect("the tool's result");
    assert_eq!(tool["message"]["parts"][1]["type"], "image", "{tool}");
}
