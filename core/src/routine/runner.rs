//! The runner: fires due slots as session runs. Any number of runners, in any number of processes on any
//! number of machines, share one store; every guarantee comes from the store's transactions (see
//! [`super::store`]), none from a leader.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};
use tracing::Instrument;

use super::store::{ClaimSlots, RunUsage};
use super::{Routine, RoutineError, RoutineEvent, Routines, RunRecord, RunState, SkippedSlots};
use crate::Agent;
use crate::error::ToolError;
use crate::ledger::tools::{RoutineRun, ledger_tools};
use crate::ledger::{DrainStop, Ledger, RoutineLimits};
use crate::session::{SessionError, Sessions};
use crate::tools::{Tool, ToolSpec};

/// Makes the agent for one run of a routine. The context names the routine (its `model` override
/// included) and gives the run's tools (`report_outcome`, `list_my_routines`, `list_my_outcomes`).
pub type AgentFactory = Arc<dyn Fn(&RunContext) -> Result<Agent, crate::Error> + Send + Sync>;

/// An [`AgentFactory`] that answers later: for hosts whose factory runs on another thread (a
/// JavaScript function called on Node's own thread).
pub type AsyncAgentFactory =
    Arc<dyn Fn(RunContext) -> futures::future::BoxFuture<'static, Result<Agent, crate::Error>> + Send + Sync>;

/// A factory as the runner keeps it.
#[derive(Clone)]
enum Factory {
    Now(AgentFactory),
    Later(AsyncAgentFactory),
}

impl Factory {
    async fn make(&self, ctx: &RunContext) -> Result<Agent, crate::Error> {
        match self {
            Factory::Now(f) => f(ctx),
            Factory::Later(f) => f(ctx.clone()).await,
        }
    }
}

/// What an agent factory knows of the run it makes an agent for.
#[derive(Clone)]
pub struct RunContext {
    /// The routine the run is for.
    pub routine: Routine,
    /// The run, as its claim recorded it.
    pub run: RunRecord,
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext").field("routine", &self.routine.id).field("run", &self.run.id).finish()
    }
}

impl RunContext {
    /// The run's tools: `report_outcome` and the read-only `list_my_routines` and `list_my_outcomes`.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TickReport {
    /// The runs the tick started.
    pub started: Vec<RunRecord>,
    /// The runs it found lost (their runner's lease ran out).
    pub lost: Vec<RunRecord>,
    /// The slots it skipped.
    pub skipped: Vec<SkippedSlots>,
    /// Parked runs whose session a resume ended since: now `finished`.
    #[serde(default)]
    pub resumed: Vec<RunRecord>,
}

/// How many parked runs one tick looks at.
const PARKED_CHECKS_PER_TICK: i64 = 8;

/// The longest runner lease (24 h). A run whose runner died is held no longer than this; a larger lease
/// would also overflow the millisecond arithmetic of the claim (`now + lease`).
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// The shortest `run_forever` poll interval (10 ms): shorter would hammer the store with claims.
pub const MIN_POLL: Duration = Duration::from_millis(10);

/// Builds a [`Runner`].
pub struct RunnerBuilder {
    routines: Routines,
    sessions: Sessions,
    agents: HashMap<String, Factory>,
    id: Option<String>,
    lease: Duration,
    poll: Duration,
    batch: i64,
    broken: bool,
    ledger: Option<Ledger>,
    max_in_flight: usize,
}

