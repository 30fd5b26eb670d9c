//! A walk over every built-in tool's schema (SPEC §2): every integer parameter declares its minimum, so
//! a negative count is refused and never replaced by a default; and for every argument, at every depth,
//! a value of the wrong kind (or outside its `enum`) is refused by the argument rule in words that name
//! the argument as the schema spells it. Blank entries of a list of strings are dropped.

use serde_json::{Value, json};

use crate::tools::ToolSpec;
use crate::tools::args::read_arguments;

/// Every built-in's spec, whatever configuration registers it.
fn every_builtin() -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = super::NAMES
        .iter()
        .chain(&["conversation_search", "conversation_read", "context_check", "context_compact", "escalate_to_human"])
        .map(|n| super::by_name(n).unwrap_or_else(|| panic!("no built-in {n}")).spec().clone())
        .collect();
    let registered = crate::agent::checklist::tools()
        .into_iter()
        .chain(crate::agent::background::tools())
        .chain(crate::agent::scratchpad::tools());
    specs.extend(registered.map(|t| t.spec().clone()));
    specs.extend(crate::agent::subagent::specs());
    specs.extend(crate::ledger::tools::specs());
    specs.extend(crate::mcp::meta::specs());
    specs.push(crate::deferral::tools::search_spec());
    specs.push(crate::deferral::tools::load_spec());
    specs
}

fn ty(prop: &Value) -> Option<&str> {
    prop.get("type").and_then(Value::as_str)
}

fn first_branch(prop: &Value) -> Option<&Value> {
    prop.get("anyOf").or_else(|| prop.get("oneOf")).and_then(Value::as_array).and_then(|b| b.first())
}

/// A value the schema takes.
fn valid(prop: &Value) -> Value {
    if let Some(first) = prop.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    match ty(prop) {
        Some("string") => json!("x"),
        Some("array") => json!([valid(prop.get("items").unwrap_or(&Value::Null))]),
        Some("boolean") => json!(true),
        Some("integer") => json!(prop.get("minimum").and_then(Value::as_i64).unwrap_or(1).max(1)),
        Some("number") => json!(1),
        Some("object") => valid_object(prop),
        _ => match first_branch(prop) {
            Some(b) => valid(b),
            None => json!("x"),
        },
    }
}

/// An object with every required field, each valid.
fn valid_object(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    for r in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        let prop = props.and_then(|p| p.get(r)).unwrap_or(&Value::Null);
        out.insert(r.to_string(), valid(prop));
    }
    Value::Object(out)
}

/// Values of this property the rule must refuse, each with the name the refusal must hold.
fn bad(label: &str, prop: &Value) -> Vec<(Value, String)> {
    let mut out = Vec::new();
    if prop.get("enum").is_some() {
        out.push((json!("no-such-value"), label.to_string()));
    }
    match ty(prop) {
        Some("string") => out.push((json!(5), label.to_string())),
        Some("boolean") => out.extend([json!("true"), json!(1)].map(|v| (v, label.to_string()))),
        Some("integer") => {
            out.extend([json!("2"), json!(2.5)].map(|v| (v, label.to_string())));
            if prop.get("minimum").and_then(Value::as_f64).is_some_and(|m| m >= 0.0) {
                out.push((json!(-1), label.to_string()));
            }
        }
        Some("number") => out.push((json!("1"), label.to_string())),
        Some("object") => {
            out.push((json!("{}"), label.to_string()));
            out.push((json!([1]), label.to_string()));
            // Each field of an object, refused by its full name.
            let props = prop.get("properties").and_then(Value::as_object);
            for (name, inner) in props.into_iter().flatten() {
                for (v, l) in bad(&format!("{label}.{name}"), inner) {
                    let mut obj = valid_object(prop);
                    obj[name.as_str()] = v;
                    out.push((obj, l));
                }
            }
        }
        Some("array") => {
            out.push((json!(5), label.to_string()));
            let items = prop.get("items").unwrap_or(&Value::Null);
            // A bad entry, as the second one: refused as `name[1]` (or a field of it).
            for (v, l) in bad(&format!("{label}[1]"), items) {
                out.push((json!([valid(items), v]), l));
            }
        }
        _ => {
            if let Some(branches) = prop.get("anyOf").or_else(|| prop.get("oneOf")).and_then(Value::as_array) {
                // A kind no branch takes, then each branch's own bad values of its kind.
                if !branches.iter().any(|b| ty(b) == Some("boolean")) {
                    out.push((json!(true), label.to_string()));
                }
                for b in branches {
                    if ty(b) == Some("object") {
                        out.extend(bad(label, b).into_iter().filter(|(v, _)| v.is_object()));
                    }
                }
            }
        }
    }
    out
}

