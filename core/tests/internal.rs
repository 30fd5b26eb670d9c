//! A panic in the core never unwinds into the caller: a run whose task panics (here a tool that panics,
//! as a bug in a wire or a tool would) ends with the typed `Error::Internal` (code `internal`), and so
//! does a streamed run; a run without the panicking call finishes normally (the control). The hook the
//! bindings use to panic outside a run (a tool spec that panics once armed) panics only once armed.

use ambit::{Agent, Error, Event, OpenAiChat};
use ambit_test_provider::{Provider, Script};
use futures::StreamExt;
use serde_json::json;

async fn provider(tool: &str) -> Provider {
    let script = serde_json::from_value(json!({"name": "internal", "exchanges": [
        {"respond": {"tool_calls": [{"id": "a", "name": tool, "arguments": {}}]}},
        {"respond": {"content": "done"}}
    ]}))
    .unwrap();
    let script: Script = script;
    Provider::start(script).await.unwrap()
}

fn agent(provider: &Provider) -> Agent {
    Agent::builder()
        .model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k").max_retries(0))
        .tool_arc(ambit::testing::panicking_tool())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_panic_inside_a_run_is_the_internal_error() {
    let p = provider(ambit::testing::PANICKING_TOOL).await;
    let err = agent(&p).run("go").await.expect_err("the run panicked");
    assert!(matches!(err, Error::Internal(_)), "{err:?}");
    assert_eq!(err.code(), "internal");
    assert!(err.to_string().contains(ambit::testing::PANIC_MESSAGE), "{err}");
}

#[tokio::test]
async fn a_panic_inside_a_streamed_run_is_the_internal_error() {
    let p = provider(ambit::testing::PANICKING_TOOL).await;
    let mut stream = agent(&p).stream("go");
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item);
    }
    let err = last.expect("an item").expect_err("the run panicked");
    assert_eq!(err.code(), "internal", "{err}");
}

#[tokio::test]
async fn control_the_same_run_without_the_panicking_call_finishes() {
    // The model calls a tool that does not exist: an error result, and the run goes on to its answer.
    let p = provider("no_such_tool").await;
    let result = agent(&p).run("go").await.expect("no panic, no error");
    assert_eq!(result.output, "done");
    let p = provider("no_such_tool").await;
    let mut stream = agent(&p).stream("go");
    let mut finished = false;
    while let Some(item) = stream.next().await {
        finished |= matches!(item, Ok(Event::RunFinished { .. }));
    }
    assert!(finished);
}

#[test]
fn force_panic_panics_with_its_message() {
    let payload = std::panic::catch_unwind(|| ambit::testing::force_panic()).expect_err("it panics");
    let err = Error::from_panic(&*payload);
    assert_eq!(err.code(), "internal");
    assert!(err.to_string().contains(ambit::testing::PANIC_MESSAGE), "{err}");
}

#[test]
fn the_spec_tool_panics_only_once_armed() {
    let (tool, armed) = ambit::testing::tool_with_panicking_spec();
    let agent =
        Agent::builder().model(OpenAiChat::new("m").api_key("k")).tool_arc(tool).build().expect("built unarmed");
    assert_eq!(agent.list_tools().len(), 1, "unarmed, it lists");
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| agent.list_tools())).expect_err("armed");
    assert!(Error::from_panic(&*payload).to_string().contains(ambit::testing::PANIC_MESSAGE));
}
