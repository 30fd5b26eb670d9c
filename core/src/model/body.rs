//! A request body whose tools are written straight from the request's specs: with hundreds of tools
//! the schemas are most of the bytes, and copying each into a fresh `Value` per request cost more than
//! sending them (bench/peers, 500 tools). The wires build the rest of the body as a `Value`.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::tools::ToolSpec;

/// How a wire declares one function tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolShape {
    /// Chat Completions: `{"type": "function", "function": {name, description, parameters}}`.
    Chat,
    /// Responses: `{"type": "function", name, description, parameters, strict}` (+ `defer_loading`).
    Responses,
    /// Anthropic Messages: `{name, description, input_schema}` (+ `defer_loading`).
    Anthropic,
}

/// One entry of `tools`: a declared function, or a fixed object (a provider's own tool).
#[derive(Debug)]
pub enum WireTool<'a> {
    /// A function declared by its spec, in the wire's shape.
    Function(ToolShape, &'a ToolSpec),
    /// A provider's own tool, as given.
    Fixed(Value),
}

/// A request body: `fields` in order, then `tools` when there are any.
#[derive(Debug)]
pub struct RequestBody<'a> {
    /// The body's fields, in order.
    pub fields: Map<String, Value>,
    /// The tools, in order.
    pub tools: Vec<WireTool<'a>>,
    /// The last tool carries this `cache_control` (Anthropic prompt caching: the tools are the start of
    /// the cached prefix).
    pub cache_last_tool: Option<Value>,
    /// The OpenAI wires' strict schemas are on (the `strict` setting): each function tool whose schema
    /// qualifies ([`super::strict::why_not_strict`]) is written with `strict: true`.
    pub strict: bool,
}

impl RequestBody<'_> {
    /// The body as a JSON value (what tests and wrappers inspect).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for RequestBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let tools = !self.tools.is_empty();
        let mut map = s.serialize_map(Some(self.fields.len() + usize::from(tools)))?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        if tools {
            let last = self.tools.len() - 1;
            let marked: Vec<Marked<'_>> = self
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| Marked(t, if i == last { self.cache_last_tool.as_ref() } else { None }, self.strict))
                .collect();
            map.serialize_entry("tools", &marked)?;
        }
        map.end()
    }
}

/// A Chat Completions function, `strict: true` when asked for.
struct ChatFunction<'a>(&'a ToolSpec, bool);

impl Serialize for ChatFunction<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.0.name)?;
        map.serialize_entry("description", &self.0.description)?;
        map.serialize_entry("parameters", &Params(&self.0.parameters))?;
        if self.1 {
            map.serialize_entry("strict", &true)?;
        }
        map.end()
    }
}

/// A tool's schema as a body writes it: its JSON text, written once and kept by the schema, copied
/// into every request after; the value itself where the text cannot be had.
struct Params<'a>(&'a crate::tools::Schema);

impl Serialize for Params<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.raw_json() {
            Some(raw) => raw.serialize(s),
            None => self.0.serialize(s),
        }
    }
}

/// A tool as the body writes it, with the `cache_control` it carries, if any, and whether strict
/// schemas are on.
struct Marked<'a>(&'a WireTool<'a>, Option<&'a Value>, bool);

impl Serialize for Marked<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.write(s, self.1, self.2)
    }
}

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.write(s, None, false)
    }
}

