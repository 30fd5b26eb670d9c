//! The reach a named agent runs with when another agent delegates to it (issue 21): its own level,
//! scope and network met with the caller's at that moment. The callee reaches only what both reach, so
//! a delegation never widens the caller; a pure function over plain data, like [`super::narrow`].

use std::path::{Path, PathBuf};

use super::scope::SYSTEM_DIRS;
use super::{Level, Network, Scope};

/// What one agent reaches: its level, its directories and its network.
#[derive(Debug, Clone, PartialEq)]
pub struct Reach {
    /// The permission level.
    pub level: Level,
    /// The directories.
    pub scope: Scope,
    /// The network setting.
    pub network: Network,
}

impl Reach {
    /// Whether this reach may write under `path` (resolved): the rule of [`super::narrow::Grant`].
    pub fn can_write(&self, path: &Path) -> bool {
        may_write(self.level, &self.scope, path)
    }

    /// Whether this reach may read under `path` (resolved).
    pub fn can_read(&self, path: &Path) -> bool {
        may_read(self.level, &self.scope, path)
    }
}

/// Whether an agent at `level` with `scope` may write under `path` (resolved): the one rule a sub-agent's
/// grant and a delegation's reach both use.
pub(crate) fn may_write(level: Level, scope: &Scope, path: &Path) -> bool {
    match level {
        Level::Unrestricted => true,
        Level::Workspace => scope.workspace_roots().any(|r| path.starts_with(r)),
        Level::Read | Level::None => false,
    }
}

/// Whether an agent at `level` with `scope` may read under `path` (resolved). At `none` it reads nothing;
/// at `unrestricted` nothing is confined (its shell reads anywhere).
pub(crate) fn may_read(level: Level, scope: &Scope, path: &Path) -> bool {
    match level {
        Level::None => return false,
        Level::Unrestricted => return true,
        Level::Read | Level::Workspace => {}
    }
    !scope.confine_reads
        || scope.workspace_roots().any(|r| path.starts_with(r))
        || scope.readable_dirs.iter().any(|r| path.starts_with(r))
        || SYSTEM_DIRS.iter().any(|r| path.starts_with(r))
}

/// A set of directory trees: everything, or the trees under some roots.
#[derive(Debug, Clone, PartialEq)]
enum Trees {
    All,
    Roots(Vec<PathBuf>),
}

impl Trees {
    fn holds(&self, path: &Path) -> bool {
        match self {
            Trees::All => true,
            Trees::Roots(roots) => roots.iter().any(|r| path.starts_with(r)),
        }
    }

    /// What both hold: two trees meet in the deeper one when one holds the other, else not at all.
    fn meet(&self, other: &Trees) -> Trees {
        match (self, other) {
            (Trees::All, x) | (x, Trees::All) => x.clone(),
            (Trees::Roots(a), Trees::Roots(b)) => {
                let mut out: Vec<PathBuf> = Vec::new();
                for x in a {
                    for y in b {
                        let deeper = if x.starts_with(y) {
                            x
                        } else if y.starts_with(x) {
                            y
                        } else {
                            continue;
                        };
                        if !out.iter().any(|o| deeper.starts_with(o)) {
                            out.retain(|o| !o.starts_with(deeper));
                            out.push(deeper.clone());
                        }
                    }
                }
                Trees::Roots(out)
            }
        }
    }
}

fn writable(r: &Reach) -> Trees {
    match r.level {
        Level::Unrestricted => Trees::All,
        Level::Workspace => Trees::Roots(r.scope.workspace_roots().map(Path::to_path_buf).collect()),
        Level::Read | Level::None => Trees::Roots(Vec::new()),
    }
}

