//! Permission levels and network settings: small ordered enums with one spelling each.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a session may do, in order: `none < read < workspace < unrestricted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// No tool at all: the agent can only answer with text.
    None,
    /// Reads anywhere in reach; the shell runs write-protected.
    Read,
    /// Writes under the workspace roots.
    Workspace,
    /// Everything; nothing is confined.
    Unrestricted,
}

impl Level {
    /// Every level, narrowest first.
    pub const ALL: [Level; 4] = [Level::None, Level::Read, Level::Workspace, Level::Unrestricted];

    /// The level as configured and sent (`none`, `read`, `workspace`, `unrestricted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Read => "read",
            Level::Workspace => "workspace",
            Level::Unrestricted => "unrestricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Level::None),
            "read" => Ok(Level::Read),
            "workspace" => Ok(Level::Workspace),
            "unrestricted" => Ok(Level::Unrestricted),
            other => Err(format!("unknown permission level '{other}' (none, read, workspace or unrestricted)")),
        }
    }
}

/// What the shell and web_fetch may reach: `none < remote < unrestricted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No shell network, no web_fetch.
    None,
    /// Other machines only: loopback and this host's own addresses are refused.
    Remote,
    /// Anything.
    #[default]
    Unrestricted,
}

impl Network {
    /// The setting as configured and sent (`none`, `remote`, `unrestricted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Remote => "remote",
            Network::Unrestricted => "unrestricted",
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Network {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Network::None),
            "remote" => Ok(Network::Remote),
            "unrestricted" => Ok(Network::Unrestricted),
            other => Err(format!("unknown network setting '{other}' (none, remote or unrestricted)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_round_trip() {
        assert!(Level::None < Level::Read && Level::Read < Level::Workspace && Level::Workspace < Level::Unrestricted);
        for l in Level::ALL {
            assert_eq!(l.as_str().parse::<Level>().unwrap(), l);
            assert_eq!(serde_json::to_value(l).unwrap(), l.as_str());
        }
        assert!("Read".parse::<Level>().unwrap_err().contains("unknown permission level 'Read'"));
    }

    #[test]
    fn networks_are_ordered_and_round_trip() {
        assert!(Network::None < Network::Remote && Network::Remote < Network::Unrestricted);
        for n in [Network::None, Network::Remote, Network::Unrestricted] {
            assert_eq!(n.as_str().parse::<Network>().unwrap(), n);
        }
    }
}
