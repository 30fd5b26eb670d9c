//! The exporting layer and its exporter thread (cargo feature `otel`).
//!
//! Each span the layer takes is recorded straight into the protobuf encoding of its OTLP `Span`: one
//! buffer per span, to which every recorded field appends its `KeyValue` (field names are the
//! callsites' `&'static str`s, values are written once, where they are recorded). At the span's close
//! its ids, times and name complete the buffer, which goes to a bounded queue (a full queue drops the
//! span and counts it: the loop never waits for the exporter). A thread of its own takes the queued
//! spans when 512 are waiting, every 5 s, or on a flush, wraps them in an `ExportTraceServiceRequest`
//! and POSTs it over OTLP/HTTP with protobuf bodies. No OpenTelemetry SDK span objects, no
//! per-attribute strings, and no wake-up of the exporter per span (a span is pushed under a lock; the
//! exporter is signalled once per batch).
//!
//! Protobuf fields may come in any order and, for a scalar field, the last one read wins: a span's
//! kind is written first as `internal` and an `otel.kind` field written later replaces it; `otel.name`
//! likewise replaces the callsite's name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Spans waiting for the exporter at most (the OpenTelemetry SDK's default queue size).
const QUEUE: usize = 2048;
/// Spans in one export at most.
const BATCH: usize = 512;
/// How long a finished span waits for its batch at most.
const DELAY: Duration = Duration::from_secs(5);
/// How long one export may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What wakes the exporter thread.
pub(super) enum Msg {
    /// A batch of spans is waiting.
    Batch,
    /// Export what is pending now and answer with how it went.
    Flush(mpsc::Sender<Result<(), String>>),
}

/// The finished spans waiting for the exporter (each the encoded body of its `Span` message), and the
/// exporter's wake-up.
pub(super) struct Queue {
    spans: Mutex<Vec<Vec<u8>>>,
    capacity: usize,
    wake: SyncSender<Msg>,
}

impl Queue {
    pub(super) fn new(capacity: usize, wake: SyncSender<Msg>) -> Arc<Queue> {
        Arc::new(Queue { spans: Mutex::new(Vec::with_capacity(BATCH.min(capacity))), capacity, wake })
    }

    /// Queues a finished span, or drops and counts it when the queue is full; wakes the exporter when a
    /// batch is waiting. Never waits for the exporter.
    fn push(&self, span: Vec<u8>) {
        let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        if spans.len() >= self.capacity {
            drop(spans);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        spans.push(span);
        let batch = spans.len() == BATCH.min(self.capacity);
        drop(spans);
        if batch {
            let _ = self.wake.try_send(Msg::Batch);
        }
    }

    fn take(&self) -> Vec<Vec<u8>> {
        let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *spans, Vec::with_capacity(BATCH.min(self.capacity)))
    }
}

/// Spans dropped because the queue was full (reported by the next flush).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// A span in the making: its ids, its start, and its `Span` message's fields recorded so far.
struct SpanData {
    trace_id: [u8; 16],
    span_id: u64,
    parent: u64,
    start: u64,
    named: bool,
    body: Vec<u8>,
}

/// The `tracing` layer recording spans as OTLP protobuf and handing them to the exporter thread.
pub(super) struct OtlpLayer {
    queue: Arc<Queue>,
    seed: u64,
    next: AtomicU64,
}

impl OtlpLayer {
    pub(super) fn new(queue: Arc<Queue>) -> OtlpLayer {
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        let seed = u64::from_le_bytes(seed) | now_nanos();
        OtlpLayer { queue, seed, next: AtomicU64::new(1) }
    }

