//! A structured mutation fuzzer over every decoder of what a peer sends: SSE framing, the three model
//! wires streamed and not, and MCP tool, resource and prompt results. It runs on stable Rust, as a test target
//! (`cargo test -p ambit-sdk --test fuzz`), for a fixed number of inputs from a fixed seed, so CI runs it
//! in bounded time and a failure reproduces.
//!
//! Each input is a seed from `core/fuzz/corpus/<decoder>/` (real answers, as the loopback provider
//! writes them) mutated at the byte level (bit flips, special bytes, cuts, copies, splices with
//! another seed) and in its JSON (a node replaced by a boundary number such as 2e9, 3e9, u64::MAX or
//! -1, a value of the wrong type, a huge string, a long array, deep nesting; keys dropped or renamed;
//! events dropped, repeated or reordered). A streamed input is fed in random chunk sizes, under the
//! default limits or tiny ones (so the limit paths run too).
//!
//! For every input it checks that the decoder does not panic (each input runs under `catch_unwind`),
//! that it allocates at most [`PEAK_CAP`] bytes beyond what was live before (a counting global
//! allocator refuses more, after writing the input to the crash file, so an unbounded allocation is
//! reported with its input), and that it returns `Ok` or a typed error (`model_response`). A failing
//! input is written to `$CARGO_TARGET_TMPDIR/fuzz-crash-<decoder>-<n>.bin`; kept as a regression case in
//! `core/fuzz/regressions/<decoder>/`, it runs first on every later run.
//!
//! Settings (environment): `AMBIT_FUZZ_INPUTS` (default 40,000 in all), `AMBIT_FUZZ_SEED` (default
//! 1), `AMBIT_FUZZ_WRITE_SEEDS=1` writes the seed corpus anew from the loopback provider's answers
//! to the scenario files, then fuzzes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::time::Instant;

use ambit::ModelError;
use ambit::model::sse::SseParser;
use ambit::model::{WireLimits, anthropic, openai_chat, openai_responses};
use serde_json::{Value, json};

/// The most bytes one input may have live at once beyond what was live before it.
const PEAK_CAP: usize = 64 << 20;
/// The longest input handed to a decoder.
const MAX_INPUT: usize = 1 << 20;

// ---------------------------------------------------------------------------------------------------
// The counting allocator.

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Allocations past `LIVE_CAP` are refused (the process then aborts with the input saved).
static LIVE_CAP: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The input being decoded and the crash file's path (a NUL-terminated C string), for the refusal.
static INPUT_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static INPUT_LEN: AtomicUsize = AtomicUsize::new(0);
static CRASH_PATH: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());
static REFUSED: AtomicBool = AtomicBool::new(false);

struct Counting;

impl Counting {
    fn grew(size: usize) -> bool {
        let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
        if now > LIVE_CAP.load(Ordering::Relaxed) {
            LIVE.fetch_sub(size, Ordering::Relaxed);
            refuse(size);
            return false;
        }
        PEAK.fetch_max(now, Ordering::Relaxed);
        true
    }
}

/// Writes the input to the crash file with raw system calls (no allocation here) and says so.
#[cold]
fn refuse(size: usize) {
    if REFUSED.swap(true, Ordering::SeqCst) {
        return;
    }
    let path = CRASH_PATH.load(Ordering::SeqCst);
    let input = INPUT_PTR.load(Ordering::SeqCst);
    let len = INPUT_LEN.load(Ordering::SeqCst);
    let msg = b"fuzz: an input allocated past PEAK_CAP; it is saved in the crash file named at the start\n";
    // SAFETY: plain system calls on a buffer and a C string this program keeps alive for its whole run.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        if !path.is_null() && !input.is_null() {
            let fd = libc::open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644);
            if fd >= 0 {
                libc::write(fd, input.cast(), len);
                libc::close(fd);
            }
        }
    }
    let _ = size;
}

// SAFETY: every call is passed on to the system allocator unchanged; only the counts are ours.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Counting::grew(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Counting::grew(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && !Counting::grew(new_size - layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` came from this allocator with `layout`; the caller checked `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > layout.size() {
                LIVE.fetch_sub(new_size - layout.size(), Ordering::Relaxed);
            }
        } else if new_size < layout.size() {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ---------------------------------------------------------------------------------------------------
// Randomness: xorshift64*, seeded, so a run reproduces.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------------------------------------------
// The decoders.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoder {
    Sse,
    ChatStream,
    ChatBody,
    AnthropicStream,
    AnthropicBody,
    ResponsesStream,
    ResponsesBody,
    McpResult,
    McpResource,
    McpPrompt,
}

