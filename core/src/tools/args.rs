//! The one rule by which every tool, built-in or not, reads its arguments (SPEC §2). It runs before the
//! tool; a refusal names the argument as the schema spells it (`items[1].status` inside a list of
//! objects) and the tool does not run. The rule is read off the tool's JSON Schema: each property's
//! `type` (or, without one, the `anyOf` / `oneOf` branch the value's kind fits), `enum`, `minimum` (a
//! count: `minimum >= 0` refuses negatives), `items` (and a tuple's `prefixItems`), `minItems`,
//! `maxItems`, `properties`, `required` and `additionalProperties`, at every depth. A local `$ref`
//! (`#/$defs/Inner`, as Pydantic writes a nested model) is read as the schema it points at; one that
//! does not resolve, or only to more `$ref`s past [`MAX_REF_HOPS`], is refused by name.

use serde_json::{Map, Value};

/// The most `$ref`s followed in a row for one value (a longer chain is a loop).
pub const MAX_REF_HOPS: usize = 32;

/// Reads `args` under `schema`. Returns the arguments the tool receives: blanks left out, bare strings
/// made one-entry lists, blank list entries dropped, `2.0` made `2`. `allow_blank` names the string
/// fields whose empty value is itself the value.
pub fn read_arguments(schema: &Value, allow_blank: &[String], args: Value) -> Result<Value, String> {
    let Value::Object(args) = args else {
        return Err(format!("the arguments must be a JSON object, got {}", kind(&args)));
    };
    read_object(schema, None, schema, allow_blank, args).map(Value::Object)
}

/// Reads the fields of an object under its schema; `at` is the object's own name (`None` for the
/// arguments themselves), which prefixes every field's name in a refusal.
fn read_object(
    root: &Value,
    at: Option<&str>,
    schema: &Value,
    allow_blank: &[String],
    fields: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let label = |name: &str| match at {
        Some(at) => format!("{at}.{name}"),
        None => name.to_string(),
    };
    let empty = Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let mut out = Map::new();
    for (name, value) in fields {
        match props.get(&name) {
            Some(prop) => {
                let keep_blank = allow_blank.iter().any(|n| n == &name);
                if let Some(v) = read_value(root, &label(&name), prop, value, keep_blank)? {
                    out.insert(name, v);
                }
            }
            None if closed => return Err(format!("unknown argument '{}'", label(&name))),
            None => {
                out.insert(name, value);
            }
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !out.contains_key(r) {
                return Err(format!("argument '{}' is required", label(r)));
            }
        }
    }
    Ok(out)
}

/// The schema `prop` stands for: itself, or where its local `$ref` (`#`, `#/$defs/Inner`) points in
/// `root`, followed up to [`MAX_REF_HOPS`] times. A `$ref` outside the schema (a URL) is left as it is
/// (nothing of it checked); one that does not resolve, or loops, is refused naming the argument.
fn resolve<'a>(root: &'a Value, name: &str, prop: &'a Value) -> Result<&'a Value, String> {
    let mut at = prop;
    for _ in 0..=MAX_REF_HOPS {
        let Some(pointer) = at.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) else {
            return Ok(at);
        };
        at = root.pointer(pointer).ok_or_else(|| {
            format!("argument '{name}': its schema's $ref '#{pointer}' does not point into the schema")
        })?;
    }
    Err(format!("argument '{name}': its schema's $ref chain is longer than {MAX_REF_HOPS} (a loop)"))
}

