//! Permissions: levels, the per-call decision, approvals, scope and network. Pure rules live in
//! [`decision`] and [`scope`]'s resolution; the loop and the built-in tools call them.

pub mod approval;
pub mod decision;
mod level;
pub mod narrow;
pub mod network;
pub(crate) mod open;
mod policy;
pub mod reach;
pub mod scope;

pub use approval::{ApprovalDecision, ApprovalHandler, ApprovalRequest};
pub use decision::{ApprovalReason, CallDecision, Filters, ToolStatus};
pub use level::{Level, Network};
pub use policy::{Policy, PolicyConfig};
pub use scope::{Access, Scope, ScopeError, WriteReach};
