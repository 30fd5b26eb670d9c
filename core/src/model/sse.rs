//! Server-sent events, as the three wires stream them: `event:` and `data:` lines, a blank line ends an
//! event. Read from the response body chunk by chunk, in time linear in the bytes (each byte is looked
//! at once), within the [`WireLimits`] on a line, an event, the stream's bytes and its events.

use super::limits::{WireLimits, over};
use crate::error::ModelError;

/// One event: its name (absent on Chat Completions) and its data lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name.
    pub event: Option<String>,
    /// The data lines, joined by `\n`.
    pub data: String,
}

/// Splits a byte stream into events; feed it chunks as they arrive.
#[derive(Debug)]
pub struct SseParser {
    limits: WireLimits,
    /// The line begun in an earlier chunk, not yet ended.
    line: Vec<u8>,
    event: Option<String>,
    /// The event's data lines so far, joined by `\n`; `None` before the first.
    data: Option<String>,
    bytes: usize,
    events: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::new(WireLimits::default())
    }
}

impl SseParser {
    /// A parser that refuses what goes past `limits` (`max_line_bytes`, `max_stream_bytes`,
    /// `max_events`).
    pub fn new(limits: WireLimits) -> Self {
        SseParser { limits, line: Vec::new(), event: None, data: None, bytes: 0, events: 0 }
    }

    /// Adds a chunk; returns the events it completed, or the error naming the limit it went past.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, ModelError> {
        self.bytes = self.bytes.saturating_add(chunk.len());
        if self.bytes > self.limits.max_stream_bytes {
            return Err(over("the streamed answer", "max_stream_bytes", self.limits.max_stream_bytes, "bytes"));
        }
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(pos);
            rest = tail.get(1..).unwrap_or_default();
            self.check_line(head.len())?;
            let ended = if self.line.is_empty() {
                self.line(head)?
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.line(&line)?
            };
            out.extend(ended);
        }
        self.check_line(rest.len())?;
        self.line.extend_from_slice(rest);
        Ok(out)
    }

    /// Ends the stream; returns an event left without its blank line.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, ModelError> {
        let rest = std::mem::take(&mut self.line);
        if !rest.is_empty() {
            self.line(&rest)?;
        }
        self.line(b"")
    }

    fn check_line(&self, more: usize) -> Result<(), ModelError> {
        if self.line.len().saturating_add(more) > self.limits.max_line_bytes {
            return Err(over("a line of the stream", "max_line_bytes", self.limits.max_line_bytes, "bytes"));
        }
        Ok(())
    }

    /// One line, without its `\n`.
    fn line(&mut self, line: &[u8]) -> Result<Option<SseEvent>, ModelError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.data.is_none() && self.event.is_none() {
                return Ok(None);
            }
            self.events += 1;
            if self.events > self.limits.max_events {
                return Err(over("the streamed answer", "max_events", self.limits.max_events, "events"));
            }
            let data = self.data.take().unwrap_or_default();
            return Ok(Some(SseEvent { event: self.event.take(), data }));
        }
        if line.starts_with(b":") {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => (line.get(..i).unwrap_or_default(), line.get(i + 1..).unwrap_or_default()),
            None => (line, &b""[..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"data" => {
                let data = match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d
                    }
                    None => self.data.insert(String::new()),
                };
                if data.len().saturating_add(value.len()) > self.limits.max_line_bytes {
                    return Err(over("an event's data", "max_line_bytes", self.limits.max_line_bytes, "bytes"));
                }
                data.push_str(&String::from_utf8_lossy(value));
            }
            _ => {}
        }
        Ok(None)
    }
}

/// Reads a streamed response to its end, handing every event to `on_event`; stops early when it
/// returns `Ok(false)`. The stream is read within `limits`.
pub(crate) async fn read_events(
    mut resp: reqwest::Response,
    limits: WireLimits,
    mut on_event: impl FnMut(SseEvent) -> Result<bool, ModelError>,
) -> Result<(), ModelError> {
    let mut parser = SseParser::new(limits);
    loop {
        let chunk = resp.chunk().await.map_err(|e| ModelError::Transport(format!("the stream broke: {e}")))?;
        let Some(chunk) = chunk else { break };
        for e in parser.push(&chunk)? {
            if !on_event(e)? {
                return Ok(());
            }
        }
    }
    if let Some(e) = parser.finish()? {
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
        assert!(p.push(b"event: message_start\ndata: {\"a\"").unwrap().is_empty());
        let got = p.push(b":1}\n\n: comment\r\ndata: [DONE]\r\n\r\n").unwrap();
        assert_eq!(
            got,
            vec![
                SseEvent { event: Some("message_start".into()), data: "{\"a\":1}".into() },
                SseEvent { event: None, data: "[DONE]".into() },
            ]
        );
        assert_eq!(p.finish().unwrap(), None);
    }

    #[test]
    fn multi_line_data_and_an_unterminated_last_event() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: a\ndata: b").unwrap().is_empty());
        assert_eq!(p.finish().unwrap(), Some(SseEvent { event: None, data: "a\nb".into() }));
    }

    fn small(line: usize, stream: usize, events: usize) -> SseParser {
        SseParser::new(WireLimits {
            max_line_bytes: line,
            max_stream_bytes: stream,
            max_events: events,
            ..WireLimits::default()
        })
    }

    #[test]
    fn a_line_an_event_the_stream_and_its_events_are_bounded() {
        // A line at the limit passes, split across chunks or not; one byte more is refused.
        let mut p = small(10, 1000, 1000);
        assert!(p.push(b"data: 1234").unwrap().is_empty());
        assert_eq!(p.push(b"\n\n").unwrap(), vec![SseEvent { event: None, data: "1234".into() }]);
        let e = small(10, 1000, 1000).push(b"data: 12345").unwrap_err();
        assert!(e.to_string().contains("max_line_bytes (10 bytes)"), "{e}");
        let mut p = small(10, 1000, 1000);
        p.push(b"data: 12").unwrap();
        assert!(p.push(b"345\n").unwrap_err().to_string().contains("max_line_bytes"));
        // Data lines under the limit one by one, past it together.
        let mut p = small(11, 1000, 1000);
        let e = p.push(b"data: 12345\ndata: 12345\ndata: 12345\n").unwrap_err();
        assert!(e.to_string().contains("an event's data went past the limit max_line_bytes"), "{e}");
        // The stream's bytes.
        let mut p = small(100, 18, 1000);
        p.push(b"data: 1\n\ndata: 2\n\n").unwrap();
        assert!(p.push(b"x").unwrap_err().to_string().contains("max_stream_bytes (18 bytes)"));
        // Its events.
        let mut p = small(100, 1000, 2);
        assert_eq!(p.push(b"data: 1\n\ndata: 2\n\n").unwrap().len(), 2);
        assert!(p.push(b"data: 3\n\n").unwrap_err().to_string().contains("max_events (2 events)"));
    }

    /// A line that comes in many chunks is kept whole across them (the parser keeps the unfinished
    /// line and looks at each new byte once; the old one rescanned the buffer per chunk, quadratic in
    /// the line: core/tests/wire_limits.rs measures the time).
    #[test]
    fn a_long_line_in_small_chunks_is_one_line() {
        let mut p = SseParser::default();
        let n = 1 << 20;
        p.push(b"data: ").unwrap();
        for _ in 0..n / 4096 {
            assert!(p.push(&[b'a'; 4096]).unwrap().is_empty());
        }
        let got = p.push(b"\n\n").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data.len(), n);
    }
}
