//! Content beyond text: the parts a user message (or a tool's result) is made of — text, images and
//! files — as every wire carries them in its own blocks (issue 17, part 3).
//!
//! Bytes are held base64-encoded, so a message stays one JSON value in a session row and in every
//! binding. Each part is checked before anything is sent ([`Part::check`]): an image or file over its
//! byte cap, or whose bytes are not the media type it is labelled, is refused by name.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most bytes one image part may hold (decoded): 5 MiB, the Anthropic Messages API's per-image cap,
/// the smallest of the three wires'.
pub const IMAGE_MAX_BYTES: usize = 5 * 1024 * 1024;
/// The most bytes one file part may hold (decoded): 32 MiB, the Anthropic Messages API's request cap
/// for a PDF, the smallest of the three wires'.
pub const FILE_MAX_BYTES: usize = 32 * 1024 * 1024;

/// The most images one tool result may carry: past it, each image is replaced by a text note saying so
/// ([`budget_result`]).
pub const RESULT_IMAGES_MAX: usize = 8;
/// The most bytes (decoded) the images and files of one tool result may hold together: past it, each
/// part that does not fit is replaced by a text note.
pub const RESULT_MEDIA_MAX_BYTES: usize = 8 * 1024 * 1024;
/// The most images the tool results of one model request may carry together (the newest are kept;
/// [`budget_request`]): well under the 100 images per request the Anthropic Messages API takes.
pub const REQUEST_TOOL_IMAGES_MAX: usize = 20;
/// The most bytes (decoded) the tool results' images and files of one model request may hold together:
/// their base64 stays well under the Anthropic Messages API's 32 MB request cap.
pub const REQUEST_TOOL_MEDIA_MAX_BYTES: usize = 16 * 1024 * 1024;

/// The image types every wire accepts.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// The file types every wire accepts as a document.
pub const FILE_TYPES: [&str; 2] = ["application/pdf", "text/plain"];

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image's bytes, base64-encoded, with their media type (`image/png`, `image/jpeg`, `image/gif`,
    /// `image/webp`).
    Image {
        /// Absent in a binding's JSON: read from the bytes ([`Part::resolved`]).
        #[serde(default)]
        media_type: String,
        /// The bytes, base64-encoded.
        data: String,
    },
    /// An image the provider fetches itself (`https:` or a `data:` URL).
    ImageUrl {
        /// The URL.
        url: String,
    },
    /// A document's bytes, base64-encoded: a PDF (`application/pdf`) or text (`text/plain`).
    File {
        /// `application/pdf` or `text/plain`.
        media_type: String,
        /// The file's name, as the model is told it.
        filename: String,
        /// The bytes, base64-encoded.
        data: String,
    },
}