impl WireTool<'_> {
    /// Writes the tool, with `cache_control` when given; `strict`: strict schemas are on, so a function
    /// whose schema qualifies is marked strict.
    fn write<S: Serializer>(&self, s: S, cache_control: Option<&Value>, strict: bool) -> Result<S::Ok, S::Error> {
        let (shape, t) = match self {
            WireTool::Fixed(v) => {
                return match (cache_control, v) {
                    (Some(c), Value::Object(o)) => {
                        let mut o = o.clone();
                        o.insert("cache_control".into(), c.clone());
                        o.serialize(s)
                    }
                    _ => v.serialize(s),
                };
            }
            WireTool::Function(shape, t) => (*shape, *t),
        };
        let strict = strict && shape != ToolShape::Anthropic && t.parameters.strict_ok();
        let mut map = s.serialize_map(None)?;
        match shape {
            ToolShape::Chat => {
                map.serialize_entry("type", "function")?;
                map.serialize_entry("function", &ChatFunction(t, strict))?;
            }
            ToolShape::Responses => {
                map.serialize_entry("type", "function")?;
                map.serialize_entry("name", &t.name)?;
                map.serialize_entry("description", &t.description)?;
                map.serialize_entry("parameters", &Params(&t.parameters))?;
                map.serialize_entry("strict", &strict)?;
            }
            ToolShape::Anthropic => {
                map.serialize_entry("name", &t.name)?;
                map.serialize_entry("description", &t.description)?;
                map.serialize_entry("input_schema", &Params(&t.parameters))?;
            }
        }
        if t.defer_loading && shape != ToolShape::Chat {
            map.serialize_entry("defer_loading", &true)?;
        }
        if let Some(c) = cache_control {
            map.serialize_entry("cache_control", c)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_serialize_in_each_wire_shape() {
        let mut spec = ToolSpec::new("f", "does f", json!({"type": "object"}));
        let body = |shape, spec: &ToolSpec| {
            let tools = vec![WireTool::Fixed(json!({"type": "tool_search"})), WireTool::Function(shape, spec)];
            RequestBody {
                fields: Map::from_iter([("model".to_string(), json!("m"))]),
                tools,
                cache_last_tool: None,
                strict: true,
            }
            .to_value()
        };
        assert_eq!(
            body(ToolShape::Chat, &spec),
            json!({"model": "m", "tools": [{"type": "tool_search"},
                {"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}}}]})
        );
        spec.defer_loading = true;
        assert_eq!(
            body(ToolShape::Anthropic, &spec)["tools"][1],
            json!({"name": "f", "description": "does f", "input_schema": {"type": "object"}, "defer_loading": true})
        );
        assert_eq!(
            body(ToolShape::Responses, &spec)["tools"][1],
            json!({"type": "function", "name": "f", "description": "does f", "parameters": {"type": "object"},
                   "strict": false, "defer_loading": true})
        );
        let empty = RequestBody { fields: Map::new(), tools: Vec::new(), cache_last_tool: None, strict: false };
        assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
    }

    /// A function whose schema qualifies for strict mode is marked strict on both OpenAI wires while the
    /// setting is on; one that does not, or with the setting off, is not (Responses then says `false`).
    #[test]
    fn strict_marks_only_qualifying_functions_and_only_when_on() {
        let strict = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                            "additionalProperties": false});
        let open = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let (a, b) = (ToolSpec::new("a", "", strict), ToolSpec::new("b", "", open));
        let body = |shape, on| {
            let tools = vec![WireTool::Function(shape, &a), WireTool::Function(shape, &b)];
            RequestBody { fields: Map::new(), tools, cache_last_tool: None, strict: on }.to_value()
        };
        let chat = body(ToolShape::Chat, true);
        assert_eq!(chat["tools"][0]["function"]["strict"], json!(true));
        assert_eq!(chat["tools"][1]["function"].get("strict"), None);
        assert_eq!(body(ToolShape::Chat, false)["tools"][0]["function"].get("strict"), None);
        let responses = body(ToolShape::Responses, true);
        assert_eq!((&responses["tools"][0]["strict"], &responses["tools"][1]["strict"]), (&json!(true), &json!(false)));
        assert_eq!(body(ToolShape::Responses, false)["tools"][0]["strict"], json!(false));
        assert_eq!(body(ToolShape::Anthropic, true)["tools"][0].get("strict"), None);
    }

    /// A schema's JSON text is written once and kept; a change to the schema after a request was built
    /// reaches the next request (the kept text and strict verdict go with the change), and a copy of
    /// the spec changed on its own leaves the original's text alone.
    #[test]
    fn a_schema_changed_after_a_request_reaches_the_next_one() {
        let loose = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let mut spec = ToolSpec::new("f", "", loose.clone());
        let text = |spec: &ToolSpec| {
            let tools = vec![WireTool::Function(ToolShape::Responses, spec)];
            serde_json::to_string(&RequestBody { fields: Map::new(), tools, cache_last_tool: None, strict: true })
                .unwrap()
        };
        let first = text(&spec);
        assert_eq!(first, text(&spec));
        assert!(first.contains(r#""strict":false"#), "{first}");
        let copy = spec.clone();
        spec.parameters["required"] = json!(["city"]);
        spec.parameters["additionalProperties"] = json!(false);
        let second = text(&spec);
        assert!(second.contains(r#""required":["city"]"#) && second.contains(r#""strict":true"#), "{second}");
        // The bytes are the value's own serialization, key order included.
        let expected = serde_json::to_string(&json!({"tools": [{"type": "function", "name": "f", "description": "",
            "parameters": &*spec.parameters, "strict": true}]}))
        .unwrap();
        assert_eq!(serde_json::from_str::<Value>(&second).unwrap(), serde_json::from_str::<Value>(&expected).unwrap());
        assert!(second.contains(&serde_json::to_string(&*spec.parameters).unwrap()));
        assert_eq!(text(&copy), first, "the copy kept the old schema");
    }

    /// A schema nested past serde_json's parse limit (128) still reads back whole from a body's value
    /// (`to_value`, what the wires' `request_body` and wrappers return): its kept text is not what the
    /// value is made from.
    #[test]
    fn a_deeply_nested_schema_reads_back_from_the_body_value() {
        let mut schema = json!({"type": "string"});
        for _ in 0..140 {
            schema = json!({"type": "array", "items": schema});
        }
        let spec = ToolSpec::new("deep", "", schema.clone());
        for shape in [ToolShape::Chat, ToolShape::Responses, ToolShape::Anthropic] {
            let body = RequestBody {
                fields: Map::new(),
                tools: vec![WireTool::Function(shape, &spec)],
                cache_last_tool: None,
                strict: false,
            };
            let value = body.to_value();
            let tool = &value["tools"][0];
            let written = [&tool["function"]["parameters"], &tool["parameters"], &tool["input_schema"]];
            assert!(written.iter().any(|w| **w == schema), "{shape:?}: the schema did not read back: {value}");
            // The bytes sent are the same as before.
            let text = serde_json::to_string(&body).unwrap();
            assert!(text.contains(&serde_json::to_string(&schema).unwrap()), "{shape:?}");
        }
    }
}
