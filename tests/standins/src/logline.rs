//! Time stamps in the two formats the real tools print: the database tools'
//! `2026-11-22T03:10:00.000+0000<TAB>message` lines and mongod's JSON log `$date`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Civil date (year, month, day) from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `2026-11-22T03:10:00.000` (UTC) for a millisecond time.
fn format_base(millis: i64) -> String {
    let secs = millis.div_euclid(1000);
    let ms = millis.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// The database tools' stamp: `2026-11-22T03:10:00.000+0000` (always UTC here).
pub fn tools_stamp(millis: i64) -> String {
    format!("{}+0000", format_base(millis))
}

/// mongod's JSON log stamp: `2026-11-22T03:10:00.000+00:00`.
pub fn mongod_stamp(millis: i64) -> String {
    format!("{}+00:00", format_base(millis))
}

/// Print one line to stderr the way mongo-tools' logger does.
pub fn tool_log(msg: impl AsRef<str>) {
    eprintln!("{}\t{}", tools_stamp(now_millis()), msg.as_ref());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(tools_stamp(0), "1970-01-01T00:00:00.000+0000");
        // 2014-11-18T20:24:25Z is ts 1416342265 of the mongo-tools known answer.
        assert_eq!(
            tools_stamp(1_416_342_265_123),
            "2014-11-18T20:24:25.123+0000"
        );
        assert_eq!(
            mongod_stamp(951_782_400_000),
            "2000-02-29T00:00:00.000+00:00"
        );
    }
}
