//! Which tools are offered and what happens to a call: pure functions over plain data, exhaustively
//! tested. The loop calls them; nothing here does I/O.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Level, Network};

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
    /// Whether the lists refuse the tool `name`.
    pub fn is_blocked(&self, name: &str) -> bool {
        self.block.contains(name) || self.allow.as_ref().is_some_and(|a| !a.contains(name))
    }

    /// The level a call of `name` requires: its override, else `declared`.
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
    /// Needs the network, and the session's network setting is `none` (SPEC §1): withheld, not offered
    /// and refused.
    NoNetwork,
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
    /// The call runs.
    Run,
    /// The call waits on an approval, for this reason.
    Ask(ApprovalReason),
    /// The call is refused; the text is what the model sees.
    Refuse(String),
}

/// A tool's facts as the decision needs them.
#[derive(Debug, Clone, Copy)]
pub struct ToolFacts<'a> {
    /// The tool's whole name.
    pub name: &'a str,
    /// The level the tool declares.
    pub declared_level: Level,
    /// Whether the tool asks for approval on every call.
    pub requires_approval: bool,
    /// The tool reaches the network itself ([`crate::ToolSpec::needs_network`]).
    pub needs_network: bool,
}

impl<'a> ToolFacts<'a> {
    /// A tool's facts, off the tool.
    pub fn of(tool: &'a dyn crate::tools::Tool) -> ToolFacts<'a> {
        let spec = tool.spec();
        ToolFacts {
            name: &spec.name,
            declared_level: tool.level(),
            requires_approval: tool.requires_approval(),
            needs_network: spec.needs_network,
        }
    }
}

/// The session's side of a decision.
#[derive(Debug, Clone, Copy)]
pub struct SessionFacts<'a> {
    /// The session's level.
    pub level: Level,
    /// Whether an approval handler answers calls.
    pub approvals: bool,
    /// The tool lists and overrides.
    pub filters: &'a Filters,
    /// The session's network setting.
    pub network: Network,
}

/// Whether the session's network setting withholds the tool (SPEC §1: at `none`, web_fetch is withheld).
fn withheld(tool: ToolFacts<'_>, session: SessionFacts<'_>) -> bool {
    tool.needs_network && session.network == Network::None
}

/// Whether the tool is offered to the model, and how its calls are treated.
pub fn status(tool: ToolFacts<'_>, session: SessionFacts<'_>) -> ToolStatus {
    let level = session.filters.effective_level(tool.name, tool.declared_level);
    if session.filters.is_blocked(tool.name) {
        ToolStatus::Blocked
    } else if session.level == Level::None || (level > session.level && !session.approvals) {
        ToolStatus::AboveLevel
    } else if withheld(tool, session) {
        ToolStatus::NoNetwork
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
    if level > session.level && !session.approvals {
        return CallDecision::Refuse(format!(
            "tool '{}' requires level {level}; this session holds {}",
            tool.name, session.level
        ));
    }
    if withheld(tool, session) {
        return CallDecision::Refuse(format!(
            "tool '{}' needs the network, and this session's network setting is none",
            tool.name
        ));
    }
    if level > session.level {
        return CallDecision::Ask(ApprovalReason::AboveLevel);
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
                            let tool = ToolFacts {
                                name: "t",
                                declared_level: declared,
                                requires_approval,
                                needs_network: false,
                            };
                            let session = SessionFacts {
                                level: session_level,
                                approvals,
                                filters: &filters,
                                network: Network::Unrestricted,
                            };
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
            ToolFacts {
                name: "file_write",
                declared_level: Level::Workspace,
                requires_approval: false,
                needs_network: false,
            },
            SessionFacts { level: Level::Read, approvals: false, filters: &f, network: Network::Unrestricted },
        );
        assert_eq!(
            d,
            CallDecision::Refuse("tool 'file_write' requires level workspace; this session holds read".into())
        );
    }

    /// A tool that needs the network, at every level, approval setting and network setting: at network
    /// `none` it is never offered and never runs (not even put to a person); otherwise the network
    /// changes nothing.
    #[test]
    fn network_none_withholds_a_tool_that_needs_the_network() {
        let f = Filters::default();
        for network in [Network::None, Network::Remote, Network::Unrestricted] {
            for level in Level::ALL {
                for approvals in [false, true] {
                    for declared in Level::ALL {
                        let tool = ToolFacts {
                            name: "web_fetch",
                            declared_level: declared,
                            requires_approval: false,
                            needs_network: true,
                        };
                        let plain = ToolFacts { needs_network: false, ..tool };
                        let session = SessionFacts { level, approvals, filters: &f, network };
                        let (d, s) = (decide(tool, session), status(tool, session));
                        if network != Network::None {
                            assert_eq!((d, s), (decide(plain, session), status(plain, session)));
                            continue;
                        }
                        assert!(matches!(d, CallDecision::Refuse(_)), "{level} {declared} {approvals}: {d:?}");
                        assert_ne!(s, ToolStatus::Offered);
                        if level != Level::None && (declared <= level || approvals) {
                            assert_eq!(s, ToolStatus::NoNetwork);
                            assert_eq!(
                                d,
                                CallDecision::Refuse(
                                    "tool 'web_fetch' needs the network, and this session's network setting is none"
                                        .into()
                                )
                            );
                        }
                    }
                }
            }
        }
    }
}
