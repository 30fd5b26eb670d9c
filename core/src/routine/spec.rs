//! A routine's definition, its validation (every refusal names its field), and how an update applies.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::RoutineError;
use super::schedule::{Cadence, Cron, Timing, Window, weekday_bit};

/// The longest agent name, id, title, model name or time zone name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// The longest instructions, in bytes.
pub const MAX_INSTRUCTIONS_BYTES: usize = 64 * 1024;

/// A routine's active window: the weekdays (`mon` … `sun`) and the civil hours `start` to `end`
/// (`HH:MM`, end after start) in an IANA time zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveWindow {
    /// The weekdays it is open (`mon` … `sun`).
    pub weekdays: Vec<String>,
    /// When it opens each of those days (`HH:MM`).
    pub start: String,
    /// When it closes (`HH:MM`, after `start`).
    pub end: String,
    /// The IANA time zone the hours are read in.
    pub timezone: String,
}

/// A routine's definition: what a revision holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutineSpec {
    /// The name the host maps to an agent factory. Never changes.
    pub agent: String,
    /// A short name for people (none: the instructions stand for it).
    pub title: Option<String>,
    /// The input of every run.
    pub instructions: String,
    /// The schedule: every so many seconds (at least 1) …
    pub interval_seconds: Option<i64>,
    /// … or a 5-field cron expression, read in `timezone`.
    pub cron_expression: Option<String>,
    /// The IANA time zone of the cron expression (default `UTC`).
    pub timezone: Option<String>,
    /// When slots may run (none: any time).
    pub active_window: Option<ActiveWindow>,
    /// Whether slots fire (a disabled routine's slots are skipped as `disabled`).
    pub enabled: bool,
    /// Runs of the routine at once in a drain (default 1).
    pub parallel_limit: Option<i64>,
    /// The most runs started for slots that came due together (after an outage, or during a long
    /// run): the latest `catch_up` run, the older ones are skipped (default 1).
    pub catch_up: i64,
    /// The most runs started in a calendar day of the routine's time zone.
    pub daily_cap: Option<i64>,
    /// A model the agent factory should use instead of its own.
    pub model: Option<String>,
}

impl RoutineSpec {
    /// A routine of `agent` running `instructions` every `interval_seconds`, with the defaults.
    pub fn every(agent: impl Into<String>, instructions: impl Into<String>, interval_seconds: i64) -> RoutineSpec {
        RoutineSpec {
            agent: agent.into(),
            title: None,
            instructions: instructions.into(),
            interval_seconds: Some(interval_seconds),
            cron_expression: None,
            timezone: None,
            active_window: None,
            enabled: true,
            parallel_limit: None,
            catch_up: 1,
            daily_cap: None,
            model: None,
        }
    }

    /// A routine of `agent` running `instructions` at the slots of `cron_expression` in `timezone`.
    pub fn cron(
        agent: impl Into<String>,
        instructions: impl Into<String>,
        cron_expression: impl Into<String>,
        timezone: impl Into<String>,
    ) -> RoutineSpec {
        RoutineSpec {
            interval_seconds: None,
            cron_expression: Some(cron_expression.into()),
            timezone: Some(timezone.into()),
            ..RoutineSpec::every(agent, instructions, 1)
        }
    }

    /// The parallel limit in force (1 when unset).
    pub fn parallel(&self) -> i64 {
        self.parallel_limit.unwrap_or(1)
    }

    /// Checks every field; the first refusal names its field.
    /// Whether `other` fires on the same schedule in the same window (an update that changes neither
    /// keeps the next slot).
    pub(crate) fn same_timing(&self, other: &RoutineSpec) -> bool {
        self.interval_seconds == other.interval_seconds
            && self.cron_expression == other.cron_expression
            && self.timezone == other.timezone
            && self.active_window == other.active_window
    }

    /// Checks every field (a refusal names its field) and returns the timing the schedule makes.
    pub fn validate(&self) -> Result<Timing, RoutineError> {
        check_name("agent", &self.agent)?;
        if let Some(t) = &self.title {
            check_text("title", t, MAX_NAME_BYTES)?;
        }
        check_text("instructions", &self.instructions, MAX_INSTRUCTIONS_BYTES)?;
        if self.instructions.trim().is_empty() {
            return Err(RoutineError::invalid("instructions", "must not be empty"));
        }
        if let Some(m) = &self.model {
            check_name("model", m)?;
        }
        for (field, v, min) in [
            ("parallel_limit", self.parallel_limit, 1),
            ("daily_cap", self.daily_cap, 0),
            ("catch_up", Some(self.catch_up), 1),
        ] {
            if let Some(v) = v.filter(|v| *v < min) {
                return Err(RoutineError::invalid(field, format!("must be at least {min}, got {v}")));
            }
        }
        self.timing()
    }