/// The declared type of a property: `type`, or the first non-null entry of a type list.
fn declared_type(prop: &Value) -> Option<&str> {
    match prop.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

/// What a JSON value is, as an error names it ("a string", "a list", …).
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The branches of a property declared as a union (`anyOf` or `oneOf`) without a `type` of its own.
fn union(prop: &Value) -> Option<&Vec<Value>> {
    prop.get("anyOf").or_else(|| prop.get("oneOf")).and_then(Value::as_array)
}

/// The branch of a union a value's kind fits: the first whose type is the value's own kind, else one
/// that takes it by the rule (a bare string as a one-entry list), else one that declares no type.
fn branch_for<'a>(branches: &[&'a Value], value: &Value) -> Option<&'a Value> {
    let exact = |ty: &str| match value {
        Value::String(_) => ty == "string",
        Value::Bool(_) => ty == "boolean",
        Value::Number(n) => ty == "number" || (ty == "integer" && n.as_f64().is_some_and(|f| f.fract() == 0.0)),
        Value::Array(_) => ty == "array",
        Value::Object(_) => ty == "object",
        Value::Null => ty == "null",
    };
    let find = |test: &dyn Fn(&Value) -> bool| branches.iter().copied().find(|b| test(b));
    find(&|b| declared_type(b).is_some_and(exact))
        .or_else(|| find(&|b| value.is_string() && declared_type(b) == Some("array")))
        .or_else(|| find(&|b| declared_type(b).is_none()))
}

