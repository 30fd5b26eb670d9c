//! Which tools are offered and what happens to a call: pure functions over plain data, exhaustively
//! tested. The loop calls them; nothing here does I/O.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::Level;

/// Per-agent tool filters: an allow-list, a block list and per-tool level overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filters {
    /// When set, only these tools exist for the agent.
    pub allow: Option<BTreeSet<String>>,
    /// These tools never exist for the agent; a block wins over an allow.
    pub block: BTreeSet<String>,
    /// The level a tool requires, replacing its declared one.
    pub overrides: BTreeMap<String, Level>,
}

impl Filters {
    pub fn is_blocked(&self, name: &str) -> bool {
        self.block.contains(name) || self.allow.as_ref().is_some_and(|a| !a.contains(name))
    }

    pub fn effective_level(&self, name: &str, declared: Level) -> Level {
        self.overrides.get(name).copied().unwrap_or(declared)
    }
}

/// What the listing API says of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Sent to the model; a call runs (or goes to the approval handler when `approval` says so).
    Offered,
    /// Filtered out by the allow-list or the block list.
    Blocked,
    /// Requires more than the session holds, and approvals are off (or the session is at `none`).
    AboveLevel,
    /// Offered, but deferred (SPEC §4): listed in the catalog, its schema sent once the model loads it.
    Deferred,
    /// Hidden by the deferral setting (SPEC §4): not registered at all, not in the catalog or the request.
    Hidden,
}

/// Why a call is put to the approval handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalReason {
    /// The tool requires more than the session's level.
    AboveLevel,
    /// The tool is marked `requires_approval`: every call goes to a person.
    RequiresApproval,
}

/// What happens to one call, before the tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallDecision {
    Run,
    Ask(ApprovalReason),
    Refuse(String),
}

/// A tool's facts as the decision needs them.
#[derive(Debug, Clone, Copy)]
pub struct ToolFacts<'a> {
    pub name: &'a str,
    pub declared_level: Level,
    pub requires_approval: bool,
}

/// The session's side of a decision.
#[derive(Debug, Clone, Copy)]
pub struct SessionFacts<'a> {
    pub level: Level,
    pub approvals: bool,
    pub filters: &'a Filters,
}

/// Whether the tool is offered to the model, and how its calls are treated.
pub fn status(tool: ToolFacts<'_>, session: SessionFacts<'_>) -> ToolStatus {
    let level = session.filters.effective_level(tool.name, tool.declared_level);
    if session.filters.is_blocked(tool.name) {
        ToolStatus::Blocked
    } else if session.level == Level::None || (level > session.level && !session.approvals) {
        ToolStatus::AboveLevel
    } else {
        ToolStatus::Offered
    }
}

/// Whether a call of an offered tool goes to the approval handler.
pub fn needs_approval(tool: ToolFacts<'_>, session: SessionFacts<'_>) -> bool {
    matches!(decide(tool, session), CallDecision::Ask(_))
}

/// What happens to one call of `tool` in this session.
pub fn decide(tool: ToolFacts<'_>, session: SessionFacts<'_>) -> CallDecision {
    let level = session.filters.effective_level(tool.name, tool.declared_level);
    if session.filters.is_blocked(tool.name) {
        return CallDecision::Refuse(format!("tool '{}' is not available to this agent", tool.name));
    }
    if session.level == Level::None {
        return CallDecision::Refuse(format!(
            "tool '{}' requires level {level}; this session holds none, where no tool runs",
            tool.name
        ));
    }
    if level > session.level {
        if session.approvals {
            return CallDecision::Ask(ApprovalReason::AboveLevel);
        }
        return CallDecision::Refuse(format!(
            "tool '{}' requires level {level}; this session holds {}",
            tool.name, session.level
        ));
    }
    if tool.requires_approval {
        if session.approvals {
            return CallDecision::Ask(ApprovalReason::RequiresApproval);
        }
        return CallDecision::Refuse(format!(
            "tool '{}' requires approval for every call, and this agent has no approval handler",
            tool.name
        ));
    }
    CallDecision::Run
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters_variants() -> Vec<Filters> {
        let mut v = vec![Filters::default()];
        v.push(Filters { allow: Some(["t".to_string()].into()), ..Default::default() });
        v.push(Filters { allow: Some(["other".to_string()].into()), ..Default::default() });
        v.push(Filters { block: ["t".to_string()].into(), ..Default::default() });
        v.push(Filters {
            allow: Some(["t".to_string()].into()),
            block: ["t".to_string()].into(),
            ..Default::default()
        });
        for l in Level::ALL {
            v.push(Filters { overrides: [("t".to_string(), l)].into(), ..Default::default() });
        }
        v
    }

    /// Every combination of declared level, session level, approvals, requires_approval and filter.
    #[test]
    fn exhaustive_decisions_never_run_above_level_or_when_blocked() {
        let mut cases = 0;
        for filters in filters_variants() {
            for declared in Level::ALL {
                for session_level in Level::ALL {
                    for approvals in [false, true] {
                        for requires_approval in [false, true] {
                            cases += 1;
                            let tool = ToolFacts { name: "t", declared_level: declared, requires_approval };
                            let session = SessionFacts { level: session_level, approvals, filters: &filters };
                            let effective = filters.effective_level("t", declared);
                            let d = decide(tool, session);
                            let s = status(tool, session);
                            if filters.is_blocked("t") {
                                assert!(matches!(d, CallDecision::Refuse(_)));
                                assert_eq!(s, ToolStatus::Blocked);
                                continue;
                            }
                            if session_level == Level::None {
                                assert!(matches!(d, CallDecision::Refuse(_)), "nothing runs at none");
                                assert_eq!(s, ToolStatus::AboveLevel);
                                continue;
                            }
                            match d {
                                CallDecision::Run => {
                                    assert!(effective <= session_level && !requires_approval);
                                    assert_eq!(s, ToolStatus::Offered);
                                }
                                CallDecision::Ask(ApprovalReason::AboveLevel) => {
                                    assert!(approvals && effective > session_level);
                                    assert_eq!(s, ToolStatus::Offered);
                                }
                                CallDecision::Ask(ApprovalReason::RequiresApproval) => {
                                    assert!(approvals && requires_approval && effective <= session_level);
                                }
                                CallDecision::Refuse(msg) => {
                                    assert!(!approvals);
                                    assert!(msg.contains("tool 't'"), "{msg}");
                                    if effective > session_level {
                                        assert!(msg.contains(&format!("requires level {effective}")), "{msg}");
                                        assert!(msg.contains(&format!("this session holds {session_level}")), "{msg}");
                                        assert_eq!(s, ToolStatus::AboveLevel);
                                    } else {
                                        assert!(requires_approval);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(cases, 9 * 4 * 4 * 2 * 2);
    }

    #[test]
    fn refusal_names_tool_and_both_levels() {
        let f = Filters::default();
        let d = decide(
            ToolFacts { name: "file_write", declared_level: Level::Workspace, requires_approval: false },
            SessionFacts { level: Level::Read, approvals: false, filters: &f },
        );
        assert_eq!(
            d,
            CallDecision::Refuse("tool 'file_write' requires level workspace; this session holds read".into())
        );
    }
}
