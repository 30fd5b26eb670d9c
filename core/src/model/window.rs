//! How many tokens a model's context window holds, by default: a table of the known OpenAI and
//! Anthropic model families, and a conservative default for any other model (a local server's, an
//! unknown name). A model takes another value with its `context_window` setting; a session uses the
//! model's window unless its own configuration names one.

/// The window of a model the table does not know: small enough for common local models served with
/// a 32k context, so auto-compaction fires before such a server refuses the request.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

/// (name prefix, window), the more specific prefixes first.
const FAMILIES: &[(&str, u64)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-4.5", 128_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-1106", 128_000),
    ("gpt-4-0125", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-5", 400_000),
    ("gpt-3.5-turbo", 16_385),
    ("chatgpt-4o", 128_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("codex-mini", 200_000),
    ("claude-instant", 100_000),
    ("claude-2.0", 100_000),
    ("claude", 200_000),
];

/// The context window of `model` by default: its family's from the table (the name compared without
/// regard to case, after any `provider/` prefix), else [`DEFAULT_CONTEXT_WINDOW`].
pub fn default_context_window(model: &str) -> u64 {
    let name = model.rsplit('/').next().unwrap_or(model).trim().to_ascii_lowercase();
    FAMILIES.iter().find(|(prefix, _)| name.starts_with(prefix)).map_or(DEFAULT_CONTEXT_WINDOW, |&(_, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_families_and_a_conservative_default() {
        for (model, window) in [
            ("gpt-4.1", 1_047_576),
            ("gpt-4.1-mini-2025-04-14", 1_047_576),
            ("gpt-4o-mini", 128_000),
            ("GPT-4o", 128_000),
            ("openai/gpt-4o", 128_000),
            ("gpt-4", 8_192),
            ("gpt-4-0613", 8_192),
            ("gpt-4-turbo-2024-04-09", 128_000),
            ("gpt-3.5-turbo", 16_385),
            ("gpt-5-mini", 400_000),
            ("o1-mini", 128_000),
            ("o3-mini", 200_000),
            ("o4-mini", 200_000),
            ("claude-sonnet-4-5", 200_000),
            ("claude-3-5-haiku-latest", 200_000),
            ("anthropic/claude-opus-4-1", 200_000),
            ("claude-instant-1.2", 100_000),
            ("llama-3.1-8b-instruct", DEFAULT_CONTEXT_WINDOW),
            ("m", DEFAULT_CONTEXT_WINDOW),
            ("", DEFAULT_CONTEXT_WINDOW),
        ] {
            assert_eq!(default_context_window(model), window, "{model}");
        }
    }
}
