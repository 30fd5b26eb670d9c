//! The slot rule: one test per rule (DST gap and fold, windows, catch-up, the daily cap), then property
//! tests over generated cron expressions, time zones and windows, each checked against a brute-force
//! walk over every minute.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;

use super::schedule::{Cadence, Cron, Timing, Window, day_bounds};
use super::spec::{ActiveWindow, RoutineSpec};
use super::store::plan_claim;

fn at(tz: &str, civil: &str) -> i64 {
    let dt: DateTime = civil.parse().unwrap();
    TimeZone::get(tz).unwrap().to_ambiguous_timestamp(dt).compatible().unwrap().as_millisecond()
}

fn civil(tz: &str, ms: i64) -> String {
    Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned(TimeZone::get(tz).unwrap())
        .strftime("%Y-%m-%d %H:%M %Z")
        .to_string()
}

fn cron_timing(expr: &str, tz: &str) -> Timing {
    Timing { cadence: Cadence::Cron(Cron::parse(expr).unwrap(), TimeZone::get(tz).unwrap()), window: None }
}

fn chain(t: &Timing, from: i64, until: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut s = t.first_slot(from);
    while let Some(x) = s.filter(|x| *x <= until) {
        out.push(x);
        s = t.next_slot(x);
    }
    out
}

