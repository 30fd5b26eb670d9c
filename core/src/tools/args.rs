//! The one rule by which every tool, built-in or not, reads its arguments (SPEC §2). It runs before the
//! tool; a refusal names the argument and the tool does not run. The rule is read off the tool's JSON
//! Schema: each property's `type`, `minimum` (a count: `minimum >= 0` refuses negatives),
//! `items.type` and `additionalProperties`.

use serde_json::{Map, Value};

/// Reads `args` under `schema`. Returns the arguments the tool receives: blanks left out, bare strings
/// made one-entry lists, blank list entries dropped, `2.0` made `2`. `allow_blank` names the string
/// fields whose empty value is itself the value.
pub fn read_arguments(schema: &Value, allow_blank: &[String], args: Value) -> Result<Value, String> {
    let Value::Object(args) = args else {
        return Err(format!("the arguments must be a JSON object, got {}", kind(&args)));
    };
    let empty = Map::new();
    let props = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let mut out = Map::new();
    for (name, value) in args {
        match props.get(&name) {
            Some(prop) => {
                let keep_blank = allow_blank.iter().any(|n| n == &name);
                if let Some(v) = read_value(&name, prop, value, keep_blank)? {
                    out.insert(name, v);
                }
            }
            None if closed => return Err(format!("unknown argument '{name}'")),
            None => {
                out.insert(name, value);
            }
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !out.contains_key(r) {
                return Err(format!("argument '{r}' is required"));
            }
        }
    }
    Ok(Value::Object(out))
}

/// The declared type of a property: `type`, or the first non-null entry of a type list.
fn declared_type(prop: &Value) -> Option<&str> {
    match prop.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

fn kind(v: &Value) -> &'static str {
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

/// `Ok(None)`: the argument counts as left out.
fn read_value(name: &str, prop: &Value, value: Value, keep_blank: bool) -> Result<Option<Value>, String> {
    if value.is_null() {
        return Ok(None);
    }
    let Some(ty) = declared_type(prop) else { return Ok(Some(value)) };
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
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                let label = format!("{name}[{i}]");
                if let Some(v) = read_value(&label, &item_schema, item, false)? {
                    out.push(v);
                }
            }
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
}
