//! Tool calls a model wrote as text, for OpenAI-compatible servers (the `text_tool_calls` setting).
//!
//! A small local model under its own chat template often writes its tool call as its answer's text
//! (`{"name": "get_weather", "arguments": {"city": "Paris"}}`) where the server did not read it as a
//! call. With `text_tool_calls = "auto"` the Chat Completions wire reads such an answer as the calls it
//! holds, in one of these forms:
//!
//! - a bare JSON call object, several separated by white space or `;`, or a JSON array of them, as the
//!   whole answer (a Llama 3 JSON call is `{"name": …, "parameters": …}`);
//! - the same in one fenced code block (```` ```json … ``` ````) as the whole answer;
//! - Hermes / Qwen `<tool_call>{…}</tool_call>` blocks, Llama 3 `<|python_tag|>{…}` and Mistral
//!   `[TOOL_CALLS][{…}]` (or `[TOOL_CALLS]name[ARGS]{…}`), each after optional text, which stays the
//!   answer's text.
//!
//! The rule is strict where it can be: every call must name a tool offered in that request, with
//! arguments that are an object (or the text of one; the argument rule then reads them as it reads any
//! call), and nothing else may follow the calls; when any part fails, none of the text is read as calls
//! and the answer stays text, as the server sent it. An answer the server already gave structured calls
//! is never read, nor one to a request that offers no tool or asks for none. A text longer than
//! [`MAX_TEXT_BYTES`] is not read, and at most the wire's `max_tool_calls` calls are taken.
//!
//! `text_tool_calls = "constrained"` also asks the server to constrain the answer (the `response_format`
//! JSON schema, which llama.cpp turns into a grammar): the model can then write only one call of an
//! offered tool, with arguments its schema allows, or a JSON string, its text answer (unless the
//! request requires a call).

use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::{ModelResponse, StopReason, TextSink, ToolCall};

/// The longest answer text the reader looks at (1 MiB); a longer one stays text.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// How an answer's text is read for tool calls (Chat Completions only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TextToolCalls {
    /// Text is text (the default).
    #[default]
    Off,
    /// Calls written as text in a known form are read as calls.
    Auto,
    /// As `Auto`, and the server is asked to constrain the answer to one call or a JSON string (the text).
    Constrained,
}

impl TextToolCalls {
    /// The setting's plain-data form: `"off"`, `"auto"` or `"constrained"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TextToolCalls::Off => "off",
            TextToolCalls::Auto => "auto",
            TextToolCalls::Constrained => "constrained",
        }
    }

    /// Reads the plain-data form, refusing anything else by name.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        match v.as_str() {
            Some("off") => Ok(TextToolCalls::Off),
            Some("auto") => Ok(TextToolCalls::Auto),
            Some("constrained") => Ok(TextToolCalls::Constrained),
            _ => Err(format!("text_tool_calls must be \"off\", \"auto\" or \"constrained\", got {v}")),
        }
    }
}

/// The markers that open calls after optional text.
const MARKERS: [&str; 3] = ["<tool_call>", "<|python_tag|>", "[TOOL_CALLS]"];

/// The calls read from a text, and the text before them (the answer's text that stays).
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// The text before the first call, trimmed; `None` when there is none.
    pub text: Option<String>,
    /// `(name, arguments as JSON text)`, in the order written.
    pub calls: Vec<(String, String)>,
}

/// Reads `text` as tool calls of the tools named in `offered`, at most `max_calls` of them; `None` when
/// the text is not (entirely) such calls. With `constrained`, a whole-text JSON string is read as its
/// text (the constrained mode's text answer), returned with no calls.
pub fn read(text: &str, offered: &[&str], max_calls: usize, constrained: bool) -> Option<Recovered> {
    if text.len() > MAX_TEXT_BYTES || offered.is_empty() {
        return None;
    }
    let first = MARKERS.iter().filter_map(|m| text.find(m).map(|p| (p, *m))).min_by_key(|(p, _)| *p);
    let (prose, calls) = match first {
        Some((p, marker)) => {
            let rest = &text[p + marker.len()..];
            let calls = match marker {
                "<tool_call>" => tagged(rest)?,
                "<|python_tag|>" => json_values(rest, true)?,
                _ => mistral(rest)?,
            };
            (text[..p].trim(), calls)
        }
        None => {
            let whole = text.trim();
            if constrained
                && whole.starts_with('"')
                && let Ok(Value::String(answer)) = serde_json::from_str::<Value>(whole)
            {
                return Some(Recovered { text: Some(answer), calls: Vec::new() });
            }
            let inner = match whole.strip_prefix("```") {
                Some(fenced) => fence(fenced)?,
                None => whole,
            };
            if !inner.starts_with('{') && !inner.starts_with('[') {
                return None;
            }
            ("", json_values(inner, true)?)
        }
    };
    if calls.is_empty() || calls.len() > max_calls {
        return None;
    }
    let calls = calls.iter().map(|c| call(c, offered)).collect::<Option<Vec<_>>>()?;
    Some(Recovered { text: (!prose.is_empty()).then(|| prose.to_string()), calls })
}

