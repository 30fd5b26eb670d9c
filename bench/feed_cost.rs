//! Instruction cost of streamed runs through an EventFeed (the bindings' path): N runs, each a tool call
//! and an answer, every event read. `N` from the first argument (default 2000).
use ambit::test_model::{Reply, TestModel};
use ambit::{Agent, EventFeed};
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let replies = (0..n).flat_map(|_| [Reply::tool_call("echo", json!({"x": 1})), Reply::text("done")]);
    let tool =
        ambit::tool_fn(
            "echo",
            "echo",
            json!({"type": "object"}),
            |v: Value| async move { Ok::<_, String>(v.to_string()) },
        );
    let agent = Agent::builder().model(TestModel::new(replies)).tool(tool).build().unwrap();
    let mut events = 0usize;
    for _ in 0..n {
        let feed = EventFeed::start(agent.stream("go"), |run| tokio::spawn(run));
        while let Some(item) = feed.next().await {
            item.unwrap();
            events += 1;
        }
    }
    println!("{n} runs, {events} events");
}