const DECODERS: [Decoder; 10] = [
    Decoder::Sse,
    Decoder::ChatStream,
    Decoder::ChatBody,
    Decoder::AnthropicStream,
    Decoder::AnthropicBody,
    Decoder::ResponsesStream,
    Decoder::ResponsesBody,
    Decoder::McpResult,
    Decoder::McpResource,
    Decoder::McpPrompt,
];

impl Decoder {
    fn name(self) -> &'static str {
        match self {
            Decoder::Sse => "sse",
            Decoder::ChatStream => "chat_stream",
            Decoder::ChatBody => "chat_body",
            Decoder::AnthropicStream => "anthropic_stream",
            Decoder::AnthropicBody => "anthropic_body",
            Decoder::ResponsesStream => "responses_stream",
            Decoder::ResponsesBody => "responses_body",
            Decoder::McpResult => "mcp_result",
            Decoder::McpResource => "mcp_resource",
            Decoder::McpPrompt => "mcp_prompt",
        }
    }

    fn streamed(self) -> bool {
        matches!(self, Decoder::Sse | Decoder::ChatStream | Decoder::AnthropicStream | Decoder::ResponsesStream)
    }
}

/// Limits small enough that mutated inputs reach them.
fn tiny_limits(rng: &mut Rng) -> WireLimits {
    WireLimits {
        max_line_bytes: 64 + rng.below(4096),
        max_body_bytes: 64 + rng.below(1 << 16),
        max_stream_bytes: 64 + rng.below(1 << 16),
        max_events: 1 + rng.below(64),
        max_tool_calls: 1 + rng.below(8),
        max_content_blocks: 1 + rng.below(8),
    }
}

/// What a decoder made of an input: `Ok`, or the error (which must be a typed `model_response`).
type Outcome = Result<(), String>;

fn check_error(e: &ModelError) -> Outcome {
    match e {
        ModelError::InvalidResponse(m) if !m.is_empty() && e.code() == "model_response" => Ok(()),
        other => Err(format!("an untyped or unexpected error: {other:?}")),
    }
}

fn check_response(r: &ambit::ModelResponse, limits: &WireLimits) -> Outcome {
    if r.tool_calls.len() > limits.max_tool_calls {
        return Err(format!("{} tool calls passed max_tool_calls {}", r.tool_calls.len(), limits.max_tool_calls));
    }
    Ok(())
}

/// Feeds a streamed input through the SSE parser in random chunks, each event to `on_event`.
fn feed(
    input: &[u8],
    limits: WireLimits,
    rng: &mut Rng,
    mut on_event: impl FnMut(&ambit::model::sse::SseEvent) -> Result<bool, ModelError>,
) -> Result<(), ModelError> {
    let mut parser = SseParser::new(limits);
    let mut rest = input;
    while !rest.is_empty() {
        let n = match rng.below(4) {
            0 => 1 + rng.below(8),
            1 => 1 + rng.below(256),
            2 => 1 + rng.below(8192),
            _ => rest.len(),
        }
        .min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        for e in parser.push(chunk)? {
            if e.data.len() > limits.max_line_bytes {
                return Err(ModelError::Transport(format!("an event of {} bytes passed max_line_bytes", e.data.len())));
            }
            if !on_event(&e)? {
                return Ok(());
            }
        }
    }
    if let Some(e) = parser.finish()? {
        on_event(&e)?;
    }
    Ok(())
}