/// The JSON values of `s`: one or more, separated by white space (and `;` when `semicolons`); a
/// top-level array stands for its items. `None` when anything else is there.
fn json_values(s: &str, semicolons: bool) -> Option<Vec<Value>> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = stream.next()?.ok()?;
        rest = rest.get(stream.byte_offset()..)?.trim_start();
        if semicolons && let Some(r) = rest.strip_prefix(';') {
            rest = r.trim_start();
        }
        match value {
            Value::Array(items) => out.extend(items),
            v => out.push(v),
        }
    }
    Some(out)
}

/// `<tool_call>` blocks: the text after the first marker is `{…}</tool_call>`, then more blocks, each
/// one JSON value; the last closing tag may be missing (the server stopped at its end-of-turn token).
fn tagged(mut rest: &str) -> Option<Vec<Value>> {
    let mut out = Vec::new();
    loop {
        let (inner, after) = match rest.find("</tool_call>") {
            Some(end) => (&rest[..end], Some(&rest[end + "</tool_call>".len()..])),
            None => (rest, None),
        };
        let values = json_values(inner, false)?;
        let [value] = <[Value; 1]>::try_from(values).ok()?;
        out.push(value);
        let Some(after) = after.map(str::trim_start) else { return Some(out) };
        if after.is_empty() {
            return Some(out);
        }
        rest = after.strip_prefix("<tool_call>")?;
    }
}

/// Mistral's calls after `[TOOL_CALLS]`: a JSON array of call objects, or `name[ARGS]{…}` repeated.
fn mistral(rest: &str) -> Option<Vec<Value>> {
    let trimmed = rest.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        return json_values(trimmed, false);
    }
    let mut out = Vec::new();
    let mut rest = trimmed;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("[ARGS]")?;
        let mut stream = serde_json::Deserializer::from_str(after).into_iter::<Value>();
        let args = stream.next()?.ok()?;
        rest = after.get(stream.byte_offset()..)?.trim_start();
        rest = rest.strip_prefix("[TOOL_CALLS]").unwrap_or(rest).trim_start();
        out.push(json!({"name": name.trim(), "arguments": args}));
    }
    Some(out)
}

/// The inside of a fenced block (after its opening backticks) that is the whole text: an optional
/// language word, a line break, the content, the closing backticks at the end.
fn fence(after_ticks: &str) -> Option<&str> {
    let (lang, body) = after_ticks.split_once('\n')?;
    if !lang.trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some(body.strip_suffix("```")?.trim())
}

/// One call object, when it names an offered tool: `name`, and `arguments` or `parameters` (an object
/// or its text; absent: none), and no other keys than `id` and `type`.
fn call(v: &Value, offered: &[&str]) -> Option<(String, String)> {
    let o = v.as_object()?;
    let name = o.get("name")?.as_str()?;
    if !offered.contains(&name) {
        return None;
    }
    if o.keys().any(|k| !matches!(k.as_str(), "name" | "arguments" | "parameters" | "id" | "type")) {
        return None;
    }
    let args = match (o.get("arguments"), o.get("parameters")) {
        (Some(_), Some(_)) => return None,
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return Some((name.to_string(), "{}".to_string())),
    };
    match args {
        Value::Object(_) => Some((name.to_string(), args.to_string())),
        Value::String(s) if s.trim_start().starts_with('{') => Some((name.to_string(), s.clone())),
        _ => None,
    }
}

/// Reads `response`'s text as calls when it has none of its own (see the module): the calls get ids
/// `text_call_{seq}_{n}` and `from_text`, the text before them stays the text, and an answer that ended
/// (`end`, `other`) now stops for its calls. Returns whether calls were read.
pub(crate) fn recover(
    response: &mut ModelResponse,
    offered: &[&str],
    seq: usize,
    max_calls: usize,
    mode: TextToolCalls,
) -> bool {
    if mode == TextToolCalls::Off || !response.tool_calls.is_empty() {
        return false;
    }
    let Some(text) = response.text.as_deref() else { return false };
    let Some(found) = read(text, offered, max_calls, mode == TextToolCalls::Constrained) else { return false };
    response.text = found.text;
    if found.calls.is_empty() {
        return false;
    }
    response.tool_calls = found
        .calls
        .into_iter()
        .enumerate()
        .map(|(n, (name, arguments))| ToolCall { id: format!("text_call_{seq}_{n}"), name, arguments, from_text: true })
        .collect();
    if matches!(response.stop, StopReason::End | StopReason::Other) {
        response.stop = StopReason::ToolCalls;
    }
    true
}

