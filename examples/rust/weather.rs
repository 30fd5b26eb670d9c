//! The ambit demo in Rust: `cargo run --example weather [question]`.
//!
//! A real model when OPENAI_API_KEY or OPENAI_BASE_URL is set (AMBIT_MODEL picks it); else the
//! loopback provider, in-process, with scripted answers.

use ambit::{Agent, OpenAiChat, tool_fn};
use ambit_test_provider::{Provider, Script};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct WeatherArgs {
    city: String,
}

/// Prints a failure as its message (`Display`), not as the `Debug` form `main` returning an error
/// would print.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let name = std::env::var("AMBIT_MODEL").unwrap_or_else(|_| "gpt-4.1-mini".into());
    let configured =
        ["OPENAI_API_KEY", "OPENAI_BASE_URL"].iter().any(|k| std::env::var(k).is_ok_and(|v| !v.is_empty()));
    let mut _provider = None;
    let model = if configured {
        OpenAiChat::new(name)
    } else {
        let script =
            Script::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scripted/weather.json"))?;
        let p = Provider::start(script).await?;
        println!(
            "No OPENAI_API_KEY or OPENAI_BASE_URL set: the model's answers are SCRIPTED by the loopback provider."
        );
        let m = OpenAiChat::new(name).base_url(p.base_url()).api_key("sk-scripted");
        _provider = Some(p);
        m
    };
    let agent = Agent::builder()
        .model(model)
        .instructions("You answer weather questions briefly.")
        .tool(tool_fn(
            "get_weather",
            "Current weather for a city.",
            json!({"type": "object", "properties": {"city": {"type": "string", "description": "The city's name"}}, "required": ["city"]}),
            |a: WeatherArgs| async move { Ok::<_, String>(json!({"city": a.city, "sky": "sunny", "temperature_c": 22})) },
        ))
        .build()?;
    let question = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let question = if question.is_empty() { "What's the weather in Paris?".to_string() } else { question };
    println!("> {question}");
    let result = agent.run(question).await?;
    for c in &result.tool_calls {
        println!("  tool {}({}) -> {}", c.name, c.arguments, c.result);
    }
    println!("{}", result.output);
    println!(
        "[{} model requests, {} input + {} output tokens]",
        result.usage.requests, result.usage.input_tokens, result.usage.output_tokens
    );
    Ok(())
}
