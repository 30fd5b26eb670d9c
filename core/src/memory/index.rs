//! ambit's own full-text index and score, the same on both stores, so a recall can stop early.
//!
//! Each memory's words (title, body and tags; letters and digits, lower case, stemmed as English, stop
//! words left out, see [`super::rules::searchable`]) become postings: one per distinct term, holding the
//! term's *impact* in that memory, a BM25F weight (title counts 10, tags 5, body 1; saturation `K1`,
//! length normalisation `B` against a fixed [`REFERENCE_LENGTH`]). A memory's relevance to a query is
//! the sum over the query's terms of the term's inverse document frequency (in the agent's namespace)
//! times its impact there. Impacts depend on the memory alone; each term's postings are kept
//! in blocks, one row per term and [`BUCKET`] of memory ids, and a recall reads its terms' blocks whole
//! (a few rows a term) and scores every memory met here, in `f64` from integer impacts and counts, so
//! both stores rank alike to the last bit.

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
/// query's order (a term the namespace lacks keeps its place, id 0 and weight 0).
#[derive(Debug, Clone)]
pub struct Query {
    pub term_ids: Vec<i64>,
    pub idf: Vec<f64>,
}

impl Query {
    /// The relevance of a memory with these impacts (one per term, 0 where it lacks the term). Summed in
    /// term order, from 0, so a memory's blocks can be summed a term at a time to the same bits.
    #[cfg(test)]
    fn score(&self, impacts: &[i64]) -> f64 {
        self.idf.iter().zip(impacts).fold(0.0, |sum, (w, i)| sum + w * (*i as f64 / IMPACT_SCALE))
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

/// How many consecutive memory ids share one block of a term's list: a term's postings are packed into
/// one row per bucket of ids (`id / BUCKET`), so a list of 35,000 postings over 100,000 memories is 25
/// rows, and a write rewrites one small row per term.
pub const BUCKET: i64 = 4_096;
/// The bytes of one posting in a block: the memory id's offset in its bucket (`u16`, little-endian) and
/// the term's impact there (`u32`, little-endian; an impact is at most `(K1 + 1) * IMPACT_SCALE`).
const POSTING_BYTES: usize = 6;

/// The bucket (block) of a memory id.
pub fn bucket(id: i64) -> i64 {
    id.div_euclid(BUCKET)
}

/// The postings of a block: (memory id, impact), in memory id order.
pub fn decode_block(bucket: i64, data: &[u8]) -> Vec<(i64, i64)> {
    data.chunks_exact(POSTING_BYTES)
        .map(|c| {
            let offset = u16::from_le_bytes([c[0], c[1]]);
            let impact = u32::from_le_bytes([c[2], c[3], c[4], c[5]]);
            (bucket * BUCKET + i64::from(offset), i64::from(impact))
        })
        .collect()
}

/// A block's bytes from its postings (every id of the one bucket), sorted by memory id.
pub fn encode_block(postings: &mut [(i64, i64)]) -> Vec<u8> {
    postings.sort_unstable();
    let mut out = Vec::with_capacity(postings.len() * POSTING_BYTES);
    for (id, impact) in postings.iter() {
        let offset = id.rem_euclid(BUCKET) as u16;
        let impact = (*impact).clamp(0, i64::from(u32::MAX)) as u32;
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&impact.to_le_bytes());
    }
    out
}

/// Every memory holding a term of the query, with its score: `blocks` holds each block read, as (the
/// term's position in the query, bucket, bytes). A bucket's blocks are summed into one array of scores
/// in the query's term order, so each memory's score is exactly [`Query::score`] of its impacts (adding
/// the 0 of a missing term changes no sum), on both stores alike.
pub fn score_blocks(query: &Query, mut blocks: Vec<(usize, i64, Vec<u8>)>) -> Vec<(f64, i64)> {
    blocks.sort_unstable_by_key(|(position, bucket, _)| (*bucket, *position));
    let mut sums = vec![0.0f64; BUCKET as usize];
    let mut met = vec![false; BUCKET as usize];
    let mut touched: Vec<usize> = Vec::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let current = blocks[i].1;
        while i < blocks.len() && blocks[i].1 == current {
            let (position, _, data) = &blocks[i];
            let w = query.idf[*position];
            for c in data.chunks_exact(POSTING_BYTES) {
                let offset = usize::from(u16::from_le_bytes([c[0], c[1]])) % BUCKET as usize;
                let impact = u32::from_le_bytes([c[2], c[3], c[4], c[5]]);
                if !met[offset] {
                    met[offset] = true;
                    touched.push(offset);
                }
                sums[offset] += w * (f64::from(impact) / IMPACT_SCALE);
            }
            i += 1;
        }
        for offset in touched.drain(..) {
            out.push((sums[offset], current * BUCKET + offset as i64));
            sums[offset] = 0.0;
            met[offset] = false;
        }
    }
    out
}

