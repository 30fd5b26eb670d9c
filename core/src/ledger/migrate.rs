//! The ledger's schema migrations, applied on open by the crate's one migration runner (`crate::migrate`).

use crate::migrate::Plan;

pub(super) const PLAN: Plan = Plan {
    table: "ambit_ledger_migrations",
    pg_lock: 7411001,
    sqlite: &[
        (1, "work_ledger", include_str!("../../migrations/sqlite/0001_work_ledger.sql")),
        (2, "claim_secrets", include_str!("../../migrations/sqlite/0002_claim_secrets.sql")),
    ],
    postgres: &[
        (1, "work_ledger", include_str!("../../migrations/postgres/0001_work_ledger.sql")),
        (2, "claim_secrets", include_str!("../../migrations/postgres/0002_claim_secrets.sql")),
        (3, "claim_function", include_str!("../../migrations/postgres/0003_claim_function.sql")),
        (4, "claim_fresh_once", include_str!("../../migrations/postgres/0004_claim_fresh_once.sql")),
    ],
};
