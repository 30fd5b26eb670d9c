//! The session rules as plain functions over the log: the live window after compactions, what a
//! compaction summarises and keeps, `conversation_search`, `conversation_read` and `context_check`'s
//! report. No I/O here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::Message;

/// The share of the window at which auto-compaction fires, by default.
pub const DEFAULT_COMPACT_AT: f64 = 0.85;
/// Rounds kept verbatim by a compaction, by default.
pub const DEFAULT_KEEP_RECENT: usize = 2;
/// `conversation_read` returns at most this many entries.
pub const READ_MAX: usize = 20;
/// `conversation_search` returns at most this many matches.
pub const SEARCH_MAX: usize = 100;
/// Text longer than this is shown cut in search and read results.
const SHOWN_CHARS: usize = 2000;

/// One entry of a session's log. `index` is the `#N` the conversation tools show (1-based).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The entry's number in the log (1-based), as the conversation tools show it (`#N`).
    pub index: i64,
    #[serde(flatten)]
    /// What it holds.
    pub item: Item,
}

/// What an entry holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    /// A message of the conversation.
    Message {
        /// The message.
        message: Message,
    },
    /// A compaction: the live window restarts with the summary that follows, then the messages from
    /// `keep_from` on.
    Boundary {
        /// The first entry kept verbatim after the summary.
        keep_from: i64,
    },
    /// The model-written summary of what the boundary before it took out of the window.
    Summary {
        /// The summary.
        text: String,
    },
}

impl Item {
    /// The entry's kind as stored (`message`, `boundary`, `summary`).
    pub fn kind(&self) -> &'static str {
        match self {
            Item::Message { .. } => "message",
            Item::Boundary { .. } => "boundary",
            Item::Summary { .. } => "summary",
        }
    }

    /// The body as stored (JSON, without the kind).
    pub fn body(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("kind");
        }
        v
    }

    /// Reads a stored entry back.
    pub fn from_stored(kind: &str, body: &str) -> Result<Item, String> {
        let mut v: Value = serde_json::from_str(body).map_err(|e| format!("entry body: {e}"))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("kind".into(), Value::String(kind.to_string()));
        }
        serde_json::from_value(v).map_err(|e| format!("entry of kind {kind}: {e}"))
    }
}

/// The opening words of the summary message in the live window.
pub const SUMMARY_HEADER: &str = "[Summary of the earlier conversation. Compaction never deletes: conversation_search and \
                                  conversation_read (by #N) still reach every turn it summarised.]";

/// The messages the model sees now: after the last compaction, its summary and the messages kept.
pub fn live_window(entries: &[Entry]) -> Vec<(i64, Message)> {
    let last = entries.iter().rposition(|e| matches!(e.item, Item::Boundary { .. }));
    let Some(at) = last else {
        return messages_of(entries);
    };
    let Item::Boundary { keep_from } = entries[at].item else { unreachable!("rposition found a boundary") };
    let mut out = Vec::new();
    if let Some(Entry { index, item: Item::Summary { text } }) = entries.get(at + 1) {
        out.push((*index, Message::user(format!("{SUMMARY_HEADER}\n{text}"))));
    }
    out.extend(messages_of(entries).into_iter().filter(|(i, _)| *i >= keep_from));
    out
}

fn messages_of(entries: &[Entry]) -> Vec<(i64, Message)> {
    entries
        .iter()
        .filter_map(|e| match &e.item {
            Item::Message { message } => Some((e.index, message.clone())),
            _ => None,
        })
        .collect()
}

/// What a compaction does with the live window: summarise the entries before `keep_from`, keep the
/// rest verbatim. `None` when there is nothing to summarise.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The entries to summarise, with their numbers.
    pub summarise: Vec<(i64, Message)>,
    /// The first entry kept verbatim.
    pub keep_from: i64,
}

/// Where the rounds of `window` start. A round opens with a user message, or with a model turn (a
/// provider item or an assistant message) that follows tool results; it holds everything up to the next
/// round, so an assistant's tool calls and their results are always in the same round.
fn round_starts(window: &[(i64, Message)]) -> Vec<usize> {
    (0..window.len())
        .filter(|&i| match &window[i].1 {
            Message::User { .. } => true,
            Message::Assistant { .. } | Message::Provider { .. } => {
                i == 0 || matches!(window[i - 1].1, Message::Tool { .. })
            }
            Message::Tool { .. } => i == 0,
        })
        .collect()
}

