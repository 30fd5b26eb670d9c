//! Ranking quality, measured: 212 memories of a small company's working life and 62 questions asked the
//! way an agent asks them (paraphrased, rarely in the memory's own words), each with the memories that
//! answer it (tests/memory/*.tsv). recall@5 is the share of expected memories found in the first five
//! results, averaged over the questions; the goal is 0.9 on both stores. The negative control scores
//! the baseline order (no query) with the same measure and must fall far below it.

#[path = "ledger_support/mod.rs"]
mod ledger_support;

use std::collections::HashMap;
use std::sync::Arc;

use ambit::memory::{ManualClock, Memory, MemoryKind, MemoryOptions, Recall, Remember};
use ledger_support::{T0, postgres_store, sqlite_store};

const MEMORIES: [&str; 3] = [
    include_str!("../../tests/memory/memories_a.tsv"),
    include_str!("../../tests/memory/memories_b.tsv"),
    include_str!("../../tests/memory/memories_c.tsv"),
];
const QUERIES: &str = include_str!("../../tests/memory/queries.tsv");
const GOAL: f64 = 0.9;

/// (name, memory) for every line of the memory files: name, kind, salience, title, body, tags.
fn memories() -> Vec<(String, Remember)> {
    MEMORIES
        .iter()
        .flat_map(|f| f.lines())
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "six fields: {l}");
            let kind = MemoryKind::parse("kind", f[1]).unwrap();
            let m = Remember::new(f[4])
                .title(f[3])
                .kind(kind)
                .salience(f[2].parse().unwrap())
                .tags(f[5].split(',').filter(|t| !t.is_empty()))
                .key(f[0]);
            (f[0].to_string(), m)
        })
        .collect()
}

fn queries() -> Vec<(String, Vec<String>)> {
    QUERIES
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (q, expected) = l.split_once('\t').unwrap();
            (q.to_string(), expected.split(',').map(str::to_string).collect())
        })
        .collect()
}

/// recall@5 of `rank` over every query, and the queries that missed.
async fn recall_at_5(mem: &Memory, by_id: &HashMap<i64, String>, baseline: bool) -> (f64, Vec<String>) {
    let qs = queries();
    let mut total = 0.0;
    let mut misses = Vec::new();
    for (q, expected) in &qs {
        let recall = if baseline { Recall::baseline().limit(5) } else { Recall::query(q).limit(5) };
        let top: Vec<String> =
            mem.recall("company", &recall).await.unwrap().iter().map(|m| by_id[&m.id].clone()).collect();
        let found = expected.iter().filter(|e| top.contains(e)).count();
        total += found as f64 / expected.len() as f64;
        if found < expected.len() {
            misses.push(format!("{q:?}: expected {expected:?}, got {top:?}"));
        }
    }
    (total / qs.len() as f64, misses)
}

#[tokio::test]
async fn recall_at_5_meets_the_goal_on_both_stores() {
    let ms = memories();
    assert!(ms.len() >= 200, "{} memories", ms.len());
    assert!(queries().len() >= 50);
    let names: std::collections::HashSet<&String> = ms.iter().map(|(n, _)| n).collect();
    for (q, expected) in queries() {
        assert!(expected.iter().all(|e| names.contains(e)), "{q}: unknown expected {expected:?}");
    }
    let mut tops = Vec::new();
    for s in [sqlite_store().await, postgres_store().await] {
        let options = MemoryOptions { clock: Arc::new(ManualClock::new(T0)), ..MemoryOptions::default() };
        let mem = Memory::open_with(&s.url, options).await.unwrap();
        let mut by_id = HashMap::new();
        for (name, m) in memories() {
            by_id.insert(mem.remember("company", m).await.unwrap().memory.id, name);
        }
        let (score, misses) = recall_at_5(&mem, &by_id, false).await;
        let (control, _) = recall_at_5(&mem, &by_id, true).await;
        println!("recall@5 {}: {score:.3} (baseline order, the control: {control:.3})", s.name);
        for m in &misses {
            println!("  miss on {}: {m}", s.name);
        }
        assert!(score >= GOAL, "{}: recall@5 {score:.3} is below {GOAL}: {misses:#?}", s.name);
        // Negative control: the same measure over an order that ignores the query is far below the goal.
        assert!(control < 0.2, "{}: the control scored {control:.3}", s.name);
        let mut top1 = Vec::new();
        for (q, _) in queries() {
            let hits = mem.recall("company", &Recall::query(&q).limit(1)).await.unwrap();
            top1.push(hits.first().map(|m| by_id[&m.id].clone()));
        }
        tops.push(top1);
    }
    let agree = tops[0].iter().zip(&tops[1]).filter(|(a, b)| a == b).count();
    println!("top result the same on both stores for {agree} of {} queries", tops[0].len());
}