impl RunnerBuilder {
    /// The work ledger the runs use: each run also gets `claim_work`, `record_work`,
    /// `list_work_ledger` and `report_backlog` (its scope is the routine's id), and a backlog report
    /// starts a drain (extra runs, capped by the routine's parallel limit and daily cap), which goes on
    /// run after run until one of the ledger's four stop rules says stop.
    pub fn ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }
    /// Maps an agent name of the routines to the factory that makes its agent.
    pub fn agent(
        mut self,
        name: impl Into<String>,
        factory: impl Fn(&RunContext) -> Result<Agent, crate::Error> + Send + Sync + 'static,
    ) -> Self {
        self.agents.insert(name.into(), Factory::Now(Arc::new(factory)));
        self
    }
    /// [`RunnerBuilder::agent`] with a shared factory.
    pub fn agent_arc(mut self, name: impl Into<String>, factory: AgentFactory) -> Self {
        self.agents.insert(name.into(), Factory::Now(factory));
        self
    }
    /// [`RunnerBuilder::agent`] with a factory that answers later.
    pub fn agent_async(mut self, name: impl Into<String>, factory: AsyncAgentFactory) -> Self {
        self.agents.insert(name.into(), Factory::Later(factory));
        self
    }
    /// The runner's id in run records (default: a fresh one).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
    /// How long a run stays held after its runner stops renewing (default 60 s): a run whose runner died
    /// is marked `lost` this long after its last renewal. At least 3 ms and at most [`MAX_LEASE`] (24 h):
    /// `build` refuses anything else, naming `lease`.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// How often `run_forever` ticks (default 1 s). At least [`MIN_POLL`] (10 ms): `build` refuses a
    /// shorter one (zero would claim in a busy loop), naming `poll`.
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
    /// The most routines one tick claims (default 256).
    pub fn batch(mut self, batch: i64) -> Self {
        self.batch = batch;
        self
    }
    /// The most runs this runner has in progress at once (default 256): a tick claims no more than
    /// the room left, so a busy runner leaves due slots to the others.
    pub fn max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = max;
        self
    }
    /// The broken slot claim of the negative control (no lock, no unique slot key). Tests only.
    #[doc(hidden)]
    pub fn broken_claim_for_tests(mut self) -> Self {
        self.broken = true;
        self
    }

    /// The runner, its settings checked (a refusal names the setting).
    pub fn build(self) -> Result<Runner, RoutineError> {
        if self.lease.as_millis() < 3 {
            return Err(RoutineError::invalid("lease", "must be at least 3 ms"));
        }
        if self.lease > MAX_LEASE {
            return Err(RoutineError::invalid(
                "lease",
                format!("must be at most {} s (24 h), got {} ms", MAX_LEASE.as_secs(), self.lease.as_millis()),
            ));
        }
        if self.poll < MIN_POLL {
            return Err(RoutineError::invalid(
                "poll",
                format!("must be at least {} ms, got {} ms", MIN_POLL.as_millis(), self.poll.as_millis()),
            ));
        }
        if self.batch < 1 {
            return Err(RoutineError::invalid("batch", "must be at least 1"));
        }
        if self.max_in_flight < 1 {
            return Err(RoutineError::invalid("max_in_flight", "must be at least 1"));
        }
        let id = self.id.unwrap_or_else(|| super::fresh_id("runner"));
        super::spec::check_name("id", &id)?;
        let (events, _) = broadcast::channel(4096);
        let (inflight, _) = watch::channel(0usize);
        Ok(Runner {
            inner: Arc::new(Inner {
                routines: self.routines,
                sessions: self.sessions,
                agents: self.agents,
                id,
                // Bounded by MAX_LEASE above, so this fits.
                lease_ms: i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX),
                poll: self.poll,
                batch: self.batch,
                broken: self.broken,
                ledger: self.ledger,
                max_in_flight: self.max_in_flight,
                events,
                inflight,
                skew: std::sync::atomic::AtomicI64::new(0),
                skew_read: std::sync::Mutex::new(None),
            }),
        })
    }
}

struct Inner {
    routines: Routines,
    sessions: Sessions,
    agents: HashMap<String, Factory>,
    id: String,
    lease_ms: i64,
    poll: Duration,
    batch: i64,
    broken: bool,
    ledger: Option<Ledger>,
    max_in_flight: usize,
    events: broadcast::Sender<RoutineEvent>,
    inflight: watch::Sender<usize>,
    /// The store's clock less the routines' clock, measured at each tick when the routines' clock is
    /// the machine's wall clock (0 on any other clock): what the runner adds to its clock's time for
    /// every lease it writes and every due or lost judgment it makes.
    skew: std::sync::atomic::AtomicI64,
    /// The last good reading of the skew: the routines' clock's time and the monotonic time then (none
    /// yet: the first tick reads it).
    skew_read: std::sync::Mutex<Option<(i64, Instant)>>,
}