/// Plans a compaction keeping the latest `keep_recent` rounds. A tail is kept only when older history
/// remains to summarise.
pub fn plan(window: &[(i64, Message)], keep_recent: usize, next_index: i64) -> Option<Plan> {
    if window.is_empty() {
        return None;
    }
    let starts = round_starts(window);
    let cut =
        if keep_recent == 0 || starts.len() <= keep_recent { window.len() } else { starts[starts.len() - keep_recent] };
    let cut = if cut == 0 { window.len() } else { cut };
    let keep_from = window.get(cut).map_or(next_index, |(i, _)| *i);
    Some(Plan { summarise: window[..cut].to_vec(), keep_from })
}

/// Plans a compaction at a round boundary inside a run. The round in flight (the one holding the latest
/// model turn, whose tool results the model has not read yet) always stays verbatim, after the
/// `keep_recent` rounds before it, as many of those as leave the first round to summarise. `None` when
/// nothing worth summarising precedes them (nothing, or only the last compaction's summary).
pub fn plan_in_run(window: &[(i64, Message)], keep_recent: usize) -> Option<Plan> {
    let starts = round_starts(window);
    let turn = window.iter().rposition(|(_, m)| matches!(m, Message::Assistant { .. } | Message::Provider { .. }));
    let current = match turn {
        Some(t) => starts.iter().rposition(|&s| s <= t)?,
        None => starts.len().checked_sub(1)?,
    };
    if current == 0 {
        return None;
    }
    let cut = starts[current.saturating_sub(keep_recent).max(1)];
    let summarise = &window[..cut];
    let only_a_summary =
        |(_, m): &(i64, Message)| matches!(m, Message::User { content, .. } if content.starts_with(SUMMARY_HEADER));
    if summarise.is_empty() || (summarise.len() == 1 && only_a_summary(&summarise[0])) {
        return None;
    }
    Some(Plan { summarise: summarise.to_vec(), keep_from: window[cut].0 })
}

/// One message as text, for the summariser and the conversation tools.
pub fn render(message: &Message) -> (&'static str, String) {
    match message {
        Message::User { content, .. } => ("user", content.clone()),
        Message::Assistant { content, tool_calls } => {
            let mut text = content.clone().unwrap_or_default();
            for c in tool_calls {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!("[call {} {}]", c.name, c.arguments));
            }
            ("assistant", text)
        }
        Message::Tool { name, content, is_error, .. } => {
            let tag = if *is_error { "error" } else { "result" };
            ("tool", format!("[{tag} of {name}] {content}"))
        }
        Message::Provider { items, .. } => {
            let kinds: Vec<&str> =
                items.iter().map(|i| i.get("type").and_then(serde_json::Value::as_str).unwrap_or("item")).collect();
            ("assistant", format!("[provider {}]", kinds.join(", ")))
        }
    }
}

fn render_entry(e: &Entry) -> (&'static str, String) {
    match &e.item {
        Item::Message { message } => render(message),
        Item::Boundary { keep_from } => ("compaction", format!("--- compaction boundary (kept from #{keep_from}) ---")),
        Item::Summary { text } => ("summary", text.clone()),
    }
}

fn shown(text: &str) -> String {
    if text.chars().count() <= SHOWN_CHARS {
        return text.to_string();
    }
    let cut: String = text.chars().take(SHOWN_CHARS).collect();
    format!("{cut}… [{} more characters]", text.chars().count() - SHOWN_CHARS)
}

/// `conversation_search`: matching lines, each tagged `#N role:`. A literal is matched without regard
/// to case; a regex as written.
pub fn search(entries: &[Entry], query: &str, is_regex: bool, limit: usize) -> Result<String, String> {
    if query.is_empty() {
        return Err("query is empty".into());
    }
    let limit = limit.clamp(1, SEARCH_MAX);
    let re = if is_regex {
        Some(regex::Regex::new(query).map_err(|e| format!("query is not a valid regular expression: {e}"))?)
    } else {
        None
    };
    let needle = query.to_lowercase();
    let mut hits = Vec::new();
    for e in entries {
        let (role, text) = render_entry(e);
        for line in text.lines() {
            let found = match &re {
                Some(r) => r.is_match(line),
                None => line.to_lowercase().contains(&needle),
            };
            if found {
                hits.push(format!("#{} {role}: {}", e.index, shown(line.trim())));
                break;
            }
        }
        if hits.len() >= limit {
            break;
        }
    }
    if hits.is_empty() {
        return Ok(format!("No matches for {query:?}."));
    }
    Ok(format!("{}\n(conversation_read {{\"start\": N}} reads from #N)", hits.join("\n")))
}

