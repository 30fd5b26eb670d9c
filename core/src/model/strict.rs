//! Strict schemas on the OpenAI wires (issue 14): a function tool, or a typed answer's `json_schema`,
//! sent with `strict: true` is decoded by the server under its schema, so the model can only write what
//! matches. OpenAI takes `strict` only for a schema of its structured-outputs subset; any other is
//! refused with HTTP 400. So `strict: true` is sent exactly where [`why_not_strict`] finds nothing, and
//! the schema goes out without it otherwise (the argument rule still checks every call). The setting
//! `strict: false` ([`super::ModelSettings::strict`]) never sends it.
//!
//! The subset, as OpenAI documents it for structured outputs:
//! - the root is an object (`"type": "object"`), not `anyOf`;
//! - every object lists each of its properties in `required` and has `"additionalProperties": false`
//!   (an optional field is written as required and nullable: `"type": ["string", "null"]`);
//! - only these keywords: `type`, `properties`, `required`, `additionalProperties`, `items`, `enum`,
//!   `const`, `anyOf`, `$ref`, `$defs`, `definitions`, `description`, `title`, `pattern`, `format`,
//!   `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `minItems`, `maxItems`
//!   (so no `default`, `allOf`, `oneOf`, `not`, `minLength`, `prefixItems`, …), and `format` only one of
//!   `date-time`, `time`, `date`, `duration`, `email`, `hostname`, `ipv4`, `ipv6`, `uuid`;
//! - at most [`MAX_DEPTH`] levels of nested objects and [`MAX_PROPERTIES`] properties in all.

use serde_json::{Map, Value};

use super::Wire;
use super::body::RequestBody;

/// The deepest nesting of objects strict mode takes.
pub const MAX_DEPTH: usize = 10;
/// The most properties, summed over every object, strict mode takes.
pub const MAX_PROPERTIES: usize = 5000;

/// The `format`s strict mode takes.
const FORMATS: [&str; 9] = ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// The keywords of strict mode's subset.
const KEYWORDS: [&str; 22] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Why `schema` cannot be sent with `strict: true`, naming where (a JSON pointer) and what; `None`: it
/// can.
pub fn why_not_strict(schema: &Value) -> Option<String> {
    let root = schema.as_object()?;
    if root.get("type").and_then(Value::as_str) != Some("object") {
        return Some("the root is not an object schema (\"type\": \"object\")".into());
    }
    let mut walk = Walk { properties: 0 };
    walk.schema(schema, "", 1).err()
}

struct Walk {
    properties: usize,
}

impl Walk {
    fn schema(&mut self, schema: &Value, at: &str, depth: usize) -> Result<(), String> {
        let o = match schema {
            Value::Object(o) => o,
            // `true` / `false` schemas are not in the subset.
            other => return Err(format!("{}: the schema {other} is not an object", here(at))),
        };
        if let Some(k) = o.keys().find(|k| !KEYWORDS.contains(&k.as_str())) {
            return Err(format!("{}: the keyword `{k}` is not supported in strict mode", here(at)));
        }
        if let Some(f) = o.get("format").filter(|f| !f.as_str().is_some_and(|f| FORMATS.contains(&f))) {
            return Err(format!("{}: the format {f} is not supported in strict mode", here(at)));
        }
        if is_object(o) {
            if depth > MAX_DEPTH {
                return Err(format!("{}: objects nest deeper than {MAX_DEPTH} levels", here(at)));
            }
            self.object(o, at, depth)?;
        }
        if let Some(items) = o.get("items") {
            self.schema(items, &format!("{at}/items"), depth)?;
        }
        if let Some(any) = o.get("anyOf") {
            let list = any.as_array().ok_or_else(|| format!("{}/anyOf: not a list", here(at)))?;
            for (i, s) in list.iter().enumerate() {
                self.schema(s, &format!("{at}/anyOf/{i}"), depth)?;
            }
        }
        for defs in ["$defs", "definitions"] {
            if let Some(d) = o.get(defs) {
                let map = d.as_object().ok_or_else(|| format!("{}/{defs}: not an object", here(at)))?;
                for (name, s) in map {
                    self.schema(s, &format!("{at}/{defs}/{}", escape(name)), 1)?;
                }
            }
        }
        Ok(())
    }

    fn object(&mut self, o: &Map<String, Value>, at: &str, depth: usize) -> Result<(), String> {
        if o.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Err(format!("{}: an object without \"additionalProperties\": false", here(at)));
        }
        let empty = Map::new();
        let props = match o.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(format!("{}/properties: not an object", here(at))),
        };
        let required: Vec<&str> =
            o.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        if let Some(missing) = props.keys().find(|k| !required.contains(&k.as_str())) {
            return Err(format!(
                "{}: the property `{missing}` is not in required (strict mode makes every property required; \
                 write an optional one as nullable)",
                here(at)
            ));
        }
        self.properties += props.len();
        if self.properties > MAX_PROPERTIES {
            return Err(format!("more than {MAX_PROPERTIES} properties in all"));
        }
        for (name, s) in props {
            self.schema(s, &format!("{at}/properties/{}", escape(name)), depth + 1)?;
        }
        Ok(())
    }
}