/// Why a part was refused; [`crate::Error::InvalidMessage`] carries it naming the part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PartError(pub String);

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text { text: text.into() }
    }

    /// An image from its bytes, its media type read from their first bytes (PNG, JPEG, GIF or WebP).
    pub fn image(bytes: &[u8]) -> Result<Part, PartError> {
        let media_type = sniff(bytes)
            .filter(|t| t.starts_with("image/"))
            .ok_or_else(|| PartError("the bytes are not a PNG, JPEG, GIF or WebP image".into()))?;
        let part = Part::Image { media_type: media_type.into(), data: STANDARD.encode(bytes) };
        part.check()?;
        Ok(part)
    }

    /// An image from its bytes labelled `media_type`, checked against them.
    pub fn image_typed(bytes: &[u8], media_type: impl Into<String>) -> Result<Part, PartError> {
        let part = Part::Image { media_type: media_type.into(), data: STANDARD.encode(bytes) };
        part.check()?;
        Ok(part)
    }

    /// An image the provider fetches from `url`.
    pub fn image_url(url: impl Into<String>) -> Part {
        Part::ImageUrl { url: url.into() }
    }

    /// A file from its bytes: `media_type` `application/pdf` or `text/plain`, checked against them.
    pub fn file(bytes: &[u8], media_type: impl Into<String>, filename: impl Into<String>) -> Result<Part, PartError> {
        let part =
            Part::File { media_type: media_type.into(), filename: filename.into(), data: STANDARD.encode(bytes) };
        part.check()?;
        Ok(part)
    }

    /// The part's kind as its `type` says: `text`, `image`, `image_url` or `file`.
    pub fn kind(&self) -> &'static str {
        match self {
            Part::Text { .. } => "text",
            Part::Image { .. } => "image",
            Part::ImageUrl { .. } => "image_url",
            Part::File { .. } => "file",
        }
    }

    /// The part with an image's missing media type (`""`) read from its bytes, then checked
    /// ([`Part::check`]): how the bindings hand over an image whose type the host did not give.
    pub fn resolved(self) -> Result<Part, PartError> {
        let part = match self {
            Part::Image { media_type, data } if media_type.is_empty() => {
                let bytes = decode(&data)?;
                let media_type = sniff(&bytes)
                    .filter(|t| t.starts_with("image/"))
                    .ok_or_else(|| PartError("the bytes are not a PNG, JPEG, GIF or WebP image".into()))?;
                Part::Image { media_type: media_type.into(), data }
            }
            other => other,
        };
        part.check()?;
        Ok(part)
    }

    /// Checks the part: base64 that decodes, within its byte cap, bytes of the media type it names, and
    /// a media type the wires take; an image URL is `https:`, `http:` or `data:`.
    pub fn check(&self) -> Result<(), PartError> {
        match self {
            Part::Text { .. } => Ok(()),
            Part::ImageUrl { url } if url.starts_with("data:") => {
                // A `data:` URL carries its bytes: checked as an image's are (type, cap, bytes).
                let (media_type, data) = split_data_url(url).ok_or_else(|| {
                    PartError(format!("a data: image URL must be data:<image type>;base64,<data>, got '{}'", cut(url)))
                })?;
                Part::Image { media_type: media_type.to_string(), data: data.to_string() }.check()
            }
            Part::ImageUrl { url } => {
                if ["https://", "http://"].iter().any(|p| url.starts_with(p)) {
                    Ok(())
                } else {
                    Err(PartError(format!(
                        "the image URL must start with https://, http:// or data:image/, got '{}'",
                        cut(url)
                    )))
                }
            }
            Part::Image { media_type, data } => {
                if !IMAGE_TYPES.contains(&media_type.as_str()) {
                    return Err(PartError(format!(
                        "image media type '{media_type}' is not one the wires take ({})",
                        IMAGE_TYPES.join(", ")
                    )));
                }
                // The size is known from the text: a huge part is refused before it is decoded.
                bounded("image", decoded_len(data), IMAGE_MAX_BYTES)?;
                let bytes = decode(data)?;
                matches_type(&bytes, media_type)
            }
            Part::File { media_type, filename, data } => {
                if !FILE_TYPES.contains(&media_type.as_str()) {
                    return Err(PartError(format!(
                        "file '{filename}': media type '{media_type}' is not one the wires take ({})",
                        FILE_TYPES.join(", ")
                    )));
                }
                if filename.trim().is_empty() {
                    return Err(PartError("a file needs a filename".into()));
                }
                bounded(&format!("file '{filename}'"), decoded_len(data), FILE_MAX_BYTES)?;
                let bytes = decode(data)?;
                matches_type(&bytes, media_type).map_err(|e| PartError(format!("file '{filename}': {}", e.0)))
            }
        }
    }

    /// What the part is, for a text view: the text itself, or a short note (`[image image/png, 1234
    /// bytes]`).
    pub fn describe(&self) -> String {
        match self {
            Part::Text { text } => text.clone(),
            Part::Image { media_type, data } => format!("[image {media_type}, {} bytes]", decoded_len(data)),
            Part::ImageUrl { url } => format!("[image {}]", cut(url)),
            Part::File { media_type, filename, data } => {
                format!("[file {filename} {media_type}, {} bytes]", decoded_len(data))
            }
        }
    }

    /// The part as a `data:` URL (an image or a file), for the wires that take one.
    pub fn data_url(&self) -> Option<String> {
        match self {
            Part::Image { media_type, data } | Part::File { media_type, data, .. } => {
                Some(format!("data:{media_type};base64,{data}"))
            }
            _ => None,
        }
    }
}

