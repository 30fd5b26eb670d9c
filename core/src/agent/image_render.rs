//! `image_render` (seed 000): shows the model an image the agent holds in memory — base64 bytes given
//! inline or saved in a scratchpad entry (a command pipeline's output) — as an image content block.
//! PNG, JPEG, GIF and WebP pass through unchanged; BMP, TIFF, ICO, TGA, PNM, QOI, DDS, Farbfeld and HDR
//! are converted to PNG (feature `image-convert`, on by default). The final payload is capped at
//! [`MAX_BYTES`]. Offered only on an agent whose model takes images ([`crate::AgentBuilder::vision`]).

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::content::{Part, sniff, tool_content};
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolContext, ToolSpec};

use super::run_state::RunState;

/// The tool's name.
pub const NAME: &str = "image_render";
/// The most bytes the rendered image may hold (after any conversion): ~3.75 MB, the seed's cap.
pub const MAX_BYTES: usize = 3_750_000;

struct ImageRender {
    spec: ToolSpec,
}

/// The tool, registered by [`crate::AgentBuilder::vision`].
pub fn tool() -> Arc<dyn Tool> {
    let spec = ToolSpec::new(
        NAME,
        "Displays an image you have in memory, as base64 bytes or in a scratchpad entry, so you can see it. \
         Exactly one of from_scratchpad or base64. Prefer from_scratchpad for large images (inline base64 \
         inflates the call). PNG, JPEG, GIF and WebP pass through; BMP, TIFF, ICO, TGA, PNM, QOI, DDS, \
         Farbfeld and HDR are converted to PNG. At most ~3.75 MB.",
        json!({
            "type": "object",
            "properties": {
                "from_scratchpad": {"type": "string", "description": "The scratchpad entry holding the image's base64"},
                "base64": {"type": "string", "description": "The image's bytes, base64-encoded"}
            }
        }),
    )
    .with_level(Level::None);
    Arc::new(ImageRender { spec })
}

#[async_trait]
impl Tool for ImageRender {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let (text, source) = match (arguments.get("from_scratchpad"), arguments.get("base64")) {
            (Some(Value::String(name)), None) => {
                let state =
                    RunState::current().ok_or_else(|| ToolError::failed("image_render runs inside a run only"))?;
                let entries = state.scratchpad.lock().unwrap_or_else(|p| p.into_inner());
                let entry = entries
                    .get(name.trim())
                    .ok_or_else(|| ToolError::failed(format!("there is no scratchpad entry '{}'", name.trim())))?;
                (entry.clone(), format!("scratchpad entry '{}'", name.trim()))
            }
            (None, Some(Value::String(b))) => (b.clone(), "base64".to_string()),
            _ => return Err(ToolError::failed("give exactly one of from_scratchpad (an entry's name) or base64")),
        };
        // Refused before it is decoded: the input may be no larger than the largest image it could give
        // (a format converted to PNG shrinks or grows by little; decoding limits bound the rest).
        if text.len() > MAX_INPUT_CHARS {
            return Err(ToolError::failed(format!(
                "the {source} is {} characters, over the {MAX_INPUT_CHARS}-character cap",
                text.len()
            )));
        }
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let bytes = STANDARD
            .decode(compact.as_bytes())
            .map_err(|e| ToolError::failed(format!("the {source} is not valid base64: {e}")))?;
        // Decoding and converting is CPU work of up to seconds: on a blocking thread, never a runtime
        // worker (which would stall every other task of the process meanwhile).
        let (media_type, bytes) = tokio::task::spawn_blocking(move || render(bytes))
            .await
            .map_err(|e| ToolError::failed(format!("the image could not be rendered: {e}")))?
            .map_err(ToolError::failed)?;
        if bytes.len() > MAX_BYTES {
            return Err(ToolError::failed(format!(
                "the image is {} bytes ({media_type}), over the {MAX_BYTES}-byte cap",
                bytes.len()
            )));
        }
        let text = format!("Rendered the image from the {source} ({media_type}, {} bytes).", bytes.len());
        let image = Part::Image { media_type: media_type.to_string(), data: STANDARD.encode(&bytes) };
        Ok(tool_content(vec![Part::text(text), image]))
    }

    async fn call_in(&self, arguments: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        self.call(arguments).await
    }
}

/// The image as the wires take it: PNG, JPEG, GIF and WebP as they are; the other formats converted to
/// PNG.
pub fn render(bytes: Vec<u8>) -> Result<(&'static str, Vec<u8>), String> {
    if let Some(t) = sniff(&bytes).filter(|t| t.starts_with("image/")) {
        return Ok((t, bytes));
    }
    convert(&bytes).map(|png| ("image/png", png))
}

/// The largest side a converted image may have (the hosted APIs take at most 8,000 pixels).
#[cfg(feature = "image-convert")]
const MAX_SIDE: u32 = 8000;
/// The most memory one decode may take.
#[cfg(feature = "image-convert")]
const MAX_DECODED_BYTES: u64 = 64 * 1024 * 1024;
/// The longest base64 text `image_render` takes: twice the base64 of the largest image it may give.
const MAX_INPUT_CHARS: usize = MAX_BYTES / 3 * 8;