/// `conversation_read`: `limit` entries (at most [`READ_MAX`]) from `#start` on.
pub fn read(entries: &[Entry], start: i64, limit: usize) -> Result<String, String> {
    if start < 1 {
        return Err(format!("start must be 1 or more, got {start}"));
    }
    let limit = limit.clamp(1, READ_MAX);
    let last = entries.last().map_or(0, |e| e.index);
    let out: Vec<String> = entries
        .iter()
        .filter(|e| e.index >= start)
        .take(limit)
        .map(|e| {
            let (role, text) = render_entry(e);
            format!("#{} {role}:\n{}", e.index, shown(&text))
        })
        .collect();
    if out.is_empty() {
        return Err(format!("there is no #{start}: this session has {last} entries"));
    }
    Ok(out.join("\n\n"))
}

/// Tokens, estimated from characters (about four per token), the same way everywhere.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// What a request carries besides the conversation: its instructions (the catalog included) and tool
/// schemas, estimated, as the loop builds the request (SPEC §4: deferred and hidden tools are not in it,
/// MCP tools and the discovery tools are).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overhead {
    /// Instructions and tool schemas, estimated in tokens.
    pub tokens: u64,
    /// The tool schemas counted.
    pub tools: usize,
}

impl Overhead {
    /// The estimate for a request's instructions and tools.
    pub fn of(instructions: Option<&str>, tools: &[crate::tools::ToolSpec]) -> Overhead {
        // What a wire sends of each tool: its name, description and schema.
        let specs: Vec<serde_json::Value> = tools
            .iter()
            .map(|t| serde_json::json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        let specs = serde_json::to_string(&specs).unwrap_or_default();
        Overhead { tokens: estimate_tokens(instructions.unwrap_or("")) + estimate_tokens(&specs), tools: tools.len() }
    }
}

/// The window's use as `context_check` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauge {
    /// The model's context window, in tokens.
    pub window: u64,
    /// Instructions and tool schemas, estimated.
    pub overhead: u64,
    /// How many tool schemas the overhead counts: those the request carries (SPEC §4).
    pub tool_schemas: usize,
    /// The conversation, estimated.
    pub conversation: u64,
    /// The share of the window at which auto-compaction fires.
    pub compact_at: f64,
    /// Compactions so far.
    pub compactions: usize,
    /// What the provider counted for the last request's whole prompt (input, cache read and cache
    /// write tokens), when it reported a count; the use is then that plus `since`.
    pub reported: Option<u64>,
    /// The messages added after that request, estimated.
    pub since: u64,
}

impl Gauge {
    /// Tokens in use: the provider's count plus what came since, else the estimates.
    pub fn used(&self) -> u64 {
        match self.reported {
            Some(reported) => reported.saturating_add(self.since),
            None => self.overhead + self.conversation,
        }
    }

    fn ceiling(&self) -> f64 {
        self.window as f64 * self.compact_at
    }

    /// Whether auto-compaction fires now.
    pub fn over(&self) -> bool {
        self.used() as f64 >= self.ceiling()
    }

    /// Whether compaction could bring the use under the ceiling at all: not when the fixed overhead
    /// alone is past it.
    pub fn reclaimable(&self) -> bool {
        (self.overhead as f64) < self.ceiling()
    }

    /// The gauge as `context_check` tells it to the model.
    pub fn report(&self) -> String {
        let used = self.used();
        let pct = |n: u64| (n * 100).checked_div(self.window).unwrap_or(0);
        let ceiling = self.ceiling() as u64;
        let headroom = ceiling.saturating_sub(used);
        let compactions = match self.compactions {
            0 => "none, so nothing has been summarized away yet".to_string(),
            n => format!("{n}; conversation_search and conversation_read still reach what they summarized"),
        };
        let source = match self.reported {
            Some(reported) => format!(
                "Measured: the provider counted {reported} tokens for the last request; about {} tokens added since \
                 are estimated.",
                self.since
            ),
            None => "Estimated: no token count reported by the provider yet, so the whole window is estimated \
                     (about 4 characters per token)."
                .to_string(),
        };
        format!(
            "Using {used} of {} tokens ({}%).\nHeadroom: {headroom} tokens before the context ceiling at {}%. \
             Auto-compaction fires there, before the next model request.\n{source}\nFixed overhead: about {} \
             tokens of instructions and the {} tool schemas a request carries (estimated). Compaction does not \
             reclaim this.\nConversation: about {} tokens, which is the part compaction acts on.\nCompactions so \
             far: {compactions}.",
            self.window,
            pct(used),
            (self.compact_at * 100.0).round() as u64,
            self.overhead,
            self.tool_schemas,
            used.saturating_sub(self.overhead),
        )
    }
}

/// One message, estimated in tokens (its text, and a few for its framing).
pub fn message_tokens(message: &Message) -> u64 {
    estimate_tokens(&render(message).1) + 4
}

