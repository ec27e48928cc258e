//! Durations on the command line: `90`, `1.5s`, `250ms`, `2m`, `1h`.

use std::time::Duration;

/// Parses a duration; a bare number is seconds (as `timeout(1)`).
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected a number with an optional unit (ms, s, m, h), e.g. 1.5s"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "invalid duration unit {other:?} in {text:?}: use ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("invalid duration {text:?}: out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["", "s", "-1", "1d", "1.2.3", "abc", "1e400"] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }
}
