//! `SKILL.md` as the Agent Skills format writes it: a YAML front matter block between two `---` lines,
//! then the Markdown body. Only the top-level keys ambit reads are interpreted (`name`, `description`,
//! `priority`); every other line of the front matter (Claude Code's `allowed-tools`, `license`, a nested
//! `metadata:` map, comments) is kept byte for byte, and a write changes only the lines of the keys it
//! sets. So a skill written by another tool is read, and written back, unchanged.

/// A `SKILL.md`, split.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SkillFile {
    /// The front matter's lines, without the `---` fences, each with its line ending.
    front: Vec<String>,
    /// Whether the file had front matter at all.
    has_front: bool,
    /// The opening fence as written (`---\n` or `---\r\n`, a byte-order mark before it kept).
    open_fence: String,
    /// The closing fence as written.
    close_fence: String,
    /// Everything after the closing fence.
    pub(crate) body: String,
}

impl SkillFile {
    /// Splits a `SKILL.md`. A file without front matter is all body.
    pub(crate) fn parse(text: &str) -> SkillFile {
        let mut lines = text.split_inclusive('\n');
        let none = || SkillFile {
            front: Vec::new(),
            has_front: false,
            open_fence: String::new(),
            close_fence: String::new(),
            body: text.to_string(),
        };
        let Some(first) = lines.next() else { return none() };
        if first.trim_start_matches('\u{feff}').trim_end() != "---" {
            return none();
        }
        let mut front = Vec::new();
        let mut consumed = first.len();
        for line in lines {
            consumed += line.len();
            if matches!(line.trim_end(), "---" | "...") {
                return SkillFile {
                    front,
                    has_front: true,
                    open_fence: first.to_string(),
                    close_fence: line.to_string(),
                    body: text.get(consumed..).unwrap_or_default().to_string(),
                };
            }
            front.push(line.to_string());
        }
        // An opening fence never closed: not front matter.
        none()
    }

    /// The file's text: the front matter as read (with the changed keys), then the body.
    pub(crate) fn render(&self) -> String {
        if !self.has_front {
            return self.body.clone();
        }
        let mut out = self.open_fence.clone();
        for line in &self.front {
            out.push_str(line);
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(if self.close_fence.is_empty() { "---\n" } else { &self.close_fence });
        out.push_str(&self.body);
        out
    }

    /// The value of top-level key `key` as a string: plain, single- or double-quoted, or a block scalar
    /// (`|`, `>`); `None` when the key is absent or holds a map or list.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        let (start, end) = self.key_span(key)?;
        let line = self.front.get(start)?;
        let rest = line.split_once(':').map(|(_, r)| r).unwrap_or_default().trim();
        let more: Vec<&str> =
            self.front.get(start + 1..end)?.iter().map(|l| l.trim_end_matches(['\n', '\r'])).collect();
        scalar(rest, &more)
    }

    /// Sets top-level key `key` to the string `value`, replacing its lines (the key's own and its
    /// continuation lines) with one line, or adding it at the end of the front matter. A file without
    /// front matter gets some.
    pub(crate) fn set(&mut self, key: &str, value: &str) {
        self.set_raw(key, &quote(value));
    }

    /// Sets top-level key `key` to `raw`, written as it is (a number).
    pub(crate) fn set_raw(&mut self, key: &str, raw: &str) {
        let line = format!("{key}: {raw}{}", self.line_ending());
        if !self.has_front {
            self.has_front = true;
            self.open_fence = "---\n".into();
            self.close_fence = "---\n".into();
        }
        match self.key_span(key) {
            Some((start, end)) => {
                self.front.splice(start..end, [line]);
            }
            None => {
                if let Some(last) = self.front.last_mut().filter(|l| !l.ends_with('\n')) {
                    last.push('\n');
                }
                self.front.push(line);
            }
        }
    }

    fn line_ending(&self) -> &'static str {
        if self.open_fence.ends_with("\r\n") { "\r\n" } else { "\n" }
    }

    /// The lines `start..end` of top-level key `key`: its own line and the indented or blank lines after
    /// it (trailing blank lines left out, so they stay where they are).
    fn key_span(&self, key: &str) -> Option<(usize, usize)> {
        let start = self.front.iter().position(|l| top_key(l) == Some(key))?;
        let mut end = start + 1;
        while let Some(l) = self.front.get(end) {
            let blank = l.trim().is_empty();
            if !(blank || l.starts_with([' ', '\t'])) {
                break;
            }
            end += 1;
        }
        while end > start + 1 && self.front.get(end - 1).is_some_and(|l| l.trim().is_empty()) {
            end -= 1;
        }
        Some((start, end))
    }
}

