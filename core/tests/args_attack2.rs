//! The argument rule under hostile schemas and arguments (found by an outside attack): deep nesting never
//! reaches the rule, a huge enum's refusal stays short, a recursive `$ref` never loops.

use ambit::tools::args::read_arguments;
use serde_json::{Value, json};

/// Arguments and schemas reach the rule as JSON text (model wire, MCP, bindings): serde_json refuses
/// nesting past 128, so 10,000 nested arrays never reach the rule.
#[test]
fn ten_thousand_nested_arrays_are_refused_by_the_parser() {
    let text = format!("{{\"x\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    let e = serde_json::from_str::<Value>(&text).unwrap_err();
    assert!(e.to_string().contains("recursion limit"), "{e}");
    let text = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    assert!(serde_json::from_str::<Value>(&text).is_err());
}

/// A 100,000-value enum: the refusal names the first values and how many more (it listed them all, 2 MB).
#[test]
fn huge_enum_refusal_is_bounded() {
    let values: Vec<String> = (0..100_000).map(|i| format!("value-number-{i}")).collect();
    let schema = json!({"type": "object", "properties": {"e": {"type": "string", "enum": values}}});
    let e = read_arguments(&schema, &[], json!({"e": "nope"})).unwrap_err();
    assert!(e.len() < 16 * 1024, "a refusal of {} bytes goes back to the model", e.len());
}

/// A local `$ref` is followed (a nested Pydantic model is checked, attack3), yet a self-referencing
/// schema never loops: a well-founded recursion reads as deep as the value goes, a value it refuses is
/// refused by its path, and a chain of `$ref`s that only points at more `$ref`s is refused by name.
#[test]
fn recursive_ref_does_not_loop() {
    let schema = json!({"type": "object", "$defs": {"n": {"$ref": "#/$defs/n"}},
        "properties": {"x": {"$ref": "#"}, "y": {"anyOf": [{"$ref": "#/$defs/n"}, {"$ref": "#"}]}}});
    let out = read_arguments(&schema, &[], json!({"x": {"x": {"x": {}}}})).unwrap();
    assert_eq!(out["x"], json!({"x": {"x": {}}}));
    let e = read_arguments(&schema, &[], json!({"x": {"x": {"x": 1}}})).unwrap_err();
    assert!(e.contains("'x.x.x' must be an object"), "{e}");
    let e = read_arguments(&schema, &[], json!({"y": [1, 2]})).unwrap_err();
    assert!(e.contains("argument 'y'") && e.contains("(a loop)"), "{e}");
}
