//! Byte sizes given on the command line (`--memory 512MiB`, `--chunk-size 64MiB`):
//! a number of bytes, optionally with a decimal (K, M, G) or binary (KiB, MiB, GiB)
//! unit.

/// A value that is not a size.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a size")]
pub struct SizeError(pub String);

impl crate::error::Hint for SizeError {
    fn hint(&self) -> Option<String> {
        Some(
            "give a number of bytes, optionally with K, M, G, KiB, MiB or GiB (e.g. 1073741824, 512MiB or 1GiB)"
                .into(),
        )
    }
}

/// Parses `1073741824`, `1GiB`, `500MB`, `64m`, ... (case-insensitive units).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || SizeError(s.to_string());
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

/// `1536` -> `1.5 KiB`: for messages.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Seconds as `2 d 3 h`, `3 h 12 min`, `5 min 3 s` or `42 s`.
pub fn human_secs(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min {s} s")
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1073741824").unwrap(), 1 << 30);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("500MB").unwrap(), 500_000_000);
        assert_eq!(parse_size("64m").unwrap(), 64_000_000);
        assert_eq!(parse_size(" 64 MiB ").unwrap(), 64 << 20);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("18446744073709551615GiB").is_err());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(12), "12 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(64 << 20), "64.0 MiB");
    }
}
