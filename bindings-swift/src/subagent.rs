//! Sub-agent settings (SPEC §7) as a UniFFI record; the rules live in the core.

use ambit::agent::subagent::SubagentConfig;

/// Gives the agent agent_spawn, agent_list, agent_followup, agent_steer and agent_delete.
#[derive(Debug, Clone, uniffi::Record)]
pub struct SubagentSettings {
    /// Levels of sub-agents below the agent (default 3; 1: sub-agents cannot spawn; 0: no agent tools).
    #[uniffi(default = 3)]
    pub max_depth: u32,
    /// Whether the agent holds a memory store it may grant read access to: `none` or `read`.
    #[uniffi(default = "none")]
    pub memory: String,
}

impl SubagentSettings {
    /// The core's form; an unknown memory setting is a configuration error naming it.
    pub fn into_core(self) -> Result<SubagentConfig, ambit::Error> {
        let memory = serde_json::from_value(serde_json::Value::String(self.memory.clone())).map_err(|_| {
            ambit::Error::Config(format!("subagents: unknown memory setting '{}' (none or read)", self.memory))
        })?;
        Ok(SubagentConfig { max_depth: self.max_depth, memory })
    }
}
