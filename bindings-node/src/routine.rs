//! Routines for Node (SPEC §13): the routine store (definitions with revisions, run records, skipped
//! slots) and the runner. Every call resolves to the JSON text of `{"ok": true, "value": …}` or
//! `{"ok": false, "error": {code, message, details}}`; `routines.js` turns these into objects and typed
//! errors. Every rule lives in the core.
//!
//! An agent factory is a JS function called on Node's thread with the run's context (JSON); the facade
//! calls the host's factory, keeps the agent it returns under a token ([`keep_routine_agent`]) and
//! answers the token, which the runner here takes back. The run's tools cross the same way
//! ([`take_routine_run_tools`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ambit::routine::{RoutineError, Routines, RunContext, Runner};
use ambit::{Agent, Error};
use napi::bindgen_prelude::Either;
use napi_derive::napi;
use serde_json::{Value, json};

use crate::envelope::{JsError, envelope};
use crate::ledger::{NativeLedger, NativeLedgerTools};
use crate::session::NativeSessions;
use crate::{JsToolFn, NativeAgent};

impl JsError for RoutineError {
    fn to_js(&self) -> Value {
        json!({"code": self.code(), "message": self.to_string(), "details": {"field": self.field()}})
    }
}

macro_rules! value {
    ($v:expr) => {
        serde_json::to_value($v).map_err(|e| RoutineError::Store(e.to_string()))
    };
}

fn json_arg(field: &str, text: &str) -> Result<Value, RoutineError> {
    serde_json::from_str(text).map_err(|e| RoutineError::Invalid { field: field.into(), message: e.to_string() })
}

/// An open routine store.
#[napi]
pub struct NativeRoutines {
    routines: Routines,
}

/// Opens `sqlite:///path` or `postgres://…`, applying the migrations. Rejects with the JSON text of
/// `{code, message, details}` as the message (the facade throws the typed error).
#[napi]
pub async fn open_routines(url: String) -> napi::Result<NativeRoutines> {
    open_on(url, None).await
}

/// [`open_routines`], on the test hook's manual clock when one is given.
pub(crate) async fn open_on(url: String, clock: Option<ambit::testing::ManualClock>) -> napi::Result<NativeRoutines> {
    let opened = async move {
        match clock {
            Some(clock) => ambit::testing::open_routines(&url, &clock).await,
            None => Routines::open(&url).await,
        }
    };
    let routines = crate::envelope::open(opened).await?;
    Ok(NativeRoutines { routines })
}

#[napi]
impl NativeRoutines {
    /// Creates a routine from its definition (JSON, snake_case); the routine.
    #[napi]
    pub async fn create(&self, definition: String, actor: String) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.create_json(&json_arg("routine", &definition)?, &actor).await?) }).await
    }

    /// A routine with its revisions.
    #[napi]
    pub async fn get(&self, id: String) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.get(&id).await?) }).await
    }

    /// The revisions of a routine, also after its deletion.
    #[napi]
    pub async fn revisions(&self, id: String) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.revisions(&id).await?) }).await
    }

    /// Every routine, or an agent's.
    #[napi]
    pub async fn list(&self, agent: Option<String>) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.list(agent.as_deref()).await?) }).await
    }

    /// Applies an update (JSON: absent fields stay, null clears); the routine.
    #[napi]
    pub async fn update(&self, id: String, patch: String, actor: String) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.update_json(&id, &json_arg("update", &patch)?, &actor).await?) }).await
    }

    /// Deletes a routine (its revisions stay).
    #[napi]
    pub async fn delete(&self, id: String, actor: String) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.delete(&id, &actor).await?) }).await
    }

    /// The runs of a routine (or of all), latest first.
    #[napi]
    pub async fn runs(&self, routine_id: Option<String>, limit: i64) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.runs(routine_id.as_deref(), limit).await?) }).await
    }

    /// One run's record, or null.
    #[napi]
    pub async fn run(&self, run_id: String) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.run(&run_id).await?) }).await
    }

    /// The skipped slots of a routine (or of all).
    #[napi]
    pub async fn skipped(&self, routine_id: Option<String>) -> String {
        let r = self.routines.clone();
        envelope(async move { value!(r.skipped(routine_id.as_deref()).await?) }).await
    }
}

/// Agents a factory made and run tools a factory was given, by token, between the JS thread and the
/// runner.
static AGENTS: Mutex<Option<HashMap<String, Agent>>> = Mutex::new(None);
static TOOLS: Mutex<Option<HashMap<String, RunTools>>> = Mutex::new(None);

/// The tools of one run.
type RunTools = Vec<Arc<dyn ambit::Tool>>;

/// A token unique in this process.
fn token() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_string()
}

fn keep<T>(map: &Mutex<Option<HashMap<String, T>>>, value: T) -> String {
    let key = token();
    if let Ok(mut m) = map.lock() {
        m.get_or_insert_with(HashMap::new).insert(key.clone(), value);
    }
    key
}

fn take<T>(map: &Mutex<Option<HashMap<String, T>>>, key: &str) -> Option<T> {
    map.lock().ok()?.as_mut()?.remove(key)
}

/// Keeps the agent a factory returned; its token, which the factory answers.
#[napi]
pub fn keep_routine_agent(agent: &NativeAgent) -> napi::Result<String> {
    crate::guard(|| keep(&AGENTS, agent.agent.clone()))
}