#[test]
fn a_cron_expression_is_refused_with_the_reason() {
    for (expr, needle) in [
        ("* * * *", "5 fields"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day of week"),
        ("*/0 * * * *", "step must be at least 1"),
        ("5-1 * * * *", "reversed"),
        ("x * * * *", "not a number"),
        ("0 0 31 2 *", "never fires"),
        ("0 0 30 feb *", "never fires"),
    ] {
        let e = Cron::parse(expr).unwrap_err();
        assert!(e.contains(needle), "{expr}: {e}");
    }
    assert!(Cron::parse("0 9 * jan-mar mon-fri").is_ok());
    assert!(Cron::parse("0 0 29 2 *").is_ok(), "a leap day fires every four years");
    assert!(Cron::parse("*/15 8-18/2 1,15 * 7").is_ok());
}

#[test]
fn the_hour_the_clocks_skip_has_no_slot() {
    // New York springs forward on 2026-03-08 at 02:00: 02:30 does not exist that day.
    let t = cron_timing("30 2 * * *", "America/New_York");
    let slots = chain(&t, at("America/New_York", "2026-03-06T12:00"), at("America/New_York", "2026-03-10T12:00"));
    let shown: Vec<String> = slots.iter().map(|s| civil("America/New_York", *s)).collect();
    assert_eq!(shown, ["2026-03-07 02:30 EST", "2026-03-09 02:30 EDT", "2026-03-10 02:30 EDT"]);
    // Paris springs forward on 2026-03-29 at 02:00.
    let t = cron_timing("*/20 2 * * *", "Europe/Paris");
    let day = chain(&t, at("Europe/Paris", "2026-03-29T00:00"), at("Europe/Paris", "2026-03-29T23:00"));
    assert!(day.is_empty(), "no 02:xx slot on the day the hour is skipped: {day:?}");
}

#[test]
fn the_hour_the_clocks_repeat_fires_once() {
    // New York falls back on 2026-11-01 at 02:00 EDT to 01:00 EST: 01:00-01:59 happens twice.
    let t = cron_timing("30 1 * * *", "America/New_York");
    let slots = chain(&t, at("America/New_York", "2026-10-31T12:00"), at("America/New_York", "2026-11-02T12:00"));
    let shown: Vec<String> = slots.iter().map(|s| civil("America/New_York", *s)).collect();
    assert_eq!(shown, ["2026-11-01 01:30 EDT", "2026-11-02 01:30 EST"]);
    let t = cron_timing("*/15 1 * * *", "America/New_York");
    let day = chain(&t, at("America/New_York", "2026-11-01T00:00"), at("America/New_York", "2026-11-01T12:00"));
    assert_eq!(
        day.len(),
        4,
        "four quarter hours, not eight: {:?}",
        day.iter().map(|s| civil("America/New_York", *s)).collect::<Vec<_>>()
    );
    // From inside the second pass of the repeated hour, the next slot is the next day's.
    let second_pass = at("America/New_York", "2026-11-01T01:40") + 3_600_000;
    assert_eq!(civil("America/New_York", second_pass), "2026-11-01 01:40 EST");
    let t = cron_timing("30 1 * * *", "America/New_York");
    assert_eq!(civil("America/New_York", t.next_slot(second_pass).unwrap()), "2026-11-02 01:30 EST");
}

fn paris_window() -> Window {
    let spec = RoutineSpec {
        active_window: Some(ActiveWindow {
            weekdays: vec!["mon".into(), "tue".into(), "wed".into(), "thu".into(), "fri".into()],
            start: "09:00".into(),
            end: "17:00".into(),
            timezone: "Europe/Paris".into(),
        }),
        ..RoutineSpec::every("a", "x", 1800)
    };
    spec.timing().unwrap().window.unwrap()
}

#[test]
fn an_interval_routine_fires_at_once_inside_its_window_and_when_it_opens_outside() {
    let t = Timing { cadence: Cadence::Interval(1_800_000), window: Some(paris_window()) };
    // Created on a Tuesday at 10:07: fires on the next tick, then every 30 minutes.
    let tue = at("Europe/Paris", "2026-06-02T10:07");
    assert_eq!(t.first_slot(tue), Some(tue));
    assert_eq!(civil("Europe/Paris", t.next_slot(tue).unwrap()), "2026-06-02 10:37 CEST");
    // The last slot of the day is before 17:00; the next is 09:00 the next morning.
    let late = at("Europe/Paris", "2026-06-02T16:37");
    assert_eq!(civil("Europe/Paris", t.next_slot(late).unwrap()), "2026-06-03 09:00 CEST");
    // Created on a Saturday: first fires when the window opens on Monday.
    let sat = at("Europe/Paris", "2026-06-06T11:00");
    assert_eq!(civil("Europe/Paris", t.first_slot(sat).unwrap()), "2026-06-08 09:00 CEST");
}

#[test]
fn a_window_that_opens_in_the_skipped_hour_opens_when_the_clocks_jump() {
    let spec = RoutineSpec {
        active_window: Some(ActiveWindow {
            weekdays: vec!["sun".into()],
            start: "02:30".into(),
            end: "04:00".into(),
            timezone: "Europe/Paris".into(),
        }),
        ..RoutineSpec::every("a", "x", 600)
    };
    let t = spec.timing().unwrap();
    let first = t.first_slot(at("Europe/Paris", "2026-03-28T12:00")).unwrap();
    assert_eq!(civil("Europe/Paris", first), "2026-03-29 03:00 CEST");
}

#[test]
fn catch_up_keeps_the_latest_slots_and_skips_the_older() {
    let spec = RoutineSpec::every("a", "x", 1800);
    let t = spec.timing().unwrap();
    let start = 1_780_000_000_000i64;
    // A six-hour outage: 13 slots due (start, start+30m, …, start+6h).
    let now = start + 6 * 3_600_000;
    let plan = plan_claim(&t, &spec, start, now, 0);
    assert_eq!(plan.skip, vec![(start, start + 11 * 1_800_000, 12, "missed")]);
    assert_eq!(plan.run, Some(now));
    assert_eq!(plan.next_slot, Some(now + 1_800_000));
    let three = RoutineSpec { catch_up: 3, ..spec.clone() };
    let plan = plan_claim(&t, &three, start, now, 0);
    assert_eq!(plan.skip, vec![(start, start + 9 * 1_800_000, 10, "missed")]);
    assert_eq!(plan.run, Some(start + 10 * 1_800_000));
    assert_eq!(plan.next_slot, Some(start + 11 * 1_800_000), "the next kept slot stays due");
    // Nothing due: nothing planned, next_slot unchanged.
    let plan = plan_claim(&t, &spec, now + 1, now, 0);
    assert_eq!((plan.run, plan.skip.len(), plan.next_slot), (None, 0, Some(now + 1)));
}

#[test]
fn the_daily_cap_skips_the_slots_due() {
    let spec = RoutineSpec { daily_cap: Some(2), ..RoutineSpec::every("a", "x", 60) };
    let t = spec.timing().unwrap();
    let plan = plan_claim(&t, &spec, 1000, 1000 + 120_000, 2);
    assert_eq!(plan.run, None);
    assert_eq!(
        plan.skip,
        vec![(121_000, 121_000, 1, "daily_cap"), (1000, 61_000, 2, "missed")].into_iter().rev().collect::<Vec<_>>()
    );
    assert_eq!(plan.next_slot, Some(181_000));
    let zero = RoutineSpec { daily_cap: Some(0), ..spec };
    assert_eq!(plan_claim(&t, &zero, 1000, 1000, 0).run, None, "a cap of 0 runs nothing");
}

#[test]
fn a_day_in_a_zone_is_23_or_25_hours_around_the_changes() {
    let ny = TimeZone::get("America/New_York").unwrap();
    let (s, e) = day_bounds(&ny, at("America/New_York", "2026-03-08T12:00")).unwrap();
    assert_eq!(e - s, 23 * 3_600_000);
    let (s, e) = day_bounds(&ny, at("America/New_York", "2026-11-01T12:00")).unwrap();
    assert_eq!(e - s, 25 * 3_600_000);
}

// ---- Property tests ----

/// A small deterministic generator (splitmix64), so a failure reproduces from its seed.
struct Gen(u64);
impl Gen {
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
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const ZONES: [&str; 6] =
    ["UTC", "America/New_York", "Europe/Paris", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago"];

/// A frequent cron expression (so a brute-force walk over a few days sees many slots).
fn gen_cron(g: &mut Gen) -> String {
    let minute = match g.below(4) {
        0 => "*/15".to_string(),
        1 => format!("{}", g.below(60)),
        2 => format!("{},{}", g.below(30), 30 + g.below(30)),
        _ => format!("{}-{}/7", g.below(10), 40 + g.below(20)),
    };
    let hour = match g.below(4) {
        0 => "*".to_string(),
        1 => format!("{}-{}", g.below(4), 1 + g.below(4) + 3),
        2 => "*/3".to_string(),
        _ => format!("{},{},{}", g.below(8), 8 + g.below(8), 16 + g.below(8)),
    };
    let (dom, dow) = match g.below(3) {
        0 => ("*".to_string(), "*".to_string()),
        1 => ("*".to_string(), format!("{}-{}", g.below(3), 3 + g.below(4))),
        _ => (format!("{}-{}", 1 + g.below(10), 15 + g.below(16)), format!("{}", g.below(7))),
    };
    format!("{minute} {hour} {dom} * {dow}")
}

/// Whether `instant` is a slot by definition: its civil time matches, and it is that civil time's
/// first occurrence (the slot of a repeated civil time is its first).
fn is_slot(cron: &Cron, tz: &TimeZone, instant: Timestamp) -> bool {
    let dt = instant.to_zoned(tz.clone()).datetime();
    let before = dt.checked_sub(jiff::Span::new().minutes(1)).unwrap();
    cron.next_civil_after(before) == Some(dt) && tz.to_ambiguous_timestamp(dt).earlier().ok() == Some(instant)
}

#[test]
fn property_the_cron_chain_is_every_slot_once_in_order() {
    let mut g = Gen(0xA5_17);
    // Around both changes of 2026 in the northern and southern zones.
    let starts = ["2026-03-06T00:00", "2026-04-03T00:00", "2026-09-04T00:00", "2026-10-02T00:00", "2026-10-30T00:00"];
    let mut slots_seen = 0;
    for case in 0..30 {
        let expr = gen_cron(&mut g);
        let zone = g.pick(&ZONES);
        let tz = TimeZone::get(zone).unwrap();
        let cron = Cron::parse(&expr).unwrap();
        let t = Timing { cadence: Cadence::Cron(cron.clone(), tz.clone()), window: None };
        let from = at("UTC", g.pick(&starts)) + (g.below(86_400) as i64) * 1000;
        let until = from + 4 * 86_400_000;
        let got = chain(&t, from, until);
        // Brute force: every minute instant in (from, until] that is a slot.
        let mut want = Vec::new();
        let mut m = (from / 60_000 + 1) * 60_000;
        while m <= until {
            if is_slot(&cron, &tz, Timestamp::from_millisecond(m).unwrap()) {
                want.push(m);
            }
            m += 60_000;
        }
        assert_eq!(got, want, "case {case}: '{expr}' in {zone} from {}", civil(zone, from));
        slots_seen += got.len();
    }
    assert!(slots_seen > 500, "the generator reaches slots in volume: {slots_seen}");
}

#[test]
fn property_interval_slots_in_a_window_are_the_grid_restarted_at_each_opening() {
    let mut g = Gen(0x77);
    let mut checked = 0;
    for case in 0..40 {
        let zone = g.pick(&ZONES);
        let start_h = g.below(20);
        let end_h = start_h + 1 + g.below(24 - start_h);
        let mut days: Vec<String> = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
            .iter()
            .filter(|_| g.below(2) == 0)
            .map(|d| d.to_string())
            .collect();
        if days.is_empty() {
            days.push("wed".into());
        }
        let interval_min = [7, 15, 30, 45, 90][g.below(5) as usize];
        let spec = RoutineSpec {
            active_window: Some(ActiveWindow {
                weekdays: days,
                start: format!("{start_h:02}:00"),
                end: if end_h == 24 { "24:00".into() } else { format!("{end_h:02}:00") },
                timezone: zone.into(),
            }),
            ..RoutineSpec::every("a", "x", interval_min * 60)
        };
        let t = spec.timing().unwrap();
        let w = t.window.clone().unwrap();
        let from = at("UTC", "2026-03-05T00:00") + (g.below(40 * 86_400) as i64) * 1000;
        let until = from + 9 * 86_400_000;
        let slots = chain(&t, from, until);
        assert!(!slots.is_empty(), "case {case}");
        let step = interval_min * 60_000;
        for pair in slots.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(w.contains(Timestamp::from_millisecond(b).unwrap()), "case {case}: slot outside the window");
            if b != a + step {
                // A jump: a + step was outside, and nothing in [a + step, b) is inside (minute walk).
                assert!(b > a + step, "case {case}: slots closer than the interval");
                let mut m = a + step;
                while m < b {
                    assert!(!w.contains(Timestamp::from_millisecond(m).unwrap()), "case {case}: an opening was missed");
                    m += 60_000;
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 2000, "{checked}");
}
