//! Server-sent events, as the three wires stream them: `event:` and `data:` lines, a blank line ends an
//! event. Read from the response body chunk by chunk.

use crate::error::ModelError;

/// One event: its name (absent on Chat Completions) and its data lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Splits a byte stream into events; feed it chunks as they arrive.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: Option<String>,
    data: Vec<String>,
}

impl SseParser {
    /// Adds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(e) = self.line(&line) {
                out.push(e);
            }
        }
        out
    }

    /// Ends the stream; returns an event left without its blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned();
        if !rest.is_empty() {
            self.line(&rest);
        }
        self.line("")
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            if self.data.is_empty() && self.event.is_none() {
                return None;
            }
            let data = std::mem::take(&mut self.data).join("\n");
            return Some(SseEvent { event: self.event.take(), data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => self.data.push(value.to_string()),
            _ => {}
        }
        None
    }
}

/// Reads a streamed response to its end, handing every event to `on_event`; stops early when it
/// returns `Ok(false)`.
pub(crate) async fn read_events(
    mut resp: reqwest::Response,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, ModelError>,
) -> Result<(), ModelError> {
    let mut parser = SseParser::default();
    loop {
        let chunk = resp.chunk().await.map_err(|e| ModelError::Transport(format!("the stream broke: {e}")))?;
        let Some(chunk) = chunk else { break };
        for e in parser.push(&chunk) {
            if !on_event(e)? {
                return Ok(());
            }
        }
    }
    if let Some(e) = parser.finish() {
        on_event(e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: message_start\ndata: {\"a\"").is_empty());
        let got = p.push(b":1}\n\n: comment\r\ndata: [DONE]\r\n\r\n");
        assert_eq!(
            got,
            vec![
                SseEvent { event: Some("message_start".into()), data: "{\"a\":1}".into() },
                SseEvent { event: None, data: "[DONE]".into() },
            ]
        );
        assert_eq!(p.finish(), None);
    }

    #[test]
    fn multi_line_data_and_an_unterminated_last_event() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: a\ndata: b").is_empty());
        assert_eq!(p.finish(), Some(SseEvent { event: None, data: "a\nb".into() }));
    }
}