/// How often a runner reads the store's clock again for its skew, in ms.
const SKEW_REREAD_MS: i64 = 1_000;
/// How far the routines' clock may move apart from the monotonic clock between two readings of the
/// store's before the runner takes it as a step and reads the store's clock again, in ms.
const SKEW_STEP_MS: u64 = 100;

/// Fires the due slots of the routines in a store as session runs. Cheap to clone.
#[derive(Clone)]
pub struct Runner {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").field("id", &self.inner.id).finish_non_exhaustive()
    }
}

impl Runner {
    /// A runner over `routines`, running its runs as sessions in `sessions`.
    pub fn builder(routines: Routines, sessions: Sessions) -> RunnerBuilder {
        RunnerBuilder {
            routines,
            sessions,
            agents: HashMap::new(),
            id: None,
            lease: Duration::from_secs(60),
            poll: Duration::from_secs(1),
            batch: 256,
            broken: false,
            ledger: None,
            max_in_flight: 256,
        }
    }

    /// The runner's id, as its runs record it.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The runner's events: runs started, finished, parked and lost, slots skipped.
    pub fn subscribe(&self) -> broadcast::Receiver<RoutineEvent> {
        self.inner.events.subscribe()
    }

    /// Runs of this runner still in progress.
    pub fn in_flight(&self) -> usize {
        *self.inner.inflight.borrow()
    }

