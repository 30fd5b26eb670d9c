"""Writes the 500 realistic tools of the side-by-side benchmark as JSON: ``[{name, description,
parameters}]``, each schema about 600 bytes, the same bytes on every run (no randomness).

    python3 bench/peers/make_tools.py OUT.json [COUNT]
"""
import json
import sys

SERVICES = ["github", "jira", "slack", "gdrive", "notion", "linear", "stripe", "salesforce", "zendesk", "datadog"]
OBJECTS = ["issue", "pull_request", "comment", "project", "document", "invoice", "customer", "ticket", "alert", "user",
           "channel", "label", "milestone", "webhook", "report", "dashboard", "deployment", "release", "team", "file"]
VERBS = ["list", "get", "create", "update", "archive", "search", "export", "assign", "close", "reopen"]
NOUNS = {"list": "Lists", "get": "Fetches one", "create": "Creates a", "update": "Updates a", "archive": "Archives a",
         "search": "Searches for", "export": "Exports", "assign": "Assigns a", "close": "Closes a", "reopen": "Reopens a"}


def tool(i: int) -> dict:
    service = SERVICES[i % len(SERVICES)]
    obj = OBJECTS[(i // len(SERVICES)) % len(OBJECTS)]
    verb = VERBS[(i // (len(SERVICES) * len(OBJECTS)) + i) % len(VERBS)]
    name = f"{service}_{verb}_{obj}s" if verb in ("list", "search", "export") else f"{service}_{verb}_{obj}"
    if i >= len(SERVICES) * len(OBJECTS) * 1:
        name = f"{name}_v{i // (len(SERVICES) * len(OBJECTS)) + 1}"
    label = obj.replace("_", " ")
    description = (f"{NOUNS[verb]} {label} in {service.capitalize()}. Use it when the user asks about a {label} "
                   f"by its identifier or title.")
    props = {
        "workspace": {"type": "string", "description": f"The {service} workspace or organisation slug."},
        f"{obj}_id": {"type": "string", "description": f"Identifier of the {label}, as shown in its URL."},
        "query": {"type": "string", "description": "Free-text filter on titles."},
        "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "Which states to include."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20,
                  "description": "Largest number of results to return."},
    }
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": ["workspace"],
                           "additionalProperties": False}}


def main() -> None:
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    tools = [tool(i) for i in range(count)]
    names = [t["name"] for t in tools]
    assert len(set(names)) == len(names), "tool names must be unique"
    with open(out, "w") as f:
        json.dump(tools, f, indent=None, separators=(",", ":"))
    sizes = [len(json.dumps(t, separators=(",", ":"))) for t in tools]
    print(f"{count} tools, {sum(sizes) // count} bytes each on average", file=sys.stderr)


if __name__ == "__main__":
    main()