/// The `response_format` of the constrained mode: one call of an offered tool (`{"name", "arguments"}`,
/// the arguments as its schema says) or, when `answer`, a JSON string: the text answer.
pub(crate) fn constrained_format(tools: &[(&str, &Value)], answer: bool) -> Value {
    let mut choices: Vec<Value> = tools
        .iter()
        .map(|(name, params)| {
            json!({"type": "object", "properties": {"name": {"const": name}, "arguments": params},
                   "required": ["name", "arguments"], "additionalProperties": false})
        })
        .collect();
    if answer {
        choices.push(json!({"type": "string"}));
    }
    let mut schema = Map::new();
    schema.insert("anyOf".into(), Value::Array(choices));
    json!({"type": "json_schema", "json_schema": {"name": "ambit_turn", "schema": schema}})
}

/// A sink that holds back text that may turn out to be calls, so a streamed answer read as calls shows
/// only the text before them: text from a marker on (or all of it, when the answer opens with `{`, `[`
/// or a fence) waits for [`HeldText::finish`]; the rest passes as it arrives. Work is linear in the text.
pub(crate) struct HeldText<'a> {
    sink: &'a TextSink<'a>,
    state: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    text: String,
    /// Bytes of `text` passed on.
    shown: usize,
    /// Everything from `shown` on waits for the end.
    holding: bool,
    /// A character other than white space has come.
    started: bool,
}

impl<'a> HeldText<'a> {
    pub(crate) fn new(sink: &'a TextSink<'a>) -> Self {
        HeldText { sink, state: Mutex::new(Held::default()) }
    }

    /// Takes a piece of text, passing on what can no longer be part of a call (an answer opening with `"`
    /// is held too: the constrained mode's answer is a JSON string).
    pub(crate) fn push(&self, piece: &str) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.text.push_str(piece);
        if s.holding {
            return;
        }
        if !s.started {
            // Everything before this piece was white space: only the piece is looked at (looking at the
            // whole text on every piece was quadratic in a stream of white space).
            let Some(c) = piece.trim_start().chars().next() else { return };
            s.started = true;
            if matches!(c, '{' | '[' | '`' | '"') {
                s.holding = true;
                return;
            }
        }
        // Everything before `shown` holds no marker and no start of one.
        let tail = &s.text[s.shown..];
        let safe = match MARKERS.iter().filter_map(|m| tail.find(m)).min() {
            Some(p) => {
                s.holding = true;
                p
            }
            None => (0..tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .find(|&i| MARKERS.iter().any(|m| m.starts_with(&tail[i..])))
                .unwrap_or(tail.len()),
        };
        if safe > 0 {
            let start = s.shown;
            s.shown += safe;
            let out = s.text[start..start + safe].to_string();
            drop(s);
            (self.sink)(&out);
        }
    }

