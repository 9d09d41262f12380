//! The time zone used to display wall-clock times (`--tz`). Limits are always in
//! oplog `t:i`; only the human "when" column changes.

use chrono::{DateTime, FixedOffset, Local, Offset, TimeZone, Utc};

#[derive(Clone, Debug)]
pub enum Zone {
    Utc,
    Local,
    Fixed(FixedOffset),
    Named(chrono_tz::Tz),
}

impl Zone {
    /// Parses `UTC`, `local`, `+01:00`/`-0530`, or an IANA name such as `Europe/Berlin`.
    pub fn parse(s: &str) -> Result<Zone, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("utc") || t == "Z" {
            return Ok(Zone::Utc);
        }
        if t.eq_ignore_ascii_case("local") {
            return Ok(Zone::Local);
        }
        if t.starts_with('+') || t.starts_with('-') {
            let digits: String = t[1..].chars().filter(|c| *c != ':').collect();
            let ok = digits.len() == 4 && digits.chars().all(|c| c.is_ascii_digit());
            if ok {
                let h: i32 = digits[..2].parse().unwrap_or(99);
                let m: i32 = digits[2..].parse().unwrap_or(99);
                let secs = (h * 3600 + m * 60) * if t.starts_with('-') { -1 } else { 1 };
                if let Some(off) = FixedOffset::east_opt(secs).filter(|_| h <= 14 && m < 60) {
                    return Ok(Zone::Fixed(off));
                }
            }
            return Err(format!(
                "`{s}` is not a UTC offset; use e.g. `+01:00` or `-05:30`"
            ));
        }
        t.parse::<chrono_tz::Tz>().map(Zone::Named).map_err(|_| {
            format!("`{s}` is not a time zone; use `UTC`, `local`, an offset like `+01:00`, or an IANA name like `Europe/Berlin`")
        })
    }

    /// Column header label, e.g. `UTC` or `Europe/Berlin`.
    pub fn label(&self) -> String {
        match self {
            Zone::Utc => "UTC".into(),
            Zone::Local => "local".into(),
            Zone::Fixed(o) => o.to_string(),
            Zone::Named(tz) => tz.name().into(),
        }
    }

    /// `2026-11-21 04:12:00.123 +01:00` style; UTC shows `Z`.
    pub fn format(&self, t: DateTime<Utc>) -> String {
        let fmt = "%Y-%m-%d %H:%M:%S%.3f";
        match self {
            Zone::Utc => format!("{}Z", t.format(fmt)),
            Zone::Local => with_offset(t.with_timezone(&Local), fmt),
            Zone::Fixed(o) => with_offset(t.with_timezone(o), fmt),
            Zone::Named(tz) => with_offset(t.with_timezone(tz), fmt),
        }
    }
}

fn with_offset<Tz: TimeZone>(t: DateTime<Tz>, fmt: &str) -> String
where
    Tz::Offset: std::fmt::Display,
{
    let off = t.offset().fix();
    format!("{} {}", t.format(fmt), off)
}

pub fn parse_zone(s: &str) -> Result<Zone, String> {
    Zone::parse(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_zones() {
        let t = DateTime::from_timestamp_millis(1_763_694_720_123).unwrap();
        assert_eq!(
            Zone::parse("UTC").unwrap().format(t),
            "2025-11-21 03:12:00.123Z"
        );
        assert_eq!(
            Zone::parse("+01:00").unwrap().format(t),
            "2025-11-21 04:12:00.123 +01:00"
        );
        assert_eq!(
            Zone::parse("-0530").unwrap().format(t),
            "2025-11-20 21:42:00.123 -05:30"
        );
        assert_eq!(
            Zone::parse("Europe/Berlin").unwrap().format(t),
            "2025-11-21 04:12:00.123 +01:00"
        );
        assert!(Zone::parse("Mars/Olympus")
            .unwrap_err()
            .contains("`Mars/Olympus`"));
        assert!(Zone::parse("+25:00").is_err());
    }
}