/// The trees a reach reads beyond the system directories (which every confined reach above `none`
/// reads).
fn readable(r: &Reach) -> Trees {
    match r.level {
        Level::None => Trees::Roots(Vec::new()),
        Level::Unrestricted => Trees::All,
        Level::Read | Level::Workspace if !r.scope.confine_reads => Trees::All,
        Level::Read | Level::Workspace => Trees::Roots(
            r.scope.workspace_roots().map(Path::to_path_buf).chain(r.scope.readable_dirs.iter().cloned()).collect(),
        ),
    }
}

/// The reach a callee runs with for a caller: the lower level, the narrower network, and only the
/// directories both reach. The callee keeps its own working directory when the result still reaches
/// it; otherwise it works in the first directory left (a level with nothing left to write drops to
/// `read`, one with nothing left to read to `none`).
pub fn intersect(caller: &Reach, callee: &Reach) -> Reach {
    let network = caller.network.min(callee.network);
    let mut level = caller.level.min(callee.level);
    if level == Level::Unrestricted {
        // Both reach everything.
        return Reach { level, scope: callee.scope.clone(), network };
    }
    let write = if level == Level::Workspace { writable(caller).meet(&writable(callee)) } else { Trees::Roots(vec![]) };
    let read = readable(caller).meet(&readable(callee));
    let own = callee.scope.working_dir.clone();
    let first = |t: &Trees| match t {
        Trees::Roots(r) => r.first().cloned(),
        Trees::All => None,
    };
    if level == Level::Workspace && write == Trees::Roots(vec![]) {
        level = Level::Read;
    }
    let working_dir = match level {
        Level::Workspace if write.holds(&own) => own,
        Level::Workspace => first(&write).unwrap_or(own),
        Level::Read if read.holds(&own) => own,
        Level::Read => match first(&read) {
            Some(d) => d,
            None => {
                level = Level::None;
                own
            }
        },
        Level::None | Level::Unrestricted => own,
    };
    let workspace_dirs: Vec<PathBuf> = match (&write, level) {
        (Trees::Roots(roots), Level::Workspace) => {
            roots.iter().filter(|r| !r.starts_with(&working_dir)).cloned().collect()
        }
        _ => Vec::new(),
    };
    let (readable_dirs, confine_reads) = match &read {
        Trees::All => (Vec::new(), false),
        Trees::Roots(roots) => {
            let held = |d: &PathBuf| {
                d.starts_with(&working_dir)
                    || (level == Level::Workspace && workspace_dirs.iter().any(|w| d.starts_with(w)))
            };
            (roots.iter().filter(|d| !held(d)).cloned().collect(), true)
        }
    };
    Reach { level, scope: Scope { working_dir, workspace_dirs, readable_dirs, confine_reads }, network }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64, as the narrowing property test uses.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len() as u64) as usize]
        }
    }

    const DIRS: [&str; 10] = ["/", "/w", "/w/a", "/w/a/b", "/w/c", "/r", "/r/x", "/o", "/o/p", "/usr/lib"];
    const PROBES: [&str; 13] = [
        "/",
        "/w",
        "/w/a",
        "/w/a/b/f",
        "/w/c/f",
        "/w/f",
        "/r/f",
        "/r/x/f",
        "/o/f",
        "/o/p/f",
        "/usr/lib/f",
        "/z",
        "/w/a/f",
    ];
    const LEVELS: [Level; 4] = [Level::None, Level::Read, Level::Workspace, Level::Unrestricted];
    const NETWORKS: [Network; 3] = [Network::None, Network::Remote, Network::Unrestricted];

    fn random_reach(r: &mut Rng) -> Reach {
        let dirs = |r: &mut Rng| (0..r.below(3)).map(|_| PathBuf::from(r.pick(&DIRS))).collect::<Vec<_>>();
        Reach {
            level: *r.pick(&LEVELS),
            scope: Scope {
                working_dir: PathBuf::from(r.pick(&DIRS)),
                workspace_dirs: dirs(r),
                readable_dirs: dirs(r),
                confine_reads: r.below(2) == 0,
            },
            network: *r.pick(&NETWORKS),
        }
    }

    /// The property: the callee's effective reach is inside the caller's and inside its own.
    fn within(eff: &Reach, caller: &Reach, callee: &Reach) -> Result<(), String> {
        for (who, other) in [("caller", caller), ("callee", callee)] {
            if eff.level > other.level {
                return Err(format!("level {} is above the {who}'s {}", eff.level, other.level));
            }
            if eff.network > other.network {
                return Err(format!("network {} is wider than the {who}'s {}", eff.network, other.network));
            }
            for p in PROBES.iter().map(Path::new) {
                if eff.can_write(p) && !other.can_write(p) {
                    return Err(format!("writes {} which the {who} cannot", p.display()));
                }
                if eff.can_read(p) && !other.can_read(p) {
                    return Err(format!("reads {} which the {who} cannot", p.display()));
                }
            }
        }
        Ok(())
    }

    fn check(with: impl Fn(&Reach, &Reach) -> Reach, cases: u32, seed: u64) -> Result<u32, String> {
        let mut r = Rng(seed);
        let mut narrowed = 0;
        for n in 0..cases {
            let (caller, callee) = (random_reach(&mut r), random_reach(&mut r));
            let eff = with(&caller, &callee);
            within(&eff, &caller, &callee)
                .map_err(|e| format!("case {n}: {e}\ncaller {caller:?}\ncallee {callee:?}\neffective {eff:?}"))?;
            narrowed += u32::from(eff != callee);
        }
        Ok(narrowed)
    }

    fn seed() -> u64 {
        std::env::var("AMBIT_REACH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7)
        })
    }

    #[test]
    fn a_delegation_never_widens_the_callers_reach() {
        let seed = seed();
        let narrowed = check(intersect, 20_000, seed).unwrap_or_else(|e| panic!("AMBIT_REACH_SEED={seed}: {e}"));
        // The cases are not all trivial: many callees were narrowed by their caller.
        assert!(narrowed > 1_000, "only {narrowed} callees were narrowed (seed {seed})");
    }

    #[test]
    fn negative_control_the_callees_own_reach_fails_the_property() {
        let seed = seed();
        let err = check(|_caller, callee| callee.clone(), 20_000, seed)
            .expect_err("running the callee on its own reach must widen some caller");
        assert!(err.contains("caller"), "{err}");
    }

    #[test]
    fn the_callee_keeps_its_working_directory_inside_the_callers_workspace() {
        let caller = Reach {
            level: Level::Workspace,
            scope: Scope {
                working_dir: "/w".into(),
                workspace_dirs: vec![],
                readable_dirs: vec![],
                confine_reads: true,
            },
            network: Network::Remote,
        };
        let callee = Reach {
            level: Level::Unrestricted,
            scope: Scope {
                working_dir: "/w/a".into(),
                workspace_dirs: vec!["/o".into()],
                readable_dirs: vec![],
                confine_reads: false,
            },
            network: Network::Unrestricted,
        };
        let eff = intersect(&caller, &callee);
        assert_eq!(eff.level, Level::Workspace);
        assert_eq!(eff.network, Network::Remote);
        assert_eq!(eff.scope.working_dir, PathBuf::from("/w/a"));
        assert!(eff.can_write(Path::new("/w/a/f")) && !eff.can_write(Path::new("/o/f")));
        assert!(!eff.can_read(Path::new("/o/f")), "the caller reads nothing outside /w");
    }

    #[test]
    fn nothing_in_common_leaves_nothing_to_write() {
        let at = |level, wd: &str| Reach {
            level,
            scope: Scope { working_dir: wd.into(), workspace_dirs: vec![], readable_dirs: vec![], confine_reads: true },
            network: Network::Unrestricted,
        };
        let eff = intersect(&at(Level::Workspace, "/w"), &at(Level::Workspace, "/o"));
        assert_eq!(eff.level, Level::None, "{eff:?}");
        assert!(!eff.can_read(Path::new("/o/f")) && !eff.can_write(Path::new("/w/f")));
    }
}