/// The key a top-level `key: value` line starts, if it is one.
fn top_key(line: &str) -> Option<&str> {
    if line.starts_with([' ', '\t', '#', '-']) {
        return None;
    }
    let (key, _) = line.split_once(':')?;
    let key = key.trim_end();
    (!key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')).then_some(key)
}

/// A scalar from the text after `key:` and the key's continuation lines.
fn scalar(rest: &str, more: &[&str]) -> Option<String> {
    let rest = strip_comment(rest);
    if let Some(style) = rest.chars().next().filter(|c| *c == '|' || *c == '>') {
        return Some(block_scalar(style, rest, more));
    }
    if let Some(inner) = rest.strip_prefix('"') {
        if more.is_empty() {
            return double_quoted(inner);
        }
        let joined = fold(std::iter::once(inner).chain(more.iter().map(|l| l.trim())));
        return double_quoted(&joined);
    }
    if let Some(inner) = rest.strip_prefix('\'') {
        let joined = fold(std::iter::once(inner).chain(more.iter().map(|l| l.trim())));
        let end = find_single_quote_end(&joined)?;
        return Some(joined.get(..end)?.replace("''", "'"));
    }
    if rest.is_empty() {
        // A nested map or list (or nothing at all): not a string.
        return more.iter().all(|l| l.trim().is_empty()).then(String::new).filter(|_| more.is_empty());
    }
    if rest.starts_with(['[', '{']) {
        return None;
    }
    Some(fold(std::iter::once(rest).chain(more.iter().map(|l| strip_comment(l.trim())))))
}

/// Lines folded as YAML folds a flow scalar: one space between lines, a blank line a line break.
fn fold<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut breaks = 0usize;
    for line in lines {
        let line = line.trim();
        if line.is_empty() {
            breaks += 1;
            continue;
        }
        if !out.is_empty() {
            if breaks > 0 {
                out.push_str(&"\n".repeat(breaks));
            } else {
                out.push(' ');
            }
        }
        breaks = 0;
        out.push_str(line);
    }
    out
}

/// ` # comment` cut off a plain value.
fn strip_comment(s: &str) -> &str {
    match s.find(" #") {
        Some(i) if !s.starts_with(['"', '\'']) => s.get(..i).unwrap_or(s).trim_end(),
        _ => s,
    }
}

/// `|` keeps line breaks, `>` folds them; `-` strips the final break, `+` keeps them all.
fn block_scalar(style: char, header: &str, more: &[&str]) -> String {
    let indent = more.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min();
    let lines: Vec<&str> = more.iter().map(|l| l.get(indent.unwrap_or(0).min(l.len())..).unwrap_or("")).collect();
    let mut text = if style == '|' {
        lines.join("\n")
    } else {
        let mut out = String::new();
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                let prev_blank = lines.get(i - 1).is_some_and(|p| p.is_empty());
                if l.is_empty() || l.starts_with(' ') {
                    out.push('\n');
                } else if !prev_blank {
                    out.push(' ');
                }
            }
            out.push_str(l);
        }
        out
    };
    let body_end = text.trim_end_matches('\n').len();
    text.truncate(body_end);
    if !header.contains('-') && !text.is_empty() {
        text.push('\n');
    }
    text
}

fn find_single_quote_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes.get(i) == Some(&b'\'') {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// A double-quoted scalar's content (after the opening quote), with its escapes.
fn double_quoted(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                '/' => out.push('/'),
                ' ' => out.push(' '),
                'x' => out.push(hex(&mut chars, 2)?),
                'u' => out.push(hex(&mut chars, 4)?),
                'U' => out.push(hex(&mut chars, 8)?),
                _ => return None,
            },
            c => out.push(c),
        }
    }
    None
}

fn hex(chars: &mut std::str::Chars<'_>, n: usize) -> Option<char> {
    let digits: String = chars.take(n).collect();
    char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
}

/// `value` as a one-line YAML scalar: plain when that reads back as the same string, else
/// double-quoted (JSON's escapes are YAML's).
fn quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value.trim() == value
        && !value.starts_with(|c: char| "-?:,[]{}#&*!|>'\"%@`".contains(c))
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with(':')
        && !value.chars().any(char::is_control)
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "null" | "~" | "on" | "off"
        )
        && value.parse::<f64>().is_err();
    if plain { value.to_string() } else { serde_json::Value::String(value.to_string()).to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_scalars_skill_files_use() {
        let text = "---\nname: pdf-tools\ndescription: \"Fill PDF forms: text, checkboxes\"\nlicense: Apache-2.0\n\
                    allowed-tools: Read, Bash(python:*)\nmetadata:\n  version: \"1.0\"\npriority: 3 # high\n\
                    folded: >\n  one\n  two\n\n  three\nliteral: |-\n  a\n   b\nsingle: 'it''s'\n---\n# Body\n";
        let f = SkillFile::parse(text);
        assert_eq!(f.get("name").as_deref(), Some("pdf-tools"));
        assert_eq!(f.get("description").as_deref(), Some("Fill PDF forms: text, checkboxes"));
        assert_eq!(f.get("priority").as_deref(), Some("3"));
        assert_eq!(f.get("metadata"), None);
        assert_eq!(f.get("folded").as_deref(), Some("one two\nthree\n"));
        assert_eq!(f.get("literal").as_deref(), Some("a\n b"));
        assert_eq!(f.get("single").as_deref(), Some("it's"));
        assert_eq!(f.body, "# Body\n");
        assert_eq!(f.render(), text, "an untouched file renders byte for byte");
    }

    #[test]
    fn a_set_changes_only_its_key_and_reads_back() {
        let text = "---\r\nname: x\r\ndescription: >\r\n  old\r\n  text\r\nextra: keep\r\n---\r\nbody\r\n";
        let mut f = SkillFile::parse(text);
        for v in ["plain words", "needs: quoting", "#hash", "true", "12", "line\nbreak", " padded", "\"quoted\""] {
            f.set("description", v);
            assert_eq!(SkillFile::parse(&f.render()).get("description").as_deref(), Some(v), "{v:?}");
        }
        f.set("description", "new");
        f.set_raw("priority", "5");
        assert_eq!(f.render(), "---\r\nname: x\r\ndescription: new\r\nextra: keep\r\npriority: 5\r\n---\r\nbody\r\n");
        let mut bare = SkillFile::parse("just a body\n");
        bare.set("name", "n");
        assert_eq!(bare.render(), "---\nname: n\n---\njust a body\n");
    }
}