fn run(decoder: Decoder, input: &[u8], rng: &mut Rng) -> Outcome {
    let limits = if rng.chance(3) { tiny_limits(rng) } else { WireLimits::default() };
    let sink = |t: &str| {
        std::hint::black_box(t);
    };
    macro_rules! stream {
        ($decoder:expr, $finish:ident) => {{
            let mut d = $decoder;
            match feed(input, limits, rng, |e| d.push(e, &sink)) {
                Ok(()) => match d.$finish() {
                    Ok(r) => check_response(&r, &limits),
                    Err(e) => check_error(&e),
                },
                Err(e) => check_error(&e),
            }
        }};
    }
    let body = || -> Result<Value, ModelError> {
        if input.len() > limits.max_body_bytes {
            return Err(ModelError::InvalidResponse("past max_body_bytes".into()));
        }
        serde_json::from_slice(input).map_err(|e| ModelError::InvalidResponse(e.to_string()))
    };
    match decoder {
        Decoder::Sse => match feed(input, limits, rng, |_| Ok(true)) {
            Ok(()) => Ok(()),
            Err(e) => check_error(&e),
        },
        Decoder::ChatStream => stream!(openai_chat::StreamDecoder::new(limits), finish),
        Decoder::AnthropicStream => stream!(anthropic::StreamDecoder::new(limits), finish),
        Decoder::ResponsesStream => stream!(openai_responses::StreamDecoder::new(limits), finish),
        Decoder::ChatBody => match body().and_then(|v| openai_chat::parse_response_within(&v, &limits)) {
            Ok(r) => check_response(&r, &limits),
            Err(e) => check_error(&e),
        },
        Decoder::AnthropicBody => match body().and_then(|v| anthropic::parse_reply_within(&v, &limits)) {
            Ok(r) => check_response(&r.response, &limits),
            Err(e) => check_error(&e),
        },
        Decoder::ResponsesBody => match body().and_then(|v| openai_responses::parse_reply_within(&v, &limits)) {
            Ok(r) => check_response(&r.response, &limits),
            Err(e) => check_error(&e),
        },
        Decoder::McpResult => {
            // rmcp decodes the JSON-RPC result; ambit turns it into the model's text.
            if let Ok(result) = serde_json::from_slice::<rmcp::model::CallToolResult>(input) {
                std::hint::black_box(ambit::mcp::result_text(&result));
            }
            Ok(())
        }
        Decoder::McpResource => {
            if let Ok(result) = serde_json::from_slice::<rmcp::model::ReadResourceResult>(input) {
                std::hint::black_box(ambit::mcp::meta::contents_text(&result));
            }
            Ok(())
        }
        Decoder::McpPrompt => {
            if let Ok(result) = serde_json::from_slice::<rmcp::model::GetPromptResult>(input) {
                std::hint::black_box(ambit::mcp::meta::prompt_text(&result));
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Mutation.

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2000000000",
    "3000000000",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "1e308",
    "-1e308",
    "2e9",
    "3e9",
    "1.5",
    "-0",
    "1e999",
];

const TOKENS: &[&str] = &[
    "null",
    "true",
    "false",
    "[]",
    "{}",
    "\"\"",
    "\"x\"",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "data: ",
    "event: ",
    "[DONE]",
    ":",
    "\"index\":",
    "\"type\":",
    "\"text\"",
    "\"tool_use\"",
    "{\"a\":",
    "\\u0000",
    "\\ud800",
    "\"",
    "content_block_start",
    "content_block_delta",
    "message_start",
    "message_delta",
    "message_stop",
    "response.completed",
    "input_json_delta",
    "text_delta",
];

const KEYS: &[&str] = &[
    "index",
    "type",
    "text",
    "content",
    "content_block",
    "delta",
    "usage",
    "tool_calls",
    "message",
    "id",
    "name",
    "arguments",
    "input",
    "partial_json",
    "choices",
    "output",
    "response",
    "status",
    "finish_reason",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "completion_tokens",
    "structuredContent",
    "isError",
    "resource",
    "uri",
    "data",
    "mimeType",
];

fn a_value(rng: &mut Rng, like: Option<&Value>) -> Value {
    match rng.below(12) {
        0..=3 => {
            let n: &str = rng.pick::<&str>(NUMBERS);
            serde_json::from_str(n).unwrap_or(Value::Null)
        }
        4 => Value::Null,
        5 => json!(rng.chance(2)),
        6 => json!("x".repeat(1 + rng.below(1 << 16))),
        7 => json!([]),
        8 => json!({}),
        9 => {
            // Deep nesting, within serde_json's recursion limit and past it.
            let mut v = json!(1);
            for _ in 0..rng.below(140) {
                v = json!([v]);
            }
            v
        }
        10 => match like {
            // Copies of the node, within MAX_INPUT (the harness's own memory stays small too).
            Some(v) => {
                let most = MAX_INPUT / v.to_string().len().max(1);
                json!(vec![v.clone(); 1 + rng.below(200.min(most))])
            }
            None => json!(rng.pick(KEYS)),
        },
        _ => json!(rng.pick(KEYS)),
    }
}

/// The number of nodes of `v`.
fn size(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(size).sum(),
        Value::Object(o) => o.values().map(size).sum(),
        _ => 0,
    }
}

/// The `n`th node of `v`, depth first.
fn nth<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
    if *n == 0 {
        return Some(v);
    }
    *n -= 1;
    match v {
        Value::Array(a) => a.iter_mut().find_map(|c| nth(c, n)),
        Value::Object(o) => o.values_mut().find_map(|c| nth(c, n)),
        _ => None,
    }
}

fn mutate_json(v: &mut Value, rng: &mut Rng) {
    let mut n = rng.below(size(v));
    let Some(node) = nth(v, &mut n) else { return };
    match (rng.below(5), &mut *node) {
        (0, Value::Object(o)) if !o.is_empty() => {
            let k = o.keys().nth(rng.below(o.len())).cloned().unwrap_or_default();
            o.remove(&k);
        }
        (1, Value::Object(o)) => {
            let k = rng.pick(KEYS).to_string();
            let like = o.values().next().cloned();
            o.insert(k, a_value(rng, like.as_ref()));
        }
        (2, Value::Array(a)) if !a.is_empty() => {
            let i = rng.below(a.len());
            let item = a[i].clone();
            let most = MAX_INPUT / item.to_string().len().max(1);
            for _ in 0..1 + rng.below(64.min(most)) {
                a.push(item.clone());
            }
        }
        _ => {
            let like = node.clone();
            *node = a_value(rng, Some(&like));
        }
    }
}

/// The events of a streamed input (each with its blank line), or `None` when it has none.
fn events(input: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(input);
    text.split_inclusive("\n\n").map(|e| e.as_bytes().to_vec()).collect()
}

fn mutate(decoder: Decoder, input: &[u8], corpus: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(14) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = *rng.pick(b"\n\r:{}[]\",\\ 0\xff\x00-9e");
            }
            2 if !out.is_empty() => {
                let a = rng.below(out.len());
                let b = (a + 1 + rng.below(64)).min(out.len());
                out.drain(a..b);
            }
            3 if !out.is_empty() => {
                let a = rng.below(out.len());
                let b = (a + 1 + rng.below(256)).min(out.len());
                let copy = out[a..b].to_vec();
                let at = rng.below(out.len());
                out.splice(at..at, copy);
            }
            4 => {
                let at = rng.below(out.len() + 1);
                let token = rng.pick(TOKENS).as_bytes().to_vec();
                out.splice(at..at, token);
            }
            5 => {
                // A number in the text becomes a boundary number.
                let digits: Vec<usize> =
                    out.iter().enumerate().filter(|(_, b)| b.is_ascii_digit()).map(|(i, _)| i).collect();
                if !digits.is_empty() {
                    let start = *rng.pick(&digits);
                    let end = out[start..].iter().position(|b| !b.is_ascii_digit()).map_or(out.len(), |p| start + p);
                    out.splice(start..end, rng.pick(NUMBERS).bytes());
                }
            }
            6 => {
                // Splice with another seed.
                let other = rng.pick(corpus);
                let cut = rng.below(out.len() + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            7..=10 if decoder.streamed() => {
                // A JSON mutation in one event's data.
                let mut evs = events(&out);
                if evs.is_empty() {
                    continue;
                }
                let i = rng.below(evs.len());
                let text = String::from_utf8_lossy(&evs[i]).into_owned();
                let Some(pos) = text.find("data: ") else { continue };
                let (head, data) = text.split_at(pos + 6);
                let data = data.trim_end_matches('\n');
                let Ok(mut v) = serde_json::from_str::<Value>(data) else { continue };
                mutate_json(&mut v, rng);
                evs[i] = format!("{head}{v}\n\n").into_bytes();
                out = evs.concat();
            }
            11 if decoder.streamed() => {
                // Events dropped, repeated or swapped.
                let mut evs = events(&out);
                if evs.is_empty() {
                    continue;
                }
                let i = rng.below(evs.len());
                match rng.below(3) {
                    0 => {
                        evs.remove(i);
                    }
                    1 => {
                        let e = evs[i].clone();
                        let most = if rng.chance(8) { 5000 } else { 16 };
                        // Within MAX_INPUT: the harness's own memory stays small too.
                        for _ in 0..1 + rng.below(most.min(MAX_INPUT / e.len().max(1))) {
                            evs.insert(i, e.clone());
                        }
                    }
                    _ => {
                        let j = rng.below(evs.len());
                        evs.swap(i, j);
                    }
                }
                out = evs.concat();
            }
            7..=11 => {
                // A JSON mutation of the whole body.
                if let Ok(mut v) = serde_json::from_slice::<Value>(&out) {
                    mutate_json(&mut v, rng);
                    out = v.to_string().into_bytes();
                }
            }
            12 => {
                // A huge run of one byte.
                let at = rng.below(out.len() + 1);
                let b = *rng.pick(b"a\n \"{[");
                out.splice(at..at, std::iter::repeat_n(b, 1 + rng.below(1 << 17)));
            }
            _ => {
                let at = rng.below(out.len() + 1);
                out.splice(at..at, rng.pick(NUMBERS).bytes());
            }
        }
        out.truncate(MAX_INPUT);
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// The corpus.

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn read_dir(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).ok()?)))
        .collect();
    out.sort();
    out
}

