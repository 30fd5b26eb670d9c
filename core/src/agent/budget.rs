//! Hard limits on what one run may spend: tokens, and cost by a per-model price table.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::model::{Price, PriceTable, Usage};

/// The budgets of a run. Absent: no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The most tokens a run may use: input, output, cache-read and cache-write together.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// The most a run may cost, in the unit of the price table.
    #[serde(default)]
    pub max_cost: Option<f64>,
}

impl Budget {
    pub(crate) fn validate(&self, model: &str, prices: &PriceTable) -> Result<(), Error> {
        if let Some(c) = self.max_cost {
            if !(c.is_finite() && c >= 0.0) {
                return Err(Error::Config(format!("max_cost must be a non-negative number, got {c}")));
            }
            if !prices.contains_key(model) {
                return Err(Error::Config(format!(
                    "max_cost is set but the price table has no price for the model '{model}'"
                )));
            }
        }
        for (m, p) in prices {
            p.validate(m).map_err(Error::Config)?;
        }
        Ok(())
    }

    /// Checked after every model request: a run that has gone past a budget stops, with what it used.
    pub(crate) fn check(&self, usage: &Usage, cost: Option<f64>) -> Result<(), Error> {
        let tokens = budget_tokens(usage);
        if let Some(max) = self.max_tokens
            && tokens > max
        {
            return Err(Error::Budget {
                budget: "tokens".into(),
                limit: max as f64,
                spent: tokens as f64,
                usage: *usage,
                cost,
            });
        }
        if let (Some(max), Some(spent)) = (self.max_cost, cost)
            && spent > max
        {
            return Err(Error::Budget { budget: "cost".into(), limit: max, spent, usage: *usage, cost });
        }
        Ok(())
    }
}

/// Every token a run was billed for.
pub fn budget_tokens(u: &Usage) -> u64 {
    // Saturating: the counts are the provider's word, and a wrapped sum would slip under the budget.
    [u.output_tokens, u.cache_read_tokens, u.cache_write_tokens]
        .iter()
        .fold(u.input_tokens, |a, b| a.saturating_add(*b))
}

/// The cost of `usage` at the model's price, when the table has one.
pub(crate) fn cost_of(prices: &PriceTable, model: &str, usage: &Usage) -> Option<f64> {
    prices.get(model).map(|p: &Price| p.cost(usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_budget_names_the_budget() {
        let u =
            Usage { requests: 1, input_tokens: 60, output_tokens: 30, cache_read_tokens: 10, cache_write_tokens: 1 };
        let b = Budget { max_tokens: Some(100), max_cost: None };
        let e = b.check(&u, None).unwrap_err();
        assert_eq!(e.code(), "budget_exceeded");
        assert!(e.to_string().contains("tokens budget of 100"), "{e}");
        assert!(Budget { max_tokens: Some(101), max_cost: None }.check(&u, None).is_ok());
        let e = Budget { max_tokens: None, max_cost: Some(0.5) }.check(&u, Some(0.75)).unwrap_err();
        assert!(e.to_string().contains("cost budget of 0.5"), "{e}");
    }
}
