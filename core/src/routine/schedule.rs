//! The slot rule (SPEC §13), as pure functions of a routine's schedule, its active window and a time.
//!
//! A routine's slots form a chain: the first slot comes from the time it was created (or rescheduled),
//! each next one from the slot before it ([`Timing::first_slot`], [`Timing::next_slot`]).
//! - An interval routine's first slot is its anchor itself (it fires on the next tick), inside its
//!   window; each next slot is the previous one plus the interval. A slot that falls outside the window
//!   moves to the moment the window next opens, and the chain continues from there.
//! - A cron routine's slots are the instants whose civil time in the routine's IANA time zone matches
//!   the five fields (minute, hour, day of month, month, day of week; the day fields are or-ed when
//!   both are restricted, as in Vixie cron). A civil time that does not exist (the hour skipped when
//!   the clocks go forward) is no slot; a civil time that happens twice (the hour repeated when they go
//!   back) is a slot once, at its first occurrence. Matches outside the window are no slots.
//!
//! Times are milliseconds since the Unix epoch, as everywhere in the stores.

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Timestamp, ToSpan};

/// How far ahead a slot is looked for before the schedule is called one that never fires: nine years
/// covers a 29 February that skips a century year.
const SEARCH_DAYS: i32 = 9 * 366;

/// How many cron matches the window may refuse before the schedule is called one that never fires
/// inside its window. A window repeats weekly, so a schedule that fires at all in it does so well
/// within this (a minute-by-minute cron has 10,080 matches a week); it bounds the walk in work, not
/// only in days (`* * * * mon` in a Saturday window is 674,000 matches in nine years).
const MAX_WINDOW_REFUSALS: u32 = 100_000;

/// A parsed 5-field cron expression. Each field is a bit set of the values it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday 0.
    weekdays: u8,
    /// Whether the day-of-month and day-of-week fields were `*` (then the other alone decides).
    days_star: bool,
    weekdays_star: bool,
}

const MONTH_NAMES: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// One field's value: a number or (for months and weekdays) a three-letter name.
fn field_value(text: &str, names: &[&str], base: u32) -> Result<u32, String> {
    if let Ok(n) = text.parse::<u32>() {
        return Ok(n);
    }
    let lower = text.to_ascii_lowercase();
    names
        .iter()
        .position(|n| *n == lower)
        .map(|i| i as u32 + base)
        .ok_or_else(|| format!("'{text}' is not a number{}", if names.is_empty() { "" } else { " or a name" }))
}

/// Parses one field into a bit set over `min..=max` (weekday 7 is Sunday, folded onto 0).
fn parse_field(text: &str, what: &str, min: u32, max: u32, names: &[&str], base: u32) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let top = if what == "day of week" { 7 } else { max };
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| format!("the {what} step '{s}' is not a number"))?;
                if step == 0 {
                    return Err(format!("the {what} step must be at least 1"));
                }
                if step > top {
                    return Err(format!("the {what} step {step} is larger than the field's range ({min}-{top})"));
                }
                (r, step)
            }
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (min, top)
        } else if let Some((a, b)) = range.split_once('-') {
            let a = field_value(a, names, base).map_err(|e| format!("{what}: {e}"))?;
            let b = field_value(b, names, base).map_err(|e| format!("{what}: {e}"))?;
            (a, b)
        } else {
            let a = field_value(range, names, base).map_err(|e| format!("{what}: {e}"))?;
            // `5/15` means from 5 to the end, every 15.
            (a, if part.contains('/') { top } else { a })
        };
        if lo < min || hi > top || lo > hi {
            return Err(format!("the {what} '{part}' is outside {min}-{top} or reversed"));
        }
        let mut v = lo;
        while v <= hi {
            let folded = if what == "day of week" && v == 7 { 0 } else { v };
            bits |= 1 << folded;
            // Checked: past u32 there is nothing left to set.
            match v.checked_add(step) {
                Some(next) => v = next,
                None => break,
            }
        }
    }
    Ok((bits, text == "*" || text.starts_with("*/") && text[2..] == *"1"))
}

