//! Prices per model, to turn usage into cost. The SDK ships no prices (they change); the user sets them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Usage;

/// What one model costs, in any currency unit per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    #[serde(default)]
    /// Price per million input tokens (not cached).
    pub input_per_mtok: f64,
    #[serde(default)]
    /// Price per million output tokens.
    pub output_per_mtok: f64,
    #[serde(default)]
    /// Price per million tokens read from the prompt cache.
    pub cache_read_per_mtok: f64,
    #[serde(default)]
    /// Price per million tokens written to the prompt cache.
    pub cache_write_per_mtok: f64,
}

impl Price {
    /// What `u` costs at these prices.
    pub fn cost(&self, u: &Usage) -> f64 {
        (u.input_tokens as f64 * self.input_per_mtok
            + u.output_tokens as f64 * self.output_per_mtok
            + u.cache_read_tokens as f64 * self.cache_read_per_mtok
            + u.cache_write_tokens as f64 * self.cache_write_per_mtok)
            / 1_000_000.0
    }

    /// Checks every price is finite and not negative (a refusal names the model and the field).
    pub fn validate(&self, model: &str) -> Result<(), String> {
        for (k, v) in [
            ("input_per_mtok", self.input_per_mtok),
            ("output_per_mtok", self.output_per_mtok),
            ("cache_read_per_mtok", self.cache_read_per_mtok),
            ("cache_write_per_mtok", self.cache_write_per_mtok),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("price of '{model}': {k} must be a non-negative number, got {v}"));
            }
        }
        Ok(())
    }
}

/// Prices by model name.
pub type PriceTable = BTreeMap<String, Price>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_per_million() {
        let p =
            Price { input_per_mtok: 2.0, output_per_mtok: 8.0, cache_read_per_mtok: 0.5, cache_write_per_mtok: 0.0 };
        let u = Usage {
            requests: 1,
            input_tokens: 500_000,
            output_tokens: 100_000,
            cache_read_tokens: 1_000_000,
            cache_write_tokens: 0,
        };
        assert!((p.cost(&u) - (1.0 + 0.8 + 0.5)).abs() < 1e-9);
        assert!(Price { input_per_mtok: -1.0, ..Price::default() }.validate("m").is_err());
    }
}
