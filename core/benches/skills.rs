//! The per-turn skills index (SPEC §14) over 1,000 installed skills (goal: under 1 ms): rendered with the
//! default bound (100 entries) and with the largest (1,000, cut by the 8 KiB byte bound), from skills
//! with Agent Skills-sized descriptions and mixed priorities.
//!
//!   cargo bench -p ambit-sdk --bench skills

use ambit::skills::{DEFAULT_INDEX_ENTRIES, MAX_INDEX_ENTRIES, SkillEntry, render_index};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn skills(n: usize) -> Vec<SkillEntry> {
    (0..n)
        .map(|i| SkillEntry {
            name: format!("skill-{:04}-{}", (i * 7919) % n, ["pdf", "release", "deploy", "review"][i % 4]),
            description: format!(
                "Handles task family {i}: read the inputs, check them against the team's rules, and write the \
                 result where the user asked. Use when the request mentions topic {}.",
                i % 37
            ),
            priority: (i % 5) as i64 - 2,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let all = skills(1000);
    let mut group = c.benchmark_group("skills_index_1000");
    for entries in [DEFAULT_INDEX_ENTRIES, MAX_INDEX_ENTRIES] {
        let out = render_index(&all, entries, &[]).unwrap_or_default();
        println!("skills index of 1000 skills, {entries} entries at most: {} bytes", out.len());
        group.bench_with_input(BenchmarkId::from_parameter(entries), &entries, |b, &entries| {
            b.iter(|| std::hint::black_box(render_index(std::hint::black_box(&all), entries, &[])))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
