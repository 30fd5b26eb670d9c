'use strict';
// Skills (SPEC §14): folders in the Agent Skills format (`<dir>/<name>/SKILL.md`, YAML front matter
// `name`, `description`, optional `priority`), the format Claude Code reads and writes. The core owns the
// rules; this module only reads the option object into the core's plain data.

const { ConfigError } = require('./errors.js');
const { stringList, refuseUnknown } = require('./options.js');

/** `skills: {dirs, agentManaged, indexEntries}` as the core's `skills` option, or nothing. */
function toNativeSkills(skills) {
  if (skills == null) return {};
  if (typeof skills !== 'object' || Array.isArray(skills)) {
    throw new ConfigError(`Agent: skills must be an object {dirs, agentManaged, indexEntries}, got ${Array.isArray(skills) ? 'an array' : typeof skills}`);
  }
  refuseUnknown('Agent: skills', skills, ['dirs', 'agentManaged', 'indexEntries']);
  const { dirs, agentManaged = false, indexEntries } = skills;
  if (typeof agentManaged !== 'boolean') {
    throw new ConfigError(`Agent: skills.agentManaged must be true or false, got ${typeof agentManaged}`);
  }
  if (indexEntries != null && !(Number.isSafeInteger(indexEntries) && indexEntries >= 0)) {
    throw new ConfigError(`Agent: skills.indexEntries must be a count (an integer from 0), got ${String(indexEntries)}`);
  }
  const config = { dirs: stringList('Agent: skills.dirs', dirs ?? []), agent_managed: agentManaged };
  if (indexEntries != null) config.index_entries = indexEntries;
  return { skills: config };
}

module.exports = { toNativeSkills };
