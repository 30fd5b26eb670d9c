//! The memory rules, as plain functions: the bounds on every field, the query terms both stores search
//! for, and the rendering of memories for the model (the per-turn block and recall results).

use super::{MemoryError, MemoryKind, MemoryRecord, Recall, Remember, Search};

/// At most this many memories in one recall.
pub const MAX_RECALL: usize = 50;
/// Bounds, in bytes of UTF-8.
pub const MAX_AGENT_BYTES: usize = 128;
/// The longest key.
pub const MAX_KEY_BYTES: usize = 200;
/// The longest subject (a caller's id).
pub const MAX_SUBJECT_BYTES: usize = 200;
/// The longest title.
pub const MAX_TITLE_BYTES: usize = 200;
/// The longest body.
pub const MAX_BODY_BYTES: usize = 8_192;
/// The longest tag.
pub const MAX_TAG_BYTES: usize = 64;
/// The longest source (a session id).
pub const MAX_SOURCE_BYTES: usize = 128;
/// The longest query.
pub const MAX_QUERY_BYTES: usize = 1_000;
/// At most this many tags on a memory, and in a filter.
pub const MAX_TAGS: usize = 16;
/// At most this many subjects in a filter.
pub const MAX_SUBJECTS: usize = 16;
/// Salience runs from 1 (trivia) to 10 (essential); 5 when not given.
pub const MIN_SALIENCE: i64 = 1;
/// The highest salience.
pub const MAX_SALIENCE: i64 = 10;
/// The salience of a memory given none.
pub const DEFAULT_SALIENCE: i64 = 5;
/// A query is searched for at most this many distinct terms.
pub const MAX_TERMS: usize = 24;
/// A title made from a body's first line is clipped to this many characters.
const DERIVED_TITLE_CHARS: usize = 80;

/// Checks a text field: not blank, no control characters but newlines and tabs in a body, at most
/// `limit` bytes. The refusal names the field and the limit.
pub fn check_text(field: &str, value: &str, limit: usize) -> Result<(), MemoryError> {
    if value.trim().is_empty() {
        return Err(MemoryError::invalid(field, "must not be blank"));
    }
    if value.len() > limit {
        return Err(MemoryError::invalid(field, format!("is {} bytes; the limit is {limit} bytes", value.len())));
    }
    let multiline = field == "body";
    if value.chars().any(|c| (c.is_control() || is_line_break(c)) && !(multiline && c.is_whitespace())) {
        return Err(MemoryError::invalid(field, "must not hold control characters or line breaks"));
    }
    Ok(())
}

/// Checks an agent's name (the namespace).
pub fn check_agent(agent: &str) -> Result<(), MemoryError> {
    check_text("agent", agent, MAX_AGENT_BYTES)
}

/// Tags as stored: trimmed, lower case, deduplicated in order, each checked; at most [`MAX_TAGS`].
pub fn normalise_tags(tags: &[String]) -> Result<Vec<String>, MemoryError> {
    let too_many =
        || MemoryError::invalid("tags", format!("more than {MAX_TAGS} distinct tags; the limit is {MAX_TAGS}"));
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.trim().to_lowercase();
        if t.is_empty() {
            continue;
        }
        check_text("tags", &t, MAX_TAG_BYTES)?;
        if t.contains('|') {
            return Err(MemoryError::invalid("tags", format!("tag '{t}' holds '|'")));
        }
        if !out.contains(&t) {
            // Refused as soon as one tag too many is seen: the work stays bounded by the limit, not by
            // the length of the list a caller (or the model) sent.
            if out.len() == MAX_TAGS {
                return Err(too_many());
            }
            out.push(t);
        }
    }
    Ok(out)
}

/// Validates a memory to save: every given field within bounds, tags normalised; without a key, the
/// body is required (a create) and a missing title comes from the body's first line.
pub fn validate_remember(mut m: Remember) -> Result<Remember, MemoryError> {
    for (field, value, limit) in [
        ("key", &m.key, MAX_KEY_BYTES),
        ("subject", &m.subject, MAX_SUBJECT_BYTES),
        ("title", &m.title, MAX_TITLE_BYTES),
        ("body", &m.body, MAX_BODY_BYTES),
        ("source", &m.source, MAX_SOURCE_BYTES),
    ] {
        if let Some(v) = value {
            check_text(field, v, limit)?;
        }
    }
    if let Some(s) = m.salience
        && !(MIN_SALIENCE..=MAX_SALIENCE).contains(&s)
    {
        return Err(MemoryError::invalid("salience", format!("{s} is outside {MIN_SALIENCE} to {MAX_SALIENCE}")));
    }
    if let Some(tags) = &m.tags {
        m.tags = Some(normalise_tags(tags)?);
    }
    if m.key.is_none() && m.body.is_none() {
        return Err(MemoryError::invalid("body", "is required for a new memory"));
    }
    Ok(m)
}

/// A title for a memory saved without one: the body's first non-blank line, clipped.
pub fn derived_title(body: &str) -> String {
    // The first line by every line break a reader may honour (`\r`, U+2028, U+2029, …), its whitespace
    // collapsed: a title is one line, in the block and in results.
    let line = body.split(is_line_break).map(one_line).find(|l| !l.is_empty()).unwrap_or_default();
    clip(&line, DERIVED_TITLE_CHARS)
}