    /// The parsed schedule and window.
    pub fn timing(&self) -> Result<Timing, RoutineError> {
        let cadence = match (self.interval_seconds, &self.cron_expression) {
            (Some(_), Some(_)) => {
                return Err(RoutineError::invalid(
                    "interval_seconds",
                    "a routine has interval_seconds or cron_expression, not both",
                ));
            }
            (None, None) => {
                return Err(RoutineError::invalid(
                    "interval_seconds",
                    "a routine needs interval_seconds or cron_expression",
                ));
            }
            (Some(s), None) => {
                if s < 1 {
                    return Err(RoutineError::invalid("interval_seconds", format!("must be at least 1, got {s}")));
                }
                if self.timezone.is_some() {
                    return Err(RoutineError::invalid("timezone", "a time zone goes with a cron_expression"));
                }
                Cadence::Interval(
                    s.checked_mul(1000).ok_or_else(|| RoutineError::invalid("interval_seconds", "too large"))?,
                )
            }
            (None, Some(expr)) => {
                let cron = Cron::parse(expr).map_err(|m| RoutineError::invalid("cron_expression", m))?;
                Cadence::Cron(cron, time_zone("timezone", self.timezone.as_deref().unwrap_or("UTC"))?)
            }
        };
        let window = self.active_window.as_ref().map(window).transpose()?;
        Ok(Timing { cadence, window })
    }

    /// The time zone that names the routine's calendar days (for the daily cap): the cron's, else the
    /// window's, else UTC.
    pub fn day_zone(&self) -> jiff::tz::TimeZone {
        let name = self.timezone.as_deref().or(self.active_window.as_ref().map(|w| w.timezone.as_str()));
        name.and_then(|n| jiff::tz::db().get(n).ok()).unwrap_or(jiff::tz::TimeZone::UTC)
    }

    /// Reads a definition from JSON (what bindings send), refusing unknown fields and wrong types by
    /// name; the defaults fill what is absent. Validation is separate ([`RoutineSpec::validate`]).
    pub fn from_json(value: &Value) -> Result<RoutineSpec, RoutineError> {
        let obj = object(value, "routine")?;
        for key in obj.keys() {
            if !SPEC_FIELDS.contains(&key.as_str()) {
                return Err(RoutineError::invalid(key, "is not a routine field"));
            }
        }
        let mut spec = RoutineSpec::every(
            req_str(obj, "agent")?,
            req_str(obj, "instructions")?,
            opt_int(obj, "interval_seconds")?.unwrap_or(0),
        );
        spec.interval_seconds = opt_int(obj, "interval_seconds")?;
        spec.title = opt_str(obj, "title")?;
        spec.cron_expression = opt_str(obj, "cron_expression")?;
        spec.timezone = opt_str(obj, "timezone")?;
        spec.active_window = opt_window(obj)?;
        spec.enabled = opt_bool(obj, "enabled")?.unwrap_or(true);
        spec.parallel_limit = opt_int(obj, "parallel_limit")?;
        spec.catch_up = opt_int(obj, "catch_up")?.unwrap_or(1);
        spec.daily_cap = opt_int(obj, "daily_cap")?;
        spec.model = opt_str(obj, "model")?;
        Ok(spec)
    }
}

const SPEC_FIELDS: [&str; 13] = [
    "id",
    "agent",
    "title",
    "instructions",
    "interval_seconds",
    "cron_expression",
    "timezone",
    "active_window",
    "enabled",
    "parallel_limit",
    "catch_up",
    "daily_cap",
    "model",
];

/// An update: only the fields passed change. `Some(None)` clears a nullable field (title, a limit,
/// the model, the window).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoutinePatch {
    /// A new title, or `Some(None)` to clear it.
    pub title: Option<Option<String>>,
    /// New instructions (rewording does not reschedule).
    pub instructions: Option<String>,
    /// A new interval replaces the schedule (a cron expression goes).
    pub interval_seconds: Option<i64>,
    /// A new cron expression replaces the schedule (an interval goes).
    pub cron_expression: Option<String>,
    /// A new time zone for the cron expression.
    pub timezone: Option<String>,
    /// A new active window, or `Some(None)` to clear it.
    pub active_window: Option<Option<ActiveWindow>>,
    /// Pauses (`false`) or resumes (`true`).
    pub enabled: Option<bool>,
    /// A new parallel limit, or `Some(None)` for the default.
    pub parallel_limit: Option<Option<i64>>,
    /// A new catch-up count.
    pub catch_up: Option<i64>,
    /// A new daily cap, or `Some(None)` for none.
    pub daily_cap: Option<Option<i64>>,
    /// A new model, or `Some(None)` for the agent's own.
    pub model: Option<Option<String>>,
}

