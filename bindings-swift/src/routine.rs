//! Routines for Swift (SPEC §13): the routine store (definitions with revisions, run records, skipped
//! slots) and the runner. Definitions, records and reports cross as JSON text; the Swift facade
//! (`Routines.swift`) decodes them into structs. An agent factory is a Swift object called with the
//! run's context (JSON) and the run's tools; it returns an agent. Every rule lives in the core.

use std::sync::Arc;
use std::time::Duration;

use ambit::routine::{RoutineError, Routines, RunContext, Runner};
use async_trait::async_trait;

use crate::ledger::{CoreLedger, CoreLedgerTools};
use crate::session::CoreSessions;
use crate::{CaughtPanic, CoreAgent, HostToolError, guard, guard_async};

/// A routine failure, one case per code; `message` is the core's text.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum RoutineCoreError {
    /// Code `invalid_argument`: `field` names what was wrong (the core's snake_case name).
    #[error("{message}")]
    Invalid { field: String, message: String },
    /// Code `routine_not_found`.
    #[error("{message}")]
    NotFound { message: String },
    /// Code `routine_store`.
    #[error("{message}")]
    Store { message: String },
    /// Code `internal`: a bug in ambit, a panic caught at the boundary.
    #[error("{message}")]
    Internal { message: String },
}

impl CaughtPanic for RoutineCoreError {
    fn internal(error: ambit::Error) -> Self {
        RoutineCoreError::Internal { message: error.to_string() }
    }
}

impl From<RoutineError> for RoutineCoreError {
    fn from(e: RoutineError) -> Self {
        let message = e.to_string();
        match e {
            RoutineError::Invalid { field, .. } => RoutineCoreError::Invalid { field, message },
            RoutineError::NotFound(_) => RoutineCoreError::NotFound { message },
            RoutineError::Store(_) => RoutineCoreError::Store { message },
        }
    }
}

macro_rules! json {
    ($v:expr) => {
        serde_json::to_string($v).map_err(|e| RoutineCoreError::Store { message: e.to_string() })
    };
}

fn json_arg(field: &str, text: &str) -> Result<serde_json::Value, RoutineCoreError> {
    serde_json::from_str(text).map_err(|e| RoutineError::Invalid { field: field.into(), message: e.to_string() }.into())
}

