//! Keyword search over tool names and descriptions (SPEC §4): a word in the name outranks one in the
//! description, a whole word outranks a substring, and a near miss (`xerfs` for `xrefs`) still counts.
//! The index is built once per tool set; a query walks its vocabulary, not its tools.

use std::collections::HashMap;

/// The most results a search returns: one `tool_load` batch.
pub const MAX_RESULTS: usize = 10;

// Scores per query word. Every name score is above every description score.
const NAME_EXACT: u32 = 1000;
const NAME_WORD: u32 = 100;
const NAME_SUBSTRING: u32 = 60;
const NAME_NEAR: u32 = 45;
const DESC_WORD: u32 = 30;
const DESC_SUBSTRING: u32 = 15;
const DESC_NEAR: u32 = 10;

/// Splits text into lowercase words: runs of letters and digits, also cut where a lowercase letter or a
/// digit meets an uppercase one (`listIssues` → `list`, `issues`).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Optimal string alignment distance (edits, with adjacent transpositions counted as one), or `None`
/// when it is more than `max`.
pub fn near_distance(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        let mut row_min = usize::MAX;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1).min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
            row_min = row_min.min(v);
        }
        if row_min > max {
            return None;
        }
    }
    let v = d[a.len() * w + b.len()];
    (v <= max).then_some(v)
}

/// How far a word of this length may be from another and still count as a near miss: none below four
/// characters, one up to seven, two from eight.
pub fn near_allowance(len: usize) -> usize {
    match len {
        0..=3 => 0,
        4..=7 => 1,
        _ => 2,
    }
}

/// A tool as the index sees it.
#[derive(Debug, Clone, Copy)]
pub struct Document<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its description.
    pub description: &'a str,
}

/// The search index over one tool set.
#[derive(Debug, Clone, Default)]
pub struct SearchIndex {
    names: Vec<String>,
    exact: HashMap<String, u32>,
    name_vocab: HashMap<String, Vec<u32>>,
    desc_vocab: HashMap<String, Vec<u32>>,
}

