//! Live approvals: a host callback answers while the run waits. The answer is approve, deny (with a
//! reason the model sees) or revise (replacement arguments the tool runs with). Approval never widens
//! reach: an approved call runs at the session's level.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApprovalReason, Level};

/// What the handler is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: String,
    /// The tool's whole name.
    pub tool: String,
    /// The arguments the model sent.
    pub arguments: Value,
    /// The level the tool requires (after overrides).
    pub tool_level: Level,
    /// The session's level.
    pub session_level: Level,
    /// Why the call needs approval.
    pub reason: ApprovalReason,
}

/// The handler's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run the call as asked.
    Approve,
    /// Refuse the call.
    Deny {
        /// Why, as the model sees it.
        reason: String,
    },
    /// Run the call with other arguments.
    Revise {
        /// The arguments to run it with.
        arguments: Value,
    },
    /// Not now: in a session run, the run parks in state `awaiting_approval` until
    /// `Sessions::resume` brings the answer, from any process; outside a session the call is refused.
    Later,
}

/// Answers approval requests. Implemented by Rust types and by each binding for its language's plain
/// and async functions. An `Err` is taken as a denial whose reason names the failure.
#[async_trait]
pub trait ApprovalHandler: Send + Sync {
    /// Decides on `request`.
    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalDecision, String>;
}

/// An approval handler from a Rust closure.
pub struct FnApproval<F>(pub F);

#[async_trait]
impl<F, Fut> ApprovalHandler for FnApproval<F>
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = ApprovalDecision> + Send,
{
    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalDecision, String> {
        Ok((self.0)(request.clone()).await)
    }
}