/// The store under the Swift facade's `Routines`.
#[derive(uniffi::Object)]
pub struct CoreRoutines {
    routines: Routines,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreRoutines {
    /// Opens `sqlite:///path` or `postgres://…`, applying the migrations.
    #[uniffi::constructor]
    pub async fn open(url: String) -> Result<Arc<Self>, RoutineCoreError> {
        guard_async(async move { Ok(Arc::new(CoreRoutines { routines: Routines::open(&url).await? })) }).await
    }

    /// Creates a routine from its definition (JSON, snake_case); the routine as JSON.
    pub async fn create(&self, definition_json: String, actor: String) -> Result<String, RoutineCoreError> {
        guard_async(async move {
            let definition = json_arg("routine", &definition_json)?;
            json!(&self.routines.create_json(&definition, &actor).await?)
        })
        .await
    }

    /// A routine with its revisions, as JSON.
    pub async fn get(&self, id: String) -> Result<String, RoutineCoreError> {
        guard_async(async move { json!(&self.routines.get(&id).await?) }).await
    }

    /// The revisions of a routine (also after its deletion), as JSON.
    pub async fn revisions(&self, id: String) -> Result<String, RoutineCoreError> {
        guard_async(async move { json!(&self.routines.revisions(&id).await?) }).await
    }

    /// Every routine, or an agent's, as JSON.
    pub async fn list(&self, agent: Option<String>) -> Result<String, RoutineCoreError> {
        guard_async(async move { json!(&self.routines.list(agent.as_deref()).await?) }).await
    }

    /// Applies an update (JSON: absent fields stay, null clears); the routine as JSON.
    pub async fn update(&self, id: String, patch_json: String, actor: String) -> Result<String, RoutineCoreError> {
        guard_async(async move {
            let patch = json_arg("update", &patch_json)?;
            json!(&self.routines.update_json(&id, &patch, &actor).await?)
        })
        .await
    }

    /// Deletes a routine (its revisions stay).
    pub async fn delete(&self, id: String, actor: String) -> Result<(), RoutineCoreError> {
        guard_async(async move { Ok(self.routines.delete(&id, &actor).await?) }).await
    }

    /// The runs of a routine (or of all), latest first, as JSON.
    pub async fn runs(&self, routine_id: Option<String>, limit: i64) -> Result<String, RoutineCoreError> {
        guard_async(async move { json!(&self.routines.runs(routine_id.as_deref(), limit).await?) }).await
    }

    /// One run's record as JSON (`null` when there is none).
    pub async fn run(&self, run_id: String) -> Result<String, RoutineCoreError> {
        guard_async(async move { json!(&self.routines.run(&run_id).await?) }).await
    }

    /// The skipped slots of a routine (or of all), as JSON.
    pub async fn skipped(&self, routine_id: Option<String>) -> Result<String, RoutineCoreError> {
        guard_async(async move { json!(&self.routines.skipped(routine_id.as_deref()).await?) }).await
    }
}

/// Test hook: opens the routine store at `url` on `clock`.
#[uniffi::export(async_runtime = "tokio")]
pub async fn testing_open_routines(
    url: String,
    clock: Arc<crate::TestingClock>,
) -> Result<Arc<CoreRoutines>, RoutineCoreError> {
    guard_async(async move {
        Ok(Arc::new(CoreRoutines { routines: ambit::testing::open_routines(&url, &clock.clock).await? }))
    })
    .await
}

/// Makes the agent for one run of a routine, in Swift.
#[uniffi::export(foreign)]
#[async_trait]
pub trait RoutineAgentFactory: Send + Sync {
    /// `context_json`: `{agent, routine, run}`; `tools`: the run's tools, for the agent's `ledger`.
    async fn make(&self, context_json: String, tools: Arc<CoreLedgerTools>) -> Result<Arc<CoreAgent>, HostToolError>;
}

async fn call_factory(factory: Arc<dyn RoutineAgentFactory>, ctx: RunContext) -> Result<ambit::Agent, ambit::Error> {
    let context = serde_json::json!({"agent": ctx.routine.spec.agent, "routine": ctx.routine, "run": ctx.run});
    let tools = Arc::new(CoreLedgerTools { tools: ctx.tools() });
    let agent = factory
        .make(context.to_string(), tools)
        .await
        .map_err(|e| ambit::Error::Config(format!("the agent factory threw: {e}")))?;
    Ok(agent.inner.clone())
}

/// The runner under the Swift facade's `Runner`.
#[derive(uniffi::Object)]
pub struct CoreRunner {
    runner: Runner,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreRunner {
    /// A runner over `routines`, running its runs in `sessions`; `agents` names the agents `factory`
    /// makes. `lease_ms`: how long a dead runner's runs stay held; `poll_ms`: how often `run_forever`
    /// ticks.
    #[uniffi::constructor]
    // One argument per option of the facade's `Runner.init`, as UniFFI passes them.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        routines: Arc<CoreRoutines>,
        sessions: Arc<CoreSessions>,
        agents: Vec<String>,
        factory: Arc<dyn RoutineAgentFactory>,
        lease_ms: u64,
        poll_ms: u64,
        id: Option<String>,
        ledger: Option<Arc<CoreLedger>>,
    ) -> Result<Arc<Self>, RoutineCoreError> {
        guard(|| {
            let mut b = Runner::builder(routines.routines.clone(), sessions.sessions.clone())
                .lease(Duration::from_millis(lease_ms))
                .poll_interval(Duration::from_millis(poll_ms));
            if let Some(id) = id {
                b = b.id(id);
            }
            if let Some(l) = ledger {
                b = b.ledger(l.ledger.clone());
            }
            for name in agents {
                let f = factory.clone();
                b = b.agent_async(name, Arc::new(move |ctx| Box::pin(call_factory(f.clone(), ctx))));
            }
            Ok(Arc::new(CoreRunner { runner: b.build()? }))
        })
    }

    /// The runner's id.
    pub fn id(&self) -> Result<String, RoutineCoreError> {
        guard(|| Ok(self.runner.id().to_string()))
    }

    /// One pass at `now` (ms since the epoch; the routines' clock when nil); the report as JSON.
    pub async fn tick(&self, now: Option<i64>) -> Result<String, RoutineCoreError> {
        guard_async(async move {
            let report = match now {
                Some(now) => self.runner.tick(now).await?,
                None => self.runner.tick_now().await?,
            };
            json!(&report)
        })
        .await
    }

    /// Waits until every run this runner started has ended.
    pub async fn wait_idle(&self) -> Result<(), RoutineCoreError> {
        guard_async(async move {
            self.runner.wait_idle().await;
            Ok(())
        })
        .await
    }

    /// Ticks until the awaiting task is cancelled.
    pub async fn run_forever(&self) -> Result<(), RoutineCoreError> {
        guard_async(async move { Ok(self.runner.run_forever().await?) }).await
    }
}