#[cfg(feature = "image-convert")]
fn convert(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let format = image::guess_format(bytes)
        .map_err(|_| "the bytes are not an image of a supported format (PNG, JPEG, GIF, WebP, BMP, TIFF, ICO, TGA, PNM, QOI, DDS, Farbfeld, HDR)".to_string())?;
    // Decoding limits: a small compressed file (QOI runs, deflated TIFF) must not unpack into gigabytes.
    let mut reader = image::ImageReader::with_format(std::io::Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| format!("the {format:?} image could not be decoded: {e}"))?;
    // HDR and other float images become 8-bit RGBA; PNG takes the rest as they are.
    let decoded = match decoded {
        image::DynamicImage::ImageRgb32F(_) | image::DynamicImage::ImageRgba32F(_) => {
            image::DynamicImage::ImageRgba8(decoded.to_rgba8())
        }
        other => other,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    decoded
        .write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| format!("the image could not be written as PNG: {e}"))?;
    Ok(out.into_inner())
}

#[cfg(not(feature = "image-convert"))]
fn convert(_bytes: &[u8]) -> Result<Vec<u8>, String> {
    Err("the bytes are not a PNG, JPEG, GIF or WebP image (this build converts no other format)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid one-colour QOI image of `w`×`h`: one QOI_OP_RGBA pixel, then runs of it (a few bytes
    /// unpack to `w`×`h`×4).
    #[cfg(feature = "image-convert")]
    fn qoi(w: u32, h: u32) -> Vec<u8> {
        let mut out = b"qoif".to_vec();
        out.extend_from_slice(&w.to_be_bytes());
        out.extend_from_slice(&h.to_be_bytes());
        out.extend_from_slice(&[4, 0, 0xFF, 10, 20, 30, 255]);
        let mut left = (w as usize * h as usize).saturating_sub(1);
        while left > 0 {
            let run = left.min(62);
            out.push(0xC0 | (run as u8 - 1));
            left -= run;
        }
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        out
    }

    /// A few hundred bytes that unpack past the limits (a side over 8,000 pixels; 64 MiB) are refused
    /// before they are decoded, not allocated. Control: the same image just inside the limits converts,
    /// so the limits are what refuses.
    #[cfg(feature = "image-convert")]
    #[test]
    fn a_decompression_bomb_is_refused_by_the_limits() {
        for (w, h) in [(8001, 1), (1, 8001), (5000, 5000)] {
            let bomb = qoi(w, h);
            assert!(bomb.len() < 700_000, "{}", bomb.len());
            let err = render(bomb).unwrap_err();
            assert!(err.contains("could not be decoded"), "{w}x{h}: {err}");
        }
        let (media_type, png) = render(qoi(8000, 1)).unwrap();
        assert_eq!(media_type, "image/png");
        assert!(png.starts_with(b"\x89PNG"));
    }

    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

    #[tokio::test]
    async fn a_png_passes_through_unchanged() {
        let v = tool().call(json!({"base64": PNG})).await.unwrap();
        let parts = crate::content::read_tool_content(&v).unwrap().unwrap();
        assert_eq!(parts[1], Part::Image { media_type: "image/png".into(), data: PNG.into() });
        assert_eq!(parts[0], Part::text("Rendered the image from the base64 (image/png, 69 bytes)."));
    }

    #[cfg(feature = "image-convert")]
    #[tokio::test]
    async fn a_bmp_is_converted_to_png() {
        let mut bmp = std::io::Cursor::new(Vec::new());
        image::RgbImage::from_pixel(2, 2, image::Rgb([255, 0, 0])).write_to(&mut bmp, image::ImageFormat::Bmp).unwrap();
        let v = tool().call(json!({"base64": STANDARD.encode(bmp.get_ref())})).await.unwrap();
        let parts = crate::content::read_tool_content(&v).unwrap().unwrap();
        let Part::Image { media_type, data } = &parts[1] else { panic!("{parts:?}") };
        assert_eq!(media_type, "image/png");
        let png = STANDARD.decode(data).unwrap();
        assert_eq!(image::load_from_memory(&png).unwrap().to_rgb8().get_pixel(1, 1).0, [255, 0, 0]);
    }

    #[tokio::test]
    async fn bad_input_is_refused_by_name() {
        let e = tool().call(json!({"base64": "aGVsbG8="})).await.unwrap_err().to_string();
        assert!(e.contains("not an image") || e.contains("not a PNG"), "{e}");
        let e = tool().call(json!({})).await.unwrap_err().to_string();
        assert!(e.contains("exactly one of from_scratchpad"), "{e}");
        let e = tool().call(json!({"base64": "@@"})).await.unwrap_err().to_string();
        assert!(e.contains("not valid base64"), "{e}");
    }

    #[tokio::test]
    async fn an_image_over_the_cap_is_refused() {
        let mut big = STANDARD.decode(PNG).unwrap();
        big.resize(MAX_BYTES + 1, 0);
        let e = tool().call(json!({"base64": STANDARD.encode(&big)})).await.unwrap_err().to_string();
        assert!(
            e.contains(&format!("the image is {} bytes (image/png), over the {MAX_BYTES}-byte cap", MAX_BYTES + 1)),
            "{e}"
        );
    }
}
