//! Memory (SPEC §14) on SQLite and on PostgreSQL: remember, recall, forget, list and export through the
//! public API; a key updates in place; namespaces stay apart; every bound refuses by name (and the
//! limit itself is accepted); hostile query text is only ever words; the per-turn block is the same
//! bytes for the same memories and stays within its bound; the tools exist only with memory configured;
//! a sub-agent granted `read` recalls its parent's memories and cannot write them, and one granted none
//! has no memory tools and cannot grant any.

#[path = "ledger_support/mod.rs"]
mod ledger_support;

use std::sync::{Arc, Mutex};

use ambit::agent::subagent::SubagentConfig;
use ambit::memory::{
    ManualClock, Memory, MemoryConfig, MemoryError, MemoryKind, MemoryOptions, Recall, Remember, RenderLimits, Target,
    rules,
};
use ambit::{Agent, Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolCall, Usage};
use async_trait::async_trait;
use ledger_support::{T0, TestStore, postgres_store, sqlite_store};
use serde_json::{Value, json};

async fn open(s: &TestStore, clock: &ManualClock) -> Memory {
    Memory::open_with(&s.url, MemoryOptions { clock: Arc::new(clock.clone()), ..MemoryOptions::default() })
        .await
        .unwrap_or_else(|e| panic!("{}: open failed: {e}", s.name))
}

async fn both() -> Vec<TestStore> {
    vec![sqlite_store().await, postgres_store().await]
}

fn ids(ms: &[ambit::memory::MemoryRecord]) -> Vec<i64> {
    ms.iter().map(|m| m.id).collect()
}

