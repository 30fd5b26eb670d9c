//! The "Tool discovery" section of the per-turn context (SPEC §4): every deferred tool under its group
//! heading with the level it requires, bounded in three tiers. A pure function of its input: the same
//! entries give the same bytes.

use std::collections::BTreeMap;

use crate::permission::Level;

/// Summaries ride along while the whole section fits this many bytes.
pub const DEFAULT_MAX_BYTES: usize = 8 * 1024;
/// Past this many names the section stops and counts what it left out.
pub const DEFAULT_MAX_NAMES: usize = 200;
/// A summary longer than this many characters is clipped and ends in `…`.
pub const DEFAULT_SUMMARY_CHARS: usize = 250;

/// The bounds of the section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogLimits {
    /// The most bytes the section takes.
    pub max_bytes: usize,
    /// The most tools it names.
    pub max_names: usize,
    /// The most characters of each tool's description it shows.
    pub summary_chars: usize,
}

impl Default for CatalogLimits {
    fn default() -> Self {
        CatalogLimits {
            max_bytes: DEFAULT_MAX_BYTES,
            max_names: DEFAULT_MAX_NAMES,
            summary_chars: DEFAULT_SUMMARY_CHARS,
        }
    }
}

/// One deferred tool as the catalog shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// The tool's name.
    pub name: String,
    /// The heading it is listed under: the MCP server's name, or `host` for host functions.
    pub group: String,
    /// The level a call requires (after the session's overrides).
    pub level: Level,
    /// The tool's whole description; the catalog shows its first line, clipped.
    pub description: String,
}

/// The first line of `description` with runs of white space made one space, clipped to `max_chars`
/// characters; a clipped summary ends in `…` (which counts toward the limit).
pub fn summary(description: &str, max_chars: usize) -> String {
    let line = description.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let words: Vec<&str> = line.split_whitespace().collect();
    let line = words.join(" ");
    if line.chars().count() <= max_chars {
        return line;
    }
    let head: String = line.chars().take(max_chars.saturating_sub(1)).collect();
    format!("{}…", head.trim_end())
}

const TITLE: &str = "## Tool discovery\n";
const PREAMBLE: &str = "These tools are deferred: their schemas are not in this request. Load up to 10 at once \
with tool_load (exact names) to get their schemas from the next request; tool_search finds tools by keyword. \
A deferred tool can also be called directly.\n";

fn heading(group: &str, count: usize) -> String {
    let noun = if count == 1 { "tool" } else { "tools" };
    format!("\n### {group} ({count} {noun})\n")
}

fn count_line(tools: usize, groups: usize) -> String {
    let mut parts = Vec::new();
    if tools > 0 {
        parts.push(format!("{tools} more {} not listed", if tools == 1 { "tool" } else { "tools" }));
    }
    if groups > 0 {
        parts.push(format!("{groups} more {} not listed", if groups == 1 { "group" } else { "groups" }));
    }
    format!("\n({}; tool_search finds them.)\n", parts.join(", "))
}

/// One deferred tool as [`render_items`] reads it: [`CatalogEntry`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogItem<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its heading.
    pub group: &'a str,
    /// The level a call requires.
    pub level: Level,
    /// Its description.
    pub description: &'a str,
}

impl CatalogEntry {
    /// The entry, borrowed.
    pub fn item(&self) -> CatalogItem<'_> {
        CatalogItem { name: &self.name, group: &self.group, level: self.level, description: &self.description }
    }
}

/// Renders the section, or `None` when there is nothing deferred (the section leaves the context).
///
/// Tiers: (1) every entry with its summary, when the whole section fits `max_bytes`; (2) otherwise
/// names only, up to `max_names` names; (3) past that the names stop; headings of groups with entries
/// left out are still kept, with their counts, while the section fits `max_bytes`, and a final line
/// counts the tools and the groups not listed. Groups and entries are in name order.
pub fn render(entries: &[CatalogEntry], limits: &CatalogLimits) -> Option<String> {
    let items: Vec<CatalogItem<'_>> = entries.iter().map(CatalogEntry::item).collect();
    render_items(&items, limits)
}

