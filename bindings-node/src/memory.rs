//! The memory store for Node. Every call resolves to the JSON text of `{"ok": true, "value": …}` or
//! `{"ok": false, "error": {code, message, details}}`; `memory.js` turns these into objects and typed
//! errors. Every rule lives in the core.

use ambit::memory::{Memory, MemoryError, Target};
use napi_derive::napi;
use serde_json::{Value, json};

use crate::envelope::{JsError, envelope};

impl JsError for MemoryError {
    fn to_js(&self) -> Value {
        let details = match self.field() {
            Some(field) => json!({"field": field}),
            None => json!({}),
        };
        json!({"code": self.code(), "message": self.to_string(), "details": details})
    }
}

fn parse(field: &str, text: &str) -> Result<Value, MemoryError> {
    serde_json::from_str(text).map_err(|e| MemoryError::InvalidArgument { field: field.into(), message: e.to_string() })
}

macro_rules! value {
    ($v:expr) => {
        serde_json::to_value($v).map_err(|e| MemoryError::Store(e.to_string()))
    };
}

/// An open memory store.
#[napi]
pub struct NativeMemory {
    memory: Memory,
}

/// Opens `sqlite:///path` or `postgres://…`. Resolves to the store, or rejects with the JSON text of
/// `{code, message, details}` as the message (the facade throws the typed error).
#[napi]
pub async fn open_memory(url: String) -> napi::Result<NativeMemory> {
    let memory = crate::envelope::open(async move { Memory::open(&url).await }).await?;
    Ok(NativeMemory { memory })
}

#[napi]
impl NativeMemory {
    /// `memory`: the JSON text of a Remember (snake_case). Resolves to a Saved.
    #[napi]
    pub async fn remember(&self, agent: String, memory: String) -> String {
        let mem = self.memory.clone();
        envelope(async move { value!(mem.remember_json(&agent, &parse("memory", &memory)?).await?) }).await
    }

    /// `recall`: the JSON text of a Recall (snake_case). Resolves to the memories.
    #[napi]
    pub async fn recall(&self, agent: String, recall: String) -> String {
        let mem = self.memory.clone();
        envelope(async move { value!(mem.recall_json(&agent, &parse("recall", &recall)?).await?) }).await
    }

    /// One of `id` or `key`. Resolves to whether the memory existed.
    #[napi]
    pub async fn forget(&self, agent: String, id: Option<f64>, key: Option<String>) -> String {
        let mem = self.memory.clone();
        envelope(async move {
            // A JavaScript number is an id only when it is a whole number JavaScript holds exactly; 2 ** 70
            // or 1.5 is refused by name (napi's own conversion saturates or truncates, and would forget
            // another memory).
            let id = match id {
                Some(x) if x.is_finite() && x.fract() == 0.0 && x.abs() <= 9_007_199_254_740_991.0 => Some(x as i64),
                Some(x) => {
                    return Err(MemoryError::InvalidArgument {
                        field: "id".into(),
                        message: format!("{x} is not a whole number within JavaScript's safe integer range"),
                    });
                }
                None => None,
            };
            let target = match (id, key) {
                (Some(id), None) => Target::Id(id),
                (None, Some(key)) => Target::Key(key),
                _ => {
                    return Err(MemoryError::InvalidArgument {
                        field: "id".into(),
                        message: "give the memory's id or its key, one of them".into(),
                    });
                }
            };
            value!(mem.forget(&agent, &target).await?)
        })
        .await
    }

    /// Every memory of an agent, oldest first.
    #[napi]
    pub async fn list(&self, agent: String) -> String {
        let mem = self.memory.clone();
        envelope(async move { value!(mem.list(&agent).await?) }).await
    }

    /// The export document of an agent (or of every agent), as JSON text.
    #[napi]
    pub async fn export(&self, agent: Option<String>) -> String {
        let mem = self.memory.clone();
        envelope(async move { value!(mem.export_json(agent.as_deref()).await?) }).await
    }
}