/// `a string or an object`: the kinds a union takes, for a refusal.
fn kinds_of(branches: &[&Value]) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for b in branches {
        let k = match declared_type(b) {
            Some("string") => "a string",
            Some("array") => "a list",
            Some("boolean") => "true or false",
            Some("integer") => "an integer",
            Some("number") => "a number",
            Some("object") => "an object",
            _ => continue,
        };
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    match kinds.split_last() {
        None => "a value".to_string(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Refuses a value outside the property's `enum`, naming the argument and the values it takes.
fn check_enum(name: &str, prop: &Value, value: &Value) -> Result<(), String> {
    let Some(allowed) = prop.get("enum").and_then(Value::as_array) else { return Ok(()) };
    if allowed.contains(value) {
        return Ok(());
    }
    // At most this many allowed values are named: a refusal stays short whatever the schema holds.
    const NAMED: usize = 20;
    let mut list: Vec<String> =
        allowed.iter().take(NAMED).map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())).collect();
    if allowed.len() > NAMED {
        list.push(format!("… ({} more)", allowed.len() - NAMED));
    }
    Err(format!("argument '{name}' must be one of {}, got {}", list.join(", "), show(value)))
}

/// `Ok(None)`: the argument counts as left out.
fn read_value(root: &Value, name: &str, prop: &Value, value: Value, keep_blank: bool) -> Result<Option<Value>, String> {
    if value.is_null() {
        return Ok(None);
    }
    let prop = resolve(root, name, prop)?;
    let read = read_typed(root, name, prop, value, keep_blank)?;
    if let Some(v) = &read {
        check_enum(name, prop, v)?;
    }
    Ok(read)
}

/// `minItems` and `maxItems` of a list, after its blank entries were dropped.
fn check_count(name: &str, prop: &Value, n: usize) -> Result<(), String> {
    let bound = |k: &str| prop.get(k).and_then(Value::as_u64);
    match (bound("minItems"), bound("maxItems")) {
        (Some(lo), Some(hi)) if lo == hi && n as u64 != lo => {
            Err(format!("argument '{name}' must have exactly {lo} entries, got {n}"))
        }
        (Some(lo), _) if (n as u64) < lo => Err(format!("argument '{name}' must have at least {lo} entries, got {n}")),
        (_, Some(hi)) if n as u64 > hi => Err(format!("argument '{name}' must have at most {hi} entries, got {n}")),
        _ => Ok(()),
    }
}

fn read_typed(root: &Value, name: &str, prop: &Value, value: Value, keep_blank: bool) -> Result<Option<Value>, String> {
    let Some(ty) = declared_type(prop) else {
        return match union(prop) {
            Some(branches) => {
                let branches = branches.iter().map(|b| resolve(root, name, b)).collect::<Result<Vec<_>, _>>()?;
                match branch_for(&branches, &value) {
                    Some(branch) => read_value(root, name, branch, value, keep_blank),
                    None => Err(format!("argument '{name}' must be {}, got {}", kinds_of(&branches), kind(&value))),
                }
            }
            None => Ok(Some(value)),
        };
    };
    match ty {
        "string" => match value {
            Value::String(s) if is_blank(&s) && !keep_blank => Ok(None),
            Value::String(s) => Ok(Some(Value::String(s))),
            other => Err(format!("argument '{name}' must be a string, got {}", kind(&other))),
        },
        "array" => {
            let items = match value {
                Value::String(s) => vec![Value::String(s)],
                Value::Array(a) => a,
                other => return Err(format!("argument '{name}' must be a list, got {}", kind(&other))),
            };
            let item_schema = prop.get("items").cloned().unwrap_or(Value::Null);
            // A tuple (`prefixItems`): each position read by its own schema, none of them dropped.
            let positions = prop.get("prefixItems").and_then(Value::as_array);
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                let label = format!("{name}[{i}]");
                match positions.and_then(|p| p.get(i)) {
                    Some(schema) => match read_value(root, &label, schema, item, false)? {
                        Some(v) => out.push(v),
                        None => return Err(format!("argument '{label}' is a position of a tuple and cannot be blank")),
                    },
                    None => {
                        if let Some(v) = read_value(root, &label, &item_schema, item, false)? {
                            out.push(v);
                        }
                    }
                }
            }
            check_count(name, prop, out.len())?;
            Ok(Some(Value::Array(out)))
        }
        "boolean" => match value {
            Value::Bool(b) => Ok(Some(Value::Bool(b))),
            other => Err(format!("argument '{name}' must be true or false, got {}", show(&other))),
        },
        "integer" => {
            let n = match &value {
                Value::Number(n) if n.is_i64() || n.is_u64() => value.clone(),
                Value::Number(n) => match n.as_f64() {
                    Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
                    _ => return Err(format!("argument '{name}' must be a whole number, got {n}")),
                },
                other => return Err(format!("argument '{name}' must be an integer, got {}", show(other))),
            };
            let is_count = prop.get("minimum").and_then(Value::as_f64).is_some_and(|m| m >= 0.0);
            if is_count && n.as_i64().is_some_and(|i| i < 0) {
                return Err(format!("argument '{name}' is a count and cannot be negative, got {n}"));
            }
            if let Some(min) = prop.get("minimum").and_then(Value::as_f64)
                && n.as_f64().is_some_and(|v| v < min)
            {
                return Err(format!("argument '{name}' must be at least {min}, got {n}"));
            }
            Ok(Some(n))
        }
        "number" => match value {
            Value::Number(n) => Ok(Some(Value::Number(n))),
            other => Err(format!("argument '{name}' must be a number, got {}", show(&other))),
        },
        "object" => match value {
            Value::Object(o) if prop.get("properties").is_some_and(Value::is_object) => {
                read_object(root, Some(name), prop, &[], o).map(|o| Some(Value::Object(o)))
            }
            Value::Object(o) => {
                let strings_only = prop
                    .get("additionalProperties")
                    .and_then(|a| a.get("type"))
                    .and_then(Value::as_str)
                    .is_some_and(|t| t == "string");
                if strings_only && let Some((k, v)) = o.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!("argument '{name}' must be an object of strings; '{k}' is {}", kind(v)));
                }
                Ok(Some(Value::Object(o)))
            }
            Value::String(_) => Err(format!(
                "argument '{name}' must be an object, not a string (an object spelled as JSON text is refused)"
            )),
            other => Err(format!("argument '{name}' must be an object, got {}", kind(&other))),
        },
        _ => Ok(Some(value)),
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("the string {s:?}"),
        other => format!("{} ({other})", kind(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tuple_is_read_position_by_position_and_its_length_held() {
        let schema = json!({"type": "object", "properties": {"point": {"type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2}}});
        let read = |v: Value| read_arguments(&schema, &[], json!({"point": v}));
        assert_eq!(read(json!([1.0, "a"])).unwrap(), json!({"point": [1, "a"]}));
        for (v, named) in [
            (json!(["a", "b"]), "argument 'point[0]' must be an integer"),
            (json!([1]), "argument 'point' must have exactly 2 entries, got 1"),
            (json!([1, "a", 3]), "argument 'point' must have exactly 2 entries, got 3"),
            (json!([1, " "]), "argument 'point[1]' is a position of a tuple and cannot be blank"),
        ] {
            let e = read(v.clone()).unwrap_err();
            assert!(e.contains(named), "{v}: {e}");
        }
        let list = json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
            "minItems": 1, "maxItems": 2}}});
        let e = read_arguments(&list, &[], json!({"tags": ["a", "b", "c"]})).unwrap_err();
        assert!(e.contains("argument 'tags' must have at most 2 entries, got 3"), "{e}");
        let e = read_arguments(&list, &[], json!({"tags": [" "]})).unwrap_err();
        assert!(e.contains("argument 'tags' must have at least 1 entries, got 0"), "{e}");
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "text": {"type": "string"},
            "globs": {"type": "array", "items": {"type": "string"}},
            "recursive": {"type": "boolean"},
            "limit": {"type": "integer", "minimum": 0},
            "offset": {"type": "integer"},
            "ratio": {"type": "number"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "meta": {"type": "object"}
        }, "required": ["path"]})
    }

    fn read(args: Value) -> Result<Value, String> {
        read_arguments(&schema(), &["text".to_string()], args)
    }

    #[test]
    fn strings_blank_is_left_out_and_other_types_refused() {
        assert_eq!(read(json!({"path": "a", "offset": null})).unwrap(), json!({"path": "a"}));
        assert_eq!(read(json!({"path": "  "})).unwrap_err(), "argument 'path' is required");
        assert_eq!(read(json!({"path": ""})).unwrap_err(), "argument 'path' is required");
        assert_eq!(read(json!({})).unwrap_err(), "argument 'path' is required");
        assert_eq!(read(json!({"path": 3})).unwrap_err(), "argument 'path' must be a string, got a number");
        // allow_blank keeps the blank
        assert_eq!(read(json!({"path": "a", "text": ""})).unwrap(), json!({"path": "a", "text": ""}));
    }

    #[test]
    fn lists_take_a_bare_string_and_drop_blanks() {
        assert_eq!(read(json!({"path": "a", "globs": "*.rs"})).unwrap()["globs"], json!(["*.rs"]));
        assert_eq!(read(json!({"path": "a", "globs": ["x", "", " ", "y"]})).unwrap()["globs"], json!(["x", "y"]));
        assert_eq!(read(json!({"path": "a", "globs": []})).unwrap()["globs"], json!([]));
        assert_eq!(read(json!({"path": "a", "globs": " "})).unwrap()["globs"], json!([]));
        assert_eq!(
            read(json!({"path": "a", "globs": ["x", 1]})).unwrap_err(),
            "argument 'globs[1]' must be a string, got a number"
        );
        assert!(read(json!({"path": "a", "globs": {"a": 1}})).unwrap_err().contains("must be a list"));
    }

    #[test]
    fn booleans_are_true_or_false_only() {
        assert_eq!(read(json!({"path": "a", "recursive": false})).unwrap()["recursive"], json!(false));
        for bad in [json!("true"), json!(1), json!("false"), json!([true])] {
            let e = read(json!({"path": "a", "recursive": bad})).unwrap_err();
            assert!(e.starts_with("argument 'recursive' must be true or false"), "{e}");
        }
    }

    #[test]
    fn integers_accept_two_point_zero_and_refuse_the_rest() {
        assert_eq!(read(json!({"path": "a", "limit": 2.0})).unwrap()["limit"], json!(2));
        assert_eq!(read(json!({"path": "a", "limit": 2})).unwrap()["limit"], json!(2));
        assert_eq!(read(json!({"path": "a", "offset": -3})).unwrap()["offset"], json!(-3));
        assert!(
            read(json!({"path": "a", "limit": "2"})).unwrap_err().contains("must be an integer, got the string \"2\"")
        );
        assert!(read(json!({"path": "a", "limit": 2.5})).unwrap_err().contains("must be a whole number"));
        assert!(read(json!({"path": "a", "limit": -1})).unwrap_err().contains("is a count and cannot be negative"));
        assert!(read(json!({"path": "a", "limit": -1.0})).unwrap_err().contains("cannot be negative"));
    }

    #[test]
    fn objects_are_objects_never_json_text() {
        assert_eq!(read(json!({"path": "a", "headers": {"x": "y"}})).unwrap()["headers"], json!({"x": "y"}));
        assert!(read(json!({"path": "a", "headers": "{\"x\":\"y\"}"})).unwrap_err().contains("not a string"));
        assert!(
            read(json!({"path": "a", "headers": {"x": 1}})).unwrap_err().contains("object of strings; 'x' is a number")
        );
        assert_eq!(read(json!({"path": "a", "meta": {"x": 1}})).unwrap()["meta"], json!({"x": 1}));
        assert!(read(json!({"path": "a", "meta": [1]})).unwrap_err().contains("must be an object, got a list"));
    }

    #[test]
    fn numbers_and_unknowns() {
        assert_eq!(read(json!({"path": "a", "ratio": 0.5})).unwrap()["ratio"], json!(0.5));
        assert!(read(json!({"path": "a", "ratio": "0.5"})).unwrap_err().contains("must be a number"));
        assert_eq!(read(json!({"path": "a", "extra": "kept"})).unwrap()["extra"], json!("kept"));
        let closed = json!({"type": "object", "properties": {}, "additionalProperties": false});
        assert_eq!(read_arguments(&closed, &[], json!({"x": 1})).unwrap_err(), "unknown argument 'x'");
        assert!(read_arguments(&closed, &[], json!("{}")).unwrap_err().contains("must be a JSON object"));
    }

    #[test]
    fn unions_pick_the_branch_of_the_value_s_kind_and_blank_entries_are_dropped() {
        let schema = json!({"type": "object", "properties": {"items": {"type": "array", "items": {"anyOf": [
            {"type": "string"},
            {"type": "object", "properties": {"text": {"type": "string"}, "status": {"type": "string", "enum": ["pending", "in_progress"]}}, "required": ["text"]}
        ]}}}});
        let read = |args: Value| read_arguments(&schema, &[], args);
        assert_eq!(read(json!({"items": ["Write the fix", "   "]})).unwrap(), json!({"items": ["Write the fix"]}));
        assert_eq!(
            read(json!({"items": [{"text": "a", "status": null}, "b"]})).unwrap(),
            json!({"items": [{"text": "a"}, "b"]})
        );
        assert_eq!(
            read(json!({"items": ["a", 3]})).unwrap_err(),
            "argument 'items[1]' must be a string or an object, got a number"
        );
        assert_eq!(
            read(json!({"items": [{"text": "a", "status": "done"}]})).unwrap_err(),
            "argument 'items[0].status' must be one of pending, in_progress, got the string \"done\""
        );
        assert_eq!(read(json!({"items": [{"text": "  "}]})).unwrap_err(), "argument 'items[0].text' is required");
        assert_eq!(
            read(json!({"items": [{"text": "a", "status": 1}]})).unwrap_err(),
            "argument 'items[0].status' must be a string, got a number"
        );
    }

    #[test]
    fn an_unknown_enum_value_is_refused_by_name() {
        let schema = json!({"type": "object", "properties": {
            "network": {"type": "string", "enum": ["none", "remote", "unrestricted"]},
            "nested": {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": false}
        }});
        let read = |args: Value| read_arguments(&schema, &[], args);
        assert_eq!(read(json!({"network": "remote"})).unwrap(), json!({"network": "remote"}));
        assert_eq!(read(json!({"network": " "})).unwrap(), json!({}), "blank: left out");
        assert_eq!(
            read(json!({"network": "intranet"})).unwrap_err(),
            "argument 'network' must be one of none, remote, unrestricted, got the string \"intranet\""
        );
        assert_eq!(read(json!({"nested": {"y": 1}})).unwrap_err(), "unknown argument 'nested.y'");
        assert!(read(json!({"nested": {"x": "1"}})).unwrap_err().starts_with("argument 'nested.x' must be an integer"));
    }
}
