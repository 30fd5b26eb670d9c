//! Work that outlives the run (SPEC §8b), with real processes on both stores: a session run ends while
//! its background task still runs in the process; `task_result` reads the task from another process
//! (running, with its latest progress note, kept alive by the process's heartbeat); once that process is
//! killed with SIGKILL the task is read `lost`, never left `running`, and the session is told once.

use std::time::{Duration, Instant};

use ambit::session::{Item, Sessions, TaskStatus};
use serde_json::json;

#[path = "support/durable_worker.rs"]
mod durable_worker;
use durable_worker::{Worker, effects_of, provider};

#[path = "support/session_stores.rs"]
mod session_stores;
use session_stores::stores;

/// The lease (and so the heartbeat window) of both processes.
const LEASE_MS: u64 = 1500;

async fn task(sessions: &Sessions, sid: &str) -> ambit::session::TaskSnapshot {
    sessions.task_result(sid, "task_1").await.unwrap()
}

/// Polls (every 50 ms, at most `cap`) until `done` holds for the task; the last snapshot.
async fn until(
    sessions: &Sessions,
    sid: &str,
    cap: Duration,
    done: impl Fn(&ambit::session::TaskSnapshot) -> bool,
) -> ambit::session::TaskSnapshot {
    let started = Instant::now();
    loop {
        let t = task(sessions, sid).await;
        if done(&t) || started.elapsed() > cap {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn lost_turns(entries: &[ambit::session::Entry]) -> usize {
    entries
        .iter()
        .filter(|e| match &e.item {
            Item::Message { message: ambit::Message::User { content, .. } } => {
                content.contains("task_1 (hold) was lost")
            }
            _ => false,
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_process_was_killed_is_lost_never_left_running() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores().await {
        let effects = dir.path().join(format!("effects-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap().with_lease(Duration::from_millis(LEASE_MS)).unwrap();
        let sid = sessions.create().await.unwrap();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "a", "name": "hold", "arguments": {"to": sid, "background": true}}]}},
            {"respond": {"content": "Holding."}}
        ]))
        .await;
        let lease = LEASE_MS.to_string();
        let mut w = Worker::start(&store.url, &effects, &["--background", "--lease-ms", &lease]);
        w.send(&format!("run {sid} {}", p.base_url()));
        // The run ended (the model ended its turn) with the task still running in the child.
        assert_eq!(w.answer(), "ok", "{}", store.name);
        assert_eq!(sessions.store().state(&sid).await.unwrap().state, "idle", "{}", store.name);
        let t = task(&sessions, &sid).await;
        assert_eq!((t.status, t.name.as_str(), t.result.as_deref()), (TaskStatus::Running, "hold", None));

        // Negative control: while the child lives, its heartbeat carries the task's note to the store
        // and keeps it running well past the window in which a dead one is lost.
        let noted = until(&sessions, &sid, Duration::from_secs(60), |t| t.note.is_some()).await;
        assert_eq!(noted.note.as_deref(), Some(format!("holding {sid}").as_str()), "{}", store.name);
        let alive_since = Instant::now();
        while alive_since.elapsed() < Duration::from_millis(3 * LEASE_MS) {
            let t = task(&sessions, &sid).await;
            assert_eq!(t.status, TaskStatus::Running, "{}: a live process's task was read {t:?}", store.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(effects_of(&effects, &format!("held:{sid}")), 1);

        // SIGKILL: no destructor, no heartbeat, no result.
        let killed = Instant::now();
        w.kill();
        let t = until(&sessions, &sid, Duration::from_secs(60), |t| t.status != TaskStatus::Running).await;
        assert_eq!(t.status, TaskStatus::Lost, "{}: {t:?}", store.name);
        eprintln!(
            "durable tasks, {}: lost read {:.2} s after SIGKILL (window {LEASE_MS} ms)",
            store.name,
            killed.elapsed().as_secs_f64()
        );
        // Read again, from another handle: still lost, and the session was told once.
        let other = Sessions::open(&store.url).await.unwrap().with_lease(Duration::from_millis(LEASE_MS)).unwrap();
        assert_eq!(task(&other, &sid).await.status, TaskStatus::Lost);
        assert_eq!(lost_turns(&other.entries(&sid).await.unwrap()), 1, "{}", store.name);
        // It was never run again.
        assert_eq!(effects_of(&effects, &format!("held:{sid}")), 1);
        // An unknown task is a typed error naming it.
        let e = other.task_result(&sid, "task_9").await.unwrap_err();
        assert_eq!(e.code(), "invalid_argument");
        assert!(e.to_string().contains("task_9"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_in_the_background_reports_its_rounds_as_progress() {
    use futures::StreamExt;
    // The root starts a sub-agent in the background and ends its turn; the sub-agent answers (its request
    // and the root's second may come in either order: both answers are plain text, so either way works);
    // the root then gets the task's report as its own turn.
    let p = provider(json!([
        {"respond": {"tool_calls": [{"id": "s", "name": "agent_spawn", "arguments": {"prompt": "count the files", "background": true}}]}},
        {"respond": {"content": "one of two"}},
        {"respond": {"content": "two of two"}},
        {"respond": {"content": "Done."}}
    ]))
    .await;
    let agent = ambit::Agent::builder()
        .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .subagents(ambit::SubagentConfig::default())
        .background(true)
        .build()
        .unwrap();
    let events: Vec<ambit::Event> = agent.stream("go").filter_map(|e| async move { e.ok() }).collect().await;
    let notes: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ambit::Event::BackgroundTaskProgress { note, .. } => Some(note.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("sub-agent ") && notes[0].ends_with(": round 1 answered"), "{notes:?}");
    assert!(matches!(events.last(), Some(ambit::Event::RunFinished { .. })), "{:?}", events.last());
}

/// A run that takes over a session whose owner died names the background tasks that died with it in the
/// takeover note (their id and tool), and they read `lost`; a task another live process still renews is
/// neither named nor lost (the negative control). The dead owner is what a SIGKILLed process leaves (the
/// test above kills a real one): a lease and a task heartbeat no longer renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_names_the_background_tasks_that_died_with_the_run() {
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap().with_lease(Duration::from_millis(LEASE_MS)).unwrap();
        let sid = sessions.create().await.unwrap();
        let s = sessions.store();
        let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        // The dead process's last task heartbeat came a beat (a third of the lease) before its last lease
        // renewal, as the process's heartbeat writes them: so by the time the lease has run out the task's
        // heartbeat is stale too, however slowly this test runs. (Written at the same instant, a takeover in
        // the few ms between the two running out would leave the task to be read lost later instead.)
        let t0 = now();
        let dead = s.task_started(&sid, "hold", t0 - LEASE_MS as i64 / 3).await.unwrap();
        s.take(&sid, "dead-owner", ambit::session::Take::Run, t0, LEASE_MS as i64).await.unwrap();
        let live = s.task_started(&sid, "watch", now()).await.unwrap();
        let note = format!("background task {dead} (hold)");
        let p = provider(json!([
            {"expect": {"messages_tail": [{"role": "user", "content": {"$contains": [note.as_str(), "are lost"]}}, {"role": "user", "content": "go on"}]},
             "respond": {"content": "Understood."}}
        ]))
        .await;
        let agent = ambit::Agent::builder()
            .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .build()
            .unwrap();
        // Until the dead owner's lease runs out the run is refused (polled, at most 60 s); meanwhile the
        // other process renews `watch`, as its heartbeat would.
        let started = Instant::now();
        let out = loop {
            s.task_beat(&sid, &[(live.clone(), None)], now()).await.unwrap();
            match sessions.run(&agent, &sid, "go on").await {
                Err(e) if e.code() == "session_busy" && started.elapsed() < Duration::from_secs(60) => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                other => break other.unwrap(),
            }
        };
        assert_eq!(out.output, "Understood.", "{}", store.name);
        let entries = sessions.entries(&sid).await.unwrap();
        let first = match &entries[0].item {
            Item::Message { message: ambit::Message::User { content, .. } } => content.clone(),
            other => panic!("{}: {other:?}", store.name),
        };
        assert!(first.contains(&note), "{}: {first}", store.name);
        assert!(!first.contains("watch"), "{}: a live task was named: {first}", store.name);
        assert_eq!(sessions.task_result(&sid, &dead).await.unwrap().status, TaskStatus::Lost, "{}", store.name);
        assert_eq!(sessions.task_result(&sid, &live).await.unwrap().status, TaskStatus::Running, "{}", store.name);
        // Told once: the note, no separate lost turn when the task is read afterwards.
        let told = sessions
            .entries(&sid)
            .await
            .unwrap()
            .iter()
            .filter(|e| format!("{:?}", e.item).contains(&format!("{dead} (hold)")))
            .count();
        assert_eq!(told, 1, "{}", store.name);
    }
}
