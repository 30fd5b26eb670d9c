//! ambit's own full-text index and score, the same on both stores, so a recall can stop early.
//!
//! Each memory's words (title, body and tags; letters and digits, lower case, stemmed as English, stop
//! words left out, see [`super::rules::searchable`]) become postings: one per distinct term, holding the
//! term's *impact* in that memory, a BM25F weight (title counts 10, tags 5, body 1; saturation `K1`,
//! length normalisation `B` against a fixed [`REFERENCE_LENGTH`]). A memory's relevance to a query is
//! the sum over the query's terms of the term's inverse document frequency (in the agent's namespace)
//! times its impact there. Impacts depend on the memory alone, so each term's postings are kept ordered
//! by impact and a recall reads only their heads: it scores the memories met so far completely and
//! stops once the `limit`-th best beats the best any unread memory could reach (the sum of the terms'
//! last impacts read; the threshold algorithm). Scores are computed here, in `f64` from integer impacts
//! and counts, so both stores rank alike to the last bit.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

use super::rules;

/// How much a term counts in each field (FTS5-style column weights).
const TITLE_WEIGHT: f64 = 10.0;
const TAGS_WEIGHT: f64 = 5.0;
const BODY_WEIGHT: f64 = 1.0;
/// BM25's term-frequency saturation and length normalisation.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// The length (in words) a memory's length is normalised against. Fixed, not the store's running
/// average, so a posting's impact never changes after it is written and the ordered lists stay ordered.
pub const REFERENCE_LENGTH: f64 = 40.0;
/// Impacts are stored as integers, this many per unit, so every store keeps them exactly.
const IMPACT_SCALE: f64 = 1_000_000.0;

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The words of a text, lower case (every word, searchable or not).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The indexed form of a lower-case searchable word.
fn stem(word: &str) -> String {
    stemmer().stem(word).into_owned()
}