/// [`render`] over borrowed entries. The work is bounded by what the section shows: a tier that
/// overflows stops at the first entry past the budget, and only groups whose names are listed are
/// sorted, so ten thousand tools cost little more than two hundred.
pub fn render_items(items: &[CatalogItem<'_>], limits: &CatalogLimits) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    // Group by heading; entries of one group usually come together, so the map is searched once per run.
    let mut groups: BTreeMap<&str, Vec<&CatalogItem<'_>>> = BTreeMap::new();
    let mut run_group: Option<&str> = None;
    let mut run: Vec<&CatalogItem<'_>> = Vec::new();
    for it in items {
        if run_group != Some(it.group) {
            if let Some(g) = run_group {
                groups.entry(g).or_default().append(&mut run);
            }
            run_group = Some(it.group);
        }
        run.push(it);
    }
    if let Some(g) = run_group {
        groups.entry(g).or_default().append(&mut run);
    }
    let mut groups: Vec<(&str, Vec<&CatalogItem<'_>>, bool)> = groups.into_iter().map(|(g, l)| (g, l, false)).collect();
    let sort = |entry: &mut (&str, Vec<&CatalogItem<'_>>, bool)| {
        if !entry.2 {
            entry.1.sort_by(|a, b| a.name.cmp(b.name));
            entry.2 = true;
        }
    };

    // Tier 1: summaries, while the whole section fits.
    let mut full = format!("{TITLE}{PREAMBLE}");
    let mut fits = true;
    'tier1: for g in groups.iter_mut() {
        sort(g);
        full.push_str(&heading(g.0, g.1.len()));
        for e in &g.1 {
            let s = summary(e.description, limits.summary_chars);
            if s.is_empty() {
                full.push_str(&format!("- {} [{}]\n", e.name, e.level));
            } else {
                full.push_str(&format!("- {} [{}]: {s}\n", e.name, e.level));
            }
            if full.len() > limits.max_bytes {
                fits = false;
                break 'tier1;
            }
        }
    }
    if fits {
        return Some(full);
    }

    // Tiers 2 and 3: names only, up to `max_names`; then headings while they fit, then a count line.
    let mut out = format!("{TITLE}{PREAMBLE}");
    let mut shown = 0usize;
    let mut tools_left = 0usize;
    let mut groups_left = 0usize;
    // The longest count line this section could need, reserved so the headings never push it out.
    let reserve = count_line(items.len(), groups.len()).len();
    for g in groups.iter_mut() {
        if shown < limits.max_names {
            sort(g);
            out.push_str(&heading(g.0, g.1.len()));
            for e in &g.1 {
                if shown < limits.max_names {
                    out.push_str(&format!("- {} [{}]\n", e.name, e.level));
                    shown += 1;
                } else {
                    tools_left += 1;
                }
            }
            continue;
        }
        let h = heading(g.0, g.1.len());
        tools_left += g.1.len();
        if groups_left == 0 && out.len() + h.len() + reserve <= limits.max_bytes {
            out.push_str(&h);
        } else {
            groups_left += 1;
        }
    }
    if tools_left > 0 || groups_left > 0 {
        out.push_str(&count_line(tools_left, groups_left));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(group: &str, name: &str, description: &str) -> CatalogEntry {
        CatalogEntry { name: name.into(), group: group.into(), level: Level::Read, description: description.into() }
    }

    fn many(groups: usize, per_group: usize, description: &str) -> Vec<CatalogEntry> {
        let mut v = Vec::new();
        for g in 0..groups {
            for t in 0..per_group {
                v.push(entry(&format!("server{g:03}"), &format!("mcp__server{g:03}__tool_{t:03}"), description));
            }
        }
        v
    }

    #[test]
    fn nothing_deferred_is_no_section() {
        assert_eq!(render(&[], &CatalogLimits::default()), None);
    }

    #[test]
    fn small_catalog_has_summaries_headings_counts_and_levels() {
        let entries = vec![
            entry("notion", "mcp__notion__search", "Search the workspace.\nLonger text here."),
            entry("notion", "mcp__notion__fetch", "Fetch a page."),
            entry("github", "mcp__github__list_issues", "List issues."),
        ];
        let text = render(&entries, &CatalogLimits::default()).unwrap();
        let expected = format!(
            "{TITLE}{PREAMBLE}\n### github (1 tool)\n- mcp__github__list_issues [read]: List issues.\n\
             \n### notion (2 tools)\n- mcp__notion__fetch [read]: Fetch a page.\n\
             - mcp__notion__search [read]: Search the workspace.\n"
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn rendering_is_deterministic_whatever_the_input_order() {
        let mut entries = many(3, 5, "Does a thing.");
        let a = render(&entries, &CatalogLimits::default()).unwrap();
        entries.reverse();
        let b = render(&entries, &CatalogLimits::default()).unwrap();
        assert_eq!(a.as_bytes(), b.as_bytes());
    }

    #[test]
    fn summary_clips_at_250_characters_with_an_ellipsis() {
        let long = "é".repeat(300);
        let s = summary(&long, 250);
        assert_eq!(s.chars().count(), 250);
        assert!(s.ends_with('…'));
        let exact = "a".repeat(250);
        assert_eq!(summary(&exact, 250), exact);
        let over = "a".repeat(251);
        assert_eq!(summary(&over, 250), format!("{}…", "a".repeat(249)));
        assert_eq!(summary("  first   line  \nsecond", 250), "first line");
        assert_eq!(summary("\n\n  \nthird", 250), "third");
        assert_eq!(summary("", 250), "");
    }

    #[test]
    fn a_section_that_fits_keeps_summaries_and_one_that_does_not_drops_them() {
        // 40 tools of ~100-byte summaries: over 8 KB with summaries, so names only.
        let desc = "x".repeat(100);
        let entries = many(2, 40, &desc);
        let text = render(&entries, &CatalogLimits::default()).unwrap();
        assert!(!text.contains(&desc));
        assert!(text.contains("### server000 (40 tools)\n- mcp__server000__tool_000 [read]\n"));
        assert!(!text.contains("not listed"));
        // Few tools: summaries stay.
        let entries = many(1, 5, &desc);
        let text = render(&entries, &CatalogLimits::default()).unwrap();
        assert!(text.contains(&desc));
        assert!(text.len() <= DEFAULT_MAX_BYTES);
    }

    #[test]
    fn the_summary_tier_boundary_is_exactly_max_bytes() {
        let entries = many(1, 3, "Does a thing.");
        let full = render(&entries, &CatalogLimits::default()).unwrap();
        let at = CatalogLimits { max_bytes: full.len(), ..CatalogLimits::default() };
        assert_eq!(render(&entries, &at).unwrap(), full);
        let below = CatalogLimits { max_bytes: full.len() - 1, ..CatalogLimits::default() };
        assert!(!render(&entries, &below).unwrap().contains("Does a thing."));
    }

    #[test]
    fn past_200_names_the_section_stops_and_counts() {
        // 10 groups of 30: 200 names shown, 100 left out; the groups after the cut keep their headings.
        let entries = many(10, 30, "Does a thing.");
        let text = render(&entries, &CatalogLimits::default()).unwrap();
        assert_eq!(text.matches("\n- ").count(), 200);
        assert!(text.contains("### server006 (30 tools)\n- mcp__server006__tool_000 [read]\n"));
        assert!(text.contains("- mcp__server006__tool_019 [read]\n\n### server007 (30 tools)\n"));
        assert!(!text.contains("mcp__server006__tool_020"));
        assert!(text.contains("### server007 (30 tools)\n"));
        assert!(text.contains("### server009 (30 tools)\n"));
        assert!(text.ends_with("\n(100 more tools not listed; tool_search finds them.)\n"));
    }

    #[test]
    fn headings_past_the_byte_budget_become_a_group_count() {
        // 300 groups of 1: 200 names, then headings while they fit 8 KB, then a count of groups.
        let entries = many(300, 1, "Does a thing.");
        let text = render(&entries, &CatalogLimits::default()).unwrap();
        assert_eq!(text.matches("\n- ").count(), 200);
        let headings = text.matches("\n### ").count();
        let listed_without_names = headings - 200;
        let groups_left = 300 - headings;
        assert!(text.ends_with(&format!(
            "\n(100 more tools not listed, {groups_left} more groups not listed; tool_search finds them.)\n"
        )));
        // Names alone exceed 8 KB here, so no heading past the names fits.
        assert_eq!(listed_without_names, 0);

        // With fewer names allowed, headings fit and are kept, each with its count.
        let limits = CatalogLimits { max_names: 20, ..CatalogLimits::default() };
        let text = render(&entries, &limits).unwrap();
        assert!(text.len() <= limits.max_bytes);
        assert!(text.contains("### server020 (1 tool)\n"));
        let headings = text.matches("\n### ").count();
        assert!(headings > 20 && headings < 300, "{headings}");
        let groups_left = 300 - headings;
        assert!(text.ends_with(&format!(
            "\n(280 more tools not listed, {groups_left} more groups not listed; tool_search finds them.)\n"
        )));
    }

    #[test]
    fn every_tier_is_deterministic_and_names_its_groups_with_counts() {
        for (groups, per) in [(1, 1), (2, 50), (5, 60), (400, 1), (3, 500)] {
            let entries = many(groups, per, "Some text that is moderately long to push the size along.");
            let a = render(&entries, &CatalogLimits::default()).unwrap();
            let mut rev = entries.clone();
            rev.reverse();
            assert_eq!(a, render(&rev, &CatalogLimits::default()).unwrap());
            assert!(a.matches("\n- ").count() <= DEFAULT_MAX_NAMES);
            for h in a.lines().filter(|l| l.starts_with("### ")) {
                assert!(h.ends_with(&format!("({per} {})", if per == 1 { "tool" } else { "tools" })), "{h}");
            }
        }
    }
}