    /// Waits until every run this runner started has ended (finished, parked or failed).
    pub async fn wait_idle(&self) {
        let mut rx = self.inner.inflight.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// One pass at `now`: renews this runner's leases, marks `lost` the runs whose lease ran out, claims
    /// the due slots and starts their runs (in the background; [`Runner::wait_idle`] waits for them).
    pub async fn tick(&self, now: i64) -> Result<TickReport, RoutineError> {
        let ticked_at = Instant::now();
        let inner = &self.inner;
        let store = inner.routines.store();
        // On the wall clock, time is the store's: a machine whose clock is fast would otherwise fire
        // slots early and find other runners' live runs lost, and a slow one would keep lost runs alive.
        self.follow_store_clock().await?;
        let now = now + self.skew();
        // A lease is written again once a sixth of it has run: a tick every few milliseconds would
        // otherwise rewrite every live run's row each time.
        store.renew(&inner.id, now + inner.lease_ms, now + inner.lease_ms - inner.lease_ms / 6).await?;
        let mut report = TickReport { lost: store.mark_lost(now).await?, ..TickReport::default() };
        for run in &report.lost {
            tracing::warn!(run = %run.id, routine = %run.routine_id, "routine run lost: its runner's lease ran out");
            let _ = inner.events.send(RoutineEvent::RunLost { run: run.clone() });
        }
        let room = inner.max_in_flight.saturating_sub(self.in_flight()) as i64;
        if room == 0 {
            return Ok(report);
        }
        let mut agents: Vec<String> = inner.agents.keys().cloned().collect();
        agents.sort();
        let req = ClaimSlots {
            now,
            runner: inner.id.clone(),
            lease_until: now + inner.lease_ms,
            agents,
            limit: inner.batch.min(room),
            broken: inner.broken,
        };
        let claimed = store.claim(&req).await?;
        for skipped in claimed.skipped {
            let _ = inner.events.send(RoutineEvent::SlotSkipped { skipped: skipped.clone() });
            report.skipped.push(skipped);
        }
        for (run, routine) in claimed.runs {
            report.started.push(run.clone());
            self.spawn_run(routine, run, ticked_at);
        }
        report.resumed = self.follow_parked(now).await?;
        Ok(report)
    }

    /// Reads the store's clock for the skew when the last reading is a second old, or when the routines'
    /// clock stepped since (its time moved apart from the monotonic clock's by more than 100 ms: an NTP
    /// step, a VM's clock set after a pause), or when there is none yet. A runner ticking every few
    /// milliseconds would otherwise spend a round trip of each tick on it. Until a reading succeeds, and
    /// after a step until one does again, the tick fails: no lease and no slot is judged on a skew that
    /// may be wrong. A reading that merely took too long after an ordinary second keeps the last one.
    async fn follow_store_clock(&self) -> Result<(), RoutineError> {
        let inner = &self.inner;
        let clock = inner.routines.clock();
        let (stale, trusted) = {
            let last = inner.skew_read.lock().unwrap_or_else(|e| e.into_inner());
            match *last {
                None => (true, false),
                Some((local_then, at)) => {
                    let mono = i64::try_from(at.elapsed().as_millis()).unwrap_or(i64::MAX);
                    let stepped = (clock.now_ms().saturating_sub(local_then)).abs_diff(mono) > SKEW_STEP_MS;
                    (stepped || mono >= SKEW_REREAD_MS, !stepped)
                }
            }
        };
        if !stale {
            return Ok(());
        }
        match inner.routines.measure_skew().await? {
            Some(skew) => {
                inner.skew.store(skew, std::sync::atomic::Ordering::Relaxed);
                *inner.skew_read.lock().unwrap_or_else(|e| e.into_inner()) = Some((clock.now_ms(), Instant::now()));
                Ok(())
            }
            None if trusted => Ok(()),
            None => Err(RoutineError::Store(
                "the store's clock could not be read within a second: no lease or slot is judged until it is".into(),
            )),
        }
    }

    /// The store's clock less the routines' clock (see `Inner::skew`).
    fn skew(&self) -> i64 {
        self.inner.skew.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The routines' clock's time, on the store's clock.
    fn now(&self) -> i64 {
        self.inner.routines.clock().now_ms() + self.skew()
    }

    /// [`Runner::tick`] at the routines' clock's now.
    pub async fn tick_now(&self) -> Result<TickReport, RoutineError> {
        self.tick(self.inner.routines.clock().now_ms()).await
    }

    /// Looks at the sessions of a few parked runs (the longest unchecked first): a parked run whose
    /// session a resume took on and ended (through `Sessions::resume`, in any process) is finished.
    async fn follow_parked(&self, now: i64) -> Result<Vec<RunRecord>, RoutineError> {
        let inner = &self.inner;
        let store = inner.routines.store();
        let mut ended = Vec::new();
        for run in store.parked_to_check(now, PARKED_CHECKS_PER_TICK).await? {
            let state = match inner.sessions.store().state(&run.session_id).await {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "the session of a parked routine run could not be read");
                    continue;
                }
            };
            // Still parked, or a resume is running it: the record waits.
            if state.parked.is_some() || state.state == "running" {
                continue;
            }
            if let Some(record) = store.end_parked(&run.id, now).await? {
                let _ = inner.events.send(RoutineEvent::RunFinished { run: record.clone() });
                ended.push(record);
            }
        }
        Ok(ended)
    }

    /// Starts a claimed run in the background.
    fn spawn_run(&self, routine: Routine, run: RunRecord, claimed_at: Instant) {
        let _ = self.inner.events.send(RoutineEvent::RunStarted { run: run.clone() });
        self.inner.inflight.send_modify(|n| *n += 1);
        let this = self.clone();
        let span = tracing::info_span!("routine_run", routine = %routine.id, run = %run.id, kind = %run.kind, slot = run.slot_at);
        tokio::spawn(
            async move {
                this.execute(routine, run, claimed_at).await;
                this.inner.inflight.send_modify(|n| *n = n.saturating_sub(1));
            }
            .instrument(span),
        );
    }

