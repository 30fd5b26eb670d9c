//! Realistic MCP tool sets for the deferral benchmarks and the request-size test: servers of 50 tools
//! each, named and described the way real servers (GitHub, Jira, Notion, Slack, databases, clouds) do,
//! with JSON Schemas of 3 to 9 documented parameters (types, enums, defaults, nested objects). The
//! same `n` always gives the same tools.

#![allow(dead_code)]

use serde_json::{Map, Value, json};

const SERVERS: [&str; 20] = [
    "github",
    "jira",
    "notion",
    "slack",
    "postgres",
    "kubernetes",
    "aws",
    "linear",
    "sentry",
    "stripe",
    "gitlab",
    "confluence",
    "datadog",
    "figma",
    "hubspot",
    "salesforce",
    "zendesk",
    "asana",
    "gdrive",
    "bigquery",
];
const VERBS: [&str; 10] = ["list", "get", "create", "update", "delete", "search", "add", "remove", "export", "sync"];
const NOUNS: [&str; 25] = [
    "issues",
    "pull_requests",
    "comments",
    "reviews",
    "branches",
    "commits",
    "releases",
    "labels",
    "milestones",
    "projects",
    "pages",
    "databases",
    "channels",
    "messages",
    "users",
    "teams",
    "tables",
    "rows",
    "pods",
    "deployments",
    "buckets",
    "alerts",
    "invoices",
    "tickets",
    "workflows",
];

/// One tool: its server, its own name (the `<tool>` of `mcp__<server>__<tool>`), description and schema.
pub struct McpToolDef {
    pub server: String,
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl McpToolDef {
    pub fn exposed(&self) -> String {
        format!("mcp__{}__{}", self.server, self.name)
    }
}

fn server_name(i: usize) -> String {
    let base = SERVERS[i % SERVERS.len()];
    if i < SERVERS.len() { base.to_string() } else { format!("{base}_{}", i / SERVERS.len()) }
}

fn property(k: usize, noun: &str) -> (String, Value) {
    match k % 9 {
        0 => (
            "owner".into(),
            json!({"type": "string", "description": "The account or organization that owns the repository or workspace."}),
        ),
        1 => (
            "repo".into(),
            json!({"type": "string", "description": "The name of the repository, project or space, without the owner."}),
        ),
        2 => (
            "state".into(),
            json!({"type": "string", "enum": ["open", "closed", "all"], "default": "open", "description": format!("Only {noun} in this state.")}),
        ),
        3 => (
            "per_page".into(),
            json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 30, "description": "Results per page (max 100)."}),
        ),
        4 => (
            "page".into(),
            json!({"type": "integer", "minimum": 1, "default": 1, "description": "The page of results to fetch, from 1."}),
        ),
        5 => (
            "sort".into(),
            json!({"type": "string", "enum": ["created", "updated", "popularity", "long-running"], "default": "created", "description": "What to sort the results by."}),
        ),
        6 => (
            "since".into(),
            json!({"type": "string", "format": "date-time", "description": format!("Only {noun} updated at or after this time, as an ISO 8601 timestamp.")}),
        ),
        7 => (
            "labels".into(),
            json!({"type": "array", "items": {"type": "string"}, "description": "Label names to filter by; every label must match."}),
        ),
        _ => (
            "filter".into(),
            json!({"type": "object", "description": "Extra filters the API takes.", "properties": {
                "assignee": {"type": "string", "description": "Login of the assignee, `none` or `*`."},
                "creator": {"type": "string", "description": "Login of the creator."},
                "mentioned": {"type": "string", "description": "A user mentioned in it."},
            }}),
        ),
    }
}

/// `n` tools over `n / 50` servers (at least one), 50 to a server.
pub fn tools(n: usize) -> Vec<McpToolDef> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let server = server_name(i / 50);
        let j = i % 50;
        let verb = VERBS[j % VERBS.len()];
        let noun = NOUNS[(j / VERBS.len() + i / 50) % NOUNS.len()];
        let name = if j < 25 { format!("{verb}_{noun}") } else { format!("{verb}_{noun}_{}", j / 10) };
        let thing = noun.replace('_', " ");
        let description = format!(
            "{} {thing} in a {server} workspace. Use this when the user asks about {thing}; results are \
             paginated and sorted newest first. Requires read access to the workspace; archived {thing} are \
             left out unless `state` is `all`. Returns each item's id, title, author, state and timestamps.",
            capitalized(verb)
        );
        let count = 3 + (i * 7) % 7;
        let mut props = Map::new();
        let mut required = Vec::new();
        for k in 0..count {
            let (key, schema) = property(k + i, noun);
            if k < 2 {
                required.push(Value::String(key.clone()));
            }
            props.insert(key, schema);
        }
        let parameters =
            json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
        out.push(McpToolDef { server, name, description, parameters });
    }
    out
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}
