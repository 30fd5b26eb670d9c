import Foundation

/// Skills (SPEC §14): folders in the Agent Skills format (`<dir>/<name>/SKILL.md` with YAML front matter
/// `name`, `description` and optionally `priority`), the format Claude Code reads and writes. Given to an
/// `Agent`, they are listed in a bounded index after the instructions on every request, and the agent
/// gets `skill_read` and `skill_search`; `agentManaged` adds `skill_write`, `skill_edit` and
/// `skill_delete` (never given to a sub-agent). Every file is reached through the agent's policy scope.
public struct Skills: Sendable, Equatable {
    /// Directories holding skill folders, absolute or relative to the policy's working directory; a new
    /// skill is written to the first.
    public var dirs: [String]
    /// The agent may write, edit and delete skills.
    public var agentManaged: Bool
    /// The most skills the per-turn index lists (default 100, at most 1,000; 0: no index).
    public var indexEntries: Int?

    public init(dirs: [String], agentManaged: Bool = false, indexEntries: Int? = nil) {
        self.dirs = dirs
        self.agentManaged = agentManaged
        self.indexEntries = indexEntries
    }

    func settings() throws -> SkillsSettings {
        var entries: UInt32? = nil
        if let indexEntries {
            guard let n = UInt32(exactly: indexEntries) else {
                throw AmbitError.config(
                    message: "invalid configuration: skills.index_entries must be a count (an integer from 0), got \(indexEntries)")
            }
            entries = n
        }
        return SkillsSettings(dirs: dirs, agentManaged: agentManaged, indexEntries: entries)
    }
}
