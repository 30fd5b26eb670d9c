//! Property tests of the gate: generated (policy, tool, arguments) cases. No tool body ever runs above
//! the session's level, when blocked, unapproved, outside its scope, or with an argument the rule
//! refuses; and a call the rules allow always runs.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::gate::{GateOutcome, Session, run_call};
use crate::error::ToolError;
use crate::permission::decision::{CallDecision, SessionFacts, ToolFacts, decide};
use crate::permission::{ApprovalDecision, ApprovalHandler, ApprovalRequest, Filters, Level, Policy, Scope};
use crate::tools::{Tool, ToolSpec};

/// xorshift64*: small, seeded, reproducible.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(crate) fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const PROPS: [(&str, &str); 7] = [
    ("s", r#"{"type": "string"}"#),
    ("t", r#"{"type": "string"}"#),
    ("l", r#"{"type": "array", "items": {"type": "string"}}"#),
    ("b", r#"{"type": "boolean"}"#),
    ("n", r#"{"type": "integer", "minimum": 0}"#),
    ("i", r#"{"type": "integer"}"#),
    ("o", r#"{"type": "object", "additionalProperties": {"type": "string"}}"#),
];

fn value_pool() -> Vec<Value> {
    vec![
        json!(""),
        json!("   "),
        json!("x"),
        json!("true"),
        json!("2"),
        json!("{\"a\":\"b\"}"),
        json!(2),
        json!(2.0),
        json!(2.5),
        json!(-1),
        json!(-1.0),
        json!(0),
        json!(true),
        json!(false),
        Value::Null,
        json!([]),
        json!(["a", "", " ", "b"]),
        json!(["a", 3]),
        json!({"a": "b"}),
        json!({"a": 1}),
        json!(1e300),
    ]
}

fn valid(name: &str, rng: &mut Rng) -> Value {
    match name {
        "s" | "t" => json!(*rng.pick(&["x", "path/to", " y "])),
        "l" => rng.pick(&[json!(["a"]), json!("a"), json!(["a", ""])]).clone(),
        "b" => json!(rng.chance(2)),
        "n" => rng.pick(&[json!(0), json!(3), json!(2.0)]).clone(),
        "i" => rng.pick(&[json!(-4), json!(7)]).clone(),
        _ => json!({"k": "v"}),
    }
}

/// A tool whose body records the arguments it ran with.
struct Recorder {
    spec: ToolSpec,
    ran: Mutex<Vec<Value>>,
}

#[async_trait]
impl Tool for Recorder {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.ran.lock().unwrap().push(arguments);
        Ok(Value::String("ok".into()))
    }
}

/// Answers with a fixed decision and counts the questions.
struct Fixed(ApprovalDecision, Mutex<usize>);

#[async_trait]
impl ApprovalHandler for Fixed {
    async fn decide(&self, _: &ApprovalRequest) -> Result<ApprovalDecision, String> {
        *self.1.lock().unwrap() += 1;
        Ok(self.0.clone())
    }
}

/// Whether `args` satisfies the rule for `schema`, strictly: what a tool body may rely on.
fn satisfies(schema: &Value, allow_blank: &[String], args: &Value) -> Result<(), String> {
    let obj = args.as_object().ok_or("not an object")?;
    for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if !obj.contains_key(r) {
            return Err(format!("required {r} missing"));
        }
    }
    for (k, v) in obj {
        let Some(prop) = schema["properties"].get(k) else { continue };
        let ok = match prop["type"].as_str().unwrap() {
            "string" => v.as_str().is_some_and(|s| !s.trim().is_empty() || allow_blank.contains(k)),
            "array" => v.as_array().is_some_and(|a| a.iter().all(|i| i.as_str().is_some_and(|s| !s.trim().is_empty()))),
            "boolean" => v.is_boolean(),
            "integer" => v.as_i64().is_some_and(|n| prop.get("minimum").is_none() || n >= 0),
            "object" => v.as_object().is_some_and(|o| o.values().all(Value::is_string)),
            _ => true,
        };
        if !ok {
            return Err(format!("{k} = {v} breaks the rule for {prop}"));
        }
    }
    Ok(())
}

fn random_case(rng: &mut Rng, pool: &[Value]) -> (Policy, Arc<Recorder>, Value, Option<ApprovalDecision>) {
    let level = *rng.pick(&[Level::None, Level::Read, Level::Workspace, Level::Unrestricted, Level::Unrestricted]);
    let mut filters = Filters::default();
    match rng.below(5) {
        0 => filters.allow = Some(["tool".to_string()].into()),
        1 => filters.allow = Some(["other".to_string()].into()),
        2 => {
            filters.block.insert("tool".into());
        }
        _ => {}
    }
    if rng.chance(4) {
        filters.overrides.insert("tool".into(), *rng.pick(&Level::ALL));
    }
    let mut props = Map::new();
    let mut required = Vec::new();
    let mut strings = Vec::new();
    for (name, schema) in PROPS {
        if rng.chance(2) {
            props.insert(name.into(), serde_json::from_str(schema).unwrap());
            if rng.chance(4) {
                required.push(json!(name));
            }
            if schema.contains("\"string\"}") && !schema.contains("array") {
                strings.push(name.to_string());
            }
        }
    }
    let schema = json!({"type": "object", "properties": props, "required": required});
    let allow_blank: Vec<String> = strings.into_iter().filter(|_| rng.chance(3)).collect();
    let mut spec = ToolSpec::new("tool", "generated", schema).with_allow_blank(allow_blank);
    if !rng.chance(5) {
        spec = spec.with_level(*rng.pick(&Level::ALL));
    }
    spec = spec.with_requires_approval(rng.chance(4));
    let mut args = Map::new();
    for (name, _) in PROPS {
        if rng.chance(2) {
            // Mostly a value of the right type (so calls get far enough to run), often a tricky one.
            let v = if rng.chance(4) { rng.pick(pool).clone() } else { valid(name, rng) };
            args.insert(name.into(), v);
        }
    }
    if rng.chance(8) {
        args.insert("extra".into(), rng.pick(pool).clone());
    }
    let args = if rng.chance(50) { rng.pick(pool).clone() } else { Value::Object(args) };
    let answer = match rng.below(4) {
        0 => None,
        1 => Some(ApprovalDecision::Approve),
        2 => Some(ApprovalDecision::Deny { reason: "no".into() }),
        _ => {
            let mut revised = Map::new();
            for (name, _) in PROPS {
                if rng.chance(2) {
                    revised.insert(name.into(), rng.pick(pool).clone());
                }
            }
            Some(ApprovalDecision::Revise { arguments: Value::Object(revised) })
        }
    };
    let mut policy = Policy::level(level);
    policy.filters = filters;
    let tool = Arc::new(Recorder { spec, ran: Mutex::new(Vec::new()) });
    (policy, tool, args, answer)
}

/// At least 100,000 generated cases per run.
#[tokio::test(flavor = "current_thread")]
async fn no_tool_body_runs_outside_the_rules() {
    let pool = value_pool();
    let mut rng = Rng::new(0x5eed_a3b1_7c00_0001);
    let scope = Scope::current_dir().unwrap();
    let cases = 120_000;
    let (mut ran, mut refused, mut denied) = (0, 0, 0);
    for case in 0..cases {
        let (mut policy, tool, args, answer) = random_case(&mut rng, &pool);
        let handler = answer.clone().map(|a| Arc::new(Fixed(a, Mutex::new(0))));
        if let Some(h) = &handler {
            policy.approvals = Some(h.clone());
        }
        policy.scope = Some(scope.clone());
        let session = Session::new(policy.clone()).unwrap();
        let outcome = run_call(&session, tool.as_ref(), "c", args.clone(), |_| {}, || {}).await;
        let bodies = tool.ran.lock().unwrap().clone();
        let facts = ToolFacts {
            name: "tool",
            declared_level: tool.level(),
            requires_approval: tool.requires_approval(),
            needs_network: false,
        };
        let session = SessionFacts {
            level: policy.level,
            approvals: handler.is_some(),
            filters: &policy.filters,
            network: policy.network,
        };
        let decision = decide(facts, session);
        let effective = policy.filters.effective_level("tool", tool.level());
        let asked = handler.as_ref().map_or(0, |h| *h.1.lock().unwrap());
        let ctx = format!("case {case}: level {} tool {effective} answer {answer:?} args {args}", policy.level);
        match &outcome {
            GateOutcome::Ran { arguments, .. } => {
                ran += 1;
                assert_eq!(bodies.len(), 1, "{ctx}");
                assert!(!policy.filters.is_blocked("tool"), "ran while blocked: {ctx}");
                assert!(policy.level != Level::None, "ran at none: {ctx}");
                if effective > policy.level || tool.requires_approval() {
                    assert_eq!(asked, 1, "ran above level or unapproved without asking: {ctx}");
                    assert!(
                        matches!(answer, Some(ApprovalDecision::Approve | ApprovalDecision::Revise { .. })),
                        "ran without an approval: {ctx}"
                    );
                }
                satisfies(&tool.spec.parameters, &tool.spec.allow_blank, arguments)
                    .unwrap_or_else(|e| panic!("{e}: {ctx}"));
                assert_eq!(&bodies[0], arguments, "{ctx}");
            }
            GateOutcome::Refused { message } => {
                refused += 1;
                assert!(bodies.is_empty(), "refused but ran: {ctx}");
                assert!(message.contains("'tool'"), "a refusal names the tool: {message}");
            }
            GateOutcome::Parked { .. } => panic!("no handler here answers later: {ctx}"),
            GateOutcome::Denied { .. } => {
                denied += 1;
                assert!(bodies.is_empty(), "denied but ran: {ctx}");
                assert!(matches!(answer, Some(ApprovalDecision::Deny { .. })), "{ctx}");
            }
        }
        // Liveness: a call the rules allow, with arguments the rule accepts, runs.
        if decision == CallDecision::Run
            && crate::tools::args::read_arguments(&tool.spec.parameters, &tool.spec.allow_blank, args.clone()).is_ok()
        {
            assert!(matches!(outcome, GateOutcome::Ran { .. }), "an allowed call did not run: {ctx}");
        }
    }
    println!("{cases} generated cases: {ran} ran, {refused} refused, {denied} denied");
    assert!(
        ran > 10_000 && refused > 10_000 && denied > 1_000,
        "the generator covers every outcome: {ran} {refused} {denied}"
    );
}