/// Every integer parameter at any depth, by its full name.
fn integers(label: &str, prop: &Value, out: &mut Vec<(String, Value)>) {
    match ty(prop) {
        Some("integer") => out.push((label.to_string(), prop.clone())),
        Some("array") => integers(&format!("{label}[]"), prop.get("items").unwrap_or(&Value::Null), out),
        _ => {}
    }
    for (name, inner) in prop.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let label = if label.is_empty() { name.clone() } else { format!("{label}.{name}") };
        integers(&label, inner, out);
    }
    for b in prop.get("anyOf").or_else(|| prop.get("oneOf")).and_then(Value::as_array).into_iter().flatten() {
        integers(label, b, out);
    }
}

#[test]
fn the_walk_covers_every_kind_of_built_in() {
    let names: Vec<String> = every_builtin().into_iter().map(|s| s.name).collect();
    for n in ["file_read", "conversation_read", "checklist_add", "task_cancel", "scratchpad_read", "agent_spawn"] {
        assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
    }
    for n in ["claim_work", "mcp_prompt_get", "tool_load", "escalate_to_human", "web_fetch", "shell_execute"] {
        assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
    }
    assert_eq!(names.len(), 40, "{names:?}");
}

#[test]
fn every_integer_parameter_of_every_built_in_declares_its_minimum_and_refuses_a_negative() {
    for spec in every_builtin() {
        let mut found = Vec::new();
        integers("", &spec.parameters, &mut found);
        for (name, prop) in found {
            let min = prop.get("minimum").and_then(Value::as_i64);
            assert!(min.is_some_and(|m| m >= 0), "{}: integer '{name}' declares no minimum of 0 or more", spec.name);
            if name.contains('.') || name.contains('[') {
                continue;
            }
            let mut args = valid_object(&spec.parameters);
            args[name.as_str()] = json!(-1);
            let e = read_arguments(&spec.parameters, &spec.allow_blank, args)
                .expect_err(&format!("{}: {name} = -1 was taken", spec.name));
            assert!(e.contains(&format!("'{name}'")) && e.contains("cannot be negative"), "{}: {e}", spec.name);
        }
    }
}

#[test]
fn every_argument_of_every_built_in_is_refused_by_its_schema_name() {
    let mut checked = 0;
    for spec in every_builtin() {
        let schema = &spec.parameters;
        // The minimal call is taken.
        read_arguments(schema, &spec.allow_blank, valid_object(schema))
            .unwrap_or_else(|e| panic!("{}: the minimal call was refused: {e}", spec.name));
        for (name, prop) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
            let cases = bad(name, prop);
            assert!(!cases.is_empty(), "{}: argument '{name}' declares nothing the rule can check", spec.name);
            for (value, label) in cases {
                let mut args = valid_object(schema);
                args[name.as_str()] = value.clone();
                let e = read_arguments(schema, &spec.allow_blank, args)
                    .expect_err(&format!("{}: {name} = {value} was taken", spec.name));
                assert!(
                    e.contains(&format!("'{label}'")),
                    "{}: {name} = {value}: {e:?} does not name '{label}'",
                    spec.name
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 140, "only {checked} refusals checked");
}

#[test]
fn a_blank_entry_of_every_list_of_texts_is_dropped() {
    let mut lists = 0;
    for spec in every_builtin() {
        let schema = &spec.parameters;
        for (name, prop) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
            let items = prop.get("items").unwrap_or(&Value::Null);
            let takes_text = ty(items) == Some("string")
                || items
                    .get("anyOf")
                    .and_then(Value::as_array)
                    .is_some_and(|b| b.iter().any(|b| ty(b) == Some("string")));
            if ty(prop) != Some("array") || !takes_text {
                continue;
            }
            let mut args = valid_object(schema);
            args[name.as_str()] = json!(["kept", "   ", ""]);
            let read = read_arguments(schema, &spec.allow_blank, args)
                .unwrap_or_else(|e| panic!("{}: {name}: {e}", spec.name));
            assert_eq!(read[name.as_str()], json!(["kept"]), "{}: {name}", spec.name);
            lists += 1;
        }
    }
    assert!(lists >= 10, "only {lists} lists of texts");
}