/// Moves the best of `candidates` (by score) to its front and returns how many: at least `want` of them
/// (all when fewer), and every candidate tied with the last of those, so the tiebreak can order them.
pub fn best_first(candidates: &mut [(f64, i64)], want: usize) -> usize {
    if want == 0 {
        return 0;
    }
    if candidates.len() <= want {
        return candidates.len();
    }
    let by_score = |a: &(f64, i64), b: &(f64, i64)| b.0.total_cmp(&a.0);
    candidates.select_nth_unstable_by(want - 1, by_score);
    let bar = candidates[want - 1].0;
    let mut end = want;
    for i in want..candidates.len() {
        if candidates[i].0.total_cmp(&bar) != Ordering::Less {
            candidates.swap(i, end);
            end += 1;
        }
    }
    end
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
    fn blocks_round_trip_and_score_exactly_as_the_impacts_do() {
        let mut a = [(BUCKET + 7, 1_200_000), (BUCKET + 3, 5), (BUCKET * 2 - 1, 2_200_000)];
        let data = encode_block(&mut a);
        assert_eq!(decode_block(1, &data), [(BUCKET + 3, 5), (BUCKET + 7, 1_200_000), (BUCKET * 2 - 1, 2_200_000)]);
        let q = Query { term_ids: vec![10, 20], idf: vec![1.7, 0.3] };
        let b = encode_block(&mut [(BUCKET + 7, 400_000), (BUCKET + 9, 900_000)]);
        let c = encode_block(&mut [(3, 900_000)]);
        // Blocks come in any order; each memory scores its impacts in query order.
        let mut scored = score_blocks(&q, vec![(1, 1, b), (1, 0, c), (0, 1, data)]);
        scored.sort_by_key(|s| s.1);
        let expect = |i: &[i64]| q.score(i);
        assert_eq!(
            scored,
            [
                (expect(&[0, 900_000]), 3),
                (expect(&[5, 0]), BUCKET + 3),
                (expect(&[1_200_000, 400_000]), BUCKET + 7),
                (expect(&[0, 900_000]), BUCKET + 9),
                (expect(&[2_200_000, 0]), BUCKET * 2 - 1),
            ]
        );
    }

    #[test]
    fn best_first_keeps_every_tie_of_the_last() {
        let mut c = vec![(1.0, 1), (3.0, 2), (2.0, 3), (2.0, 4), (0.5, 5), (2.0, 6)];
        let n = best_first(&mut c, 2);
        let mut ids: Vec<i64> = c[..n].iter().map(|x| x.1).collect();
        ids.sort();
        // The second best is 2.0, which 3, 4 and 6 share: all three come along; 1 and 5 do not.
        assert_eq!(ids, [2, 3, 4, 6]);
        assert_eq!(best_first(&mut c, 1), 1);
        assert_eq!(best_first(&mut c, 10), 6);
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
