//! Turning kernel start times (clock ticks since boot) into ages and wall
//! clock times, and naming moments in file names.

use std::time::{SystemTime, UNIX_EPOCH};

pub use tether::sys::Clock;

/// Wall clock now, Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `YYYYMMDDTHHMMSSZ` (UTC) for a Unix time in milliseconds: sortable and
/// safe in file names.
pub fn file_stamp(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
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

    #[test]
    fn stamps_are_utc_dates() {
        assert_eq!(file_stamp(0), "19700101T000000Z");
        assert_eq!(file_stamp(951_782_400_000), "20000229T000000Z");
        assert_eq!(file_stamp(1_773_151_199_999), "20260310T135959Z");
    }

    #[test]
    fn ages_count_from_start() {
        let clock = Clock {
            ticks_per_sec: 100,
            uptime_ticks: 1_000,
            boot_time_ms: 5_000,
        };
        assert_eq!(clock.age_ms(900), 1_000);
        assert_eq!(clock.age_ms(2_000), 0, "started after the clock was read");
        assert_eq!(clock.wall_ms(100), 6_000);
    }
}
