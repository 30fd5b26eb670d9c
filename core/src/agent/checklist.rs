//! The checklist (SPEC §6): what the agent has committed to do, and the rule that a run cannot end its
//! turn while an item is pending or in_progress. The rules are plain functions over [`Checklist`]; the
//! three tools (`checklist_add`, `checklist_edit`, `checklist_read`) read and change the checklist of
//! the run they are called in.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::run_state::RunState;
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolSpec};

/// How many times the loop nudges the model about open items before it ends the run anyway.
pub const DEFAULT_NUDGE_CAP: u32 = 3;

/// The five statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started.
    Pending,
    /// Being worked on (one at a time).
    InProgress,
    /// Put off, with a reason.
    Deferred,
    /// Done.
    Completed,
    /// Dropped.
    Canceled,
}

impl Status {
    fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "pending" => Status::Pending,
            "in_progress" => Status::InProgress,
            "deferred" => Status::Deferred,
            "completed" => Status::Completed,
            "canceled" => Status::Canceled,
            _ => return None,
        })
    }

    /// The status as the tools show it (`pending`, `in_progress`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Deferred => "deferred",
            Status::Completed => "completed",
            Status::Canceled => "canceled",
        }
    }

    /// Pending and in_progress items keep a run from ending its turn.
    pub fn is_open(self) -> bool {
        matches!(self, Status::Pending | Status::InProgress)
    }
}

/// One item on the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChecklistItem {
    /// The item's number on the list (1-based).
    pub id: u32,
    /// What is to be done.
    pub text: String,
    /// Where it stands.
    pub status: Status,
    /// Why it was deferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The background task a deferred item waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

impl ChecklistItem {
    /// `#1 [pending] text`, with the reason and task of a deferred item.
    pub fn line(&self) -> String {
        let mut s = format!("#{} [{}] {}", self.id, self.status.as_str(), self.text);
        if let Some(r) = &self.reason {
            s.push_str(&format!(" (reason: {r})"));
        }
        if let Some(t) = &self.task {
            s.push_str(&format!(" (waits on task {t})"));
        }
        s
    }
}

/// A run's checklist. Completed and canceled items leave it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checklist {
    items: Vec<ChecklistItem>,
    next_id: u32,
}

/// Text and reasons are kept as one line each.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What `checklist_edit` asks for; absent fields are left as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edit {
    /// The new status.
    pub status: Option<String>,
    /// Why (required when deferring).
    pub reason: Option<String>,
    /// The sub-agent or background task working on it.
    pub task: Option<String>,
    /// New words for the item.
    pub text: Option<String>,
}

impl Checklist {
    /// The items, in order.
    pub fn items(&self) -> &[ChecklistItem] {
        &self.items
    }

    /// The items that keep the run from ending its turn.
    pub fn open(&self) -> Vec<&ChecklistItem> {
        self.items.iter().filter(|i| i.status.is_open()).collect()
    }

