//! Telemetry: OTLP export of the core's spans (`Telemetry.enable` in Swift). The core makes the spans and
//! the exporter; this only hands over the settings.

use crate::{CoreError, guard};

/// Turns OTLP export on: the collector's `endpoint` (a base URL gets `/v1/traces`), extra `headers`,
/// whether message contents are recorded (after the credential redactor), the `service.name`.
#[uniffi::export]
pub fn telemetry_enable(
    endpoint: String,
    headers: std::collections::HashMap<String, String>,
    record_content: bool,
    service_name: String,
) -> Result<(), CoreError> {
    guard(|| {
        let mut headers: Vec<(String, String)> = headers.into_iter().collect();
        headers.sort();
        let config = ambit::telemetry::OtlpConfig { endpoint, headers, record_content, service_name };
        ambit::telemetry::init(config).map(|_| ())?;
        Ok(())
    })
}

/// Exports every finished span not yet sent.
#[uniffi::export]
pub fn telemetry_flush() -> Result<(), CoreError> {
    guard(|| Ok(ambit::telemetry::flush()?))
}

/// Exports what is pending and turns export off (`telemetry_enable` turns it on again).
#[uniffi::export]
pub fn telemetry_disable() -> Result<(), CoreError> {
    guard(|| Ok(ambit::telemetry::shutdown()?))
}