fn is_object(o: &Map<String, Value>) -> bool {
    let typed = match o.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    typed || o.contains_key("properties")
}

fn here(at: &str) -> &str {
    if at.is_empty() { "the schema's root" } else { at }
}

/// A property name as a JSON pointer token.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Marks a request body of an OpenAI wire strict where it may be: its function tools (each written with
/// `strict: true` when its schema qualifies) and its typed answer's `json_schema` (Chat Completions
/// `response_format.json_schema`, Responses `text.format`), when there is one and it qualifies. `on`:
/// the model's `strict` setting.
pub(crate) fn mark(body: &mut RequestBody<'_>, wire: Wire, on: bool, has_output: bool) {
    body.strict = on;
    if !on || !has_output {
        return;
    }
    let format = match wire {
        Wire::OpenaiChat => body.fields.get_mut("response_format").and_then(|f| f.get_mut("json_schema")),
        Wire::OpenaiResponses => body.fields.get_mut("text").and_then(|t| t.get_mut("format")),
        Wire::Anthropic => None,
    };
    if let Some(Value::Object(f)) = format
        && f.get("schema").is_some_and(|s| why_not_strict(s).is_none())
    {
        f.insert("strict".into(), Value::Bool(true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strict_object(props: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }

    #[test]
    fn a_schema_of_the_subset_qualifies() {
        let inner = strict_object(json!({"n": {"type": ["integer", "null"], "minimum": 0}}), &["n"]);
        let schema = strict_object(
            json!({"city": {"type": "string", "description": "a city", "pattern": "^[A-Z]"},
                   "sky": {"enum": ["sunny", "rain"]},
                   "days": {"type": "array", "items": inner, "maxItems": 3},
                   "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
                   "ref": {"$ref": "#/$defs/R"}}),
            &["city", "sky", "days", "when", "ref"],
        );
        let mut schema = schema;
        schema["$defs"] = json!({"R": strict_object(json!({"x": {"const": 1}}), &["x"])});
        assert_eq!(why_not_strict(&schema), None);
        assert_eq!(why_not_strict(&strict_object(json!({}), &[])), None);
    }

    #[test]
    fn each_way_out_of_the_subset_is_named_with_where() {
        let ok = || strict_object(json!({"city": {"type": "string"}}), &["city"]);
        let cases: Vec<(Value, &str)> = vec![
            (json!({"anyOf": [ok()]}), "the root is not an object schema"),
            (
                json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
                "the schema's root: an object without \"additionalProperties\": false",
            ),
            (
                strict_object(json!({"city": {"type": "string"}, "unit": {"type": "string"}}), &["city"]),
                "the property `unit` is not in required",
            ),
            (
                strict_object(json!({"city": {"type": "string", "default": "Paris"}}), &["city"]),
                "/properties/city: the keyword `default` is not supported",
            ),
            (strict_object(json!({"c": {"type": "string", "minLength": 1}}), &["c"]), "`minLength`"),
            (strict_object(json!({"c": {"allOf": [{"type": "string"}]}}), &["c"]), "`allOf`"),
            (
                strict_object(json!({"c": {"type": "object", "properties": {}}}), &["c"]),
                "/properties/c: an object without \"additionalProperties\": false",
            ),
            (
                strict_object(
                    json!({"c": {"type": "array", "items": {"type": "object", "properties": {"a": {}}, "required": [], "additionalProperties": false}}}),
                    &["c"],
                ),
                "/properties/c/items: the property `a` is not in required",
            ),
            (strict_object(json!({"a/b": true}), &["a/b"]), "/properties/a~1b: the schema true is not an object"),
            (
                strict_object(json!({"n": {"type": "integer", "format": "int32"}}), &["n"]),
                "/properties/n: the format \"int32\" is not supported",
            ),
        ];
        for (schema, words) in cases {
            let why = why_not_strict(&schema).unwrap_or_else(|| panic!("{schema} qualified"));
            assert!(why.contains(words), "{schema}: {why}");
        }
        // Nesting: 10 levels of objects qualify, 11 do not.
        let nest = |levels: usize| {
            let mut s = strict_object(json!({}), &[]);
            for _ in 1..levels {
                s = strict_object(json!({"n": s}), &["n"]);
            }
            s
        };
        assert_eq!(why_not_strict(&nest(MAX_DEPTH)), None);
        assert!(why_not_strict(&nest(MAX_DEPTH + 1)).unwrap().contains("deeper than 10 levels"));
    }
}
