//! The OTLP/HTTP (protobuf) exporter of the loop's spans, and the global `tracing` subscriber that
//! carries them (cargo feature `otel`).

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::level_filters::LevelFilter;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{Layer, Registry, filter};

use super::export::{self, OtlpLayer, Queue};
use crate::Error;

/// Where and how spans are exported.
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// The collector's OTLP/HTTP endpoint: a base URL (`http://localhost:4318`, to which `/v1/traces`
    /// is added) or the traces URL itself (ending in `/v1/traces`).
    pub endpoint: String,
    /// Headers sent with every export (an API key of a hosted collector).
    pub headers: Vec<(String, String)>,
    /// Whether spans carry message contents (after the credential redactor). Off by default.
    pub record_content: bool,
    /// The `service.name` of the exported resource (default `ambit`).
    pub service_name: String,
}

impl OtlpConfig {
    /// Export to `endpoint`, without headers or contents, as service `ambit`.
    pub fn new(endpoint: impl Into<String>) -> OtlpConfig {
        OtlpConfig {
            endpoint: endpoint.into(),
            headers: Vec::new(),
            record_content: false,
            service_name: "ambit".to_string(),
        }
    }
}

struct Global {
    /// The exporter thread's queue.
    queue: Arc<Queue>,
    endpoint: String,
}

static GLOBAL: OnceLock<Result<Global, String>> = OnceLock::new();
/// Whether spans are made and exported (the exporting layer's filter).
static ON: AtomicBool = AtomicBool::new(false);

/// What [`init`] turned on; [`Telemetry::shutdown`] (or [`shutdown`]) exports what is pending and turns
/// export off. Dropping it changes nothing.
#[derive(Debug)]
pub struct Telemetry {
    _private: (),
}

impl Telemetry {
    /// Exports every finished span not yet sent, waiting for the collector's answer.
    pub fn flush(&self) -> Result<(), Error> {
        flush()
    }

    /// Exports what is pending and turns export off.
    pub fn shutdown(self) -> Result<(), Error> {
        shutdown()
    }
}

/// Turns export on: the first call installs the process's global `tracing` subscriber carrying the
/// loop's spans to `config.endpoint` over OTLP/HTTP with protobuf bodies, batched on a thread of its
/// own (spans and events at `INFO` and above); `tracing` events at `DEBUG` and above are also passed on
/// to the `log` crate (the Python binding's `logging` bridge goes on working). A later call (after [`shutdown`]) turns export on again and sets
/// `record_content`; the process exports to one endpoint, with the first call's headers and service
/// name. Fails when the endpoint is not an http(s) URL, is not the first call's, or when another global
/// `tracing` subscriber is installed already.
pub fn init(config: OtlpConfig) -> Result<Telemetry, Error> {
    let endpoint = traces_url(&config.endpoint)?;
    let global = GLOBAL
        .get_or_init(|| {
            let headers = header_map(&config.headers)?;
            let queue = export::start(endpoint.clone(), headers, &config.service_name)?;
            // The conventions' attributes only (no source location, thread, target or busy/idle
            // times), recorded straight into OTLP protobuf by a layer of our own (export.rs). Parents
            // come from `tracing`'s own current span.
            let layer = OtlpLayer::new(queue.clone())
                .with_filter(filter::filter_fn(|m| ON.load(Ordering::Relaxed) && exported(m)));
            // Events only: without export on, no span is made at all.
            let log = LogForward.with_filter(filter::filter_fn(|m| m.is_event()));
            let subscriber = Registry::default().with(layer).with(log).with(LevelFilter::DEBUG);
            tracing::subscriber::set_global_default(subscriber)
                .map_err(|e| format!("another tracing subscriber is installed ({e})"))?;
            Ok(Global { queue, endpoint: endpoint.clone() })
        })
        .as_ref()
        .map_err(|e| Error::Config(format!("telemetry: {e}")))?;
    if global.endpoint != endpoint {
        return Err(Error::Config(format!(
            "telemetry: this process exports to {}; it cannot export to {endpoint} too",
            global.endpoint
        )));
    }
    super::set_record_content(config.record_content);
    ON.store(true, Ordering::Relaxed);
    Ok(Telemetry { _private: () })
}