/// A `data:<media type>;base64,<data>` URL's media type and data.
fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let (head, data) = url.strip_prefix("data:")?.split_once(',')?;
    let media_type = head.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// The bytes a part carries (decoded): an image's or a file's, a `data:` URL's; 0 for text and a URL
/// the provider fetches.
fn media_bytes(part: &Part) -> usize {
    match part {
        Part::Image { data, .. } | Part::File { data, .. } => decoded_len(data),
        Part::ImageUrl { url } => split_data_url(url).map_or(0, |(_, d)| decoded_len(d)),
        Part::Text { .. } => 0,
    }
}

/// Keeps each media part in turn while it fits in what is left of the budget (`images` images,
/// `bytes` bytes); one that does not is replaced by a text note naming it and the budget (`what`).
fn spend(part: &mut Part, images: &mut usize, bytes: &mut usize, what: &str) -> bool {
    if matches!(part, Part::Text { .. }) {
        return false;
    }
    let size = media_bytes(part);
    let image = !matches!(part, Part::File { .. });
    if (image && *images == 0) || size > *bytes {
        *part = Part::text(format!("{} [left out: over {what}]", part.describe()));
        return true;
    }
    *images -= usize::from(image);
    *bytes -= size;
    false
}

/// A tool result's parts within its budget ([`RESULT_IMAGES_MAX`] images, [`RESULT_MEDIA_MAX_BYTES`]
/// bytes), in order: each image or file over it is replaced by a text note saying so.
pub fn budget_result(mut parts: Vec<Part>) -> Vec<Part> {
    let (mut images, mut bytes) = (RESULT_IMAGES_MAX, RESULT_MEDIA_MAX_BYTES);
    let what = format!("one tool result's budget of {RESULT_IMAGES_MAX} images and {RESULT_MEDIA_MAX_BYTES} bytes");
    for p in &mut parts {
        spend(p, &mut images, &mut bytes, &what);
    }
    parts
}

/// The media of one request within its budget ([`REQUEST_TOOL_IMAGES_MAX`] images,
/// [`REQUEST_TOOL_MEDIA_MAX_BYTES`] bytes), newest first: the tool results, a background task's result
/// delivered as its own user turn, and the user's earlier turns (a session re-sends them on every turn:
/// one photo a turn would otherwise pile up past the wire's request cap, and every later turn of the
/// session would fail). Each image or file over the budget is replaced by a text note saying so (and the
/// message's text view follows). The newest user turn, the input, is never cut; its media count first.
/// Returns whether anything was left out.
pub fn budget_request(messages: &mut [crate::model::Message]) -> bool {
    let (mut images, mut bytes) = (REQUEST_TOOL_IMAGES_MAX, REQUEST_TOOL_MEDIA_MAX_BYTES);
    let what = format!(
        "one request's budget of {REQUEST_TOOL_IMAGES_MAX} images and {REQUEST_TOOL_MEDIA_MAX_BYTES} bytes \
         from tools and earlier turns"
    );
    let input =
        messages.iter().rposition(|m| matches!(m, crate::model::Message::User { parts, .. } if !is_task_report(parts)));
    if let Some(crate::model::Message::User { parts, .. }) = input.map(|i| &messages[i]) {
        for p in parts.iter().filter(|p| !matches!(p, Part::Text { .. })) {
            images = images.saturating_sub(usize::from(!matches!(p, Part::File { .. })));
            bytes = bytes.saturating_sub(media_bytes(p));
        }
    }
    let mut any = false;
    for (i, m) in messages.iter_mut().enumerate().rev() {
        let (content, parts) = match m {
            _ if Some(i) == input => continue,
            crate::model::Message::Tool { content, parts, .. } => (content, parts),
            crate::model::Message::User { content, parts } if has_media(parts) => (content, parts),
            _ => continue,
        };
        let view = text_view(parts);
        let mut cut_here = false;
        for p in parts.iter_mut() {
            cut_here |= spend(p, &mut images, &mut bytes, &what);
        }
        if cut_here && *content == view {
            *content = text_view(parts);
        }
        any |= cut_here;
    }
    any
}