    /// The answer ended: unless its text was read as calls, what was held passes on, or, when the
    /// reader replaced the text (the constrained mode's JSON string, held whole since it opens with `"`),
    /// the new text.
    pub(crate) fn finish(&self, read_as_calls: bool, replaced: Option<&str>) {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if read_as_calls {
            return;
        }
        let rest = match replaced {
            Some(t) => t.to_string(),
            None => s.text[s.shown..].to_string(),
        };
        drop(s);
        if !rest.is_empty() {
            (self.sink)(&rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFERED: [&str; 2] = ["get_weather", "get_time"];

    fn calls(text: &str) -> Option<Vec<(String, String)>> {
        read(text, &OFFERED, 1024, false).map(|r| r.calls)
    }

    fn one(name: &str, args: &str) -> Option<Vec<(String, String)>> {
        Some(vec![(name.to_string(), args.to_string())])
    }

    #[test]
    fn each_form_is_read() {
        let paris = r#"{"city":"Paris"}"#;
        assert_eq!(calls(r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#), one("get_weather", paris));
        assert_eq!(calls(r#"  {"name": "get_weather", "parameters": {"city": "Paris"}}  "#), one("get_weather", paris));
        assert_eq!(
            calls("```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```"),
            one("get_weather", paris)
        );
        assert_eq!(
            calls("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
            one("get_weather", paris)
        );
        assert_eq!(
            calls("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"),
            one("get_weather", paris)
        );
        assert_eq!(
            calls(
                "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1b2c3d4e\"}]"
            ),
            one("get_weather", paris)
        );
        assert_eq!(calls("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"), one("get_weather", paris));
        // Arguments as the text of an object are kept as that text (the argument rule reads them).
        assert_eq!(
            calls(r#"{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}"#),
            one("get_weather", r#"{"city": "Paris"}"#)
        );
        // Several calls, in order; text before a tag stays the answer's text.
        let r = read(
            "Let me check.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n\
             <tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
            &OFFERED,
            1024,
            false,
        )
        .unwrap();
        assert_eq!(r.text.as_deref(), Some("Let me check."));
        assert_eq!(r.calls.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["get_weather", "get_time"]);
        assert_eq!(
            calls(r#"{"name": "get_time", "arguments": {}}; {"name": "get_weather", "arguments": {"city": "P"}}"#)
                .map(|c| c.len()),
            Some(2)
        );
    }

    #[test]
    fn hostile_text_stays_text() {
        for text in [
            // A tool not offered, alone or beside an offered one.
            r#"{"name": "delete_everything", "arguments": {}}"#,
            r#"[{"name": "get_weather", "arguments": {}}, {"name": "rm", "arguments": {}}]"#,
            "<tool_call>{\"name\": \"shell\", \"arguments\": {\"cmd\": \"rm -rf /\"}}</tool_call>",
            // Text that mentions JSON, or has more than the calls.
            r#"Here is an example: {"name": "get_weather", "arguments": {"city": "Paris"}}"#,
            r#"{"name": "get_weather", "arguments": {"city": "Paris"}} and then I will answer"#,
            "```json\n{\"name\": \"get_weather\", \"arguments\": {}}\n``` is how you would call it",
            r#"{"name": "Paris", "population": 2100000}"#,
            r#"{"name": "get_weather", "arguments": {}, "note": "extra"}"#,
            r#"{"name": "get_weather", "arguments": [1, 2]}"#,
            r#"{"name": "get_weather", "arguments": "rain"}"#,
            r#"{"name": "get_weather", "arguments": {}, "parameters": {}}"#,
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
            // Nested or unbalanced tags.
            "<tool_call><tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call></tool_call>",
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call> trailing",
            "<tool_call></tool_call>",
            "[TOOL_CALLS]",
            "[TOOL_CALLS]get_weather",
            "<|python_tag|>brave_search.call(query=\"x\")",
            "plain text",
            "",
            "[]",
        ] {
            assert_eq!(calls(text), None, "{text}");
        }
    }

    #[test]
    fn bounds_hold() {
        // Deep nesting: serde_json's recursion limit refuses it; the text stays text.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(calls(&deep), None);
        let deep_args = format!(
            "{{\"name\": \"get_weather\", \"arguments\": {}{}}}",
            "{\"a\":".repeat(200),
            "1".to_string() + &"}".repeat(200)
        );
        assert_eq!(calls(&deep_args), None);
        // Past MAX_TEXT_BYTES nothing is read, even a valid call.
        let pad = " ".repeat(MAX_TEXT_BYTES);
        let big = format!("{pad}{{\"name\": \"get_time\", \"arguments\": {{}}}}");
        assert_eq!(calls(&big), None);
        // Negative control: the same call without the padding is read.
        assert_eq!(calls(big.trim()), one("get_time", "{}"));
        // More calls than the limit: none.
        let many = "{\"name\": \"get_time\", \"arguments\": {}}\n".repeat(5);
        assert_eq!(read(&many, &OFFERED, 4, false), None);
        assert_eq!(read(&many, &OFFERED, 5, false).map(|r| r.calls.len()), Some(5));
        // A million tags is linear work (this finishes at once) and, unclosed and nested, no call.
        let tags = "<tool_call>".repeat(1 << 16);
        assert_eq!(calls(&tags), None);
    }

    #[test]
    fn a_json_string_is_the_text_only_in_the_constrained_mode() {
        let r = read(r#""It is \"sunny\".""#, &OFFERED, 8, true).unwrap();
        assert_eq!((r.text.as_deref(), r.calls.len()), (Some("It is \"sunny\"."), 0));
        assert_eq!(read(r#""It is sunny.""#, &OFFERED, 8, false), None);
        assert_eq!(read(r#""It is" "sunny""#, &OFFERED, 8, true), None);
    }

    fn held(pieces: &[&str], read_as_calls: bool) -> String {
        let out = Mutex::new(String::new());
        let sink = |t: &str| out.lock().unwrap().push_str(t);
        let h = HeldText::new(&sink);
        for p in pieces {
            h.push(p);
        }
        h.finish(read_as_calls, None);
        out.into_inner().unwrap()
    }

    #[test]
    fn held_text_shows_only_what_is_not_a_call() {
        assert_eq!(held(&["Hello", " world"], false), "Hello world");
        assert_eq!(held(&["Let me check. <tool", "_call>{\"name\"", "}</tool_call>"], true), "Let me check. ");
        assert_eq!(held(&["{\"name\": ", "\"get_time\"}"], true), "");
        // Text that only looked like the start of a marker passes on.
        assert_eq!(held(&["a <tool", "box> b"], false), "a <toolbox> b");
        assert_eq!(held(&["  [1, 2]"], false), "  [1, 2]");
    }
}