/// A character that ends a line for some reader: `\n`, `\r`, vertical tab, form feed, NEL, U+2028, U+2029.
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `text` on one line: every run of whitespace (line breaks included) one space, trimmed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` clipped to `max` characters; a clipped text ends in `…`.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Words no search should turn on: they match nearly every memory.
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because",
    "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing",
    "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here",
    "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most",
    "my", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were",
    "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// Whether a lower-case word is worth searching for (and so indexing): two characters or more, not a
/// stop word.
pub(crate) fn searchable(word: &str) -> bool {
    word.chars().nth(1).is_some() && !STOP_WORDS.contains(&word)
}

/// The terms a query searches for: its words (letters and digits), lower case, stop words and
/// one-character words left out, each once, in order, at most [`MAX_TERMS`]. Both stores search for
/// exactly these, stemmed by the one index ([`super::index`]).
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        let w = word.to_lowercase();
        if !searchable(&w) || out.contains(&w) {
            continue;
        }
        out.push(w);
        if out.len() == MAX_TERMS {
            break;
        }
    }
    out
}

/// Validates a recall into the search the store runs.
pub fn validate_recall(r: &Recall) -> Result<Search, MemoryError> {
    if r.limit == 0 || r.limit > MAX_RECALL {
        return Err(MemoryError::invalid("limit", format!("{} is outside 1 to {MAX_RECALL}", r.limit)));
    }
    let terms = match &r.query {
        Some(q) => {
            check_text("query", q, MAX_QUERY_BYTES)?;
            terms(q)
        }
        None => Vec::new(),
    };
    let tags = normalise_tags(&r.tags)?;
    if r.subjects.len() > MAX_SUBJECTS {
        return Err(MemoryError::invalid(
            "subjects",
            format!("{} subjects; the limit is {MAX_SUBJECTS}", r.subjects.len()),
        ));
    }
    for s in &r.subjects {
        check_text("subjects", s, MAX_SUBJECT_BYTES)?;
    }
    Ok(Search { terms, tags, kind: r.kind, subjects: r.subjects.clone(), no_subject: false, limit: r.limit })
}

/// Tags as the store keeps them, `|a|b|` (so a filter looks for `|a|`), and as words for search.
pub fn stored_tags(tags: &[String]) -> (String, String) {
    if tags.is_empty() {
        return ("|".to_string(), String::new());
    }
    (format!("|{}|", tags.join("|")), tags.join(" "))
}

/// Tags read back from their stored form.
pub fn parse_tags(stored: &str) -> Vec<String> {
    stored.split('|').filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// What the per-turn block shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderLimits {
    /// Memories listed (default 10).
    pub entries: usize,
    /// Characters of a body shown (default 300; a clipped body ends in `…`).
    pub body_chars: usize,
    /// Bytes of the whole block (default 4,096): entries that would pass it are left out and counted.
    pub max_bytes: usize,
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits { entries: 10, body_chars: 300, max_bytes: 4_096 }
    }
}

/// The heading of the per-turn block.
pub const BASELINE_HEADING: &str = "# Memory";

/// One memory as the model reads it: `#id [kind, salience N, pinned, tags: a, b] Title: body`.
pub fn render_line(m: &MemoryRecord, body_chars: usize) -> String {
    let mut facets = vec![m.kind.as_str().to_string(), format!("salience {}", m.salience)];
    if m.pinned {
        facets.push("pinned".into());
    }
    if let Some(k) = &m.key {
        facets.push(format!("key {k}"));
    }
    if let Some(s) = &m.subject {
        facets.push(format!("about {s}"));
    }
    if !m.tags.is_empty() {
        facets.push(format!("tags: {}", m.tags.join(", ")));
    }
    let body = clip(&one_line(&m.body), body_chars);
    // One line, whatever a stored field holds (a row written before a check, or by another program).
    one_line(&format!("- #{} [{}] {}: {}", m.id, facets.join(", "), m.title, body))
}

/// The per-turn block: the baseline memories in the order given (pinned, then salience), bounded by
/// `limits`; `None` when there are none. Deterministic: the same memories give the same bytes. Given
/// one memory more than `limits.entries`, it says that more are stored.
pub fn render_baseline(memories: &[MemoryRecord], limits: &RenderLimits) -> Option<String> {
    if memories.is_empty() || limits.entries == 0 {
        return None;
    }
    let mut out = format!(
        "{BASELINE_HEADING}\nWhat you saved in earlier sessions, pinned first, then by salience. memory_recall searches \
         all of it.\n"
    );
    let mut shown = 0;
    for m in memories.iter().take(limits.entries) {
        let line = render_line(m, limits.body_chars);
        // Room is kept for the closing line.
        if out.len() + line.len() + 1 + 80 > limits.max_bytes {
            break;
        }
        out.push_str(&line);
        out.push('\n');
        shown += 1;
    }
    let left = memories.len() - shown;
    if left > 0 {
        let more = if memories.len() > limits.entries { "more memories are" } else { "memories are" };
        out.push_str(&format!("({} shown; {more} stored: memory_recall reaches them)\n", shown));
    }
    Some(out.trim_end().to_string())
}

/// Recall results as the model reads them, bodies whole.
pub fn render_results(memories: &[MemoryRecord]) -> String {
    if memories.is_empty() {
        return "No memories matched.".to_string();
    }
    memories.iter().map(|m| render_line(m, MAX_BODY_BYTES)).collect::<Vec<_>>().join("\n")
}

/// A kind given as a string, checked.
pub fn kind_arg(field: &str, s: Option<&str>) -> Result<Option<MemoryKind>, MemoryError> {
    s.map(|s| MemoryKind::parse(field, s)).transpose()
}