/// Whether a user message's parts are a background task's result with media
/// ([`crate::agent::background`]'s report: its header text, then the result's parts).
fn is_task_report(parts: &[Part]) -> bool {
    matches!(parts.first(), Some(Part::Text { text }) if text.starts_with(crate::agent::background::TASK_REPORT_PREFIX))
        && has_media(parts)
}

/// The text view of a list of parts: the parts described, one after another, separated by newlines.
pub fn text_view(parts: &[Part]) -> String {
    parts.iter().map(Part::describe).collect::<Vec<_>>().join("\n")
}

/// A tool result's parts after the loop's hooks saw its text: as they were when `text` is still their
/// text view; none when a hook replaced the result (withheld means nothing of it reaches the model:
/// the replacement text is the whole result).
pub fn with_text(parts: Vec<Part>, text: &str) -> Vec<Part> {
    if text_view(&parts) == text { parts } else { Vec::new() }
}

/// Whether any part is not text (the message needs content blocks).
pub fn has_media(parts: &[Part]) -> bool {
    parts.iter().any(|p| !matches!(p, Part::Text { .. }))
}

/// Checks each part, the error naming its index: `parts[2]: …`.
pub fn check_all(parts: &[Part]) -> Result<(), (usize, PartError)> {
    parts.iter().enumerate().try_for_each(|(i, p)| p.check().map_err(|e| (i, e)))
}

/// The key of the JSON value a tool returns to hand the model content parts instead of text
/// ([`tool_content`]).
pub const TOOL_CONTENT_KEY: &str = "$ambit_content";

/// A tool's result made of parts (text and images): what a tool returns to show the model an image.
/// The loop sends the images in the wire's tool-result blocks; the result's text (events, hooks, the
/// run's record) describes them.
pub fn tool_content(parts: Vec<Part>) -> Value {
    serde_json::json!({ TOOL_CONTENT_KEY: parts })
}

/// The parts of a tool's result made by [`tool_content`]; `None` for any other value. A malformed one
/// is an error naming the part.
pub fn read_tool_content(value: &Value) -> Option<Result<Vec<Part>, String>> {
    let Value::Object(map) = value else { return None };
    if map.len() != 1 {
        return None;
    }
    let list = map.get(TOOL_CONTENT_KEY)?;
    let Value::Array(items) = list else {
        return Some(Err(format!("{TOOL_CONTENT_KEY} must be a list of parts")));
    };
    let mut parts = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let part: Part = match serde_json::from_value(item.clone()) {
            Ok(p) => p,
            Err(e) => return Some(Err(format!("parts[{i}]: {e}"))),
        };
        match part.resolved() {
            Ok(part) => parts.push(part),
            Err(e) => return Some(Err(format!("parts[{i}]: {e}"))),
        }
    }
    Some(Ok(parts))
}

/// The tag a binding's typed content return starts with (Python `ambit.Image` / a list of parts, Swift
/// `toolContent([...])`): a marker chosen at random once per process, so no string a tool returns (from
/// a web page, a file, a hostile server) can pass for content; only the binding's own typed return,
/// which asks for this tag, does. The content value's JSON follows it.
pub fn host_content_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let mut bytes = [0u8; 16];
        // Without randomness the tag is still never a prefix a plain string has by chance: it starts
        // with a NUL.
        let _ = getrandom::fill(&mut bytes);
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("\u{0}ambit-content:{hex}:")
    })
}

/// A host-language tool's answer as the bindings hand it over (text): the content value when the text
/// is [`host_content_tag`] followed by a [`tool_content`] value's JSON (the binding's typed parts
/// return), else the text itself. A string that merely looks like content JSON stays a string.
pub fn from_host_text(text: String) -> Value {
    if let Some(json) = text.strip_prefix(host_content_tag())
        && let Ok(v) = serde_json::from_str::<Value>(json)
        && read_tool_content(&v).is_some()
    {
        return v;
    }
    Value::String(text)
}

/// The media type `bytes` start like: PNG, JPEG, GIF, WebP or PDF; `None` for anything else.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else if bytes.starts_with(b"%PDF-") {
        Some("application/pdf")
    } else {
        None
    }
}

