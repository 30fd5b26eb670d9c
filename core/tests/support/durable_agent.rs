//! The agent of the durable-run tests, the same in the test (core/tests/durable.rs) and in its child
//! process (durable_child.rs). Its tools count their side effects as lines appended to a file:
//! `send_email {to}` (needs an approval: the handler answers "later", so a run parks on it) appends
//! `to`; `hold {to}` (no approval) appends `held:to`. With `block`, a tool blocks forever once it has
//! had its effect, so a kill -9 lands after the effect and before its result is recorded.

use std::io::Write;

use ambit::permission::approval::FnApproval;
use ambit::{Agent, ApprovalDecision, Level, OpenAiChat, Policy, tool_fn};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct To {
    to: String,
}

fn effect(effects: &str, line: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(effects)
        .map_err(|e| format!("effects file: {e}"))?;
    f.write_all(format!("{line}\n").as_bytes()).map_err(|e| format!("effects file: {e}"))?;
    f.sync_all().map_err(|e| format!("effects file: {e}"))
}

/// The agent, on the loopback provider at `base_url`.
#[allow(dead_code)] // the child process uses `agent_with`
pub fn agent(base_url: &str, effects: &str, block: bool, idempotent: bool) -> Agent {
    agent_with(base_url, effects, block, idempotent, false, false)
}

/// The agent, with the session tools (`context_compact` ...) when `session_tools`, and background calls
/// when `background` (a background `hold` reports the progress note `holding {to}` first).
pub fn agent_with(
    base_url: &str,
    effects: &str,
    block: bool,
    idempotent: bool,
    session_tools: bool,
    background: bool,
) -> Agent {
    let schema = json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]});
    let file = effects.to_string();
    let mut send = tool_fn("send_email", "Send the drafted email.", schema.clone(), move |e: To| {
        let file = file.clone();
        async move {
            effect(&file, &e.to)?;
            if block {
                std::future::pending::<()>().await;
            }
            Ok::<_, String>(format!("sent to {}", e.to))
        }
    })
    .level(Level::Read)
    .requires_approval();
    if idempotent {
        send = send.idempotent();
    }
    let file = effects.to_string();
    let hold = tool_fn("hold", "Hold on.", schema.clone(), move |e: To| {
        let file = file.clone();
        async move {
            effect(&file, &format!("held:{}", e.to))?;
            if let Some(task) = ambit::agent::background::TaskHandle::current() {
                task.progress(format!("holding {}", e.to));
            }
            std::future::pending::<()>().await;
            Ok::<_, String>(String::new())
        }
    })
    .level(Level::Read);
    // Attack tests (core/tests/durable_attack.rs): `gate {to}` appends `entered:to`, then waits until
    // the file `<effects>.gate` exists; `record {to}` appends `rec:to` (no approval).
    let (file, gate_file) = (effects.to_string(), format!("{effects}.gate"));
    let gate = tool_fn("gate", "Wait for the gate.", schema.clone(), move |e: To| {
        let (file, gate_file) = (file.clone(), gate_file.clone());
        async move {
            effect(&file, &format!("entered:{}", e.to))?;
            while !std::path::Path::new(&gate_file).exists() {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Ok::<_, String>("through".to_string())
        }
    })
    .level(Level::Read);
    let file = effects.to_string();
    let record = tool_fn("record", "Record.", schema, move |e: To| {
        let file = file.clone();
        async move {
            effect(&file, &format!("rec:{}", e.to))?;
            Ok::<_, String>("recorded".to_string())
        }
    })
    .level(Level::Read);
    let later = FnApproval(|_| async { ApprovalDecision::Later });
    let session = if session_tools { ambit::session::tools() } else { Vec::new() };
    Agent::builder()
        .model(OpenAiChat::new("m").base_url(base_url).max_retries(0))
        .tools(session)
        .tool(send)
        .tool(hold)
        .tool(gate)
        .tool(record)
        .policy(Policy::level(Level::Read).approvals(later))
        .background(background)
        .build()
        .expect("the test agent builds")
}