/// Messages, estimated in tokens.
pub fn messages_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(message_tokens).sum()
}

/// The conversation part of the gauge: the live window's messages.
pub fn conversation_tokens(window: &[(i64, Message)]) -> u64 {
    window.iter().map(|(_, m)| message_tokens(m)).sum()
}

/// The most sessions `session_search` returns.
pub const SESSION_SEARCH_MAX: usize = 100;

/// What `session_search` matches in a session's log: user and assistant text and compaction summaries,
/// not tool calls, tool results or provider items.
pub fn said(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match &e.item {
            Item::Message { message: Message::User { content, .. } } => Some(content.clone()),
            Item::Message { message: Message::Assistant { content: Some(c), .. } } => Some(c.clone()),
            Item::Summary { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// How a session matches a `session_search` query: `Some((title_has_every_word, words_in_best_line,
/// best_line))`, or `None` when nothing matches. Words are compared case-insensitively.
pub fn session_match(words: &[String], title: &str, said: &[String]) -> Option<(bool, usize, String)> {
    let title_lower = title.to_lowercase();
    let in_title = !words.is_empty() && words.iter().all(|w| title_lower.contains(w.as_str()));
    let mut best: Option<(usize, String)> = None;
    for text in said {
        for line in text.lines() {
            let lower = line.to_lowercase();
            let n = words.iter().filter(|w| lower.contains(w.as_str())).count();
            if n > 0 && best.as_ref().is_none_or(|(m, _)| n > *m) {
                best = Some((n, line.trim().chars().take(200).collect()));
            }
        }
    }
    match (in_title, best) {
        (true, best) => Some((true, best.as_ref().map_or(0, |b| b.0), best.map(|b| b.1).unwrap_or_default())),
        (false, Some((n, line))) => Some((false, n, line)),
        (false, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(i: i64, t: &str) -> Entry {
        Entry { index: i, item: Item::Message { message: Message::user(t) } }
    }
    fn asst(i: i64, t: &str) -> Entry {
        Entry {
            index: i,
            item: Item::Message { message: Message::Assistant { content: Some(t.into()), tool_calls: vec![] } },
        }
    }

    fn log() -> Vec<Entry> {
        vec![
            user(1, "the auth token is abc"),
            asst(2, "noted"),
            user(3, "deploy"),
            asst(4, "deployed"),
            user(5, "status?"),
            asst(6, "green"),
        ]
    }

    #[test]
    fn stored_items_round_trip() {
        for e in log().into_iter().chain([
            Entry { index: 7, item: Item::Boundary { keep_from: 3 } },
            Entry { index: 8, item: Item::Summary { text: "s".into() } },
        ]) {
            let body = e.item.body().to_string();
            assert!(!body.contains("\"kind\""), "{body}");
            assert_eq!(Item::from_stored(e.item.kind(), &body).unwrap(), e.item);
        }
    }

    #[test]
    fn compaction_keeps_recent_rounds_and_the_window_restarts_at_the_summary() {
        let entries = log();
        let window = live_window(&entries);
        let p = plan(&window, 2, 7).unwrap();
        assert_eq!(p.keep_from, 3);
        assert_eq!(p.summarise.len(), 2);
        // keep_recent 0 or too few rounds: everything is summarised.
        assert_eq!(plan(&window, 0, 7).unwrap().keep_from, 7);
        assert_eq!(plan(&window, 3, 7).unwrap().keep_from, 7);
        let mut after = entries.clone();
        after.push(Entry { index: 7, item: Item::Boundary { keep_from: 3 } });
        after.push(Entry { index: 8, item: Item::Summary { text: "token abc noted".into() } });
        let w = live_window(&after);
        assert_eq!(w.len(), 5);
        assert!(matches!(&w[0].1, Message::User { content, .. } if content.starts_with(SUMMARY_HEADER)));
        assert_eq!(w[1].0, 3);
        // Nothing was deleted: the summarised turn is still found and read.
        let found = search(&after, "AUTH TOKEN", false, 20).unwrap();
        assert!(found.starts_with("#1 user: the auth token is abc"), "{found}");
        assert!(read(&after, 1, 2).unwrap().starts_with("#1 user:\nthe auth token is abc\n\n#2 assistant:\nnoted"));
    }

    #[test]
    fn search_by_regex_is_case_sensitive_and_limits_apply() {
        let entries = log();
        assert_eq!(search(&entries, "^de", true, 20).unwrap().lines().next().unwrap(), "#3 user: deploy");
        assert!(search(&entries, "^DE", true, 20).unwrap().starts_with("No matches"));
        assert_eq!(search(&entries, "e", false, 2).unwrap().lines().count(), 3);
        assert!(search(&entries, "(", true, 20).unwrap_err().contains("not a valid regular expression"));
    }

    #[test]
    fn read_is_bounded() {
        let many: Vec<Entry> = (1..=30).map(|i| user(i, "x")).collect();
        assert_eq!(read(&many, 5, 100).unwrap().matches("user:").count(), READ_MAX);
        assert!(read(&many, 31, 1).unwrap_err().contains("there is no #31: this session has 30 entries"));
        assert!(read(&many, 0, 1).is_err());
    }

    #[test]
    fn the_gauge_fires_at_its_share_of_the_window() {
        let g = Gauge {
            window: 1000,
            overhead: 100,
            tool_schemas: 3,
            conversation: 749,
            compact_at: 0.85,
            compactions: 0,
            reported: None,
            since: 0,
        };
        assert!(!g.over());
        assert!(g.report().starts_with("Using 849 of 1000 tokens (84%).\nHeadroom: 1 tokens"), "{}", g.report());
        assert!(g.report().contains("\nEstimated: no token count reported"), "{}", g.report());
        let g = Gauge { conversation: 750, ..g };
        assert!(g.over() && g.reclaimable());
        // A count the provider reported replaces the estimate; only what was added since is estimated.
        let g = Gauge { reported: Some(840), since: 9, ..g };
        assert_eq!(g.used(), 849);
        assert!(!g.over());
        let report = g.report();
        assert!(report.contains("\nMeasured: the provider counted 840 tokens for the last request; about 9 tokens"));
        assert!(report.contains("\nConversation: about 749 tokens"), "{report}");
        assert!(Gauge { since: 10, ..g.clone() }.over());
        assert!(!Gauge { overhead: 850, ..g }.reclaimable());
    }

    fn turn(i: i64, calls: &[&str]) -> (i64, Message) {
        let tool_calls = calls
            .iter()
            .map(|id| crate::model::ToolCall {
                id: id.to_string(),
                name: "t".into(),
                arguments: "{}".into(),
                from_text: false,
            })
            .collect();
        (i, Message::Assistant { content: None, tool_calls })
    }
    fn result(i: i64, id: &str) -> (i64, Message) {
        (
            i,
            Message::Tool {
                call_id: id.into(),
                name: "t".into(),
                content: "r".into(),
                is_error: false,
                parts: Vec::new(),
            },
        )
    }
    fn said(i: i64, t: &str) -> (i64, Message) {
        (i, Message::user(t))
    }

    #[test]
    fn a_compaction_inside_a_run_keeps_the_round_in_flight_and_never_splits_calls_from_results() {
        // One user message, then tool rounds: each model turn after results opens a round.
        let w = vec![
            said(1, "go"),
            turn(2, &["a"]),
            result(3, "a"),
            turn(4, &["b", "c"]),
            result(5, "b"),
            result(6, "c"),
            turn(7, &["d"]),
            result(8, "d"),
        ];
        assert_eq!(round_starts(&w), [0, 3, 6]);
        // keep_recent 1: the round before the one in flight stays, the first is summarised.
        let p = plan_in_run(&w, 1).unwrap();
        assert_eq!((p.summarise.len(), p.keep_from), (3, 4));
        // keep_recent 0: only the round in flight stays.
        assert_eq!(plan_in_run(&w, 0).unwrap().keep_from, 7);
        // keep_recent past what there is: the first round is still summarised.
        assert_eq!(plan_in_run(&w, 5).unwrap().keep_from, 4);
        // A steering message after the results does not leave the round in flight to be summarised.
        let mut steered = w.clone();
        steered.push(said(9, "also this"));
        assert_eq!(plan_in_run(&steered, 0).unwrap().keep_from, 7);
        // Nothing before the round in flight, or only the last summary: nothing to do.
        assert!(plan_in_run(&w[..3], 2).is_none());
        let summary = said(10, &format!("{SUMMARY_HEADER}\nearlier"));
        let after = vec![summary.clone(), turn(11, &["e"]), result(12, "e"), turn(13, &["f"]), result(14, "f")];
        assert_eq!(round_starts(&after), [0, 3]);
        assert_eq!(plan_in_run(&after, 0).unwrap().keep_from, 13);
        let fresh = vec![summary, said(11, "next"), turn(12, &["e"]), result(13, "e")];
        assert!(plan_in_run(&fresh, 0).is_none());
        // Between runs, tool rounds count as rounds too.
        assert_eq!(plan(&w, 2, 9).unwrap().keep_from, 4);
    }
}