/// What an update did to the routine's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reschedule {
    /// Rewording: the next slot stays where it was.
    Keep,
    /// The schedule or the window changed, or the routine was resumed: the next slot is computed anew.
    Anew,
    /// Paused: no next slot.
    Pause,
}

impl RoutinePatch {
    /// Reads an update from JSON: absent fields stay, `null` clears a nullable one; `agent` is refused
    /// (a routine's agent never changes).
    pub fn from_json(value: &Value) -> Result<RoutinePatch, RoutineError> {
        let obj = object(value, "update")?;
        let mut p = RoutinePatch::default();
        for (key, v) in obj {
            match key.as_str() {
                "agent" => {
                    return Err(RoutineError::invalid(
                        "agent",
                        "the agent a routine belongs to can't change; create a new routine instead",
                    ));
                }
                "title" => p.title = Some(nullable_str(v, "title")?),
                "model" => p.model = Some(nullable_str(v, "model")?),
                "instructions" => p.instructions = Some(str_of(v, "instructions")?),
                "interval_seconds" => p.interval_seconds = Some(int_of(v, "interval_seconds")?),
                "cron_expression" => p.cron_expression = Some(str_of(v, "cron_expression")?),
                "timezone" => p.timezone = Some(str_of(v, "timezone")?),
                "active_window" => p.active_window = Some(if v.is_null() { None } else { Some(window_of(v)?) }),
                "enabled" => {
                    p.enabled =
                        Some(v.as_bool().ok_or_else(|| RoutineError::invalid("enabled", "must be true or false"))?)
                }
                "parallel_limit" => p.parallel_limit = Some(nullable_int(v, "parallel_limit")?),
                "daily_cap" => p.daily_cap = Some(nullable_int(v, "daily_cap")?),
                "catch_up" => p.catch_up = Some(int_of(v, "catch_up")?),
                other => return Err(RoutineError::invalid(other, "is not a routine field that an update can change")),
            }
        }
        Ok(p)
    }

    /// The definition with this update applied (validated), and what it does to the next slot.
    pub fn apply(&self, old: &RoutineSpec) -> Result<(RoutineSpec, Reschedule), RoutineError> {
        let mut new = old.clone();
        if let Some(t) = &self.title {
            new.title = t.clone();
        }
        if let Some(i) = &self.instructions {
            new.instructions = i.clone();
        }
        if let Some(m) = &self.model {
            new.model = m.clone();
        }
        if let Some(l) = self.parallel_limit {
            new.parallel_limit = l;
        }
        if let Some(c) = self.daily_cap {
            new.daily_cap = c;
        }
        if let Some(c) = self.catch_up {
            new.catch_up = c;
        }
        match (self.interval_seconds, &self.cron_expression) {
            (Some(_), Some(_)) => {
                return Err(RoutineError::invalid(
                    "interval_seconds",
                    "pass interval_seconds or cron_expression, not both",
                ));
            }
            (Some(s), None) => {
                if self.timezone.is_some() {
                    return Err(RoutineError::invalid("timezone", "a time zone goes with a cron_expression"));
                }
                new.interval_seconds = Some(s);
                new.cron_expression = None;
                new.timezone = None;
            }
            (None, Some(c)) => {
                new.cron_expression = Some(c.clone());
                new.interval_seconds = None;
                new.timezone = Some(self.timezone.clone().or(old.timezone.clone()).unwrap_or_else(|| "UTC".into()));
            }
            (None, None) => {
                if let Some(tz) = &self.timezone {
                    if old.cron_expression.is_none() {
                        return Err(RoutineError::invalid("timezone", "a time zone goes with a cron_expression"));
                    }
                    new.timezone = Some(tz.clone());
                }
            }
        }
        if let Some(w) = &self.active_window {
            new.active_window = w.clone();
        }
        if let Some(e) = self.enabled {
            new.enabled = e;
        }
        new.validate()?;
        let timing_changed = !new.same_timing(old);
        let how = if !new.enabled {
            Reschedule::Pause
        } else if !old.enabled || timing_changed {
            Reschedule::Anew
        } else {
            Reschedule::Keep
        };
        Ok((new, how))
    }
}