#[tokio::test]
async fn remember_recall_forget_list_and_export_on_both_stores() {
    for s in both().await {
        let clock = ManualClock::new(T0);
        let mem = open(&s, &clock).await;
        let a = mem
            .remember("ops", Remember::new("Deploys go out from the release branch on Tuesdays.").title("Deploy day"))
            .await
            .unwrap();
        assert!(a.created, "{}", s.name);
        assert_eq!((a.memory.kind, a.memory.salience, a.memory.pinned), (MemoryKind::Fact, 5, false));
        let b = mem
            .remember(
                "ops",
                Remember::new("Never restart the primary database during business hours.")
                    .kind(MemoryKind::Instruction)
                    .tags(["Database", "outage", "database"])
                    .salience(9),
            )
            .await
            .unwrap();
        assert_eq!(b.memory.tags, ["database", "outage"], "{}: tags normalised", s.name);
        assert_eq!(b.memory.title, "Never restart the primary database during business hours.", "derived title");
        // Another agent's namespace is apart.
        mem.remember("billing", Remember::new("Invoices are due in 30 days.")).await.unwrap();

        let hits = mem.recall("ops", &Recall::query("when do we restart databases")).await.unwrap();
        assert_eq!(ids(&hits), [b.memory.id], "{}: stemmed search", s.name);
        assert!(mem.recall("ops", &Recall::query("invoices")).await.unwrap().is_empty(), "{}: namespaces", s.name);
        let baseline = mem.recall("ops", &Recall::baseline()).await.unwrap();
        assert_eq!(ids(&baseline), [b.memory.id, a.memory.id], "{}: salience first", s.name);
        let by_tag = mem.recall("ops", &Recall::baseline().tags(["OUTAGE"])).await.unwrap();
        assert_eq!(ids(&by_tag), [b.memory.id], "{}", s.name);
        let by_kind = mem.recall("ops", &Recall::baseline().kind(MemoryKind::Fact)).await.unwrap();
        assert_eq!(ids(&by_kind), [a.memory.id], "{}", s.name);
        // A tag filter is a whole tag, not a substring of one.
        assert!(mem.recall("ops", &Recall::baseline().tags(["data"])).await.unwrap().is_empty(), "{}", s.name);

        let list = mem.list("ops").await.unwrap();
        assert_eq!(ids(&list), [a.memory.id, b.memory.id], "{}: oldest first", s.name);
        let export: Value = serde_json::from_str(&mem.export_json(Some("ops")).await.unwrap()).unwrap();
        assert_eq!(export["version"], 1);
        assert_eq!(export["memories"].as_array().unwrap().len(), 2);
        assert_eq!(export["memories"][1]["kind"], "instruction");
        let all: Value = serde_json::from_str(&mem.export_json(None).await.unwrap()).unwrap();
        assert_eq!(all["memories"].as_array().unwrap().len(), 3);

        assert!(mem.forget("ops", &Target::Id(a.memory.id)).await.unwrap());
        assert!(!mem.forget("ops", &Target::Id(a.memory.id)).await.unwrap(), "{}: gone", s.name);
        assert!(!mem.forget("billing", &Target::Id(b.memory.id)).await.unwrap(), "{}: not another agent's", s.name);
        assert!(mem.recall("ops", &Recall::query("release branch tuesdays")).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_key_updates_in_place_keeping_what_was_not_given() {
    for s in both().await {
        let clock = ManualClock::new(T0);
        let mem = open(&s, &clock).await;
        let first = mem
            .remember(
                "desk",
                Remember::new("Acme wants invoices as PDF.")
                    .key("acme-format")
                    .subject("org:acme")
                    .kind(MemoryKind::Preference)
                    .salience(7)
                    .tags(["invoices"]),
            )
            .await
            .unwrap();
        clock.advance(std::time::Duration::from_secs(60));
        let second = mem
            .remember(
                "desk",
                Remember {
                    key: Some("acme-format".into()),
                    body: Some("Acme wants invoices as CSV.".into()),
                    ..Remember::default()
                },
            )
            .await
            .unwrap();
        assert!(!second.created, "{}", s.name);
        let m = &second.memory;
        assert_eq!(m.id, first.memory.id, "{}: same memory", s.name);
        assert_eq!((m.body.as_str(), m.salience, m.kind), ("Acme wants invoices as CSV.", 7, MemoryKind::Preference));
        assert_eq!((m.created_at, m.updated_at), (T0, T0 + 60_000), "{}", s.name);
        assert_eq!(m.subject.as_deref(), Some("org:acme"));
        assert_eq!(mem.list("desk").await.unwrap().len(), 1, "{}: updated, not added", s.name);
        // The same key in another namespace is another memory.
        assert!(mem.remember("other", Remember::new("x").key("acme-format")).await.unwrap().created);
        // Caller context: by subject.
        mem.remember("desk", Remember::new("Globex prefers email.").subject("org:globex")).await.unwrap();
        let acme = mem.recall("desk", &Recall::baseline().subjects(["org:acme"])).await.unwrap();
        assert_eq!(ids(&acme), [m.id], "{}", s.name);
        assert!(mem.forget("desk", &Target::Key("acme-format".into())).await.unwrap());
        // A key that names nothing needs a body to create.
        let e =
            mem.remember("desk", Remember { key: Some("new".into()), salience: Some(3), ..Remember::default() }).await;
        assert_eq!(e.unwrap_err().field(), Some("body"), "{}", s.name);
    }
}

#[tokio::test]
async fn two_first_saves_under_one_key_make_one_memory() {
    for s in both().await {
        let clock = ManualClock::new(T0);
        let mem = open(&s, &clock).await;
        let saves = (0..8).map(|i| {
            let mem = mem.clone();
            tokio::spawn(async move { mem.remember("race", Remember::new(format!("v{i}")).key("k")).await })
        });
        let mut created = 0;
        for h in saves {
            created += usize::from(h.await.unwrap().unwrap_or_else(|e| panic!("save failed: {e}")).created);
        }
        assert_eq!(created, 1, "{}", s.name);
        assert_eq!(mem.list("race").await.unwrap().len(), 1, "{}", s.name);
    }
}

#[tokio::test]
async fn every_bound_refuses_by_name_and_the_limit_itself_is_accepted() {
    let s = sqlite_store().await;
    let mem = open(&s, &ManualClock::new(T0)).await;
    let at = |n: usize| "x".repeat(n);
    let cases: Vec<(&str, Remember, usize)> = vec![
        ("title", Remember::new("b").title(at(rules::MAX_TITLE_BYTES + 1)), rules::MAX_TITLE_BYTES),
        ("body", Remember::new(at(rules::MAX_BODY_BYTES + 1)), rules::MAX_BODY_BYTES),
        ("key", Remember::new("b").key(at(rules::MAX_KEY_BYTES + 1)), rules::MAX_KEY_BYTES),
        ("subject", Remember::new("b").subject(at(rules::MAX_SUBJECT_BYTES + 1)), rules::MAX_SUBJECT_BYTES),
        ("source", Remember::new("b").source(at(rules::MAX_SOURCE_BYTES + 1)), rules::MAX_SOURCE_BYTES),
        ("tags", Remember::new("b").tags([at(rules::MAX_TAG_BYTES + 1)]), rules::MAX_TAG_BYTES),
    ];
    for (field, m, limit) in cases {
        let e = mem.remember("a", m).await.unwrap_err();
        assert_eq!(e.field(), Some(field), "{e}");
        assert_eq!(e.code(), "memory_invalid_argument");
        assert!(e.to_string().contains(&limit.to_string()), "the refusal gives the limit: {e}");
    }
    // Negative control: exactly at every limit is accepted.
    let full = Remember::new(at(rules::MAX_BODY_BYTES))
        .title(at(rules::MAX_TITLE_BYTES))
        .key(at(rules::MAX_KEY_BYTES))
        .subject(at(rules::MAX_SUBJECT_BYTES))
        .source(at(rules::MAX_SOURCE_BYTES))
        .tags((0..rules::MAX_TAGS).map(|i| format!("{i}{}", at(rules::MAX_TAG_BYTES - 2))))
        .salience(rules::MAX_SALIENCE);
    mem.remember("a", full).await.unwrap();
    let too_many = Remember::new("b").tags((0..=rules::MAX_TAGS).map(|i| format!("t{i}")));
    assert_eq!(mem.remember("a", too_many).await.unwrap_err().field(), Some("tags"));
    for bad in [0, 11, -1] {
        assert_eq!(mem.remember("a", Remember::new("b").salience(bad)).await.unwrap_err().field(), Some("salience"));
    }
    assert_eq!(
        mem.remember(&at(rules::MAX_AGENT_BYTES + 1), Remember::new("b")).await.unwrap_err().field(),
        Some("agent")
    );
    assert_eq!(mem.remember(" ", Remember::new("b")).await.unwrap_err().field(), Some("agent"));
    assert_eq!(mem.remember("a", Remember::new("b").title("a\u{0}b")).await.unwrap_err().field(), Some("title"));
    assert_eq!(mem.remember("a", Remember::new("b").tags(["a|b"])).await.unwrap_err().field(), Some("tags"));
    for bad in [0, rules::MAX_RECALL + 1] {
        assert_eq!(mem.recall("a", &Recall::baseline().limit(bad)).await.unwrap_err().field(), Some("limit"));
    }
    assert_eq!(mem.recall("a", &Recall::baseline().limit(rules::MAX_RECALL)).await.unwrap().len(), 1);
    let long_query = Recall::query(at(rules::MAX_QUERY_BYTES + 1));
    assert_eq!(mem.recall("a", &long_query).await.unwrap_err().field(), Some("query"));
    let e = mem.remember_json("a", &json!({"body": "b", "colour": "red"})).await.unwrap_err();
    assert_eq!(e.field(), Some("colour"), "unknown fields are refused by their name: {e}");
    let e = mem.recall_json("a", &json!({"kind": "rumour"})).await.unwrap_err();
    assert_eq!(e.field(), Some("kind"), "{e}");
    // Numbers out of range or negative name their field, never the whole memory, never the default.
    let huge = serde_json::Value::Number(serde_json::Number::from_f64(2f64.powi(80)).unwrap());
    let e = mem.remember_json("a", &json!({"body": "b", "salience": huge})).await.unwrap_err();
    assert_eq!(e.field(), Some("salience"), "{e}");
    assert!(e.to_string().contains("64-bit range"), "{e}");
    for limit in [json!(-1), json!(2.5), json!("10")] {
        let e = mem.recall_json("a", &json!({"limit": limit})).await.unwrap_err();
        assert_eq!(e.field(), Some("limit"), "{limit}: {e}");
    }
    // Control: a good limit in the same JSON form is taken.
    assert_eq!(mem.recall_json("a", &json!({"limit": 1})).await.unwrap().len(), 1);
    // A non-object names the whole.
    let e = mem.recall_json("a", &json!([1])).await.unwrap_err();
    assert_eq!(e.field(), Some("recall"), "{e}");
    assert!(matches!(Memory::open("mysql://x").await, Err(MemoryError::InvalidArgument { .. })));
}

#[tokio::test]
async fn hostile_query_text_is_only_words_on_both_stores() {
    for s in both().await {
        let mem = open(&s, &ManualClock::new(T0)).await;
        mem.remember("a", Remember::new("The NEAR operator and quotes \"x\" in a body.").title("ops' notes"))
            .await
            .unwrap();
        for q in [
            "\"",
            "'",
            "NEAR(a b)",
            "a* OR",
            "title:ops",
            "') OR 1=1 --",
            "!(&|:*)",
            "\\",
            "^ops",
            "ops' notes",
            "-",
            "AND OR NOT",
            "{title}: ops",
            "ö ü 日本語",
        ] {
            let r = mem.recall("a", &Recall::query(q)).await;
            assert!(r.is_ok(), "{}: query {q:?} failed: {r:?}", s.name);
        }
        assert_eq!(mem.recall("a", &Recall::query("') OR notes --")).await.unwrap().len(), 1, "{}", s.name);
        // Stop words alone are no query at all.
        assert!(mem.recall("a", &Recall::query("the and of")).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn memories_outlive_the_handle_and_migrations_apply_once() {
    for s in both().await {
        let clock = ManualClock::new(T0);
        let saved =
            open(&s, &clock).await.remember("a", Remember::new("The VPN config lives in ops/vpn.")).await.unwrap();
        // A second open (a later process) finds the memory and applies nothing twice.
        let again = open(&s, &clock).await;
        let hits = again.recall("a", &Recall::query("where is the vpn configuration")).await.unwrap();
        assert_eq!(ids(&hits), [saved.memory.id], "{}", s.name);
    }
}

#[tokio::test]
async fn ties_break_the_same_way_on_both_stores() {
    let mut orders = Vec::new();
    for s in both().await {
        let mem = open(&s, &ManualClock::new(T0)).await;
        // Six memories the query matches equally (the same words), told apart only by the tiebreak:
        // pinned, then salience, then the later update, then the higher id.
        for (i, (salience, pinned)) in
            [(5, false), (7, false), (5, true), (7, false), (5, false), (1, true)].iter().enumerate()
        {
            let m = Remember::new("rotate the signing keys").title("Key rotation").salience(*salience).pinned(*pinned);
            let saved = mem.remember("a", m.key(format!("k{i}"))).await.unwrap();
            assert_eq!(saved.memory.id, i as i64 + 1);
        }
        let q = ids(&mem.recall("a", &Recall::query("signing key rotation")).await.unwrap());
        let b = ids(&mem.recall("a", &Recall::baseline()).await.unwrap());
        assert_eq!(q, [3, 6, 4, 2, 5, 1], "{}: the tiebreak", s.name);
        assert_eq!(q, b, "{}: a full tie is the baseline order", s.name);
        orders.push(q);
    }
    assert_eq!(orders[0], orders[1]);
}

fn record(id: i64, salience: u8, pinned: bool, body: &str) -> ambit::memory::MemoryRecord {
    ambit::memory::MemoryRecord {
        id,
        agent: "a".into(),
        key: None,
        subject: None,
        kind: MemoryKind::Lesson,
        title: format!("Lesson {id}"),
        body: body.into(),
        tags: vec!["t".into()],
        salience,
        pinned,
        source: None,
        created_at: T0,
        updated_at: T0 + id,
    }
}

#[tokio::test]
async fn the_baseline_block_is_bounded_and_the_same_bytes_for_the_same_memories() {
    let limits = RenderLimits { entries: 20, ..RenderLimits::default() };
    let big: Vec<_> = (1..=60).map(|i| record(i, 5, i % 7 == 0, &"word ".repeat(2_000))).collect();
    let block = rules::render_baseline(&big[..limits.entries + 1], &limits).unwrap();
    assert!(block.len() <= limits.max_bytes, "{} bytes", block.len());
    assert!(block.ends_with("more memories are stored: memory_recall reaches them)"), "{block}");
    assert!(block.contains('…'), "bodies are clipped");
    // Negative control: without the byte bound the same memories would not fit.
    let unbounded = RenderLimits { max_bytes: usize::MAX, ..limits };
    assert!(rules::render_baseline(&big[..limits.entries], &unbounded).unwrap().len() > limits.max_bytes);

    // Through the store: the same memories give the same bytes from both stores and from two opens.
    let limits = RenderLimits::default();
    let mut blocks = Vec::new();
    for s in both().await {
        let mem = open(&s, &ManualClock::new(T0)).await;
        for i in 0..30 {
            let m = Remember::new(format!("Body of memory {i}, with details.\nSecond line."))
                .title(format!("Memory {i}"))
                .salience(1 + (i * 7) % 10)
                .pinned(i % 11 == 0)
                .tags([format!("t{}", i % 3)]);
            mem.remember("a", m).await.unwrap();
        }
        mem.remember("a", Remember::new("about a caller").subject("org:x").salience(10).pinned(true)).await.unwrap();
        let one = mem.render_baseline("a", &limits).await.unwrap().unwrap();
        let two = open(&s, &ManualClock::new(T0)).await.render_baseline("a", &limits).await.unwrap().unwrap();
        assert_eq!(one, two, "{}", s.name);
        assert!(!one.contains("about a caller"), "caller preferences stay out of the baseline");
        assert_eq!(one.lines().filter(|l| l.starts_with("- #")).count(), limits.entries, "{one}");
        blocks.push(one);
    }
    assert_eq!(blocks[0], blocks[1], "both stores render the same bytes");
    assert!(blocks[0].starts_with("# Memory\n"), "{}", blocks[0]);
    let first = blocks[0].lines().nth(2).unwrap();
    assert!(first.starts_with("- #12 [fact, salience 8, pinned, tags: t2] Memory 11:"), "pinned first: {first}");
}

/// The script: the answer to a request, given it and how many came before it.
type Answer = Box<dyn Fn(&ModelRequest, usize) -> ModelResponse + Send + Sync>;

/// A model that answers from a script by turn and keeps every request.
struct Scripted {
    seen: Mutex<Vec<ModelRequest>>,
    answer: Answer,
}

impl Scripted {
    fn new(answer: impl Fn(&ModelRequest, usize) -> ModelResponse + Send + Sync + 'static) -> Arc<Scripted> {
        Arc::new(Scripted { seen: Mutex::new(Vec::new()), answer: Box::new(answer) })
    }
    fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl Model for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let n = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(request.clone());
            seen.len() - 1
        };
        Ok((self.answer)(request, n))
    }
}

fn reply(text: Option<&str>, calls: Vec<(&str, &str, Value)>) -> ModelResponse {
    let tool_calls: Vec<ToolCall> = calls
        .into_iter()
        .map(|(id, name, args)| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
            from_text: false,
        })
        .collect();
    let stop = if tool_calls.is_empty() { StopReason::End } else { StopReason::ToolCalls };
    ModelResponse { id: "r".into(), text: text.map(str::to_string), tool_calls, stop, usage: Usage::default() }
}

fn tool_results(r: &ModelRequest) -> Vec<String> {
    r.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

fn first_user(r: &ModelRequest) -> String {
    r.messages
        .iter()
        .find_map(|m| match m {
            Message::User { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_tools_exist_only_with_memory_and_the_block_follows_the_instructions() {
    let none = Agent::builder().model_arc(Scripted::new(|_, _| reply(Some("ok"), vec![]))).build().unwrap();
    assert!(none.tools().iter().all(|t| !t.spec().name.starts_with("memory_")), "no memory, no memory tools");

    let s = sqlite_store().await;
    let mem = open(&s, &ManualClock::new(T0)).await;
    mem.remember("bot", Remember::new("Answer in French.").kind(MemoryKind::Instruction).pinned(true)).await.unwrap();
    let model = Scripted::new(|_, n| match n {
        0 => reply(
            None,
            vec![
                (
                    "1",
                    "memory_remember",
                    json!({"title": "Office", "body": "The office moved to Lyon.", "tags": "office", "salience": 8}),
                ),
                ("3", "memory_remember", json!({"body": "x", "salience": "8"})),
                ("4", "memory_forget", json!({"id": 999})),
            ],
        ),
        // The calls of one turn run in parallel: the recall comes a turn later.
        1 => reply(None, vec![("2", "memory_recall", json!({"query": "where is the office"}))]),
        _ => reply(Some("ok"), vec![]),
    });
    let agent = Agent::builder()
        .model_arc(model.clone())
        .instructions("You help.")
        .memory(MemoryConfig::new(mem.clone(), "bot").unwrap())
        .build()
        .unwrap();
    let mut names: Vec<String> = agent.tools().iter().map(|t| t.spec().name.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        ["memory_caller_context", "memory_forget", "memory_recall", "memory_record_preference", "memory_remember"]
    );
    for t in agent.tools().iter() {
        assert_eq!(t.spec().parameters["additionalProperties"], false, "{}: closed schema", t.spec().name);
    }
    agent.run("hi").await.unwrap();
    let requests = model.requests();
    let first = requests[0].instructions.clone().unwrap();
    assert!(first.starts_with("You help.\n\n# Memory\n"), "{first}");
    assert!(first.contains("Answer in French."), "{first}");
    let results = tool_results(&requests[2]);
    assert!(results[0].starts_with("Saved memory #2"), "{results:?}");
    assert!(results[1].contains("argument 'salience' must be an integer"), "refused by name: {results:?}");
    assert!(results[2].contains("memory_not_found"), "{results:?}");
    assert!(results[3].contains("The office moved to Lyon."), "{results:?}");
    // The second request of the run already sees the new memory in its block.
    assert!(requests[1].instructions.as_deref().unwrap().contains("The office moved to Lyon."));
}

#[tokio::test]
async fn a_sub_agent_recalls_with_read_and_never_writes_and_one_with_none_cannot_grant() {
    let s = sqlite_store().await;
    let mem = open(&s, &ManualClock::new(T0)).await;
    mem.remember("boss", Remember::new("The staging password rotates monthly.").title("Staging")).await.unwrap();
    let model = Scripted::new(|r, _| {
        let results = tool_results(r);
        match (first_user(r).as_str(), results.len()) {
            ("parent", 0) => reply(
                None,
                vec![
                    ("a", "agent_spawn", json!({"prompt": "reader", "memory": "read"})),
                    ("b", "agent_spawn", json!({"prompt": "blind"})),
                ],
            ),
            ("reader", 0) => reply(
                None,
                vec![
                    ("1", "memory_recall", json!({"query": "staging password"})),
                    ("2", "memory_remember", json!({"body": "sneaky"})),
                    ("3", "memory_forget", json!({"id": 1})),
                ],
            ),
            ("blind", 0) => reply(
                None,
                vec![
                    ("1", "memory_recall", json!({"query": "staging"})),
                    ("2", "agent_spawn", json!({"prompt": "grandchild", "memory": "read"})),
                ],
            ),
            (who, _) => reply(Some(&format!("{who}: {}", results.join(" || "))), vec![]),
        }
    });
    let agent = Agent::builder()
        .model_arc(model.clone())
        .memory(MemoryConfig::new(mem.clone(), "boss").unwrap())
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    let out = agent.run("parent").await.unwrap();
    let requests = model.requests();
    let tools_of = |who: &str| -> Vec<String> {
        let r = requests.iter().find(|r| first_user(r) == who).unwrap();
        r.tools.iter().map(|t| t.name.clone()).filter(|n| n.starts_with("memory_")).collect()
    };
    assert_eq!(tools_of("reader"), ["memory_recall", "memory_caller_context"], "read: only the reading tools");
    assert!(tools_of("blind").is_empty(), "none: no memory tools");
    let reader = requests.iter().find(|r| first_user(r) == "reader").unwrap();
    assert!(reader.instructions.as_deref().unwrap_or("").contains("The staging password rotates monthly."));
    let blind = requests.iter().find(|r| first_user(r) == "blind").unwrap();
    assert!(!blind.instructions.as_deref().unwrap_or("").contains("staging password"), "no block without a grant");

    let final_text = out.output;
    assert!(final_text.contains("The staging password rotates monthly."), "{final_text}");
    // The write tools do not exist for the reader: the calls are refused as unknown tools.
    assert_eq!(mem.list("boss").await.unwrap().len(), 1, "nothing written: {final_text}");
    assert!(final_text.contains("memory 'read' cannot be granted: you hold memory 'none'"), "{final_text}");
    // Negative control: the parent itself can write.
    assert!(agent.tools().get("memory_remember").is_some());
}

/// SPEC §2: a negative where a count is asked for is refused by name rather than replaced by the
/// default. The memory tools hold to it even on a call that skips the loop's argument rule (a host
/// calling `Tool::call` itself): a limit of -1 was read as the default 10.
#[tokio::test]
async fn the_memory_tools_refuse_a_negative_limit_and_out_of_range_integers_by_name() {
    let s = sqlite_store().await;
    let mem = open(&s, &ManualClock::new(T0)).await;
    mem.remember("bot", Remember::new("one")).await.unwrap();
    mem.remember("bot", Remember::new("two")).await.unwrap();
    let agent = Agent::builder()
        .model_arc(Scripted::new(|_, _| reply(Some("ok"), vec![])))
        .memory(MemoryConfig::new(mem.clone(), "bot").unwrap())
        .build()
        .unwrap();
    let tool = |name: &str| agent.tools().get(name).unwrap().clone();
    let huge = Value::Number(serde_json::Number::from_f64(2f64.powi(70)).unwrap());
    for (name, args, field) in [
        ("memory_recall", json!({"limit": -1}), "limit"),
        ("memory_recall", json!({"limit": 1.5}), "limit"),
        ("memory_caller_context", json!({"subjects": ["org:a"], "limit": -5}), "limit"),
        ("memory_remember", json!({"body": "b", "salience": huge.clone()}), "salience"),
        ("memory_forget", json!({"id": huge.clone()}), "id"),
    ] {
        let e = tool(name).call(args.clone()).await.unwrap_err().to_string();
        assert!(e.contains(&format!("invalid memory argument '{field}'")), "{name} {args}: {e}");
    }
    // Control: a limit of 1 is taken (one memory of two), and no limit is the default.
    let one = tool("memory_recall").call(json!({"limit": 1})).await.unwrap();
    assert_eq!(one.as_str().unwrap().lines().count(), 1, "{one}");
    let all = tool("memory_recall").call(json!({})).await.unwrap();
    assert_eq!(all.as_str().unwrap().lines().count(), 2, "{all}");
}
