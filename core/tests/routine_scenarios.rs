//! Runs every routine scenario file in tests/scenarios/routines/ (the same files the Python and Node
//! suites run; see the README there) on a fresh SQLite file and a fresh PostgreSQL database: the steps
//! drive the routine store and a runner on a manual clock, each run of the scenario's agent is a session
//! run against the loopback provider, and every step's result is matched against its `expect`.

#[path = "support/session_stores.rs"]
mod session_stores;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ambit::routine::{RoutineError, RunRecord, Runner};
use ambit::session::Sessions;
use ambit::{Agent, OpenAiChat};
use ambit_test_provider::{Provider, Script, subset};
use serde_json::{Value, json};

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/routines");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios/routines")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Ids and agent names get a suffix of the run's own, so runs share a PostgreSQL database.
fn suffixed(v: &Value, suffix: &str) -> Value {
    let mut v = v.clone();
    for key in ["id", "agent"] {
        if let Some(s) = v.get(key).and_then(Value::as_str) {
            v[key] = json!(format!("{s}{suffix}"));
        }
    }
    v
}

/// The error a step expects, or its value matched against `expect`.
fn check(step: &Value, got: Result<Value, RoutineError>, at: &str) -> Result<(), String> {
    match (got, step.get("error")) {
        (Ok(v), None) => step.get("expect").map_or(Ok(()), |want| subset(want, &v, at)),
        (Err(e), Some(want)) => subset(want, &json!({"code": e.code(), "field": e.field()}), at),
        (Ok(v), Some(want)) => Err(format!("{at}: expected the error {want}, got {v}")),
        (Err(e), None) => Err(format!("{at}: {e}")),
    }
}

fn value<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Runs, oldest first (by start, then kind: the order the files expect).
fn runs_in_order(mut runs: Vec<RunRecord>) -> Value {
    runs.sort_by(|a, b| (a.started_at, &a.kind).cmp(&(b.started_at, &b.kind)));
    value(runs)
}

async fn run_file(path: &Path, url: &str, suffix: &str) -> Result<(), String> {
    let scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(path).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let spec = &scenario["routine"];
    let clock = ambit::testing::manual_clock(spec["clock_ms"].as_i64().ok_or("routine.clock_ms")?)
        .map_err(|e| e.to_string())?;
    let provider = Provider::start(Script::load(path)?).await.map_err(|e| e.to_string())?;
    let routines = ambit::testing::open_routines(url, &clock).await.map_err(|e| e.to_string())?;
    let sessions: Sessions = ambit::testing::open_sessions(url, &clock).await.map_err(|e| e.to_string())?;
    let base_url = provider.base_url();
    let mut builder = Runner::builder(routines.clone(), sessions).lease(Duration::from_secs(3600)).agent(
        format!("scenario{suffix}"),
        move |ctx| {
            Agent::builder()
                .model(OpenAiChat::new("m").base_url(base_url.clone()).max_retries(0))
                .tools(ctx.tools())
                .build()
        },
    );
    if spec["ledger"] == json!(true) {
        builder = builder.ledger(ambit::testing::open_ledger(url, &clock).await.map_err(|e| e.to_string())?);
    }
    let runner = builder.build().map_err(|e| e.to_string())?;
    let steps = spec["steps"].as_array().ok_or("routine.steps")?;
    for (i, step) in steps.iter().enumerate() {
        let op = step["op"].as_str().unwrap_or_default();
        let at = format!("step {i} ({op})");
        let id = step.get("id").and_then(Value::as_str).map(|s| format!("{s}{suffix}")).unwrap_or_default();
        let actor = step["actor"].as_str().unwrap_or("scenario");
        let got = match op {
            "clock" => {
                clock.set(step["at"].as_i64().ok_or("clock.at")?);
                continue;
            }
            "create" => routines.create_json(&suffixed(&step["definition"], suffix), actor).await.map(value),
            "update" => routines.update_json(&id, &step["changes"], actor).await.map(value),
            "get" => routines.get(&id).await.map(value),
            "delete" => routines.delete(&id, actor).await.map(value),
            "revisions" => routines.revisions(&id).await.map(value),
            "runs" => routines.runs(Some(&id), 100).await.map(runs_in_order),
            "skipped" => routines.skipped(Some(&id)).await.map(value),
            "tick" => {
                let now = step["at"].as_i64().ok_or("tick.at")?;
                clock.set(now);
                let report = runner.tick(now).await;
                // The runs it started end before the next step.
                runner.wait_idle().await;
                report.map(value)
            }
            other => return Err(format!("{at}: unknown op '{other}'")),
        };
        check(step, got, &at)?;
    }
    let (served, mismatches) = provider.report();
    if !mismatches.is_empty() {
        return Err(format!("provider saw mismatches: {mismatches:?}"));
    }
    let exchanges = scenario["exchanges"].as_array().map_or(0, Vec::len);
    if served != exchanges {
        return Err(format!("{served} of {exchanges} scripted exchanges were used"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_routine_scenario_file_passes_on_both_stores() {
    let files = files();
    assert!(files.len() >= 6, "the routine scenario files are missing");
    let mut failures = Vec::new();
    for (n, store) in session_stores::stores().await.iter().enumerate() {
        for (f, path) in files.iter().enumerate() {
            // Of the file's own: a runner claims every due routine of its agent in the store.
            let suffix = format!("-{n}-{f}-{}", std::process::id());
            if let Err(e) = run_file(path, &store.url, &suffix).await {
                failures.push(format!("{} on {}: {e}", path.display(), store.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The negative control: the same files with each tick's expectation checked a slot early fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_a_millisecond_early_fails_the_files_that_run_slots() {
    let stores = session_stores::stores().await;
    let sqlite = &stores[0];
    let mut caught = 0;
    for (f, path) in files().into_iter().enumerate() {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut scenario: Value = serde_json::from_str(&text).unwrap();
        let mut moved = false;
        for step in scenario["routine"]["steps"].as_array_mut().unwrap() {
            let started = step.pointer("/expect/started").and_then(Value::as_array).is_some_and(|s| !s.is_empty());
            if step["op"] == "tick" && started && !moved {
                step["at"] = json!(step["at"].as_i64().unwrap() - 1);
                moved = true;
            }
        }
        if !moved {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(path.file_name().unwrap());
        std::fs::write(&file, scenario.to_string()).unwrap();
        assert!(
            run_file(&file, &sqlite.url, &format!("-neg-{f}")).await.is_err(),
            "{}: a slot a millisecond early ran",
            path.display()
        );
        caught += 1;
    }
    assert!(caught >= 5, "only {caught} files ran slots");
}
