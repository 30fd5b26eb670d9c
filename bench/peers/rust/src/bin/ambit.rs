//! ambit from Rust: the weather job of bench/peers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ambit::deferral::DeferralConfig;
use ambit::{Agent, Anthropic, OpenAiChat, OpenAiResponses, Tool, tool_fn};
use ambit_bench_runners::{Settings, fail, measure, measure_concurrent};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Weather {
    city: String,
}

fn main() {
    // `BENCH_MINIMAL=1`: the runtime of the minimal floor (`reqwest minimal chat`), a current-thread one,
    // to tell the framework's cost from the multi-thread runtime's.
    let runtime = if std::env::var("BENCH_MINIMAL").is_ok_and(|v| v == "1") {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    };
    runtime.unwrap_or_else(|e| fail(&format!("runtime: {e}"))).block_on(run());
}

async fn run() {
    let s = Settings::from_env();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(tool_fn(
        "get_weather",
        "Current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |a: Weather| {
            counter.fetch_add(1, Ordering::Relaxed);
            async move { Ok::<_, String>(format!("sunny in {}", a.city)) }
        },
    ))];
    for t in &s.extra {
        let text = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let params = t.get("parameters").cloned().unwrap_or(json!({"type": "object"}));
        tools.push(Arc::new(tool_fn(text("name"), text("description"), params, |_: Value| async {
            Ok::<_, String>("ok")
        })));
    }
    let mut builder = Agent::builder().tools(tools);
    builder = match s.wire.as_str() {
        "chat" => builder.model(OpenAiChat::new("gpt-4.1").base_url(&s.base_url).api_key("bench-key").stream(s.stream)),
        "responses" => {
            builder.model(OpenAiResponses::new("gpt-4.1").base_url(&s.base_url).api_key("bench-key").stream(s.stream))
        }
        "anthropic" => builder
            .model(Anthropic::new("claude-sonnet-4-5").base_url(&s.base_url).api_key("bench-key").stream(s.stream)),
        w => fail(&format!("unknown wire {w}")),
    };
    if s.defer {
        let names = s.extra.iter().filter_map(|t| t.get("name").and_then(Value::as_str)).map(str::to_string);
        builder = builder.deferral(DeferralConfig { deferrable_tools: names.collect(), ..Default::default() });
    }
    let agent = builder.build().unwrap_or_else(|e| fail(&format!("agent: {e}")));
    if s.concurrency > 0 {
        let count = calls.clone();
        measure_concurrent(
            &s,
            move || count.load(Ordering::Relaxed),
            || {
                let agent = agent.clone();
                async move {
                    match agent.run("weather in Paris?").await {
                        Ok(r) => r.output,
                        Err(e) => fail(&format!("run: {e}")),
                    }
                }
            },
        )
        .await;
        return;
    }
    measure(
        &s,
        || calls.load(Ordering::Relaxed),
        || async {
            match agent.run("weather in Paris?").await {
                Ok(r) => r.output,
                Err(e) => fail(&format!("run: {e}")),
            }
        },
    )
    .await;
}