/// The scenarios whose answers seed the corpus: text, one and several tool calls, the providers' own
/// tool search, usage with cache counts, long tool names.
const SEED_SCENARIOS: &[&str] = &[
    "weather_single_call",
    "weather_two_calls",
    "deferral_native_anthropic",
    "deferral_native_responses",
    "budget_tokens",
    "parallel_bounded",
    "wire_names",
    "checklist_nudge",
];

/// Writes the seed corpus from the loopback provider's answers to the scenario files.
fn write_seeds() {
    use ambit_test_provider::wires;
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let mut answers: Vec<(String, Value, Value)> = Vec::new();
    for (name, bytes) in read_dir(&scenarios) {
        if !SEED_SCENARIOS.contains(&name.trim_end_matches(".json")) {
            continue;
        }
        let Ok(script) = serde_json::from_slice::<Value>(&bytes) else { continue };
        for (i, x) in script.get("exchanges").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let Some(respond) = x.get("respond").filter(|r| r.get("error").is_none()) else { continue };
            let request = x.pointer("/expect/body").cloned().unwrap_or(json!({}));
            answers.push((format!("{}-{i}", name.trim_end_matches(".json")), respond.clone(), request));
        }
    }
    let sse = |events: Vec<wires::Sse>| events.iter().map(wires::Sse::to_bytes).collect::<String>().into_bytes();
    let mut seeds: Vec<(&str, String, Vec<u8>)> = Vec::new();
    for (name, respond, request) in &answers {
        let chat = sse(wires::chat_chunks("chatcmpl-1", "gpt-4.1", respond));
        seeds.push(("sse", format!("chat-{name}"), chat.clone()));
        seeds.push(("chat_stream", name.clone(), chat));
        seeds.push((
            "chat_body",
            name.clone(),
            wires::chat_completion("chatcmpl-1", "gpt-4.1", respond).to_string().into_bytes(),
        ));
        let anthropic = sse(wires::anthropic_events("msg_1", "claude-sonnet-4-5", respond));
        seeds.push(("sse", format!("anthropic-{name}"), anthropic.clone()));
        seeds.push(("anthropic_stream", name.clone(), anthropic));
        seeds.push((
            "anthropic_body",
            name.clone(),
            wires::anthropic_message("msg_1", "claude-sonnet-4-5", respond).to_string().into_bytes(),
        ));
        seeds.push((
            "responses_stream",
            name.clone(),
            sse(wires::responses_events("resp_1", "gpt-5.4", respond, request)),
        ));
        seeds.push((
            "responses_body",
            name.clone(),
            wires::responses_response("resp_1", "gpt-5.4", respond, request, true).to_string().into_bytes(),
        ));
    }
    // Identical answers (many scenarios end on the same short text) are kept once.
    let mut seen = std::collections::HashSet::new();
    seeds.retain(|(d, _, bytes)| seen.insert((*d, bytes.clone())));
    for (decoder, name, bytes) in seeds {
        let dir = fuzz_dir().join("corpus").join(decoder);
        std::fs::create_dir_all(&dir).expect("the corpus directory");
        std::fs::write(dir.join(format!("{name}.txt")), bytes).expect("a seed is written");
    }
    let dir = fuzz_dir().join("corpus/mcp_result");
    std::fs::create_dir_all(&dir).expect("the corpus directory");
    let results = [
        ("text", json!({"content": [{"type": "text", "text": "sunny in Paris"}]})),
        ("error", json!({"content": [{"type": "text", "text": "no such city"}], "isError": true})),
        ("structured", json!({"content": [{"type": "text", "text": "{\"t\":22}"}], "structuredContent": {"t": 22}})),
        (
            "media",
            json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "audio", "data": "aGVsbG8=", "mimeType": "audio/wav"}]}),
        ),
        (
            "resources",
            json!({"content": [
                {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}},
                {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "aGVsbG8="}},
                {"type": "resource_link", "uri": "file:///c.txt", "name": "c.txt"}]}),
        ),
        (
            "annotated",
            json!({"content": [{"type": "text", "text": "x", "annotations": {"audience": ["user"], "priority": 0.5}}], "_meta": {"k": 1}}),
        ),
    ];
    for (name, v) in results {
        std::fs::write(dir.join(format!("{name}.json")), v.to_string()).expect("a seed is written");
    }
    let dir = fuzz_dir().join("corpus/mcp_resource");
    std::fs::create_dir_all(&dir).expect("the corpus directory");
    let resources = [
        ("text", json!({"contents": [{"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}]})),
        (
            "mixed",
            json!({"contents": [{"uri": "file:///b.bin", "mimeType": "application/octet-stream", "blob": "aGVsbG8="},
                {"uri": "file:///c.md", "text": "# c", "_meta": {"k": 1}}]}),
        ),
    ];
    for (name, v) in resources {
        std::fs::write(dir.join(format!("{name}.json")), v.to_string()).expect("a seed is written");
    }
    let dir = fuzz_dir().join("corpus/mcp_prompt");
    std::fs::create_dir_all(&dir).expect("the corpus directory");
    let prompts = [
        (
            "text",
            json!({"description": "Review code", "messages": [{"role": "user", "content": {"type": "text", "text": "Review this"}},
                {"role": "assistant", "content": {"type": "text", "text": "Sure"}}]}),
        ),
        (
            "resource",
            json!({"messages": [{"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}}},
                {"role": "user", "content": {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "aGVsbG8="}}}]}),
        ),
    ];
    for (name, v) in prompts {
        std::fs::write(dir.join(format!("{name}.json")), v.to_string()).expect("a seed is written");
    }
}

// ---------------------------------------------------------------------------------------------------

/// One decoder with its seeds and its regression cases (by file name).
type Target = (Decoder, Vec<Vec<u8>>, Vec<(String, Vec<u8>)>);

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

fn main() {
    // `cargo test` passes harness flags (`--quiet`, a filter); this target takes none of them, but
    // answers `--list` as a test binary should.
    if std::env::args().any(|a| a == "--list") {
        println!("fuzz: test");
        return;
    }
    // A name filter that does not match this target (`cargo test some_test`) skips it; the values of
    // libtest's flags (`--test-threads 2`) are no filter.
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if ["--test-threads", "--skip", "--format", "--color", "--logfile", "--shuffle-seed", "-Z"]
            .contains(&a.as_str())
        {
            args.next();
        } else if !a.starts_with('-') && !"fuzz".contains(a.as_str()) {
            return;
        }
    }
    if std::env::var("AMBIT_FUZZ_WRITE_SEEDS").is_ok_and(|v| v == "1") {
        write_seeds();
    }
    let total = env_number("AMBIT_FUZZ_INPUTS", 40_000);
    let seed = env_number("AMBIT_FUZZ_SEED", 1).max(1);
    let out_dir =
        PathBuf::from(std::env::var("CARGO_TARGET_TMPDIR").unwrap_or_else(|_| env!("CARGO_TARGET_TMPDIR").into()));
    let _ = std::fs::create_dir_all(&out_dir);

    let corpora: Vec<Target> = DECODERS
        .iter()
        .map(|&d| {
            let seeds: Vec<Vec<u8>> =
                read_dir(&fuzz_dir().join("corpus").join(d.name())).into_iter().map(|(_, b)| b).collect();
            assert!(!seeds.is_empty(), "no seeds in core/fuzz/corpus/{}", d.name());
            (d, seeds, read_dir(&fuzz_dir().join("regressions").join(d.name())))
        })
        .collect();

    let crash_path = std::ffi::CString::new(out_dir.join("fuzz-crash-allocation.bin").to_string_lossy().into_owned())
        .expect("a path without NUL");
    CRASH_PATH.store(crash_path.as_ptr().cast_mut(), Ordering::SeqCst);
    eprintln!(
        "fuzz: {total} inputs from seed {seed} over {} decoders; an input that allocates past {} MiB aborts the run and is saved in {}",
        DECODERS.len(),
        PEAK_CAP >> 20,
        crash_path.to_string_lossy()
    );
    // Panics are reported with their input below, not by the default hook on every one.
    std::panic::set_hook(Box::new(|_| {}));

    let mut rng = Rng(seed);
    let mut failures: Vec<String> = Vec::new();
    let mut ran = 0u64;
    let mut peak_seen = 0usize;
    let mut peak_input = String::new();
    let started = Instant::now();
    let live_before = LIVE.load(Ordering::SeqCst);
    let mut one = |decoder: Decoder, input: &[u8], rng: &mut Rng, label: &str| -> Option<String> {
        let (problem, used) = one_input(decoder, input, rng, label);
        if used > peak_seen {
            // The input that allocated most so far, kept for a look.
            peak_seen = used;
            peak_input = format!("{} ({} bytes in)", decoder.name(), input.len());
            let _ = std::fs::write(out_dir.join(format!("fuzz-peak-{}.bin", decoder.name())), input);
        }
        ran += 1;
        problem
    };
    fn one_input(decoder: Decoder, input: &[u8], rng: &mut Rng, label: &str) -> (Option<String>, usize) {
        INPUT_PTR.store(input.as_ptr().cast_mut(), Ordering::SeqCst);
        INPUT_LEN.store(input.len(), Ordering::SeqCst);
        let base = LIVE.load(Ordering::SeqCst);
        PEAK.store(base, Ordering::SeqCst);
        LIVE_CAP.store(base.saturating_add(PEAK_CAP), Ordering::SeqCst);
        let outcome = catch_unwind(AssertUnwindSafe(|| run(decoder, input, rng)));
        LIVE_CAP.store(usize::MAX, Ordering::SeqCst);
        let used = PEAK.load(Ordering::SeqCst).saturating_sub(base);
        let problem = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!(
                "a panic: {}",
                p.downcast_ref::<String>().map(String::as_str).or(p.downcast_ref::<&str>().copied()).unwrap_or("?")
            )),
        };
        (problem.map(|p| format!("{} {label}: {p}", decoder.name())), used)
    }

    // The regression cases first, each under the default limits and tiny ones.
    for (decoder, _, regressions) in &corpora {
        for (name, input) in regressions {
            for _ in 0..4 {
                if let Some(p) = one(*decoder, input, &mut rng, &format!("regression {name}")) {
                    failures.push(p);
                }
            }
        }
    }
    // Then the seeds as they are, then mutations.
    for (decoder, seeds, _) in &corpora {
        for (i, input) in seeds.iter().enumerate() {
            if let Some(p) = one(*decoder, input, &mut rng, &format!("seed {i}")) {
                failures.push(p);
            }
        }
    }
    let mut i = 0u64;
    let mut done = (corpora.iter().map(|(_, s, r)| s.len() + 4 * r.len()).sum::<usize>()) as u64;
    while done < total {
        done += 1;
        let (decoder, seeds, _) = &corpora[(i % corpora.len() as u64) as usize];
        i += 1;
        let base = rng.pick(seeds).clone();
        let input = mutate(*decoder, &base, seeds, &mut rng);
        if let Some(p) = one(*decoder, &input, &mut rng, &format!("input {i}")) {
            let file = out_dir.join(format!("fuzz-crash-{}-{i}.bin", decoder.name()));
            let _ = std::fs::write(&file, &input);
            failures.push(format!("{p} (saved in {})", file.display()));
            if failures.len() >= 20 {
                break;
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "fuzz: {ran} inputs in {secs:.1} s ({:.0}/s), peak allocation of one input {:.1} MiB ({peak_input}), {} failures; \
         live before the inputs {} KiB, after {} KiB",
        ran as f64 / secs.max(1e-9),
        peak_seen as f64 / (1 << 20) as f64,
        failures.len(),
        live_before >> 10,
        LIVE.load(Ordering::SeqCst) >> 10
    );
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("  {f}");
        }
        std::process::exit(1);
    }
}
