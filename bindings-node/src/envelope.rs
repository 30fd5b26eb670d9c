//! The one shape every store call answers Node in: the JSON text of `{"ok": true, "value": …}` or
//! `{"ok": false, "error": {code, message, details}}`, which the facades turn into objects and typed
//! errors. Each store's error type says how it reads as `{code, message, details}`; running on the core's
//! runtime, and a task that stopped (a panic) becoming an `internal` error, are written once here.

use serde_json::{Value, json};

/// A core error as the facades read it: `{code, message, details}`.
pub(crate) trait JsError {
    fn to_js(&self) -> Value;
}

/// The `internal` error of a task that stopped unexpectedly.
fn stopped(e: tokio::task::JoinError) -> Value {
    json!({"code": "internal", "message": crate::join_error(e).to_string()})
}

/// Runs `f` on the core's runtime and answers the envelope.
pub(crate) async fn envelope<F, E>(f: F) -> String
where
    F: std::future::Future<Output = Result<Value, E>> + Send + 'static,
    E: JsError + Send + 'static,
{
    let out = match ambit::runtime::runtime().spawn(f).await {
        Ok(Ok(value)) => json!({"ok": true, "value": value}),
        Ok(Err(e)) => json!({"ok": false, "error": e.to_js()}),
        Err(e) => json!({"ok": false, "error": stopped(e)}),
    };
    out.to_string()
}

/// Opens a store on the core's runtime: the store, or a rejection whose message is the JSON text of
/// `{code, message, details}` (the facade throws the typed error).
pub(crate) async fn open<F, T, E>(f: F) -> napi::Result<T>
where
    F: std::future::Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: JsError + Send + 'static,
{
    match ambit::runtime::runtime().spawn(f).await {
        Ok(Ok(store)) => Ok(store),
        Ok(Err(e)) => Err(rejection(&e)),
        Err(e) => Err(napi::Error::from_reason(stopped(e).to_string())),
    }
}

/// A rejection whose message is the error's `{code, message, details}` JSON text.
pub(crate) fn rejection(e: &impl JsError) -> napi::Error {
    napi::Error::from_reason(e.to_js().to_string())
}
