//! SPEC §4's goal for deferral, checked on every test run: one model request with 500 realistic MCP
//! tools deferred is at most 5 % of the bytes of the same request with all of them eager (the numbers
//! are printed by `cargo bench -p ambit-sdk --bench deferral`). Byte counts, not timings.

#[path = "../benches/support/mcp_tools.rs"]
mod mcp_tools;

use std::sync::Arc;

use ambit::deferral::{DeferralConfig, Entry, Facts, LoadStrategy, RunLoads, SourceListing, ToolSource, Tooling};
use ambit::model::{Message, ModelRequest};
use ambit::permission::Level;
use ambit::tools::{Tool, ToolRegistry, tool_fn};
use serde_json::Value;

struct Fixed(Vec<Entry>);

#[async_trait::async_trait]
impl ToolSource for Fixed {
    async fn refresh(&self) -> bool {
        false
    }
    fn listing(&self) -> SourceListing {
        SourceListing { entries: self.0.clone(), ..Default::default() }
    }
}

fn first_request(n: usize, strategy: LoadStrategy, loaded: &[String]) -> ModelRequest {
    let entries = mcp_tools::tools(n)
        .into_iter()
        .map(|t| {
            let tool: Arc<dyn Tool> = Arc::new(
                tool_fn(t.exposed(), t.description.clone(), t.parameters.clone(), |_a: Value| async move {
                    Ok::<_, String>("ok".to_string())
                })
                .level(Level::Read),
            );
            Entry { tool, group: t.server.clone(), deferred: true }
        })
        .collect();
    let facts = Facts::of(&ambit::Policy::level(Level::Unrestricted));
    let config = DeferralConfig { strategy, ..Default::default() };
    let t = Tooling::new(ToolRegistry::new(), config, Some(Arc::new(Fixed(entries))), facts);
    let toolbox = t.toolbox();
    let mut loads = RunLoads::default();
    for name in loaded {
        loads.load(name);
    }
    let instructions = "You are a helpful engineering assistant.";
    ModelRequest {
        instructions: Some(match t.catalog(&toolbox) {
            Some(c) => format!("{instructions}\n\n{c}"),
            None => instructions.to_string(),
        }),
        messages: vec![Message::user("Which pull requests wait for my review?")],
        tools: t.request_tools(&toolbox, &loads),
        ..Default::default()
    }
}

fn bytes(req: &ModelRequest) -> usize {
    ambit::model::openai_chat::request_body("gpt-4.1", req, false).to_string().len()
}

#[test]
fn five_hundred_deferred_mcp_tools_cost_at_most_five_percent_of_eager() {
    let eager = first_request(500, LoadStrategy::Eager, &[]);
    let deferred = first_request(500, LoadStrategy::Append, &[]);
    assert_eq!(eager.tools.len(), 500);
    assert_eq!(deferred.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["tool_search", "tool_load"]);
    let (e, d) = (bytes(&eager), bytes(&deferred));
    assert!(d * 100 <= e * 5, "deferred {d} B is more than 5 % of eager {e} B");
    // The catalog is bounded: 200 names, then counts.
    let catalog = deferred.instructions.as_deref().unwrap();
    assert_eq!(catalog.matches("\n- mcp__").count(), 200, "{catalog}");
    assert!(catalog.ends_with("more tools not listed; tool_search finds them.)\n"), "{catalog}");
    // Ten loaded tools add their schemas, nothing else.
    let loaded: Vec<String> = mcp_tools::tools(10).iter().map(|t| t.exposed()).collect();
    let after = first_request(500, LoadStrategy::Append, &loaded);
    assert_eq!(after.tools.len(), 12);
    assert_eq!(after.instructions, deferred.instructions);
}