impl Cron {
    /// Parses a 5-field expression (`minute hour day-of-month month day-of-week`), with `*`, ranges
    /// `a-b`, steps `/n`, lists `a,b`, and month and weekday names. A schedule that never fires (31
    /// February) is refused.
    pub fn parse(expression: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = expression.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "a cron expression has 5 fields (minute hour day month weekday), got {}",
                fields.len()
            ));
        }
        let (minutes, _) = parse_field(fields[0], "minute", 0, 59, &[], 0)?;
        let (hours, _) = parse_field(fields[1], "hour", 0, 23, &[], 0)?;
        let (days, days_star) = parse_field(fields[2], "day of month", 1, 31, &[], 0)?;
        let (months, _) = parse_field(fields[3], "month", 1, 12, &MONTH_NAMES, 1)?;
        let (weekdays, weekdays_star) = parse_field(fields[4], "day of week", 0, 6, &DAY_NAMES, 0)?;
        let cron = Cron {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            days_star,
            weekdays_star,
        };
        let start = DateTime::constant(2000, 1, 1, 0, 0, 0, 0);
        if cron.next_civil_after(start).is_none() {
            return Err(format!("'{expression}' matches no date: it never fires"));
        }
        Ok(cron)
    }

    fn date_matches(&self, date: Date) -> bool {
        if self.months & (1 << date.month()) == 0 {
            return false;
        }
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        match (self.days_star, self.weekdays_star) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        }
    }

    /// The first civil time strictly after `after` that matches, within [`SEARCH_DAYS`].
    pub fn next_civil_after(&self, after: DateTime) -> Option<DateTime> {
        let mut date = after.date();
        for day in 0..SEARCH_DAYS {
            if self.date_matches(date) {
                // On the first day, the hours and minutes before `after` cannot follow it.
                let first_hour = if day == 0 { after.hour() } else { 0 };
                for hour in first_hour..24i8 {
                    if self.hours & (1 << hour) == 0 {
                        continue;
                    }
                    let first_minute = if day == 0 && hour == first_hour { after.minute() } else { 0 };
                    for minute in first_minute..60i8 {
                        if self.minutes & (1 << minute) == 0 {
                            continue;
                        }
                        let candidate = date
                            .to_datetime(Time::constant(0, 0, 0, 0))
                            .with()
                            .hour(hour)
                            .minute(minute)
                            .build()
                            .ok()?;
                        if day > 0 || candidate > after {
                            return Some(candidate);
                        }
                    }
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

/// An active window: the weekdays and the civil hours, in a time zone, in which slots fall.
#[derive(Debug, Clone)]
pub struct Window {
    /// Bits 0..=6, Monday 0.
    pub weekdays: u8,
    /// When the window opens each day.
    pub start: Time,
    /// When it closes each day.
    pub end: Time,
    /// The time zone the hours are read in.
    pub tz: TimeZone,
}

impl Window {
    /// Whether `at` falls inside the window.
    pub fn contains(&self, at: Timestamp) -> bool {
        let z = at.to_zoned(self.tz.clone());
        let day_ok = self.weekdays & (1 << z.weekday().to_monday_zero_offset()) != 0;
        day_ok && z.time() >= self.start && z.time() < self.end
    }

    /// The first instant at or after `at` inside the window.
    pub fn next_open(&self, at: Timestamp) -> Option<Timestamp> {
        if self.contains(at) {
            return Some(at);
        }
        let mut date = at.to_zoned(self.tz.clone()).date();
        for _ in 0..16 {
            if self.weekdays & (1 << date.weekday().to_monday_zero_offset()) != 0 {
                let open = first_instant_at_or_after(&self.tz, date.to_datetime(self.start))?;
                if open >= at && self.contains(open) {
                    return Some(open);
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

/// The first instant whose civil time in `tz` is `civil` or, when `civil` falls in a gap, the instant
/// the clocks jump (the first civil time after it).
fn first_instant_at_or_after(tz: &TimeZone, civil: DateTime) -> Option<Timestamp> {
    match tz.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Unambiguous { offset } | AmbiguousOffset::Fold { before: offset, .. } => {
            offset.to_timestamp(civil).ok()
        }
        AmbiguousOffset::Gap { after, .. } => {
            let before_gap = after.to_timestamp(civil).ok()?;
            tz.following(before_gap).next().map(|t| t.timestamp())
        }
    }
}

/// The instant a matching civil time is a slot at: none in a gap, the first occurrence in a fold.
fn slot_instant(tz: &TimeZone, civil: DateTime) -> Option<Timestamp> {
    match tz.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Unambiguous { offset } | AmbiguousOffset::Fold { before: offset, .. } => {
            offset.to_timestamp(civil).ok()
        }
        AmbiguousOffset::Gap { .. } => None,
    }
}

/// A schedule, parsed.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// Every so many milliseconds.
    Interval(i64),
    /// A cron expression, read in a time zone.
    Cron(Cron, TimeZone),
}

/// A routine's timing: its cadence and its window.
#[derive(Debug, Clone)]
pub struct Timing {
    /// How often slots come.
    pub cadence: Cadence,
    /// When they may run (none: any time).
    pub window: Option<Window>,
}

fn ts(ms: i64) -> Option<Timestamp> {
    Timestamp::from_millisecond(ms).ok()
}

impl Timing {
    /// The first slot of a routine created (or rescheduled) at `anchor`: an interval routine's is the
    /// anchor itself when it is inside the window (else the window's opening), a cron routine's the
    /// first match strictly after the anchor.
    pub fn first_slot(&self, anchor: i64) -> Option<i64> {
        match &self.cadence {
            Cadence::Interval(_) => self.in_window_from(anchor),
            Cadence::Cron(..) => self.next_cron(anchor),
        }
    }

    /// The slot after `slot` in the chain.
    pub fn next_slot(&self, slot: i64) -> Option<i64> {
        match &self.cadence {
            Cadence::Interval(every) => self.in_window_from(slot.checked_add(*every)?),
            Cadence::Cron(..) => self.next_cron(slot),
        }
    }

    /// The slots the cadence alone gives after `from` and before `to` (both exclusive), which the window
    /// (or a pause) took out of the chain: `(first, last, count)`, or `None` when there are none. At most
    /// `cap` are walked.
    pub fn cadence_slots_between(&self, from: i64, to: i64, cap: usize) -> Option<(i64, i64, i64)> {
        let bare = Timing { cadence: self.cadence.clone(), window: None };
        let mut first = None;
        let mut last = 0;
        let mut count = 0i64;
        let mut at = bare.next_slot(from);
        while let Some(s) = at.filter(|s| *s < to && (count as usize) < cap) {
            first.get_or_insert(s);
            last = s;
            count += 1;
            at = bare.next_slot(s);
        }
        first.map(|f| (f, last, count))
    }

    /// `at` when inside the window (or there is none), else the window's next opening.
    fn in_window_from(&self, at: i64) -> Option<i64> {
        match &self.window {
            None => Some(at),
            Some(w) => w.next_open(ts(at)?).map(|t| t.as_millisecond()),
        }
    }

    /// The first cron slot strictly after `after`, inside the window.
    fn next_cron(&self, after: i64) -> Option<i64> {
        let Cadence::Cron(cron, tz) = &self.cadence else { return None };
        let after_ts = ts(after)?;
        let mut civil = after_ts.to_zoned(tz.clone()).datetime();
        // Each civil match is tried in turn: a gap skips it, a fold keeps its first occurrence (which may
        // lie before `after` when `after` is in the repeated hour), the window may refuse it.
        let limit = after_ts.checked_add((SEARCH_DAYS as i64 * 24).hours()).ok()?;
        let mut refused = 0u32;
        loop {
            civil = cron.next_civil_after(civil)?;
            let Some(at) = slot_instant(tz, civil) else { continue };
            if at > limit {
                return None;
            }
            if at <= after_ts {
                continue;
            }
            if self.window.as_ref().is_none_or(|w| w.contains(at)) {
                return Some(at.as_millisecond());
            }
            refused += 1;
            if refused > MAX_WINDOW_REFUSALS {
                return None;
            }
        }
    }
}

/// The calendar day (start, end) holding `at` in `tz`, for the daily cap.
pub fn day_bounds(tz: &TimeZone, at: i64) -> Option<(i64, i64)> {
    let date = ts(at)?.to_zoned(tz.clone()).date();
    let start = first_instant_at_or_after(tz, date.to_datetime(Time::midnight()))?;
    let end = first_instant_at_or_after(tz, date.tomorrow().ok()?.to_datetime(Time::midnight()))?;
    Some((start.as_millisecond(), end.as_millisecond()))
}

/// The weekday names a window takes, Monday first.
pub const WEEKDAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// A weekday of a window by name (`mon` … `sun`, any case, or the full English name).
pub fn weekday_bit(name: &str) -> Option<u8> {
    let lower = name.to_ascii_lowercase();
    let days = [
        Weekday::Monday,
        Weekday::Tuesday,
        Weekday::Wednesday,
        Weekday::Thursday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ];
    days.iter()
        .position(|d| {
            let full = format!("{d:?}").to_ascii_lowercase();
            full == lower || full[..3] == lower
        })
        .map(|i| 1u8 << i)
}