    /// A fresh non-zero id, unique in the process: a counter passed through splitmix64's bijective mix
    /// of a random seed.
    fn id(&self) -> u64 {
        loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let mut z = self.seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            if z != 0 {
                return z;
            }
        }
    }
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl<S> Layer<S> for OtlpLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().and_then(|p| p.extensions().get::<SpanData>().map(|d| (d.trace_id, d.span_id)));
        let (trace_id, parent) = match parent {
            Some(p) => p,
            None => {
                let mut t = [0u8; 16];
                t[..8].copy_from_slice(&self.id().to_be_bytes());
                t[8..].copy_from_slice(&self.id().to_be_bytes());
                (t, 0)
            }
        };
        let mut data = SpanData {
            trace_id,
            span_id: self.id(),
            parent,
            start: now_nanos(),
            named: false,
            body: Vec::with_capacity(384),
        };
        varint_field(&mut data.body, 6, 1); // kind: internal, unless `otel.kind` says otherwise
        attrs.record(&mut SpanFields { body: &mut data.body, named: &mut data.named });
        span.extensions_mut().insert(data);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanData>() {
            values.record(&mut SpanFields { body: &mut data.body, named: &mut data.named });
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let span = match event.parent() {
            Some(id) => ctx.span(id),
            None if event.is_contextual() => ctx.lookup_current(),
            None => None,
        };
        let Some(span) = span else { return };
        let mut ext = span.extensions_mut();
        let Some(data) = ext.get_mut::<SpanData>() else { return };
        // Span.Event: time, name (the message), attributes: level, target, then the event's fields.
        let meta = event.metadata();
        let mut fields = EventFields { attrs: Vec::with_capacity(256), message: None };
        kv(&mut fields.attrs, 3, "level", Val::Str(meta.level().as_str()));
        kv(&mut fields.attrs, 3, "target", Val::Str(meta.target()));
        event.record(&mut fields);
        let name = fields.message.as_deref().unwrap_or(meta.name());
        let len = 9 + str_field_len(2, name) + fields.attrs.len();
        encode_key(11, WireType::LengthDelimited, &mut data.body);
        encode_varint(len as u64, &mut data.body);
        fixed64_field(&mut data.body, 1, now_nanos());
        str_field(&mut data.body, 2, name);
        data.body.extend_from_slice(&fields.attrs);
        if *meta.level() == tracing::Level::ERROR {
            // Status { message, code: ERROR }
            let len = str_field_len(2, name) + 2;
            encode_key(15, WireType::LengthDelimited, &mut data.body);
            encode_varint(len as u64, &mut data.body);
            str_field(&mut data.body, 2, name);
            varint_field(&mut data.body, 3, 2);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(mut data) = span.extensions_mut().remove::<SpanData>() else { return };
        let body = &mut data.body;
        bytes_field(body, 1, &data.trace_id);
        bytes_field(body, 2, &data.span_id.to_be_bytes());
        if data.parent != 0 {
            bytes_field(body, 4, &data.parent.to_be_bytes());
        }
        if !data.named {
            str_field(body, 5, span.name());
        }
        fixed64_field(body, 7, data.start);
        fixed64_field(body, 8, now_nanos());
        self.queue.push(data.body);
    }
}

/// A span's fields: `otel.name` and `otel.kind` set its name and kind, the others are its attributes.
struct SpanFields<'a> {
    body: &'a mut Vec<u8>,
    named: &'a mut bool,
}