/// The terms of a query (from [`rules::terms`]) as the index keeps them: stemmed, each once, in order.
pub fn query_terms(terms: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in terms {
        let s = stem(t);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// A memory's postings: each distinct term with its impact, sorted by term.
pub fn postings(title: &str, body: &str, tags_text: &str) -> Vec<(String, i64)> {
    let mut weighted: HashMap<String, f64> = HashMap::new();
    let mut length = 0usize;
    for (text, weight) in [(title, TITLE_WEIGHT), (tags_text, TAGS_WEIGHT), (body, BODY_WEIGHT)] {
        for w in words(text) {
            length += 1;
            if rules::searchable(&w) {
                *weighted.entry(stem(&w)).or_insert(0.0) += weight;
            }
        }
    }
    let norm = K1 * (1.0 - B + B * length as f64 / REFERENCE_LENGTH);
    let mut out: Vec<(String, i64)> = weighted
        .into_iter()
        .map(|(term, tf)| {
            let impact = tf * (K1 + 1.0) / (tf + norm);
            (term, (impact * IMPACT_SCALE).round() as i64)
        })
        .collect();
    out.sort();
    out
}

/// The inverse document frequency of a term held by `df` of an agent's `n` memories (BM25's, kept
/// positive).
pub fn idf(n: i64, df: i64) -> f64 {
    let (n, df) = (n.max(df).max(0) as f64, df.max(0) as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// A query against the index: its terms' ids in the agent's namespace and their weights, in the
/// query's order.
#[derive(Debug, Clone)]
pub struct Query {
    pub term_ids: Vec<i64>,
    pub idf: Vec<f64>,
}

impl Query {
    /// The relevance of a memory with these impacts (one per term, 0 where it lacks the term). Summed in
    /// term order, so a larger impact never gives a smaller sum: the bound of [`settled`] is exact.
    pub fn score(&self, impacts: &[i64]) -> f64 {
        self.idf.iter().zip(impacts).fold(0.0, |sum, (w, i)| sum + w * (*i as f64 / IMPACT_SCALE))
    }

    /// The position of a term id in the query.
    pub fn position(&self, term_id: i64) -> Option<usize> {
        self.term_ids.iter().position(|t| *t == term_id)
    }
}

/// A memory met in a term's list, scored over every term of the query.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: i64,
    pub pinned: i64,
    pub salience: i64,
    pub updated_at: i64,
    pub score: f64,
}

/// The order of a recall with a query: higher score, then the baseline's tiebreak (pinned, higher
/// salience, later update, higher id).
fn order(a: &Candidate, b: &Candidate) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then(b.pinned.cmp(&a.pinned))
        .then(b.salience.cmp(&a.salience))
        .then(b.updated_at.cmp(&a.updated_at))
        .then(b.id.cmp(&a.id))
}

/// Sorts scored candidates, best first (score, then the baseline's tiebreak).
pub fn order_scored(mut candidates: Vec<Candidate>) -> Vec<Candidate> {
    candidates.sort_by(order);
    candidates
}

/// Scores the candidates (each with its impacts) and sorts them, best first.
#[cfg(test)]
fn rank(query: &Query, candidates: impl IntoIterator<Item = (Candidate, Vec<i64>)>) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = candidates
        .into_iter()
        .map(|(mut c, impacts)| {
            c.score = query.score(&impacts);
            c
        })
        .collect();
    out.sort_by(order);
    out
}

/// The memories met in the lists that could still be among the first `limit`, to be scored completely.
/// `seen` holds, per memory, the impacts read for it (per term, `None` where its list did not reach
/// it); `frontier` is as for [`settled`]; `exact` holds the scores of the memories known whole. A
/// memory's score is at least its known impacts' sum and at most that plus the frontier of each term not
/// read for it; every memory whose most is below the `limit`-th largest least is left out (strictly
/// below: it cannot tie). With fewer than `limit` met, all.
pub fn survivors(
    query: &Query,
    seen: &HashMap<i64, Vec<Option<i64>>>,
    frontier: &[Option<i64>],
    exact: &HashMap<i64, f64>,
    limit: usize,
) -> Vec<i64> {
    let bounds: Vec<(i64, f64, f64)> = seen
        .iter()
        .map(|(id, known)| {
            if let Some(score) = exact.get(id) {
                return (*id, *score, *score);
            }
            let least: Vec<i64> = known.iter().map(|k| k.unwrap_or(0)).collect();
            let most: Vec<i64> = known.iter().zip(frontier).map(|(k, f)| k.unwrap_or_else(|| f.unwrap_or(0))).collect();
            (*id, query.score(&least), query.score(&most))
        })
        .collect();
    if bounds.len() <= limit {
        return bounds.into_iter().map(|(id, _, _)| id).collect();
    }
    let mut leasts: Vec<f64> = bounds.iter().map(|b| b.1).collect();
    leasts.sort_by(|a, b| b.total_cmp(a));
    let threshold = leasts[limit - 1];
    bounds.into_iter().filter(|b| b.2 >= threshold).map(|(id, _, _)| id).collect()
}

/// Whether the first `limit` of `ranked` are the true first `limit`. `frontier` holds, per term, the
/// last impact read from its list, or `None` when the list was read to its end. A memory not among the
/// candidates was not read in any list, so each of its impacts is at most that term's frontier; the
/// result is settled when every list was read whole, or when the `limit`-th candidate scores strictly
/// more than that bound (strictly: an unread memory of equal score could win the tiebreak).
#[cfg(test)]
fn settled(query: &Query, ranked: &[Candidate], limit: usize, frontier: &[Option<i64>]) -> bool {
    settled_at(query, ranked.get(limit.max(1) - 1).map(|c| c.score), frontier)
}

/// [`settled`] given the `limit`-th best score (`None` when fewer were met).
pub fn settled_at(query: &Query, kth: Option<f64>, frontier: &[Option<i64>]) -> bool {
    if frontier.iter().all(Option::is_none) {
        return true;
    }
    let bound: Vec<i64> = frontier.iter().map(|f| f.unwrap_or(0)).collect();
    kth.is_some_and(|k| k > query.score(&bound))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: i64, impacts: Vec<i64>) -> (Candidate, Vec<i64>) {
        (Candidate { id, pinned: 0, salience: 5, updated_at: 0, score: 0.0 }, impacts)
    }

    #[test]
    fn postings_stem_weigh_fields_and_leave_out_stop_words() {
        let p = postings("Deploying releases", "We deploy on Tuesdays; the release is deployed.", "deploy");
        let terms: Vec<&str> = p.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(terms, ["deploy", "releas", "tuesday"]);
        let impact = |t: &str| p.iter().find(|(x, _)| x == t).map(|(_, i)| *i).unwrap();
        // deploy: title + tags + twice in the body; releas: title + body; tuesday: body once.
        assert!(impact("deploy") > impact("releas") && impact("releas") > impact("tuesday"));
        assert_eq!(query_terms(&["deployed".into(), "deploying".into(), "tuesdays".into()]), ["deploy", "tuesday"]);
    }

    #[test]
    fn a_longer_memory_weighs_a_term_less_and_rarer_terms_weigh_more() {
        let short = postings("", "billing", "");
        let long = postings("", &format!("billing {}", "word ".repeat(80)), "");
        assert!(short[0].1 > long.iter().find(|(t, _)| t == "bill").unwrap().1);
        assert!(idf(1000, 3) > idf(1000, 300));
        assert!(idf(10, 10) > 0.0);
    }

    #[test]
    fn settled_only_when_the_kth_beats_every_unread_memory() {
        let q = Query { term_ids: vec![1, 2], idf: vec![1.0, 1.0] };
        let ranked = rank(&q, [candidate(1, vec![900_000, 900_000]), candidate(2, vec![500_000, 0])]);
        assert_eq!(ranked[0].id, 1);
        // An unread memory could score at most 0.4 + 0.4 = 0.8 < 1.8: the first is settled.
        assert!(settled(&q, &ranked, 1, &[Some(400_000), Some(400_000)]));
        // ... but not the second (0.5 < 0.8), nor a tie at the bound.
        assert!(!settled(&q, &ranked, 2, &[Some(400_000), Some(400_000)]));
        assert!(!settled(&q, &ranked, 1, &[Some(900_000), Some(900_000)]));
        // Fewer candidates than the limit: settled only when every list was read whole.
        assert!(!settled(&q, &ranked, 3, &[None, Some(1)]));
        assert!(settled(&q, &ranked, 3, &[None, None]));
    }

    #[test]
    fn survivors_leave_out_only_memories_that_cannot_reach_the_kth() {
        let q = Query { term_ids: vec![1, 2], idf: vec![1.0, 1.0] };
        let seen: HashMap<i64, Vec<Option<i64>>> = [
            (1, vec![Some(900_000), Some(900_000)]),
            (2, vec![Some(800_000), None]),
            (3, vec![None, Some(100_000)]),
            (4, vec![Some(100_000), None]),
        ]
        .into();
        // Least of the second best: 0.8; the most of 3 is 0.5 + 0.1, of 4 0.1 + 0.5: both left out.
        let none = HashMap::new();
        let mut s = survivors(&q, &seen, &[Some(500_000), Some(500_000)], &none, 2);
        s.sort();
        assert_eq!(s, [1, 2]);
        // With a higher frontier, 3 and 4 could still reach 0.8 (0.8 + 0.1 = 0.9, 0.1 + 0.8 = 0.9).
        let mut s = survivors(&q, &seen, &[Some(800_000), Some(800_000)], &none, 2);
        s.sort();
        assert_eq!(s, [1, 2, 3, 4]);
        // 2 known whole at 0.95 raises the bar above the most 3 and 4 could reach (0.9): they go.
        let exact: HashMap<i64, f64> = [(2, 0.95)].into();
        let mut s = survivors(&q, &seen, &[Some(800_000), Some(800_000)], &exact, 2);
        s.sort();
        assert_eq!(s, [1, 2]);
    }

    #[test]
    fn ties_fall_to_the_baseline_order() {
        let q = Query { term_ids: vec![1], idf: vec![1.0] };
        let (mut a, mut b) = (candidate(1, vec![5]), candidate(2, vec![5]));
        a.0.salience = 9;
        b.0.salience = 3;
        assert_eq!(rank(&q, [b.clone(), a.clone()]).iter().map(|c| c.id).collect::<Vec<_>>(), [1, 2]);
        a.0.salience = 3;
        assert_eq!(rank(&q, [a, b]).iter().map(|c| c.id).collect::<Vec<_>>(), [2, 1]);
    }
}