    /// Appends items: a text (added pending) or `{text, status}` with status pending or in_progress.
    /// One wrong entry refuses the whole call. Returns the ids assigned.
    pub fn add(&mut self, entries: &[Value]) -> Result<Vec<u32>, String> {
        let mut new = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let (text, status) = match e {
                Value::String(t) => (t.as_str(), Status::Pending),
                Value::Object(o) => {
                    let text = o
                        .get("text")
                        .and_then(Value::as_str)
                        .ok_or_else(|| format!("items[{i}]: an object item needs \"text\" (a string)"))?;
                    let status = match o.get("status") {
                        None | Some(Value::Null) => Status::Pending,
                        Some(Value::String(s)) => match Status::parse(s) {
                            Some(st @ (Status::Pending | Status::InProgress)) => st,
                            _ => {
                                return Err(format!(
                                    "items[{i}]: a new item's status is pending or in_progress, not {s:?}"
                                ));
                            }
                        },
                        Some(other) => return Err(format!("items[{i}]: status must be a string, got {other}")),
                    };
                    if let Some(k) = o.keys().find(|k| *k != "text" && *k != "status") {
                        return Err(format!("items[{i}]: unknown field {k:?} (an item is a text or {{text, status}})"));
                    }
                    (text, status)
                }
                other => return Err(format!("items[{i}]: an item is a text or {{text, status}}, got {other}")),
            };
            let text = one_line(text);
            if text.is_empty() {
                return Err(format!("items[{i}]: the text is blank"));
            }
            new.push((text, status));
        }
        if new.is_empty() {
            return Err("items: give at least one item".into());
        }
        let mut ids = Vec::new();
        for (text, status) in new {
            self.next_id += 1;
            ids.push(self.next_id);
            self.items.push(ChecklistItem { id: self.next_id, text, status, reason: None, task: None });
        }
        Ok(ids)
    }

    /// Changes one item. A reason is required with deferred and canceled and refused otherwise; a task
    /// only with deferred (`known_task` says whether a task id may be waited on). One wrong part refuses
    /// the whole call.
    pub fn edit(
        &mut self,
        id: u32,
        edit: &Edit,
        known_task: impl Fn(&str) -> Result<(), String>,
    ) -> Result<(), String> {
        let index = self
            .items
            .iter()
            .position(|i| i.id == id)
            .ok_or_else(|| format!("there is no open item #{id} (completed and canceled items leave the list)"))?;
        let current = &self.items[index];
        let status = match &edit.status {
            Some(s) => Status::parse(s).ok_or_else(|| {
                format!("status {s:?} is not one of pending, in_progress, deferred, completed, canceled")
            })?,
            None => current.status,
        };
        let reason = edit.reason.as_deref().map(one_line).filter(|r| !r.is_empty());
        let needs_reason = matches!(status, Status::Deferred | Status::Canceled);
        if needs_reason && reason.is_none() && !(edit.status.is_none() && current.reason.is_some()) {
            return Err(format!("a reason is required with status {}", status.as_str()));
        }
        if !needs_reason && reason.is_some() {
            return Err(format!("a reason is only given with deferred or canceled, not with {}", status.as_str()));
        }
        let task = edit.task.as_deref().map(str::trim).filter(|t| !t.is_empty());
        if let Some(t) = task {
            if status != Status::Deferred {
                return Err(format!("a task is only given with deferred, not with {}", status.as_str()));
            }
            known_task(t)?;
        }
        let text = match &edit.text {
            Some(t) => {
                let t = one_line(t);
                if t.is_empty() {
                    return Err("the text is blank".into());
                }
                Some(t)
            }
            None => None,
        };
        let item = &mut self.items[index];
        if let Some(t) = text {
            item.text = t;
        }
        // A new reason drops a task not named again; leaving deferred drops both.
        if status == Status::Deferred {
            if reason.is_some() {
                item.task = task.map(str::to_string);
                item.reason = reason;
            } else if let Some(t) = task {
                item.task = Some(t.to_string());
            }
        } else {
            item.reason = if status == Status::Canceled { reason } else { None };
            item.task = None;
        }
        item.status = status;
        self.items.retain(|i| !matches!(i.status, Status::Completed | Status::Canceled));
        Ok(())
    }

    /// What every checklist tool returns: the remaining items with their ids.
    pub fn render(&self) -> String {
        if self.items.is_empty() {
            return "The checklist is empty.".to_string();
        }
        let mut out = format!("Checklist ({} open):", self.open().len());
        for i in &self.items {
            out.push('\n');
            out.push_str(&i.line());
        }
        out
    }
}

/// The message the loop sends when the model ends its turn with open items.
pub fn nudge_message(open: &[&ChecklistItem], nudge: u32, cap: u32) -> String {
    let lines: Vec<String> = open.iter().map(|i| i.line()).collect();
    format!(
        "[checklist] You ended your turn with {} open item(s):\n{}\nFinish them, or mark each deferred or canceled with a reason (checklist_edit), before you end your turn. (Reminder {nudge} of {cap}.)",
        open.len(),
        lines.join("\n")
    )
}

fn checklist_of_run() -> Result<Arc<RunState>, ToolError> {
    RunState::current().ok_or_else(|| ToolError::failed("the checklist is only available inside a run"))
}

fn lock(state: &RunState) -> std::sync::MutexGuard<'_, Checklist> {
    state.checklist.lock().unwrap_or_else(|p| p.into_inner())
}

struct AddTool(ToolSpec);
struct EditTool(ToolSpec);
struct ReadTool(ToolSpec);

#[async_trait]
impl Tool for AddTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let entries = match arguments.get("items") {
            Some(Value::Array(a)) => a.clone(),
            Some(v @ Value::String(_)) => vec![v.clone()],
            Some(other) => return Err(ToolError::failed(format!("items must be a list, got {other}"))),
            None => return Err(ToolError::failed("items is required")),
        };
        let state = checklist_of_run()?;
        let mut list = lock(&state);
        let ids = list.add(&entries).map_err(ToolError::failed)?;
        let ids: Vec<String> = ids.iter().map(|i| format!("#{i}")).collect();
        Ok(Value::String(format!("Added {}.\n{}", ids.join(", "), list.render())))
    }
}

#[async_trait]
impl Tool for EditTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let id = arguments
            .get("id")
            .and_then(Value::as_f64)
            .filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= f64::from(u32::MAX))
            .ok_or_else(|| ToolError::failed("id must be the item's number (a positive integer)"))?
            as u32;
        let field = |k: &str| -> Result<Option<String>, ToolError> {
            match arguments.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(ToolError::failed(format!("{k} must be a string, got {other}"))),
            }
        };
        let edit =
            Edit { status: field("status")?, reason: field("reason")?, task: field("task")?, text: field("text")? };
        let state = checklist_of_run()?;
        let tasks = state.clone();
        let mut list = lock(&state);
        list.edit(id, &edit, |t| tasks.task_may_be_waited_on(t)).map_err(ToolError::failed)?;
        Ok(Value::String(format!("Updated #{id}.\n{}", list.render())))
    }
}

