//! RFC 3339 timestamps in UTC, written and read without a date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// `time` as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds). Times before 1970 are written as the
/// epoch.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339_from_secs(secs)
}

/// Seconds since 1970-01-01T00:00:00Z as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339_from_secs(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Reads `YYYY-MM-DD` (midnight UTC) or `YYYY-MM-DDTHH:MM:SS` followed by `Z` or a `+HH:MM` /
/// `-HH:MM` offset, with optional fractional seconds (dropped), as seconds since
/// 1970-01-01T00:00:00Z. `None` when the text is not such a timestamp, names an impossible
/// date or time, or lies before 1970.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let text = text.trim();
    let (date, time) = match text.split_once(['T', 't']) {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut parts = date.splitn(3, '-');
    let y: i64 = digits(parts.next()?, 4)?;
    let m: i64 = digits(parts.next()?, 2)?;
    let d: i64 = digits(parts.next()?, 2)?;
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    if let Some(time) = time {
        let (clock, offset) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
            (c, 0)
        } else {
            let at = time.rfind(['+', '-'])?;
            let (c, o) = time.split_at(at);
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (oh, om) = o[1..].split_once(':')?;
            let (oh, om): (i64, i64) = (digits(oh, 2)?, digits(om, 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            (c, sign * (oh * 3600 + om * 60))
        };
        let clock = clock.split_once('.').map_or(clock, |(whole, frac)| {
            if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
                ""
            } else {
                whole
            }
        });
        let mut hms = clock.splitn(3, ':');
        let h: i64 = digits(hms.next()?, 2)?;
        let mi: i64 = digits(hms.next()?, 2)?;
        let s: i64 = digits(hms.next()?, 2)?;
        if h > 23 || mi > 59 || s > 60 {
            return None;
        }
        secs += h * 3600 + mi * 60 + s - offset;
    }
    u64::try_from(secs).ok()
}

/// Exactly `len` ASCII digits, as a number.
fn digits(text: &str, len: usize) -> Option<i64> {
    if text.len() != len || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The day count since 1970-01-01 of a proleptic Gregorian date (the inverse of
/// [`civil_from_days`]).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm: eras of 400 years, March-based years).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> String {
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(951_868_799), "2000-02-29T23:59:59Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(1_709_164_800), "2024-02-29T00:00:00Z");
        assert_eq!(at(4_102_444_800), "2100-01-01T00:00:00Z");
        assert_eq!(at(253_402_300_799), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn parses_what_it_writes_and_github_forms() {
        for secs in [0, 951_782_400, 951_868_799, 1_700_000_000, 253_402_300_799] {
            assert_eq!(parse_rfc3339(&rfc3339_from_secs(secs)), Some(secs));
        }
        assert_eq!(parse_rfc3339("2023-11-14"), Some(1_699_920_000));
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000)
        );
        assert_eq!(
            parse_rfc3339("2023-11-15T00:13:20+02:00"),
            Some(1_700_000_000)
        );
        assert_eq!(
            parse_rfc3339("2023-11-14T20:13:20-02:00"),
            Some(1_700_000_000)
        );
        for bad in [
            "",
            "2023-13-01",
            "2023-02-29",
            "2023-11-14T25:00:00Z",
            "2023-11-14T22:13:20",
            "2023-11-14T22:13:20.Z",
            "23-11-14",
            "1969-12-31",
            "soon",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        assert_eq!(parse_rfc3339("2024-02-29"), Some(1_709_164_800));
    }

    #[test]
    fn every_day_follows_the_previous_one() {
        // Walk 800 years day by day: dates must be strictly increasing and valid.
        let mut prev = civil_from_days(-1);
        for day in 0..(800 * 366) {
            let cur = civil_from_days(day);
            assert!(cur > prev, "{cur:?} after {prev:?}");
            assert!((1..=12).contains(&cur.1) && (1..=31).contains(&cur.2));
            assert_eq!(
                days_from_civil(cur.0, i64::from(cur.1), i64::from(cur.2)),
                day
            );
            prev = cur;
        }
    }
}
