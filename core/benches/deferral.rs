//! Deferral (SPEC §4) at scale: the catalog section and tool_search over 1,000 and 10,000 MCP tools
//! (goal: median under 1 ms), and the request bytes of one model request with 500 realistic MCP tools
//! deferred against eager (goal: deferred at most 5 % of eager), printed once before the timings.
//!
//!   cargo bench -p ambit-sdk --bench deferral

#[path = "support/mcp_tools.rs"]
mod mcp_tools;

use std::sync::Arc;

use ambit::deferral::catalog::{self, CatalogItem, CatalogLimits};
use ambit::deferral::{
    DeferralConfig, Entry, Facts, LoadStrategy, RunLoads, SearchIndex, SourceListing, ToolSource, Tooling, search,
};
use ambit::model::{Message, ModelRequest};
use ambit::permission::Level;
use ambit::tools::{Tool, ToolRegistry, tool_fn};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

/// A fixed MCP tool set standing in for connected servers.
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

fn tooling(n: usize, strategy: LoadStrategy) -> Tooling {
    let entries = mcp_tools::tools(n)
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let level = if i % 3 == 0 { Level::Read } else { Level::Workspace };
            let tool: Arc<dyn Tool> = Arc::new(
                tool_fn(t.exposed(), t.description.clone(), t.parameters.clone(), |_a: Value| async move {
                    Ok::<_, String>("ok".to_string())
                })
                .level(level),
            );
            Entry { tool, group: t.server.clone(), deferred: true }
        })
        .collect();
    let facts = Facts::of(&ambit::Policy::level(Level::Unrestricted));
    let config = DeferralConfig { strategy, ..Default::default() };
    Tooling::new(ToolRegistry::new(), config, Some(Arc::new(Fixed(entries))), facts)
}

/// The first request of a run: instructions, one user message, and the tools as the strategy ships them.
fn first_request(t: &Tooling) -> ModelRequest {
    let toolbox = t.toolbox();
    let instructions = "You are a helpful engineering assistant. Answer briefly.";
    let instructions = match t.catalog(&toolbox) {
        Some(c) => format!("{instructions}\n\n{c}"),
        None => instructions.to_string(),
    };
    ModelRequest {
        instructions: Some(instructions),
        messages: vec![Message::user("Which pull requests in ambit/core are waiting for my review?")],
        tools: t.request_tools(&toolbox, &RunLoads::default()),
        ..Default::default()
    }
}

fn request_bytes() {
    let body = |s: LoadStrategy| {
        let req = first_request(&tooling(500, s));
        let chat = ambit::model::openai_chat::request_body("gpt-4.1", &req, false).to_string().len();
        (chat, req.tools.len())
    };
    let (eager, eager_tools) = body(LoadStrategy::Eager);
    let (deferred, deferred_tools) = body(LoadStrategy::Append);
    println!(
        "request bytes, 500 MCP tools (Chat Completions body): eager {eager} B ({eager_tools} tools), deferred \
         {deferred} B ({deferred_tools} tools): {:.2} % of eager (goal: at most 5 %)",
        100.0 * deferred as f64 / eager as f64
    );
}

fn benches(c: &mut Criterion) {
    request_bytes();
    for n in [1_000usize, 10_000] {
        let t = tooling(n, LoadStrategy::Append);
        let defs = mcp_tools::tools(n);
        let names: Vec<String> = defs.iter().map(|d| d.exposed()).collect();
        // The section from the deferred tools (the agent renders it once per tool-set snapshot).
        let items: Vec<CatalogItem<'_>> = defs
            .iter()
            .zip(&names)
            .enumerate()
            .map(|(i, (d, name))| CatalogItem {
                name,
                group: &d.server,
                level: if i % 3 == 0 { Level::Read } else { Level::Workspace },
                description: &d.description,
            })
            .collect();
        c.bench_with_input(BenchmarkId::new("catalog_render", n), &n, |b, _| {
            b.iter(|| catalog::render_items(&items, &CatalogLimits::default()))
        });
        let index = SearchIndex::new(
            defs.iter().zip(&names).map(|(d, name)| search::Document { name, description: &d.description }),
        );
        for (label, query) in
            [("words", "list pull requests"), ("near_miss", "pul reqests"), ("exact", names[n / 2].as_str())]
        {
            c.bench_with_input(BenchmarkId::new(format!("tool_search_{label}"), n), &n, |b, _| {
                b.iter(|| index.search(query, search::MAX_RESULTS))
            });
        }
        // The whole tool call, as the model makes it: search, the policy's verdict, the result JSON.
        let tool = t.lookup("tool_search").expect("tool_search is offered");
        c.bench_with_input(BenchmarkId::new("tool_search_call", n), &n, |b, _| {
            b.iter(|| futures::executor::block_on(tool.call(json!({"query": "list pull requests"}))))
        });
        c.bench_with_input(BenchmarkId::new("search_index_build", n), &n, |b, _| {
            b.iter(|| {
                SearchIndex::new(
                    defs.iter().zip(&names).map(|(d, name)| search::Document { name, description: &d.description }),
                )
            })
        });
    }
}

criterion_group! {
    name = deferral;
    config = Criterion::default().sample_size(30);
    targets = benches
}
criterion_main!(deferral);