impl SearchIndex {
    /// The index over `docs`.
    pub fn new<'a>(docs: impl IntoIterator<Item = Document<'a>>) -> SearchIndex {
        let mut ix = SearchIndex::default();
        for (i, doc) in docs.into_iter().enumerate() {
            let i = i as u32;
            ix.names.push(doc.name.to_string());
            ix.exact.insert(doc.name.to_lowercase(), i);
            for w in words(doc.name) {
                let list = ix.name_vocab.entry(w).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
            for w in words(doc.description) {
                let list = ix.desc_vocab.entry(w).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
        ix
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The best matches for `query`, best first (ties by name), at most `limit`: indexes into the
    /// documents the index was built from, with their scores.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(usize, u32)> {
        self.search_where(query, limit, |_| true)
    }

    /// [`SearchIndex::search`] over the documents `keep` accepts. Scores live in dense arrays, one slot
    /// per document, and only the best `limit` are sorted, so a query costs its matches, not a sort of
    /// every tool.
    pub fn search_where(&self, query: &str, limit: usize, keep: impl Fn(usize) -> bool) -> Vec<(usize, u32)> {
        let n = self.names.len();
        let mut scores = vec![0u32; n];
        let mut touched: Vec<u32> = Vec::new();
        let mut add = |i: u32, s: u32, scores: &mut Vec<u32>| {
            if scores[i as usize] == 0 {
                touched.push(i);
            }
            scores[i as usize] += s;
        };
        if let Some(&i) = self.exact.get(query.trim().to_lowercase().as_str()) {
            add(i, NAME_EXACT, &mut scores);
        }
        let mut terms = words(query);
        terms.sort();
        terms.dedup();
        let mut name_best = vec![0u32; n];
        let mut desc_best = vec![0u32; n];
        for term in &terms {
            let mut hit: Vec<u32> = Vec::new();
            score_vocab(&self.name_vocab, term, [NAME_WORD, NAME_SUBSTRING, NAME_NEAR], &mut name_best, &mut hit);
            score_vocab(&self.desc_vocab, term, [DESC_WORD, DESC_SUBSTRING, DESC_NEAR], &mut desc_best, &mut hit);
            hit.sort_unstable();
            hit.dedup();
            for i in hit {
                let s = std::mem::take(&mut name_best[i as usize]) + std::mem::take(&mut desc_best[i as usize]);
                add(i, s, &mut scores);
            }
        }
        let mut ranked: Vec<(usize, u32)> =
            touched.into_iter().map(|i| (i as usize, scores[i as usize])).filter(|&(i, s)| s > 0 && keep(i)).collect();
        let order =
            |a: &(usize, u32), b: &(usize, u32)| b.1.cmp(&a.1).then_with(|| self.names[a.0].cmp(&self.names[b.0]));
        if limit < ranked.len() {
            if limit == 0 {
                return Vec::new();
            }
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_by(order);
        ranked
    }
}

/// Raises, for each document, `best` to the best score `term` earns in one field: whole word, else
/// substring (the term inside a longer word, at least three characters), else near miss. The documents
/// touched are added to `hit`.
fn score_vocab(
    vocab: &HashMap<String, Vec<u32>>,
    term: &str,
    [word, sub, near]: [u32; 3],
    best: &mut [u32],
    hit: &mut Vec<u32>,
) {
    let allowance = near_allowance(term.chars().count());
    let mut give = |docs: &[u32], s: u32| {
        for &d in docs {
            let e = &mut best[d as usize];
            if *e < s {
                *e = s;
            }
            hit.push(d);
        }
    };
    if let Some(docs) = vocab.get(term) {
        give(docs, word);
    }
    let substring_ok = term.len() >= 3;
    for (w, docs) in vocab {
        if w == term {
            continue;
        }
        if substring_ok && w.contains(term) {
            give(docs, sub);
        } else if allowance > 0 && near_distance(w, term, allowance).is_some() {
            give(docs, near);
        }
    }
}

/// The registered names nearest `name` by edit distance (at most a third of its length away), nearest
/// first, ties by name.
pub fn nearest_names<'a>(name: &str, names: impl IntoIterator<Item = &'a str>, limit: usize) -> Vec<String> {
    let max = (name.chars().count() / 3).max(1);
    let lower = name.to_lowercase();
    let mut found: Vec<(usize, &str)> =
        names.into_iter().filter_map(|n| near_distance(&n.to_lowercase(), &lower, max).map(|d| (d, n))).collect();
    found.sort();
    found.into_iter().take(limit).map(|(_, n)| n.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(docs: &[(&str, &str)]) -> SearchIndex {
        SearchIndex::new(docs.iter().map(|(n, d)| Document { name: n, description: d }))
    }

    fn names(ix: &SearchIndex, q: &str) -> Vec<String> {
        ix.search(q, MAX_RESULTS).into_iter().map(|(i, _)| ix.names[i].clone()).collect()
    }

    #[test]
    fn words_split_on_separators_and_case() {
        assert_eq!(words("mcp__github__listIssues"), ["mcp", "github", "list", "issues"]);
        assert_eq!(words("notion-search v2.0"), ["notion", "search", "v2", "0"]);
        assert_eq!(words("HTTPServer"), ["httpserver"]);
        assert_eq!(words(""), Vec::<String>::new());
    }

    #[test]
    fn osa_distance_counts_a_transposition_as_one() {
        assert_eq!(near_distance("xerfs", "xrefs", 1), Some(1));
        assert_eq!(near_distance("xrefs", "xrefs", 0), Some(0));
        assert_eq!(near_distance("abc", "abd", 1), Some(1));
        assert_eq!(near_distance("abc", "xyz", 2), None);
        assert_eq!(near_distance("kitten", "sitting", 3), Some(3));
        assert_eq!(near_distance("a", "abcd", 2), None);
    }

    #[test]
    fn a_word_in_the_name_outranks_one_in_the_description() {
        let ix = index(&[("mcp__a__fetch_page", "Gets a page by id."), ("mcp__a__get_xrefs", "Lists pages.")]);
        assert_eq!(names(&ix, "page"), ["mcp__a__fetch_page", "mcp__a__get_xrefs"]);
    }

    #[test]
    fn a_whole_word_outranks_a_substring() {
        let ix = index(&[("mcp__s__searchable", ""), ("mcp__s__search", "")]);
        assert_eq!(names(&ix, "search"), ["mcp__s__search", "mcp__s__searchable"]);
        let ix = index(&[("a", "Makes it searchable."), ("b", "Runs a search.")]);
        assert_eq!(names(&ix, "search"), ["b", "a"]);
    }

    #[test]
    fn a_near_miss_still_counts_below_a_real_match() {
        let ix = index(&[("mcp__code__find_xrefs", "Cross references of a symbol."), ("mcp__code__other", "")]);
        assert_eq!(names(&ix, "xerfs"), ["mcp__code__find_xrefs"]);
        let ix = index(&[("find_xrefs", ""), ("xerfs", "")]);
        assert_eq!(names(&ix, "xerfs"), ["xerfs", "find_xrefs"]);
        // Short words do not fuzz: "cat" does not find "bat".
        let ix = index(&[("bat", "")]);
        assert!(names(&ix, "cat").is_empty());
    }

    #[test]
    fn every_name_match_outranks_every_description_match() {
        for name_kind in ["widget", "widgets", "wigdet"] {
            for desc_kind in ["widget", "widgets", "wigdet"] {
                let ix = index(&[("zz_desc", &format!("about {desc_kind} things")), (&format!("aa_{name_kind}"), "")]);
                assert_eq!(names(&ix, "widget")[0], format!("aa_{name_kind}"), "{name_kind} vs {desc_kind}");
            }
        }
    }

    #[test]
    fn at_most_ten_results_ties_by_name_and_the_exact_name_first() {
        let docs: Vec<(String, String)> =
            (0..30).map(|i| (format!("tool_{i:02}"), "list things".to_string())).collect();
        let ix = SearchIndex::new(docs.iter().map(|(n, d)| Document { name: n, description: d }));
        let got = names(&ix, "list");
        assert_eq!(got.len(), 10);
        assert_eq!(got[0], "tool_00");
        assert_eq!(names(&ix, "tool_17")[0], "tool_17");
        assert!(names(&ix, "zzzz").is_empty());
        assert!(names(&ix, "").is_empty());
    }

    #[test]
    fn more_query_words_matched_rank_higher() {
        let ix = index(&[("list_issues", "List issues of a repository."), ("list_pulls", "List pull requests.")]);
        assert_eq!(names(&ix, "list issues")[0], "list_issues");
    }

    #[test]
    fn nearest_names_by_edit_distance() {
        let all = ["mcp__notion__search", "mcp__notion__fetch", "mcp__github__search"];
        assert_eq!(nearest_names("mcp__notion__serch", all, 5), all);
        assert_eq!(nearest_names("mcp__notion__serch", all, 1), ["mcp__notion__search"]);
        assert!(nearest_names("zzz", all, 5).is_empty());
    }
}