fn window(w: &ActiveWindow) -> Result<Window, RoutineError> {
    let field = "active_window";
    let mut weekdays = 0u8;
    if w.weekdays.is_empty() {
        return Err(RoutineError::invalid(field, "weekdays must name at least one day (mon … sun)"));
    }
    for d in &w.weekdays {
        weekdays |= weekday_bit(d).ok_or_else(|| {
            RoutineError::invalid(field, format!("'{d}' is not a weekday (mon, tue, wed, thu, fri, sat, sun)"))
        })?;
    }
    let time = |which: &str, s: &str| -> Result<jiff::civil::Time, RoutineError> {
        let bad = || RoutineError::invalid(field, format!("{which} '{s}' is not a time HH:MM"));
        let (h, m) = s.split_once(':').ok_or_else(bad)?;
        let (h, m): (i8, i8) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
        if h == 24 && m == 0 && which == "end" {
            return Ok(jiff::civil::Time::MAX);
        }
        jiff::civil::Time::new(h, m, 0, 0).map_err(|_| bad())
    };
    let start = time("start", &w.start)?;
    let end = time("end", &w.end)?;
    if end <= start {
        return Err(RoutineError::invalid(field, format!("the end {} is not after the start {}", w.end, w.start)));
    }
    let tz = time_zone(field, &w.timezone)?;
    Ok(Window { weekdays, start, end, tz })
}

fn time_zone(field: &str, name: &str) -> Result<jiff::tz::TimeZone, RoutineError> {
    jiff::tz::db()
        .get(name)
        .map_err(|_| RoutineError::invalid(field, format!("'{name}' is not an IANA time zone (e.g. Europe/Paris)")))
}

fn check_text(field: &str, s: &str, max: usize) -> Result<(), RoutineError> {
    if s.len() > max {
        return Err(RoutineError::invalid(field, format!("is {} bytes, the most is {max}", s.len())));
    }
    if s.contains('\0') {
        return Err(RoutineError::invalid(field, "must not contain a NUL character"));
    }
    Ok(())
}

/// A name: non-empty, single-line, bounded.
pub(crate) fn check_name(field: &str, s: &str) -> Result<(), RoutineError> {
    check_text(field, s, MAX_NAME_BYTES)?;
    if s.trim().is_empty() || s.chars().any(char::is_control) {
        return Err(RoutineError::invalid(field, "must be a non-empty name on one line"));
    }
    Ok(())
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, RoutineError> {
    v.as_object().ok_or_else(|| RoutineError::invalid(what, "must be a JSON object"))
}
fn str_of(v: &Value, field: &str) -> Result<String, RoutineError> {
    v.as_str().map(str::to_string).ok_or_else(|| RoutineError::invalid(field, "must be a string"))
}
fn int_of(v: &Value, field: &str) -> Result<i64, RoutineError> {
    v.as_i64().ok_or_else(|| RoutineError::invalid(field, "must be an integer"))
}
fn nullable_str(v: &Value, field: &str) -> Result<Option<String>, RoutineError> {
    if v.is_null() { Ok(None) } else { str_of(v, field).map(Some) }
}
fn nullable_int(v: &Value, field: &str) -> Result<Option<i64>, RoutineError> {
    if v.is_null() { Ok(None) } else { int_of(v, field).map(Some) }
}
fn req_str(obj: &Map<String, Value>, field: &str) -> Result<String, RoutineError> {
    obj.get(field).ok_or_else(|| RoutineError::invalid(field, "is required")).and_then(|v| str_of(v, field))
}
fn opt_str(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, RoutineError> {
    obj.get(field).map_or(Ok(None), |v| nullable_str(v, field))
}
fn opt_int(obj: &Map<String, Value>, field: &str) -> Result<Option<i64>, RoutineError> {
    obj.get(field).map_or(Ok(None), |v| nullable_int(v, field))
}
fn opt_bool(obj: &Map<String, Value>, field: &str) -> Result<Option<bool>, RoutineError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_bool().map(Some).ok_or_else(|| RoutineError::invalid(field, "must be true or false")),
    }
}
fn window_of(v: &Value) -> Result<ActiveWindow, RoutineError> {
    let field = "active_window";
    let obj = object(v, field)?;
    for key in obj.keys() {
        if !["weekdays", "start", "end", "timezone"].contains(&key.as_str()) {
            return Err(RoutineError::invalid(
                field,
                format!("'{key}' is not a window field (weekdays, start, end, timezone)"),
            ));
        }
    }
    let text = |k: &str| -> Result<String, RoutineError> {
        obj.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| RoutineError::invalid(field, format!("{k} is required, a string")))
    };
    let weekdays = obj
        .get("weekdays")
        .and_then(Value::as_array)
        .ok_or_else(|| RoutineError::invalid(field, "weekdays is required, a list of day names"))?
        .iter()
        .map(|d| d.as_str().map(str::to_string).ok_or_else(|| RoutineError::invalid(field, "weekdays are day names")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ActiveWindow { weekdays, start: text("start")?, end: text("end")?, timezone: text("timezone")? })
}
fn opt_window(obj: &Map<String, Value>) -> Result<Option<ActiveWindow>, RoutineError> {
    match obj.get("active_window") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => window_of(v).map(Some),
    }
}
