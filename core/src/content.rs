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
            Part::ImageUrl { url } => {
                if ["https://", "http://", "data:image/"].iter().any(|p| url.starts_with(p)) {
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

/// The text view of a list of parts: the parts described, one after another, separated by newlines.
pub fn text_view(parts: &[Part]) -> String {
    parts.iter().map(Part::describe).collect::<Vec<_>>().join("\n")
}

/// A tool result's parts after the loop's hooks saw its text: as they were when `text` is still their
/// text view, else `text` followed by the parts that are not text.
pub fn with_text(parts: Vec<Part>, text: &str) -> Vec<Part> {
    if text_view(&parts) == text {
        return parts;
    }
    std::iter::once(Part::text(text)).chain(parts.into_iter().filter(|p| !matches!(p, Part::Text { .. }))).collect()
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

/// A host-language tool's answer as the bindings hand it over (text): the content value when the text
/// is a [`tool_content`] value's JSON (the binding's `Image` / parts return), else the text itself.
pub fn from_host_text(text: String) -> Value {
    if text.starts_with(&format!("{{\"{TOOL_CONTENT_KEY}\""))
        && let Ok(v) = serde_json::from_str::<Value>(&text)
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