impl Visit for SpanFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "otel.name" => {
                str_field(self.body, 5, value);
                *self.named = true;
            }
            "otel.kind" => {
                let kind = match value {
                    "server" => 2,
                    "client" => 3,
                    "producer" => 4,
                    "consumer" => 5,
                    _ => 1,
                };
                varint_field(self.body, 6, kind);
            }
            // A string array, as the conventions type it (a `tracing` field cannot hold one).
            "gen_ai.response.finish_reasons" => kv(self.body, 9, field.name(), Val::StrArray(value)),
            name => kv(self.body, 9, name, Val::Str(value)),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        kv(self.body, 9, field.name(), Val::Int(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        kv(self.body, 9, field.name(), Val::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        kv(self.body, 9, field.name(), Val::F64(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

/// An event's fields: its message (the event's name) and its attributes.
struct EventFields {
    attrs: Vec<u8>,
    message: Option<String>,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_string());
        } else {
            kv(&mut self.attrs, 3, field.name(), Val::Str(value));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        kv(&mut self.attrs, 3, field.name(), Val::Int(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        kv(&mut self.attrs, 3, field.name(), Val::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        kv(&mut self.attrs, 3, field.name(), Val::F64(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = Some(format!("{value:?}"));
        } else {
            kv(&mut self.attrs, 3, field.name(), Val::Str(&format!("{value:?}")));
        }
    }
}

/// An attribute's value (`AnyValue`).
enum Val<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
    F64(f64),
    /// An array of one string.
    StrArray(&'a str),
}

impl Val<'_> {
    /// The length of the encoded `AnyValue` message.
    fn len(&self) -> usize {
        match self {
            Val::Str(s) => str_field_len(1, s),
            Val::Int(i) => 1 + encoded_len_varint(*i as u64),
            Val::Bool(_) => 2,
            Val::F64(_) => 9,
            Val::StrArray(s) => {
                let any = str_field_len(1, s);
                let array = 1 + encoded_len_varint(any as u64) + any;
                1 + encoded_len_varint(array as u64) + array
            }
        }
    }

    fn encode(&self, buf: &mut Vec<u8>) {
        match self {
            Val::Str(s) => str_field(buf, 1, s),
            Val::Int(i) => varint_field(buf, 3, *i as u64),
            Val::Bool(b) => varint_field(buf, 2, u64::from(*b)),
            Val::F64(f) => {
                encode_key(4, WireType::SixtyFourBit, buf);
                buf.extend_from_slice(&f.to_le_bytes());
            }
            Val::StrArray(s) => {
                // ArrayValue { values: [AnyValue { string_value }] }
                let any = str_field_len(1, s);
                let array = 1 + encoded_len_varint(any as u64) + any;
                encode_key(5, WireType::LengthDelimited, buf);
                encode_varint(array as u64, buf);
                encode_key(1, WireType::LengthDelimited, buf);
                encode_varint(any as u64, buf);
                str_field(buf, 1, s);
            }
        }
    }
}

/// Appends a `KeyValue` as field `tag` of the message in `buf`.
fn kv(buf: &mut Vec<u8>, tag: u32, key: &str, value: Val<'_>) {
    let any = value.len();
    let len = str_field_len(1, key) + 1 + encoded_len_varint(any as u64) + any;
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
    str_field(buf, 1, key);
    encode_key(2, WireType::LengthDelimited, buf);
    encode_varint(any as u64, buf);
    value.encode(buf);
}

/// The encoded length of a string (or bytes) field whose tag is below 16.
fn str_field_len(_tag: u32, s: &str) -> usize {
    1 + encoded_len_varint(s.len() as u64) + s.len()
}

fn str_field(buf: &mut Vec<u8>, tag: u32, s: &str) {
    bytes_field(buf, tag, s.as_bytes());
}

fn bytes_field(buf: &mut Vec<u8>, tag: u32, b: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(b.len() as u64, buf);
    buf.extend_from_slice(b);
}

fn varint_field(buf: &mut Vec<u8>, tag: u32, v: u64) {
    encode_key(tag, WireType::Varint, buf);
    encode_varint(v, buf);
}

fn fixed64_field(buf: &mut Vec<u8>, tag: u32, v: u64) {
    encode_key(tag, WireType::SixtyFourBit, buf);
    buf.extend_from_slice(&v.to_le_bytes());
}

/// The encoded `Resource` field of a `ResourceSpans` and the `InstrumentationScope` field of a
/// `ScopeSpans`: the parts of every request that do not change.
fn request_parts(service_name: &str) -> (Vec<u8>, Vec<u8>) {
    let mut attrs = Vec::new();
    kv(&mut attrs, 1, "service.name", Val::Str(service_name));
    kv(&mut attrs, 1, "telemetry.sdk.language", Val::Str("rust"));
    kv(&mut attrs, 1, "telemetry.sdk.name", Val::Str("ambit"));
    kv(&mut attrs, 1, "telemetry.sdk.version", Val::Str(env!("CARGO_PKG_VERSION")));
    let mut resource = Vec::new();
    bytes_field(&mut resource, 1, &attrs);
    let mut scope_name = Vec::new();
    str_field(&mut scope_name, 1, "ambit");
    let mut scope = Vec::new();
    bytes_field(&mut scope, 1, &scope_name);
    (resource, scope)
}

/// An `ExportTraceServiceRequest` holding `spans` (each the encoded body of a `Span` message).
fn request(resource: &[u8], scope: &[u8], spans: &[Vec<u8>]) -> Vec<u8> {
    let spans_len: usize = spans.iter().map(|s| 1 + encoded_len_varint(s.len() as u64) + s.len()).sum();
    let scope_spans = scope.len() + spans_len;
    let resource_spans = resource.len() + 1 + encoded_len_varint(scope_spans as u64) + scope_spans;
    let mut buf = Vec::with_capacity(1 + encoded_len_varint(resource_spans as u64) + resource_spans);
    encode_key(1, WireType::LengthDelimited, &mut buf);
    encode_varint(resource_spans as u64, &mut buf);
    buf.extend_from_slice(resource);
    encode_key(2, WireType::LengthDelimited, &mut buf);
    encode_varint(scope_spans as u64, &mut buf);
    buf.extend_from_slice(scope);
    for s in spans {
        bytes_field(&mut buf, 2, s);
    }
    buf
}

/// Starts the exporter thread: its HTTP client (made on it), and the queue's sending side. Fails when
/// the client cannot be made.
pub(super) fn start(
    url: String,
    headers: reqwest::header::HeaderMap,
    service_name: &str,
) -> Result<Arc<Queue>, String> {
    let (wake, rx) = mpsc::sync_channel(4);
    let queue = Queue::new(QUEUE, wake);
    let taken = queue.clone();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (resource, scope) = request_parts(service_name);
    std::thread::Builder::new()
        .name("ambit-otlp".to_string())
        .spawn(move || {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let made =
                tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string()).and_then(
                    |rt| {
                        let client = reqwest::Client::builder().timeout(TIMEOUT).build().map_err(|e| e.to_string())?;
                        Ok((rt, client))
                    },
                );
            let (rt, client) = match made {
                Ok(made) => {
                    let _ = ready_tx.send(Ok(()));
                    made
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("the exporter's HTTP client could not be made: {e}")));
                    return;
                }
            };
            let post = |spans: &[Vec<u8>]| -> Result<(), String> {
                let body = request(&resource, &scope, spans);
                rt.block_on(async {
                    let answer = client
                        .post(&url)
                        .headers(headers.clone())
                        .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
                        .body(body)
                        .send()
                        .await
                        .map_err(|e| format!("the collector at {url} could not be reached: {e}"))?;
                    let status = answer.status();
                    if status.is_success() {
                        return Ok(());
                    }
                    let text = answer.text().await.unwrap_or_default();
                    Err(format!(
                        "the collector at {url} answered {status}: {}",
                        text.chars().take(200).collect::<String>()
                    ))
                })
            };
            run(rx, &taken, post);
        })
        .map_err(|e| format!("the exporter thread could not be started: {e}"))?;
    ready_rx.recv().unwrap_or_else(|_| Err("the exporter thread stopped".to_string()))?;
    Ok(queue)
}

/// The exporter thread's loop: the queued spans posted (in batches of at most 512) when a batch is
/// waiting, when due, or when flushed. An export that fails in the background is reported by the next
/// flush.
fn run(rx: Receiver<Msg>, queue: &Queue, post: impl Fn(&[Vec<u8>]) -> Result<(), String>) {
    let mut failed: Option<String> = None;
    let mut due = Instant::now() + DELAY;
    let export = || -> Result<(), String> {
        let spans = queue.take();
        let mut result = Ok(());
        for batch in spans.chunks(BATCH) {
            if let Err(e) = post(batch) {
                result = Err(e);
            }
        }
        result
    };
    loop {
        let reply = match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
            Ok(Msg::Batch) => None,
            Ok(Msg::Flush(reply)) => Some(reply),
            Err(RecvTimeoutError::Timeout) => {
                due = Instant::now() + DELAY;
                None
            }
            Err(RecvTimeoutError::Disconnected) => {
                let _ = export();
                return;
            }
        };
        let mut result = export();
        let Some(reply) = reply else {
            if let Err(e) = result {
                failed = Some(e);
            }
            continue;
        };
        if let Some(e) = failed.take() {
            result = Err(match result {
                Ok(()) => format!("an earlier export failed: {e}"),
                Err(now) => format!("{now} (and an earlier export failed: {e})"),
            });
        }
        let dropped = DROPPED.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let note = format!("{dropped} spans were dropped: the export queue ({QUEUE} spans) was full");
            result = Err(match result {
                Ok(()) => note,
                Err(e) => format!("{e}; {note}"),
            });
        }
        let _ = reply.send(result);
    }
}

/// Exports every span finished before the call and waits for the collector's answer.
pub(super) fn flush(queue: &Queue) -> Result<(), String> {
    let (reply, answer) = mpsc::channel();
    queue.wake.send(Msg::Flush(reply)).map_err(|_| "the exporter thread has stopped".to_string())?;
    answer.recv().unwrap_or_else(|_| Err("the exporter thread has stopped".to_string()))
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Makes `n` spans (each closed at once) with `layer` installed on this thread.
    fn spans(layer: OtlpLayer, n: usize) {
        let subscriber = tracing_subscriber::Registry::default().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..n {
                let _ = tracing::info_span!("probe", ambit.turn = i as i64);
            }
        });
    }

    /// A full queue never makes the loop wait: the span is dropped and counted (reported by the next
    /// flush). Control: a queue with room for every span drops none.
    #[test]
    fn a_full_queue_drops_and_counts_spans_without_blocking() {
        DROPPED.store(0, Ordering::Relaxed);
        let (wake, rx) = mpsc::sync_channel(4);
        let queue = Queue::new(3, wake);
        spans(OtlpLayer::new(queue.clone()), 3);
        assert_eq!(DROPPED.load(Ordering::Relaxed), 0);
        assert_eq!(queue.take().len(), 3);
        // The exporter was woken once, when the queue held a batch (here, all it can hold).
        assert_eq!(rx.try_iter().count(), 1);

        // Nobody takes from this queue: the second and third spans find it full.
        let (wake, _rx) = mpsc::sync_channel(4);
        let queue = Queue::new(1, wake);
        spans(OtlpLayer::new(queue.clone()), 3);
        assert_eq!(DROPPED.swap(0, Ordering::Relaxed), 2);
        let taken = queue.take();
        assert_eq!(taken.len(), 1, "the first span is queued");
        // Its body holds its name and its attribute's key.
        let text = String::from_utf8_lossy(&taken[0]);
        assert!(text.contains("probe") && text.contains("ambit.turn"), "{text:?}");
    }

    /// Ids are never zero and never repeat (a counter through a bijective mix).
    #[test]
    fn ids_are_unique_and_not_zero() {
        let (wake, _rx) = mpsc::sync_channel(1);
        let layer = OtlpLayer::new(Queue::new(1, wake));
        let ids: std::collections::HashSet<u64> = (0..10_000).map(|_| layer.id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&0));
    }
}