/// Exports every finished span not yet sent ([`Telemetry::flush`]); nothing when export was never on.
/// Telemetry never fails the host: a collector that cannot be reached or refuses the spans is logged
/// (a `WARN` event of target `ambit::telemetry`), and the spans are dropped.
pub fn flush() -> Result<(), Error> {
    let Some(Ok(global)) = GLOBAL.get() else { return Ok(()) };
    if let Err(e) = export::flush(&global.queue) {
        tracing::warn!(target: "ambit::telemetry", endpoint = %global.endpoint, "span export failed: {e}");
    }
    Ok(())
}

/// Exports what is pending and turns export off: spans are no longer made, contents no longer
/// recorded. [`init`] turns it on again.
pub fn shutdown() -> Result<(), Error> {
    ON.store(false, Ordering::Relaxed);
    super::set_record_content(false);
    flush()
}

/// The traces URL of an endpoint: a base URL gets `/v1/traces`.
fn traces_url(endpoint: &str) -> Result<String, Error> {
    let url = reqwest::Url::parse(endpoint)
        .map_err(|e| Error::Config(format!("telemetry: the endpoint {endpoint:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Config(format!("telemetry: the endpoint {endpoint:?} is not an http(s) URL")));
    }
    let trimmed = endpoint.trim_end_matches('/');
    Ok(if trimmed.ends_with("/v1/traces") { trimmed.to_string() } else { format!("{trimmed}/v1/traces") })
}

/// The configured headers, each checked: a name or value HTTP cannot carry is refused by name.
fn header_map(headers: &[(String, String)]) -> Result<reqwest::header::HeaderMap, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let n =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("the header name {name:?} is not valid"))?;
        let v = HeaderValue::from_str(value).map_err(|_| format!("the value of the header {name:?} is not valid"))?;
        map.append(n, v);
    }
    Ok(map)
}

/// What the exporting layer takes: spans at INFO and above, and events at WARN and above (a tool's
/// traceback). An INFO event such as "run finished" repeats its span's attributes: it goes to the log
/// (Python's `logging`, Node's logger), not into the trace, where it would cost each run a span event.
fn exported(m: &tracing::Metadata<'_>) -> bool {
    if m.is_span() { *m.level() <= tracing::Level::INFO } else { *m.level() <= tracing::Level::WARN }
}

/// A `tracing` layer passing every event on to the `log` crate, with its target and level: with a
/// global `tracing` subscriber installed, `tracing`'s own `log` output stops, and this keeps a `log`
/// logger (the Python binding's `logging` bridge) fed.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogForward;

impl<S: tracing::Subscriber> Layer<S> for LogForward {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let level = match *meta.level() {
            tracing::Level::ERROR => log::Level::Error,
            tracing::Level::WARN => log::Level::Warn,
            tracing::Level::INFO => log::Level::Info,
            tracing::Level::DEBUG => log::Level::Debug,
            tracing::Level::TRACE => log::Level::Trace,
        };
        if level > log::max_level() {
            return;
        }
        let logger = log::logger();
        if !logger.enabled(&log::Metadata::builder().level(level).target(meta.target()).build()) {
            return;
        }
        let mut text = Fields(String::new());
        event.record(&mut text);
        logger.log(
            &log::Record::builder()
                .args(format_args!("{}", text.0))
                .level(level)
                .target(meta.target())
                .module_path(meta.module_path())
                .file(meta.file())
                .line(meta.line())
                .build(),
        );
    }
}

/// An event's message, then its other fields as `name=value`.
struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.0);
            let _ = write!(self.0, "{value:?}");
            if !rest.is_empty() {
                self.0.push(' ');
                self.0.push_str(&rest);
            }
        } else {
            if !self.0.is_empty() {
                self.0.push(' ');
            }
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }
}
