//! Schemas derived from Rust types (the `schemars` feature, on by default): a typed final answer and a
//! tool's typed parameters from one `#[derive(Deserialize, JsonSchema)]`, as Python derives them from a
//! Pydantic model, Node from a zod schema and Swift from a `Codable` type. Only the schema is derived
//! here; the core's argument rule (crate::tools::args) still checks every call and every answer against
//! it, and serde reads the checked value as the type.
//!
//! The schema is `schemars`' JSON Schema 2020-12 for what deserializes as the type (a field with
//! `#[serde(default)]` or of an `Option` type is not required), without the `$schema` key no wire takes.
//! A type whose schema is in strict mode's subset (every field required, `#[serde(deny_unknown_fields)]`
//! for `additionalProperties: false`) is sent strict on the OpenAI wires ([`crate::model::strict`]).
//!
//! ```no_run
//! use ambit::derive::{output_type, typed_tool};
//! use ambit::{Agent, OpenAiChat};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! /// Where to look.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct WeatherArgs {
//!     /// The city, in English.
//!     city: String,
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Report {
//!     city: String,
//!     temperature_c: i32,
//! }
//!
//! # async fn run() -> Result<(), ambit::Error> {
//! let agent = Agent::builder()
//!     .model(OpenAiChat::new("gpt-4.1"))
//!     .tool(typed_tool("get_weather", "Current weather for a city.", |a: WeatherArgs| async move {
//!         Ok::<_, String>(format!("sunny in {}", a.city))
//!     }))
//!     .output(output_type::<Report>())
//!     .build()?;
//! let result = agent.run("Weather in Paris?").await?;
//! let report: Report = result.output_as()?;
//! println!("{} {}", report.city, report.temperature_c);
//! # Ok(())
//! # }
//! ```

use std::future::Future;

/// The `schemars` this module derives with (a program derives `JsonSchema` with `schemars = "1"` in its
/// own dependencies).
pub use schemars;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent::output::OutputType;
use crate::tools::{FnTool, tool_fn};

/// The JSON Schema of what deserializes as `T`, without `$schema`.
pub fn schema_of<T: JsonSchema>() -> Value {
    let schema = SchemaSettings::draft2020_12().for_deserialize().into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Value::Object(o) = &mut value {
        o.remove("$schema");
    }
    drop_number_formats(&mut value);
    value
}

/// The `format`s schemars writes for Rust's number types: no wire's schema dialect has them (OpenAI's
/// strict mode refuses a schema carrying one), and the argument rule does not read them.
const NUMBER_FORMATS: [&str; 13] = [
    "int8", "int16", "int32", "int64", "int", "uint8", "uint16", "uint32", "uint64", "uint", "float", "double",
    "int128",
];

/// Removes [`NUMBER_FORMATS`] everywhere in a schema (the bounds schemars writes beside them stay).
fn drop_number_formats(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("format").and_then(Value::as_str).is_some_and(|f| NUMBER_FORMATS.contains(&f)) {
                o.remove("format");
            }
            o.values_mut().for_each(drop_number_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_number_formats),
        _ => {}
    }
}

/// The output type of a run whose final answer is a `T`: named after the type (its schema name, cut to
/// what the wires take: 64 letters, digits, `_` or `-`), with `T`'s schema and the default retries.
/// Read the answer with [`crate::RunResult::output_as`]. A `T` whose schema is not an object's is
/// refused when the agent is built, as any output type is.
pub fn output_type<T: JsonSchema>() -> OutputType {
    let name: String = T::schema_name()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    OutputType::new(name, schema_of::<T>())
}

/// A tool whose parameters are `A`'s schema: [`tool_fn`] with the schema derived instead of written.
pub fn typed_tool<A, R, E, Fut, F>(name: impl Into<String>, description: impl Into<String>, f: F) -> FnTool<F, A, Fut>
where
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    A: JsonSchema + DeserializeOwned + Send + 'static,
    R: Serialize,
    E: std::fmt::Display,
{
    tool_fn(name, description, schema_of::<A>(), f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// The sky, one of three.
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Sky {
        Sunny,
        Cloudy,
        Rain,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Weather {
        city: String,
        temperature_c: i32,
        sky: Sky,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Loose {
        query: String,
        limit: Option<u32>,
    }

    #[test]
    fn a_derived_schema_is_an_object_the_argument_rule_and_strict_mode_read() {
        let o = output_type::<Weather>();
        assert_eq!(o.name, "Weather");
        assert_eq!(o.validate(), Ok(()));
        assert_eq!(o.schema.get("$schema"), None);
        assert_eq!(o.schema["additionalProperties"], json!(false));
        assert_eq!(o.schema["properties"]["temperature_c"], json!({"type": "integer"}), "no int32 format");
        assert_eq!(crate::model::strict::why_not_strict(&o.schema), None, "{}", o.schema);
        // The one validator reads the derived schema: the enum through its `$defs` reference.
        assert!(o.read(r#"{"city": "Paris", "temperature_c": 21, "sky": "sunny"}"#).is_ok());
        let e = o.read(r#"{"city": "Paris", "temperature_c": 21, "sky": "snow"}"#).unwrap_err();
        assert!(e.contains("sky"), "{e}");
        let e = o.read(r#"{"city": "Paris", "temperature_c": "warm", "sky": "rain"}"#).unwrap_err();
        assert!(e.contains("temperature_c"), "{e}");
        // An optional field is not required, so the schema is not strict (negative control).
        let loose = schema_of::<Loose>();
        assert_eq!(loose["required"], json!(["query"]));
        assert!(crate::model::strict::why_not_strict(&loose).unwrap().contains("`limit` is not in required"));
    }

    #[test]
    fn a_generic_types_name_is_cut_to_what_the_wires_take() {
        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Page<T> {
            items: Vec<T>,
        }
        let o = output_type::<Page<Weather>>();
        assert!(o.validate().is_ok(), "{}", o.name);
    }
}