/// The tools of the run a factory is called for, by the token in its context (once).
#[napi]
pub fn take_routine_run_tools(token: String) -> napi::Result<NativeLedgerTools> {
    crate::guard(|| NativeLedgerTools { tools: take(&TOOLS, &token).unwrap_or_default() })
}

/// Calls the JS factory for one run: `factory(JSON {agent, routine, run, tools})` answers an agent's
/// token (or a promise of one), or the JSON text of `{error}` when the host's factory threw.
async fn call_factory(factory: Arc<JsToolFn>, ctx: RunContext) -> Result<Agent, Error> {
    let tools = keep(&TOOLS, ctx.tools());
    let request = json!({"agent": ctx.routine.spec.agent, "routine": ctx.routine, "run": ctx.run, "tools": tools});
    let answered = async {
        let answer = factory.call_async_catch(request.to_string()).await.map_err(|e| e.reason.clone())?;
        match answer {
            Either::A(text) => Ok(text),
            Either::B(promise) => promise.await.map_err(|e| e.reason.clone()),
        }
    }
    .await;
    // Tools the factory did not take go now.
    let _ = take(&TOOLS, &tools);
    let text = answered.map_err(|e| Error::Config(format!("the agent factory threw: {e}")))?;
    let answer: Value = serde_json::from_str(&text)
        .map_err(|e| Error::Config(format!("the agent factory's answer could not be read: {e}")))?;
    if let Some(message) = answer.get("error").and_then(Value::as_str) {
        return Err(Error::Config(format!("the agent factory threw: {message}")));
    }
    let key = answer.get("agent").and_then(Value::as_str).unwrap_or_default();
    take(&AGENTS, key).ok_or_else(|| Error::Config("the agent factory did not return an Agent".into()))
}

/// The runner's options, as the facade passes them.
#[napi(object)]
pub struct NativeRunnerOptions {
    /// How long a dead runner's runs stay held, in ms.
    pub lease_ms: Option<f64>,
    /// How often `runForever` ticks, in ms.
    pub poll_ms: Option<f64>,
    pub id: Option<String>,
}

/// A runner.
#[napi]
pub struct NativeRunner {
    runner: Runner,
    stop: tokio::sync::watch::Sender<bool>,
}

fn millis(field: &str, v: Option<f64>, default: Duration) -> Result<Duration, RoutineError> {
    match v {
        None => Ok(default),
        Some(ms) => Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| RoutineError::Invalid {
            field: field.into(),
            message: format!("must be milliseconds >= 0, got {ms}"),
        }),
    }
}

#[napi]
impl NativeRunner {
    /// A runner over `routines`, running its runs in `sessions`; `agents` names the agents `factory`
    /// makes. Throws with the JSON text of `{code, message, details}` as the message.
    #[napi(constructor)]
    pub fn new(
        routines: &NativeRoutines,
        sessions: &NativeSessions,
        agents: Vec<String>,
        factory: JsToolFn,
        options: NativeRunnerOptions,
        ledger: Option<&NativeLedger>,
    ) -> napi::Result<Self> {
        crate::guard(|| {
            let built = (|| {
                let mut b = Runner::builder(routines.routines.clone(), sessions.sessions.clone())
                    .lease(millis("lease_ms", options.lease_ms, Duration::from_secs(60))?)
                    .poll_interval(millis("poll_ms", options.poll_ms, Duration::from_secs(1))?);
                if let Some(id) = options.id {
                    b = b.id(id);
                }
                if let Some(l) = ledger {
                    b = b.ledger(l.ledger.clone());
                }
                let factory = Arc::new(factory);
                for name in agents {
                    let f = factory.clone();
                    b = b.agent_async(name, Arc::new(move |ctx| Box::pin(call_factory(f.clone(), ctx))));
                }
                b.build()
            })();
            match built {
                Ok(runner) => Ok(NativeRunner { runner, stop: tokio::sync::watch::channel(false).0 }),
                Err(e) => Err(crate::envelope::rejection(&e)),
            }
        })?
    }

    /// The runner's id.
    #[napi]
    pub fn id(&self) -> napi::Result<String> {
        crate::guard(|| self.runner.id().to_string())
    }

    /// One pass at `now` (ms since the epoch; the routines' clock when null); the report.
    #[napi]
    pub async fn tick(&self, now: Option<i64>) -> String {
        let runner = self.runner.clone();
        envelope(async move {
            value!(match now {
                Some(now) => runner.tick(now).await?,
                None => runner.tick_now().await?,
            })
        })
        .await
    }

    /// Waits until every run this runner started has ended.
    #[napi]
    pub async fn wait_idle(&self) -> String {
        let runner = self.runner.clone();
        envelope(async move {
            runner.wait_idle().await;
            Ok::<_, RoutineError>(Value::Null)
        })
        .await
    }

    /// Ticks until [`NativeRunner::stop`].
    #[napi]
    pub async fn run_forever(&self) -> String {
        let runner = self.runner.clone();
        self.stop.send_replace(false);
        let mut stop = self.stop.subscribe();
        envelope(async move {
            tokio::select! {
                r = runner.run_forever() => r?,
                _ = stop.wait_for(|s| *s) => {}
            }
            Ok::<_, RoutineError>(Value::Null)
        })
        .await
    }

    /// Ends `run_forever` (runs in progress go on).
    #[napi]
    pub fn stop(&self) -> napi::Result<()> {
        crate::guard(|| {
            self.stop.send_replace(true);
        })
    }
}