fn matches_type(bytes: &[u8], media_type: &str) -> Result<(), PartError> {
    if media_type == "text/plain" {
        return match std::str::from_utf8(bytes) {
            Ok(s) if !s.contains('\0') => Ok(()),
            _ => Err(PartError("labelled text/plain, but the bytes are not UTF-8 text".into())),
        };
    }
    match sniff(bytes) {
        Some(t) if t == media_type => Ok(()),
        Some(t) => Err(PartError(format!("labelled {media_type}, but the bytes are {t}"))),
        None => Err(PartError(format!("labelled {media_type}, but the bytes are not {media_type}"))),
    }
}

fn decode(data: &str) -> Result<Vec<u8>, PartError> {
    STANDARD.decode(data.as_bytes()).map_err(|e| PartError(format!("data is not valid base64: {e}")))
}

fn decoded_len(data: &str) -> usize {
    let pad = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(pad)
}

fn bounded(what: &str, len: usize, cap: usize) -> Result<(), PartError> {
    if len > cap { Err(PartError(format!("{what} is {len} bytes, over the {cap}-byte cap"))) } else { Ok(()) }
}

fn cut(s: &str) -> String {
    if s.len() <= 80 {
        return s.to_string();
    }
    let mut end = 80;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10];

    #[test]
    fn an_image_is_typed_from_its_bytes() {
        assert!(matches!(Part::image(PNG).unwrap(), Part::Image { media_type, .. } if media_type == "image/png"));
        assert!(matches!(Part::image(JPEG).unwrap(), Part::Image { media_type, .. } if media_type == "image/jpeg"));
        assert!(Part::image(b"hello").unwrap_err().0.contains("not a PNG, JPEG, GIF or WebP"));
    }

    #[test]
    fn a_label_that_does_not_match_the_bytes_is_refused() {
        let e = Part::image_typed(PNG, "image/jpeg").unwrap_err();
        assert_eq!(e.0, "labelled image/jpeg, but the bytes are image/png");
        assert!(Part::image_typed(PNG, "image/png").is_ok());
        let e = Part::file(b"not a pdf", "application/pdf", "a.pdf").unwrap_err();
        assert!(e.0.contains("file 'a.pdf': labelled application/pdf"), "{e}");
        assert!(Part::file(b"%PDF-1.4\n", "application/pdf", "a.pdf").is_ok());
        assert!(Part::file(b"notes", "text/plain", "a.txt").is_ok());
        assert!(Part::file(b"\0\x01", "text/plain", "a.txt").is_err());
    }

    #[test]
    fn a_part_over_its_cap_is_refused() {
        let mut big = PNG.to_vec();
        big.resize(IMAGE_MAX_BYTES + 1, 0);
        let e = Part::image(&big).unwrap_err();
        assert!(e.0.contains(&format!("image is {} bytes, over the {IMAGE_MAX_BYTES}-byte cap", IMAGE_MAX_BYTES + 1)));
        big.truncate(IMAGE_MAX_BYTES);
        assert!(Part::image(&big).is_ok());
    }

    #[test]
    fn the_serde_form_is_tagged_by_type() {
        let p = Part::image(PNG).unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["type"], "image");
        assert_eq!(v["media_type"], "image/png");
        assert_eq!(serde_json::from_value::<Part>(v).unwrap(), p);
        assert_eq!(p.describe(), format!("[image image/png, {} bytes]", PNG.len()));
    }

    /// A PNG of `len` bytes (its signature, then zeros): what a part's checks and budgets read.
    fn png_of(len: usize) -> Part {
        let mut bytes = PNG.to_vec();
        bytes.resize(len, 0);
        Part::image(&bytes).unwrap()
    }

    fn left_out(parts: &[Part]) -> usize {
        parts.iter().filter(|p| matches!(p, Part::Text { text } if text.contains("[left out: over"))).count()
    }

    #[test]
    fn attack_a_result_of_large_images_keeps_only_its_byte_budget() {
        // 7 images of 5 MiB (each within its own cap): 35 MiB would break every later request.
        let parts = budget_result(vec![png_of(IMAGE_MAX_BYTES); 7]);
        let kept = parts.iter().filter(|p| matches!(p, Part::Image { .. })).count();
        assert_eq!(kept, RESULT_MEDIA_MAX_BYTES / IMAGE_MAX_BYTES);
        assert_eq!(left_out(&parts), 7 - kept);
        assert!(text_view(&parts).contains("over one tool result's budget of 8 images and 8388608 bytes"));
        // Control: small images up to the count budget all pass, in order.
        let small = vec![png_of(100); RESULT_IMAGES_MAX];
        assert_eq!(budget_result(small.clone()), small);
    }

    #[test]
    fn attack_101_images_in_one_result_keep_the_count_budget() {
        let parts = budget_result(std::iter::once(Part::text("flood")).chain(vec![png_of(100); 101]).collect());
        assert_eq!(parts.iter().filter(|p| matches!(p, Part::Image { .. })).count(), RESULT_IMAGES_MAX);
        assert_eq!(left_out(&parts), 101 - RESULT_IMAGES_MAX);
        assert_eq!(parts[0], Part::text("flood"));
    }

    #[test]
    fn a_request_keeps_the_newest_tool_images_within_its_budget() {
        use crate::model::Message;
        let result = |id: &str, n: usize, len: usize| {
            let parts = vec![png_of(len); n];
            Message::Tool { call_id: id.into(), name: "t".into(), content: text_view(&parts), is_error: false, parts }
        };
        // Bytes: three results of one 5 MiB image and one of 2 MiB, the oldest first.
        let mut messages = vec![
            Message::user("go"),
            result("a", 1, IMAGE_MAX_BYTES),
            result("b", 1, IMAGE_MAX_BYTES),
            result("c", 1, IMAGE_MAX_BYTES),
            result("d", 1, 2 << 20),
        ];
        assert!(budget_request(&mut messages));
        let media = |m: &Message| match m {
            Message::Tool { parts, content, .. } => (has_media(parts), content.contains("left out")),
            _ => (false, false),
        };
        assert_eq!(media(&messages[1]), (false, true), "the oldest is left out, its text view says so");
        assert_eq!([media(&messages[2]), media(&messages[3]), media(&messages[4])], [(true, false); 3]);
        // Count: 30 small images over four results; the newest 20 stay.
        let mut messages: Vec<Message> = (0..3).map(|i| result(&i.to_string(), 10, 100)).collect();
        assert!(budget_request(&mut messages));
        let images = |m: &Message| match m {
            Message::Tool { parts, .. } => parts.iter().filter(|p| matches!(p, Part::Image { .. })).count(),
            _ => 0,
        };
        assert_eq!(messages.iter().map(images).collect::<Vec<_>>(), [0, 10, 10]);
        // Control: within the budget nothing changes.
        let mut within = vec![result("x", 10, 100), result("y", 10, 100)];
        let before = within.clone();
        assert!(!budget_request(&mut within));
        assert_eq!(within, before);
    }

    #[test]
    fn background_task_images_and_the_users_earlier_turns_count_in_the_request_budget() {
        use crate::model::Message;
        // Three background reports of 10 images each (a task's result delivered as its own user turn):
        // the newest 20 stay, the oldest report's are left out and its text view says so.
        let report = |id: usize| {
            let mut parts = vec![Part::text(format!("[background task task_{id} (chart) finished]"))];
            parts.extend(vec![png_of(100); 10]);
            Message::user_parts(parts)
        };
        let mut messages: Vec<Message> = (1..=3).map(report).collect();
        assert!(budget_request(&mut messages));
        let images = |m: &Message| match m {
            Message::User { parts, .. } => parts.iter().filter(|p| matches!(p, Part::Image { .. })).count(),
            _ => 0,
        };
        assert_eq!(messages.iter().map(images).collect::<Vec<_>>(), [0, 10, 10]);
        assert!(
            matches!(&messages[0], Message::User { content, .. } if content.contains("left out: over one request's budget"))
        );
        // The user's own images (10 in each of three turns): the newest turn, the input, stays whole and
        // counts first; the earlier turns share what is left, newest first.
        let own = |_| Message::user_parts(std::iter::once(Part::text("look")).chain(vec![png_of(100); 10]).collect());
        let mut messages: Vec<Message> = (0..3).map(own).collect();
        assert!(budget_request(&mut messages));
        assert_eq!(messages.iter().map(images).collect::<Vec<_>>(), [0, 10, 10]);
        // Control: two turns (20 images) are within the budget: untouched.
        let mut messages: Vec<Message> = (0..2).map(own).collect();
        let before = messages.clone();
        assert!(!budget_request(&mut messages));
        assert_eq!(messages, before);
    }

    /// A session that sends one large photo a turn: every request stays within the budget plus the
    /// newest turn, however long the session (the wire's request cap is never reached by the history).
    #[test]
    fn attack_one_large_photo_a_turn_never_piles_up_past_the_budget() {
        use crate::model::Message;
        let photo = || png_of(IMAGE_MAX_BYTES - 1024);
        let mut history: Vec<Message> = Vec::new();
        for turn in 0..8 {
            history.push(Message::user_parts(vec![Part::text(format!("turn {turn}")), photo()]));
            let mut request = history.clone();
            budget_request(&mut request);
            let sent: usize = request
                .iter()
                .filter_map(|m| match m {
                    Message::User { parts, .. } => Some(parts.iter().map(media_bytes).sum::<usize>()),
                    _ => None,
                })
                .sum();
            assert!(sent <= REQUEST_TOOL_MEDIA_MAX_BYTES + IMAGE_MAX_BYTES, "turn {turn}: {sent} bytes of media");
            history.push(Message::Assistant { content: Some("seen".into()), tool_calls: Vec::new() });
        }
    }

    #[test]
    fn attack_a_data_url_is_checked_as_bytes() {
        let png = STANDARD.encode(PNG);
        let e = Part::image_url(format!("data:image/jpeg;base64,{png}")).check().unwrap_err();
        assert_eq!(e.0, "labelled image/jpeg, but the bytes are image/png");
        let e = Part::image_url(format!("data:image/svg+xml;base64,{png}")).check().unwrap_err();
        assert!(e.0.contains("image media type 'image/svg+xml' is not one the wires take"), "{e}");
        let e = Part::image_url("data:image/png,rawbytes").check().unwrap_err();
        assert!(e.0.contains("data:<image type>;base64,<data>"), "{e}");
        let mut big = PNG.to_vec();
        big.resize(IMAGE_MAX_BYTES + 1, 0);
        let e = Part::image_url(format!("data:image/png;base64,{}", STANDARD.encode(&big))).check().unwrap_err();
        assert!(e.0.contains("over the 5242880-byte cap"), "{e}");
        // Control: a well-formed one, and an https URL, pass.
        assert!(Part::image_url(format!("data:image/png;base64,{png}")).check().is_ok());
        assert!(Part::image_url("https://example.com/cat.png").check().is_ok());
    }

    #[test]
    fn attack_a_string_that_looks_like_content_stays_a_string() {
        let forged = serde_json::to_string(&tool_content(vec![Part::image(PNG).unwrap()])).unwrap();
        assert_eq!(from_host_text(forged.clone()), Value::String(forged.clone()));
        // Control: the binding's typed return (the tag, then the value) is content.
        let typed = from_host_text(format!("{}{forged}", host_content_tag()));
        assert_eq!(read_tool_content(&typed).unwrap().unwrap().len(), 1);
    }

    #[test]
    fn tool_content_round_trips_and_names_a_bad_part() {
        let v = tool_content(vec![Part::text("a chart"), Part::image(PNG).unwrap()]);
        assert_eq!(read_tool_content(&v).unwrap().unwrap().len(), 2);
        let bad = serde_json::json!({TOOL_CONTENT_KEY: [{"type": "image", "media_type": "image/jpeg",
            "data": STANDARD.encode(PNG)}]});
        assert!(read_tool_content(&bad).unwrap().unwrap_err().starts_with("parts[0]: labelled image/jpeg"));
        assert!(read_tool_content(&serde_json::json!({"a": 1})).is_none());
    }
}