    /// Starts up to `want` extra runs of a routine for its drain (capped in the store); how many started.
    async fn start_drain(&self, routine_id: &str, want: i64) -> i64 {
        let inner = &self.inner;
        let claimed_at = Instant::now();
        let now = self.now();
        let claimed =
            match inner.routines.store().claim_drain(routine_id, want, &inner.id, now + inner.lease_ms, now).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(routine = %routine_id, error = %e, "drain runs could not be started");
                    return 0;
                }
            };
        let started = claimed.len() as i64;
        if started > 0 {
            let _ = inner.events.send(RoutineEvent::DrainStarted { routine_id: routine_id.to_string(), runs: started });
        }
        for (run, routine) in claimed {
            self.spawn_run(routine, run, claimed_at);
        }
        started
    }

    /// After a run of a routine ends: the ledger's drain decision (the four stop rules), and the next
    /// drain run when it goes on.
    async fn after_run(&self, routine: &Routine, run: &RunRecord) {
        let Some(ledger) = &self.inner.ledger else { return };
        // The store caps the runs it starts; the decision only says whether the drain goes on.
        let limits = RoutineLimits { parallel_limit: u32::MAX, daily_cap: None, running: 1, started_today: 0 };
        let decision = match ledger.drain_decision(&routine.id, &run.id, &limits).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(run = %run.id, error = %e, "drain decision failed");
                return;
            }
        };
        match decision.stop {
            // A scheduled run that never reported a backlog started no drain: nothing stops.
            Some(DrainStop::RunDidNotReport) if run.kind != "drain" => {}
            Some(stop) => {
                let reason = serde_json::to_value(stop).ok().and_then(|v| v.as_str().map(str::to_string));
                let _ = self.inner.events.send(RoutineEvent::DrainStopped {
                    routine_id: routine.id.clone(),
                    reason: reason.unwrap_or_default(),
                });
            }
            None => {
                self.start_drain(&routine.id, i64::from(decision.start_runs)).await;
            }
        }
    }

    /// Ticks on the routines' clock until cancelled (drop the future). A failed tick (the store
    /// unreachable) is logged and retried at the next one.
    pub async fn run_forever(&self) -> Result<(), RoutineError> {
        loop {
            if let Err(e) = self.tick_now().await {
                tracing::warn!(error = %e, "routine tick failed");
            }
            tokio::time::sleep(self.inner.poll).await;
        }
    }

    /// Runs one claimed run to its end and records it. Its lease is renewed while it runs.
    async fn execute(&self, routine: Routine, run: RunRecord, claimed_at: Instant) {
        let inner = &self.inner;
        let mut tools = super::tools::routine_tools(inner.routines.clone(), &routine.spec.agent, &run.id);
        if let Some(ledger) = &inner.ledger {
            let limits = RoutineLimits {
                parallel_limit: u32::try_from(routine.spec.parallel()).unwrap_or(u32::MAX),
                daily_cap: routine.spec.daily_cap.and_then(|c| u32::try_from(c).ok()),
                running: 1,
                started_today: 0,
            };
            let bound =
                RoutineRun::new(routine.id.clone(), run.id.clone()).routine_id(routine.id.clone()).limits(limits);
            for tool in ledger_tools(ledger.clone(), bound) {
                tools.push(if tool.spec().name == "report_backlog" {
                    Arc::new(DrainTrigger { inner: tool, runner: self.clone(), routine_id: routine.id.clone() })
                } else {
                    tool
                });
            }
        }
        let ctx = RunContext { routine: routine.clone(), run: run.clone(), tools };
        let store = inner.routines.store();
        // A run marked lost while this process was paused between its claim and here (another runner
        // judged its lease run out, and may have started the routine's next slot) never starts. Its
        // lease runs from the claim's time (the run's start); while less than a quarter of it, less the
        // clocks' tolerance on either side, has passed since, by this runner's clock and by the
        // monotonic one both, no runner can have judged it lost, and the check's round trip is spared.
        // Only on the wall clock: a clock a host or a test moves says nothing about the real time
        // another runner judges leases by.
        let margin = inner.lease_ms / 4 - 2 * super::SKEW_TOLERANCE_MS;
        let fresh = margin > 0
            && inner.routines.clock().is_wall_clock()
            && i64::try_from(claimed_at.elapsed().as_millis()).unwrap_or(i64::MAX) < margin
            && self.now().saturating_sub(run.started_at) < margin;
        if !fresh {
            match store.renew_run(&run.id, &inner.id, self.now() + inner.lease_ms).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(run = %run.id, "routine run lost before it started: not run");
                    return;
                }
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "routine run's lease could not be renewed: not run");
                    return;
                }
            }
        }
        // The lease is renewed while the run runs. Once the run is no longer this runner's (marked lost:
        // this process was paused or cut off past its lease), the heartbeat ends, which drops the run's
        // future: the session run stops there, and lets its session go.
        let heartbeat = async {
            let every = Duration::from_millis((inner.lease_ms / 3).max(1) as u64);
            loop {
                tokio::time::sleep(every).await;
                if let Ok(false) = store.renew_run(&run.id, &inner.id, self.now() + inner.lease_ms).await {
                    tracing::warn!(run = %run.id, "routine run lost while it ran (its lease ran out): stopped");
                    return;
                }
            }
        };
        let work = async {
            let Some(factory) = inner.agents.get(&routine.spec.agent) else {
                return Err(format!("this runner has no agent '{}'", routine.spec.agent));
            };
            let agent = factory.make(&ctx).await.map_err(|e| format!("the agent factory failed: {e}"))?;
            // The run's session is created held by the run, in the write that takes it.
            Ok(inner.sessions.run_new(&agent, &run.session_id, &routine.spec.instructions).await)
        };
        let ended = tokio::select! {
            ended = work => ended,
            _ = heartbeat => return,
        };
        let (state, usage, failure) = match ended {
            Ok(Ok(result)) => {
                let errors = result.tool_calls.iter().filter(|c| c.is_error).count() as i64;
                let usage = RunUsage {
                    tool_calls: result.tool_calls.len() as i64,
                    tool_errors: errors,
                    input_tokens: result.usage.input_tokens as i64,
                    output_tokens: result.usage.output_tokens as i64,
                    cost: result.cost,
                };
                (RunState::Finished, usage, None)
            }
            Ok(Err(SessionError::AwaitingApproval { .. })) => (RunState::Parked, RunUsage::default(), None),
            Ok(Err(e)) => (RunState::Finished, RunUsage::default(), Some(e.to_string())),
            Err(message) => (RunState::Finished, RunUsage::default(), Some(message)),
        };
        if let Some(message) = &failure {
            tracing::warn!(run = %run.id, error = %message, "routine run failed");
            let outcome = super::Outcome {
                status: super::OutcomeStatus::Error,
                summary: message.chars().take(super::MAX_SUMMARY_BYTES / 4).collect(),
                tool_calls: None,
                tool_errors: None,
            };
            // A report the agent made before failing stands.
            if let Ok(Some(r)) = inner.routines.store().run(&run.id).await
                && r.outcome.is_none()
            {
                let _ = inner.routines.store().report_outcome(&run.id, &outcome).await;
            }
        }
        match inner.routines.store().finish(&run.id, &inner.id, state, &usage, self.now()).await {
            Ok(Some(record)) => {
                let event = if state == RunState::Parked {
                    RoutineEvent::RunParked { run: record }
                } else {
                    RoutineEvent::RunFinished { run: record }
                };
                let _ = inner.events.send(event);
                if state == RunState::Finished {
                    self.after_run(&routine, &run).await;
                }
            }
            Ok(None) => tracing::warn!(run = %run.id, "routine run ended after it was marked lost"),
            Err(e) => tracing::warn!(run = %run.id, error = %e, "routine run could not be recorded"),
        }
    }
}

/// The ledger's `report_backlog` for a run of a routine: after the ledger counted the backlog, the
/// runner starts the extra runs it answered (capped in the store), and the answer says how many started.
struct DrainTrigger {
    inner: Arc<dyn Tool>,
    runner: Runner,
    routine_id: String,
}

#[async_trait::async_trait]
impl Tool for DrainTrigger {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: serde_json::Value) -> Result<serde_json::Value, ToolError> {
        let mut answer = self.inner.call(arguments).await?;
        let want = answer.get("extra_runs").and_then(serde_json::Value::as_i64).unwrap_or(0);
        let started = self.runner.start_drain(&self.routine_id, want).await;
        answer["extra_runs"] = serde_json::json!(started);
        Ok(answer)
    }
}
