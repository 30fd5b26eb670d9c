//! The redactor (SPEC §15): every credential value the broker knows, and its common encodings, replaced
//! by `[credential:alias]`. The encodings are the ones a tool's output (or code the model writes)
//! produces without thinking: base64 (standard and URL-safe, padded or not, at each of the three byte
//! offsets the value can sit at inside a longer encoded text), URL-encoding (percent, upper and lower
//! hex, `+` for spaces), JSON string escaping, hex (lower and upper), and the value reversed. A value
//! transformed any other way (split in pieces, XORed, re-encoded twice) is not recognised: redaction is
//! a net under the delivery rules, not a sandbox.

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 of `bytes` without padding, in `alphabet`.
fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// The base64 characters that depend only on `value` when it sits `offset` bytes (0, 1 or 2) into a
/// 3-byte group of a longer text: the characters whose six bits all fall inside the value.
fn base64_core(value: &[u8], offset: usize, alphabet: &[u8; 64]) -> String {
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(value);
    let encoded = base64(&padded, alphabet);
    let first = (8 * offset).div_ceil(6);
    let last = 8 * padded.len() / 6;
    encoded.get(first..last).unwrap_or_default().to_string()
}

fn percent(value: &[u8], upper: bool, everything: bool, plus_for_space: bool) -> String {
    let mut out = String::new();
    for &b in value {
        let unreserved = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        if plus_for_space && b == b' ' {
            out.push('+');
        } else if unreserved && !everything {
            out.push(char::from(b));
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

fn hex(value: &[u8], upper: bool) -> String {
    value.iter().map(|b| if upper { format!("{b:02X}") } else { format!("{b:02x}") }).collect()
}

/// Every form of `value` the redactor replaces, longest first, without duplicates.
pub(crate) fn encodings(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut out = vec![value.to_string(), value.chars().rev().collect()];
    for alphabet in [STD, URL] {
        let whole = base64(bytes, alphabet);
        let pad = "=".repeat((4 - whole.len() % 4) % 4);
        out.push(format!("{whole}{pad}"));
        out.push(whole);
        for offset in 0..3 {
            out.push(base64_core(bytes, offset, alphabet));
        }
    }
    for (upper, everything, plus) in
        [(true, false, false), (false, false, false), (true, true, false), (false, true, false), (true, false, true)]
    {
        out.push(percent(bytes, upper, everything, plus));
    }
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_string();
    out.push(json.replace('/', "\\/"));
    out.push(json);
    out.push(hex(bytes, false));
    out.push(hex(bytes, true));
    // A form shorter than the value itself (a base64 core of a short value) would match too much.
    let shortest = value.len().min(8);
    out.retain(|s| s.len() >= shortest);
    out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    out.dedup();
    out
}

/// Replaces every known value and encoding in a text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (form, replacement), longest form first.
    forms: Vec<(String, String)>,
}

impl Redactor {
    /// A redactor over `values`: (value, alias) pairs.
    pub fn new<'a>(values: impl IntoIterator<Item = (&'a str, &'a str)>) -> Redactor {
        let mut forms = Vec::new();
        for (value, alias) in values {
            for form in encodings(value) {
                forms.push((form, format!("[credential:{alias}]")));
            }
        }
        forms.sort_by_key(|f| std::cmp::Reverse(f.0.len()));
        Redactor { forms }
    }

    /// Whether the redactor knows no value.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// The text with every value and encoding replaced by `[credential:alias]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (form, replacement) in &self.forms {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), replacement);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "ghp_Secr3t/Value+with=odd&chars 0123";

    fn std_b64(bytes: &[u8]) -> String {
        let s = base64(bytes, STD);
        let pad = "=".repeat((4 - s.len() % 4) % 4);
        format!("{s}{pad}")
    }

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (plain, want) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("foobar", "Zm9vYmFy")]
        {
            assert_eq!(std_b64(plain.as_bytes()), want);
        }
    }

    #[test]
    fn the_value_inside_a_longer_base64_text_is_found_at_every_offset() {
        let r = Redactor::new([(SECRET, "gh")]);
        for prefix in ["", "a", "ab", "abc", "token: "] {
            for suffix in ["", "\n", "xy"] {
                let text = std_b64(format!("{prefix}{SECRET}{suffix}").as_bytes());
                let out = r.redact(&text);
                assert!(out.contains("[credential:gh]"), "{prefix:?}+{suffix:?}: {text} -> {out}");
                let url = base64(format!("{prefix}{SECRET}{suffix}").as_bytes(), URL);
                assert!(r.redact(&url).contains("[credential:gh]"), "url-safe {prefix:?}");
            }
        }
    }

    #[test]
    fn every_plain_encoding_is_replaced() {
        let r = Redactor::new([(SECRET, "gh")]);
        for form in encodings(SECRET) {
            let out = r.redact(&format!("before {form} after"));
            assert!(!out.contains(&form), "{form} survived: {out}");
            assert!(out.contains("[credential:gh]"));
        }
        assert_eq!(r.redact("nothing here"), "nothing here");
    }

    #[test]
    fn json_escaping_and_hex_are_covered() {
        let value = "pa\"ss\\word/42";
        let r = Redactor::new([(value, "db")]);
        let json = serde_json::to_string(&serde_json::json!({"k": value})).unwrap();
        assert!(!r.redact(&json).contains("word"), "{}", r.redact(&json));
        assert_eq!(r.redact(&hex(value.as_bytes(), true)), "[credential:db]");
    }
}