#[async_trait]
impl Tool for ReadTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        let state = checklist_of_run()?;
        Ok(Value::String(lock(&state).render()))
    }
}

/// The three checklist tools, at level `read`.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    let status = json!({"type": "string", "enum": ["pending", "in_progress", "deferred", "completed", "canceled"]});
    vec![
        Arc::new(AddTool(
            ToolSpec::new(
                "checklist_add",
                "Adds items to your checklist: what you have committed to do in this run. Each item is a text (added pending) or {text, status} with status pending or in_progress. You cannot end your turn while an item is pending or in_progress. Returns the ids and the whole list.",
                json!({"type": "object", "properties": {"items": {"type": "array", "items": {"anyOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"text": {"type": "string"}, "status": {"type": "string", "enum": ["pending", "in_progress"]}}, "required": ["text"]}
                ]}}}, "required": ["items"]}),
            )
            .with_level(Level::Read),
        )),
        Arc::new(EditTool(
            ToolSpec::new(
                "checklist_edit",
                "Changes one checklist item by id: status (pending, in_progress, deferred, completed or canceled), reason (required with deferred and canceled, refused otherwise), task (with deferred only: the background task the item waits on), or text. Completed and canceled items leave the list. Returns what remains.",
                json!({"type": "object", "properties": {
                    "id": {"type": "integer", "minimum": 1}, "status": status, "reason": {"type": "string"},
                    "task": {"type": "string"}, "text": {"type": "string"}
                }, "required": ["id"]}),
            )
            .with_level(Level::Read),
        )),
        Arc::new(ReadTool(
            ToolSpec::new("checklist_read", "Returns your checklist with the item ids.", json!({"type": "object", "properties": {}}))
                .with_level(Level::Read),
        )),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_tasks(t: &str) -> Result<(), String> {
        Err(format!("there is no background task {t}"))
    }

    #[test]
    fn add_texts_and_objects() {
        let mut c = Checklist::default();
        let ids = c.add(&[json!("write  the\nreport"), json!({"text": "ship", "status": "in_progress"})]).unwrap();
        assert_eq!(ids, vec![1, 2]);
        assert_eq!(c.render(), "Checklist (2 open):\n#1 [pending] write the report\n#2 [in_progress] ship");
        assert!(c.add(&[json!({"text": "x", "status": "completed"})]).is_err());
        assert!(c.add(&[json!("ok"), json!(3)]).is_err(), "one wrong entry refuses the whole call");
        assert_eq!(c.items().len(), 2);
        assert!(c.add(&[]).is_err());
    }

    #[test]
    fn reason_rules() {
        let mut c = Checklist::default();
        c.add(&[json!("a"), json!("b"), json!("c")]).unwrap();
        let edit = |status: &str, reason: Option<&str>| Edit {
            status: Some(status.into()),
            reason: reason.map(str::to_string),
            ..Edit::default()
        };
        assert!(c.edit(1, &edit("deferred", None), no_tasks).unwrap_err().contains("reason is required"));
        assert!(c.edit(1, &edit("canceled", None), no_tasks).unwrap_err().contains("reason is required"));
        assert!(c.edit(1, &edit("completed", Some("done")), no_tasks).unwrap_err().contains("only given with"));
        assert!(c.edit(1, &edit("done", None), no_tasks).unwrap_err().contains("not one of"));
        c.edit(1, &edit("completed", None), no_tasks).unwrap();
        c.edit(2, &edit("canceled", Some("not needed")), no_tasks).unwrap();
        c.edit(3, &edit("deferred", Some("waiting for data")), no_tasks).unwrap();
        assert_eq!(c.render(), "Checklist (0 open):\n#3 [deferred] c (reason: waiting for data)");
        assert!(c.open().is_empty());
        assert!(c.edit(1, &Edit::default(), no_tasks).unwrap_err().contains("no open item #1"));
        let with_task =
            Edit { status: Some("deferred".into()), reason: Some("r".into()), task: Some("task_9".into()), text: None };
        assert!(c.edit(3, &with_task, no_tasks).unwrap_err().contains("no background task task_9"));
        let bad = Edit { status: Some("pending".into()), task: Some("task_1".into()), ..Edit::default() };
        assert!(c.edit(3, &bad, |_| Ok(())).unwrap_err().contains("only given with deferred"));
        c.edit(3, &with_task, |_| Ok(())).unwrap();
        assert_eq!(c.items()[0].task.as_deref(), Some("task_9"));
        // A new reason drops a task not named again.
        c.edit(3, &Edit { reason: Some("new".into()), ..Edit::default() }, no_tasks).unwrap();
        assert_eq!(c.items()[0].task, None);
    }
}
