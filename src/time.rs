//! The one parser for every time value on the command line (`--since`, `--until`,
//! `pitr ts`, `pitr oid at`).
//!
//! A value becomes an oplog position [`Ts`]. Accepted forms:
//! - `T:I`, `T:` and `T`, read exactly as mongorestore reads `--oplogLimit`
//!   (`T` and `T:` mean ordinal 0; a bare `T` is also epoch seconds);
//! - RFC 3339 with `Z` or an offset (never a guessed local zone), truncated to the
//!   second because oplog positions are whole seconds plus an ordinal;
//! - `oid:<24 hex digits>`: the creation second of an ObjectId;
//! - a timestamp as the shells and tools print it, pasted whole (surrounding and
//!   inner spaces allowed): `Timestamp(T, I)` (legacy `mongo` shell),
//!   `Timestamp({ t: T, i: I })` (mongosh), `{"$timestamp": {"t": T, "i": I}}`
//!   (extended JSON: `pitr oplog cat --json`, bsondump, mongoexport). Each is the exact
//!   position `T:I`.
//!
//! A 13-digit number is epoch milliseconds (what `Date.now()` and an entry's `wall`
//! print), never read as seconds: it is refused with the seconds value it most likely
//! means (16 and 19 digits likewise, as micro- and nanoseconds).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime};

use crate::error::Hint;
use crate::objectid::{self, ObjectIdError};
use crate::oplog::timestamp::Ts;

/// The accepted forms, in one line, for error messages (clap shows only an error's
/// Display, so it has to carry this itself).
const SHORT_FORMS: &str = "expected T:I, T, T:, epoch seconds, RFC 3339 with Z or an offset, \
    oid:<24 hex digits>, or Timestamp(T, I)";

/// The accepted forms in full, for hints.
const LONG_FORMS: &str = "accepted forms: `T:I` (oplog position, as mongorestore --oplogLimit), \
    `T` or `T:` (second T, ordinal 0), epoch seconds, RFC 3339 such as \
    `2026-11-21T03:12:00Z` or `...+01:00`, `oid:<24 hex digits>`, or a timestamp as a shell \
    prints it: `Timestamp(T, I)`, `Timestamp({ t: T, i: I })`, `{\"$timestamp\": {\"t\": T, \"i\": I}}`";

/// A parsed time value: the position it stands for, how it was written, and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeValue {
    pub ts: Ts,
    pub form: TimeForm,
    /// The value exactly as given.
    pub input: String,
}

/// How a time value was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeForm {
    /// `T:I` (`ordinal_given`) or `T:` (ordinal 0, not given).
    OplogTs { ordinal_given: bool },
    /// A bare integer: epoch seconds, ordinal 0.
    EpochSeconds,
    /// RFC 3339 with `Z` or an offset; `subsec_dropped` when a fraction of a second
    /// was truncated away.
    Rfc3339 { subsec_dropped: bool },
    /// `oid:<hex>`: the ObjectId's creation second, ordinal 0.
    ObjectId,
}

impl TimeForm {
    /// A stable snake_case name for JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeForm::OplogTs { .. } => "oplog_ts",
            TimeForm::EpochSeconds => "epoch_seconds",
            TimeForm::Rfc3339 { .. } => "rfc3339",
            TimeForm::ObjectId => "object_id",
        }
    }
}

impl TimeValue {
    /// True only for `T:I` with an explicit ordinal: a position inside a second rather
    /// than the start of one.
    pub fn is_exact_position(&self) -> bool {
        matches!(
            self.form,
            TimeForm::OplogTs {
                ordinal_given: true
            }
        )
    }

    /// For messages: e.g. `oplog position 1700000000:3`, or
    /// `2026-11-21T02:12:00Z (from 2026-11-21T03:12:00+01:00)`.
    pub fn describe(&self) -> String {
        let utc = self.ts.utc_string();
        match self.form {
            TimeForm::OplogTs {
                ordinal_given: true,
            } => format!("oplog position {}", self.ts),
            TimeForm::OplogTs {
                ordinal_given: false,
            } => format!("oplog position {} ({utc})", self.ts),
            TimeForm::EpochSeconds => format!("{utc} (epoch seconds {})", self.ts.t),
            TimeForm::Rfc3339 { subsec_dropped } => {
                let mut notes = Vec::new();
                if self.input != utc {
                    notes.push(format!("from {}", self.input));
                }
                if subsec_dropped {
                    notes.push("fraction of a second dropped".to_string());
                }
                if notes.is_empty() {
                    utc
                } else {
                    format!("{utc} ({})", notes.join(", "))
                }
            }
            TimeForm::ObjectId => format!("{utc} (creation second of {})", self.input),
        }
    }
}

impl FromStr for TimeValue {
    type Err = TimeError;

    fn from_str(s: &str) -> Result<TimeValue, TimeError> {
        parse_time(s)
    }
}

/// Which half of `T:I` a number problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Seconds,
    Ordinal,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Seconds => "seconds",
            Part::Ordinal => "ordinal",
        })
    }
}

/// Why a string is not a time value. Every message names the value in backticks.
#[derive(Debug, thiserror::Error)]
pub enum TimeError {
    #[error("empty time value ({SHORT_FORMS})")]
    Empty,

    #[error("`{input}` is not a time value: more than one `:` ({SHORT_FORMS})")]
    TooManyColons { input: String },

    #[error("`{input}` is not a time value: the {part} part is empty ({SHORT_FORMS})")]
    EmptyPart { input: String, part: Part },

    #[error("`{input}` is not a time value: the {part} part `{text}` is not a decimal number ({SHORT_FORMS})")]
    NotDecimal {
        input: String,
        part: Part,
        text: String,
    },

    #[error(
        "`{input}` is not a time value: the {part} part {text} is larger than 4294967295 (32 bits)"
    )]
    TooLarge {
        input: String,
        part: Part,
        text: String,
    },

    #[error(
        "`{input}` is not a time value: {} has {} digits, like epoch {unit}; \
         did you mean `{suggestion}` ({utc})?",
        if text == input { "it".to_string() } else { format!("`{text}`") },
        text.len()
    )]
    SubSecondEpoch {
        input: String,
        /// The offending number.
        text: String,
        /// `milliseconds`, `microseconds` or `nanoseconds`.
        unit: &'static str,
        /// `input` with that number in seconds.
        suggestion: String,
        /// The second it stands for, RFC 3339 UTC.
        utc: String,
    },

    #[error("`{input}` is not a time value: {detail} (expected `Timestamp(T, I)`, `Timestamp({{ t: T, i: I }})` or `{{\"$timestamp\": {{\"t\": T, \"i\": I}}}}`)")]
    BadPastedTimestamp { input: String, detail: String },

    #[error("`{input}` has no UTC offset: add `Z` for UTC or an offset such as `+01:00`")]
    NoOffset { input: String },

    #[error("`{input}` is a date without a time of day: write e.g. `{input}T00:00:00Z`")]
    DateOnly { input: String },

    #[error("`{input}` is not a valid RFC 3339 time: {source} (e.g. `2026-11-21T03:12:00Z`)")]
    BadRfc3339 {
        input: String,
        #[source]
        source: chrono::ParseError,
    },

    #[error("`{input}` is before 1970-01-01T00:00:00Z: oplog times start at the Unix epoch")]
    BeforeEpoch { input: String },

    #[error(
        "`{input}` is after 2106-02-07T06:28:15Z, the last second an oplog timestamp can hold"
    )]
    AfterMax { input: String },

    #[error("`{input}` is not a time value: {source}")]
    ObjectId {
        input: String,
        #[source]
        source: ObjectIdError,
    },
}

impl Hint for TimeError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            TimeError::NoOffset { .. } => {
                "pitr never guesses the local time zone; e.g. `2026-11-21T03:12:00Z` or \
                 `2026-11-21T03:12:00+01:00`"
                    .to_string()
            }
            TimeError::DateOnly { .. } | TimeError::BadRfc3339 { .. } => format!(
                "RFC 3339 is `YYYY-MM-DDTHH:MM:SS` plus `Z` or `+HH:MM`, optionally with \
                 fractional seconds; {LONG_FORMS}"
            ),
            TimeError::BeforeEpoch { .. } | TimeError::AfterMax { .. } => {
                "oplog positions and ObjectIds hold unsigned 32-bit seconds: \
                 1970-01-01T00:00:00Z to 2106-02-07T06:28:15Z"
                    .to_string()
            }
            TimeError::ObjectId { source, .. } => source.hint().unwrap_or_default(),
            TimeError::SubSecondEpoch {
                unit, suggestion, ..
            } => format!(
                "oplog times are whole seconds: write the epoch in seconds (`{suggestion}`), \
                 or RFC 3339; a number of epoch {unit} is never read as seconds (that would be \
                 tens of thousands of years from now)"
            ),
            TimeError::NotDecimal { input, .. } | TimeError::TooManyColons { input } => {
                match misplaced_form_hint(input) {
                    Some(h) => format!("{h}; {LONG_FORMS}"),
                    None => LONG_FORMS.to_string(),
                }
            }
            _ => LONG_FORMS.to_string(),
        })
    }
}

/// 13 digits is what `Date.now()` and `wall` in milliseconds look like today (16
/// and 19: micro- and nanoseconds). Any of them read as seconds is past 2106, beyond
/// what an oplog timestamp holds; it is refused with the seconds it most likely means.
fn sub_second_epoch(input: &str, text: &str) -> Option<TimeError> {
    let unit = match text.len() {
        13 => "milliseconds",
        16 => "microseconds",
        19 => "nanoseconds",
        _ => return None,
    };
    let secs: u32 = text[..10].parse().ok()?;
    Some(TimeError::SubSecondEpoch {
        input: input.into(),
        text: text.into(),
        unit,
        suggestion: input.replacen(text, &secs.to_string(), 1),
        utc: Ts::new(secs, 0).utc_string(),
    })
}

/// A hint for values that are a known form written the wrong way.
fn misplaced_form_hint(input: &str) -> Option<String> {
    if let Ok(oid) = objectid::parse(input) {
        return Some(format!(
            "for the creation second of an ObjectId write `oid:{}`",
            oid.to_hex()
        ));
    }
    None
}

/// Parses any accepted time value. Usable as a clap `value_parser`.
pub fn parse_time(s: &str) -> Result<TimeValue, TimeError> {
    if s.is_empty() {
        return Err(TimeError::Empty);
    }
    if let Some(hex) = strip_prefix_ignore_case(s, "oid:") {
        return parse_oid_form(s, hex);
    }
    if looks_like_date(s) {
        return parse_rfc3339(s);
    }
    if let Some(v) = pasted::parse(s) {
        return v;
    }
    parse_oplog_ts(s)
}

/// Timestamps pasted from a shell or from extended JSON (see the module
/// documentation): `Timestamp(T, I)`, `Timestamp({ t: T, i: I })` (keys in either
/// order, quoted or not, optional `new`), `{"$timestamp": {"t": T, "i": I}}`.
/// Spaces may sit anywhere between tokens, never inside a number.
mod pasted {
    use super::{parse_u32_part, Part, TimeError, TimeForm, TimeValue, Ts};

    #[derive(Debug, PartialEq, Eq)]
    enum Tok<'a> {
        /// A word or number: letters, digits, `$`, `_`.
        Word(&'a str),
        /// A quoted word (`"t"`, `'i'`, `"$timestamp"`).
        Quoted(&'a str),
        Punct(char),
    }

    fn tokens(s: &str) -> Option<Vec<Tok<'_>>> {
        let mut out = Vec::new();
        let b = s.as_bytes();
        let mut k = 0;
        while k < b.len() {
            let c = b[k];
            if c.is_ascii_whitespace() {
                k += 1;
            } else if c.is_ascii_alphanumeric() || c == b'$' || c == b'_' {
                let start = k;
                while k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'$' || b[k] == b'_')
                {
                    k += 1;
                }
                out.push(Tok::Word(&s[start..k]));
            } else if c == b'"' || c == b'\'' {
                let end = s[k + 1..].find(c as char)? + k + 1;
                out.push(Tok::Quoted(&s[k + 1..end]));
                k = end + 1;
            } else if b"(){}:,".contains(&c) {
                out.push(Tok::Punct(c as char));
                k += 1;
            } else {
                return None;
            }
        }
        Some(out)
    }

    /// `None` when `s` does not look like one of these forms at all (other parsers
    /// then have their say); `Some(Err)` when it does but is malformed.
    pub(super) fn parse(s: &str) -> Option<Result<TimeValue, TimeError>> {
        let t = s.trim();
        let shell = t
            .strip_prefix("new ")
            .map_or(t, str::trim_start)
            .get(..9)
            .is_some_and(|w| w.eq_ignore_ascii_case("timestamp"));
        if !shell && !t.starts_with('{') {
            return None;
        }
        let bad = |detail: &str| TimeError::BadPastedTimestamp {
            input: s.into(),
            detail: detail.into(),
        };
        let Some(toks) = tokens(t) else {
            return Some(Err(bad("unexpected characters")));
        };
        Some(
            (if shell {
                shell_form(s, &toks)
            } else {
                json_form(s, &toks)
            })
            .and_then(|r| {
                r.map(|(secs, ord)| TimeValue {
                    ts: Ts::new(secs, ord),
                    form: TimeForm::OplogTs {
                        ordinal_given: true,
                    },
                    input: s.into(),
                })
                .ok_or_else(|| {
                    bad(if shell {
                        "not a `Timestamp(T, I)` or `Timestamp({ t: T, i: I })`"
                    } else {
                        "not a `{\"$timestamp\": {\"t\": T, \"i\": I}}`"
                    })
                })
            }),
        )
    }

    type Found = Result<Option<(u32, u32)>, TimeError>;

    /// `[new] Timestamp ( T , I )` or `[new] Timestamp ( { t : T , i : I } )`.
    fn shell_form(input: &str, toks: &[Tok<'_>]) -> Found {
        let mut rest = toks;
        if let [Tok::Word(w), tail @ ..] = rest {
            if *w == "new" {
                rest = tail;
            }
        }
        let [Tok::Word(_), Tok::Punct('('), inner @ .., Tok::Punct(')')] = rest else {
            return Ok(None);
        };
        match inner {
            [Tok::Word(t), Tok::Punct(','), Tok::Word(i)] => Ok(Some((
                parse_u32_part(input, t, Part::Seconds)?,
                parse_u32_part(input, i, Part::Ordinal)?,
            ))),
            [Tok::Punct('{'), ..] => object(input, inner),
            _ => Ok(None),
        }
    }

    /// `{ "$timestamp" : { "t" : T , "i" : I } }`.
    fn json_form(input: &str, toks: &[Tok<'_>]) -> Found {
        let [Tok::Punct('{'), key, Tok::Punct(':'), inner @ .., Tok::Punct('}')] = toks else {
            return Ok(None);
        };
        if !matches!(key, Tok::Quoted("$timestamp") | Tok::Word("$timestamp")) {
            return Ok(None);
        }
        object(input, inner)
    }

    /// `{ t : T , i : I }`, keys in either order, quoted or not.
    fn object(input: &str, toks: &[Tok<'_>]) -> Found {
        let [Tok::Punct('{'), k1, Tok::Punct(':'), Tok::Word(v1), Tok::Punct(','), k2, Tok::Punct(':'), Tok::Word(v2), Tok::Punct('}')] =
            toks
        else {
            return Ok(None);
        };
        fn key<'a>(k: &Tok<'a>) -> Option<&'a str> {
            match k {
                Tok::Word(w) | Tok::Quoted(w) => Some(*w),
                Tok::Punct(_) => None,
            }
        }
        let (t, i) = match (key(k1), key(k2)) {
            (Some("t"), Some("i")) => (v1, v2),
            (Some("i"), Some("t")) => (v2, v1),
            _ => return Ok(None),
        };
        Ok(Some((
            parse_u32_part(input, t, Part::Seconds)?,
            parse_u32_part(input, i, Part::Ordinal)?,
        )))
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `YYYY-` at the start: an RFC 3339 attempt, not a `T:I`.
fn looks_like_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 5 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

/// `T`, `T:` or `T:I`, exactly as mongorestore's `--oplogLimit`.
fn parse_oplog_ts(s: &str) -> Result<TimeValue, TimeError> {
    let mut parts = s.split(':');
    let secs = parts.next().unwrap_or_default();
    let ordinal = parts.next();
    if parts.next().is_some() {
        return Err(TimeError::TooManyColons { input: s.into() });
    }
    let t = parse_u32_part(s, secs, Part::Seconds)?;
    let (i, form) = match ordinal {
        None => (0, TimeForm::EpochSeconds),
        Some("") => (
            0,
            TimeForm::OplogTs {
                ordinal_given: false,
            },
        ),
        Some(o) => (
            parse_u32_part(s, o, Part::Ordinal)?,
            TimeForm::OplogTs {
                ordinal_given: true,
            },
        ),
    };
    Ok(TimeValue {
        ts: Ts::new(t, i),
        form,
        input: s.into(),
    })
}

/// Plain decimal digits that fit u32 (no sign, spaces, `_` or `0x`, like Go's
/// `strconv.ParseUint(s, 10, 32)`).
fn parse_u32_part(input: &str, text: &str, part: Part) -> Result<u32, TimeError> {
    if text.is_empty() {
        return Err(TimeError::EmptyPart {
            input: input.into(),
            part,
        });
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TimeError::NotDecimal {
            input: input.into(),
            part,
            text: text.into(),
        });
    }
    text.parse::<u32>().map_err(|_| {
        (part == Part::Seconds)
            .then(|| sub_second_epoch(input, text))
            .flatten()
            .unwrap_or_else(|| TimeError::TooLarge {
                input: input.into(),
                part,
                text: text.into(),
            })
    })
}

/// `oid:<hex>`: the creation second, ordinal 0.
fn parse_oid_form(input: &str, hex: &str) -> Result<TimeValue, TimeError> {
    let oid = objectid::parse(hex).map_err(|source| TimeError::ObjectId {
        input: input.into(),
        source,
    })?;
    Ok(TimeValue {
        ts: Ts::new(objectid::creation_seconds(&oid), 0),
        form: TimeForm::ObjectId,
        input: input.into(),
    })
}

/// RFC 3339 (`T` or a space between date and time) with `Z` or an offset.
fn parse_rfc3339(s: &str) -> Result<TimeValue, TimeError> {
    let dt = DateTime::parse_from_rfc3339(s).map_err(|e| rfc3339_error(s, e))?;
    let t = seconds_in_range(s, &dt)?;
    Ok(TimeValue {
        ts: Ts::new(t, 0),
        form: TimeForm::Rfc3339 {
            subsec_dropped: dt.timestamp_subsec_nanos() != 0,
        },
        input: s.into(),
    })
}

/// Tells a missing offset or a missing time of day apart from other syntax errors.
fn rfc3339_error(s: &str, source: chrono::ParseError) -> TimeError {
    let naive = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .any(|f| NaiveDateTime::parse_from_str(s, f).is_ok());
    if naive {
        TimeError::NoOffset { input: s.into() }
    } else if NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() {
        TimeError::DateOnly { input: s.into() }
    } else {
        TimeError::BadRfc3339 {
            input: s.into(),
            source,
        }
    }
}

/// Whole seconds since the epoch, which must fit u32.
fn seconds_in_range(s: &str, dt: &DateTime<FixedOffset>) -> Result<u32, TimeError> {
    let secs = dt.timestamp();
    if secs < 0 {
        return Err(TimeError::BeforeEpoch { input: s.into() });
    }
    u32::try_from(secs).map_err(|_| TimeError::AfterMax { input: s.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> TimeValue {
        match parse_time(s) {
            Ok(v) => v,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    fn err(s: &str) -> TimeError {
        match parse_time(s) {
            Ok(v) => panic!("{s:?} should be rejected, got {v:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn oplog_limit_forms_like_mongorestore() {
        let v = ok("5");
        assert_eq!((v.ts, v.form), (Ts::new(5, 0), TimeForm::EpochSeconds));
        assert!(!v.is_exact_position());
        let v = ok("5:");
        assert_eq!(
            (v.ts, v.form),
            (
                Ts::new(5, 0),
                TimeForm::OplogTs {
                    ordinal_given: false
                }
            )
        );
        assert!(!v.is_exact_position());
        let v = ok("5:1");
        assert_eq!(
            (v.ts, v.form),
            (
                Ts::new(5, 1),
                TimeForm::OplogTs {
                    ordinal_given: true
                }
            )
        );
        assert!(v.is_exact_position());
        assert!(ok("5:0").is_exact_position());
        assert_eq!(ok("4294967295:4294967295").ts, Ts::MAX);
        assert_eq!(ok("0005:01").ts, Ts::new(5, 1));
        assert_eq!(ok("5:1").input, "5:1");
    }

    #[test]
    fn oplog_limit_rejections() {
        assert!(matches!(err("5:1:2"), TimeError::TooManyColons { .. }));
        assert!(matches!(
            err("4294967296"),
            TimeError::TooLarge {
                part: Part::Seconds,
                ..
            }
        ));
        assert!(matches!(
            err("4294967296:0"),
            TimeError::TooLarge {
                part: Part::Seconds,
                ..
            }
        ));
        assert!(matches!(
            err("5:4294967296"),
            TimeError::TooLarge {
                part: Part::Ordinal,
                ..
            }
        ));
        assert!(matches!(err(""), TimeError::Empty));
        assert!(matches!(err(":5"), TimeError::EmptyPart { .. }));
        for s in [
            "-1", "+5", "abc", "0x10", " 5", "5 ", "5: 1", "1_000", "5:-1", "1e9",
        ] {
            assert!(
                matches!(err(s), TimeError::NotDecimal { .. }),
                "{s:?}: {}",
                err(s)
            );
        }
    }

    #[test]
    fn error_messages_name_the_value_and_list_forms() {
        let e = err("5:1:2");
        assert_eq!(
            e.to_string(),
            format!("`5:1:2` is not a time value: more than one `:` ({SHORT_FORMS})")
        );
        let hint = e.hint().unwrap_or_default();
        assert!(hint.starts_with("accepted forms: `T:I`"), "{hint}");
        assert!(err("0x10").to_string().contains("`0x10`"));
        assert!(err("1700000000000")
            .hint()
            .is_some_and(|h| h.contains("milliseconds")));
        assert!(err("47cc67093475061e3d95369d")
            .hint()
            .is_some_and(|h| h.contains("`oid:47cc67093475061e3d95369d`")));
    }

    #[test]
    fn rfc3339_with_z_and_offsets() {
        let v = ok("2026-11-21T03:12:00Z");
        assert_eq!(v.ts.utc_string(), "2026-11-21T03:12:00Z");
        assert_eq!(
            v.form,
            TimeForm::Rfc3339 {
                subsec_dropped: false
            }
        );
        assert_eq!(v.describe(), "2026-11-21T03:12:00Z");
        let v = ok("2026-11-21T03:12:00+01:00");
        assert_eq!(v.ts, ok("2026-11-21T02:12:00Z").ts);
        assert_eq!(
            v.describe(),
            "2026-11-21T02:12:00Z (from 2026-11-21T03:12:00+01:00)"
        );
        let v = ok("2026-11-21T03:12:00-05:30");
        assert_eq!(v.ts.utc_string(), "2026-11-21T08:42:00Z");
        assert_eq!(ok("2026-11-21 03:12:00Z").ts, ok("2026-11-21T03:12:00Z").ts);
        assert_eq!(ok("1970-01-01T00:00:00Z").ts, Ts::ZERO);
        assert_eq!(ok("2106-02-07T06:28:15Z").ts, Ts::new(u32::MAX, 0));
        assert_eq!(ok("2038-01-19T03:14:08Z").ts, Ts::new(1 << 31, 0));
    }

    #[test]
    fn rfc3339_fraction_is_truncated_not_rounded() {
        let v = ok("2026-11-21T03:12:00.999Z");
        assert_eq!(v.ts, ok("2026-11-21T03:12:00Z").ts);
        assert_eq!(
            v.form,
            TimeForm::Rfc3339 {
                subsec_dropped: true
            }
        );
        assert_eq!(
            v.describe(),
            "2026-11-21T03:12:00Z (from 2026-11-21T03:12:00.999Z, fraction of a second dropped)"
        );
        assert_eq!(
            ok("2026-11-21T03:12:00.000Z").form,
            TimeForm::Rfc3339 {
                subsec_dropped: false
            }
        );
    }

    #[test]
    fn rfc3339_rejections() {
        for s in [
            "2026-11-21T03:12:00",
            "2026-11-21 03:12:00.5",
            "2026-11-21T03:12",
        ] {
            let e = err(s);
            assert!(matches!(e, TimeError::NoOffset { .. }), "{s:?}: {e}");
            assert!(e.to_string().contains("add `Z`"));
        }
        assert!(matches!(err("2026-11-21"), TimeError::DateOnly { .. }));
        assert!(matches!(
            err("1969-12-31T23:59:59Z"),
            TimeError::BeforeEpoch { .. }
        ));
        assert!(matches!(
            err("1970-01-01T00:30:00+01:00"),
            TimeError::BeforeEpoch { .. }
        ));
        assert!(matches!(
            err("2106-02-07T06:28:16Z"),
            TimeError::AfterMax { .. }
        ));
        assert!(matches!(
            err("2026-13-01T00:00:00Z"),
            TimeError::BadRfc3339 { .. }
        ));
        assert!(matches!(
            err("2026-11-21T03:12:00Zjunk"),
            TimeError::BadRfc3339 { .. }
        ));
    }

    #[test]
    fn object_id_form_uses_creation_second() {
        let v = ok("oid:47cc67093475061e3d95369d");
        assert_eq!(v.ts, Ts::new(1204578057, 0));
        assert_eq!(v.ts.utc_string(), "2008-03-03T21:00:57Z");
        assert_eq!(v.form, TimeForm::ObjectId);
        assert!(!v.is_exact_position());
        assert_eq!(ok("OID:ffffffff0000000000000000").ts, Ts::new(u32::MAX, 0));
        assert_eq!(
            ok("oid:800000000000000000000000").ts.utc_string(),
            "2038-01-19T03:14:08Z"
        );
        let e = err("oid:47cc");
        assert!(matches!(e, TimeError::ObjectId { .. }));
        assert!(e.to_string().contains("`oid:47cc`"));
        assert!(e.hint().is_some_and(|h| h.contains("24 hex digits")));
    }

    #[test]
    fn describe_each_form() {
        assert_eq!(ok("1700000000:3").describe(), "oplog position 1700000000:3");
        assert_eq!(
            ok("1700000000:").describe(),
            "oplog position 1700000000:0 (2023-11-14T22:13:20Z)"
        );
        assert_eq!(
            ok("1700000000").describe(),
            "2023-11-14T22:13:20Z (epoch seconds 1700000000)"
        );
        assert_eq!(
            ok("oid:47cc67093475061e3d95369d").describe(),
            "2008-03-03T21:00:57Z (creation second of oid:47cc67093475061e3d95369d)"
        );
    }

    /// Issue 17 item 16: a timestamp copied from mongosh or the legacy shell was
    /// refused ("the seconds part `Timestamp(1795223165, 1)` is not a decimal number").
    #[test]
    fn timestamps_as_the_shells_and_extended_json_print_them() {
        for s in [
            "Timestamp(1795223165, 1)",
            "Timestamp(1795223165,1)",
            "  Timestamp( 1795223165 ,  1 )  ",
            "new Timestamp(1795223165, 1)",
            "Timestamp({ t: 1795223165, i: 1 })",
            "Timestamp({t:1795223165,i:1})",
            "Timestamp({ i: 1, t: 1795223165 })",
            "Timestamp({ \"t\": 1795223165, \"i\": 1 })",
            "{\"$timestamp\":{\"t\":1795223165,\"i\":1}}",
            " { \"$timestamp\" : { \"t\" : 1795223165 , \"i\" : 1 } } ",
        ] {
            let v = ok(s);
            assert_eq!(v.ts, Ts::new(1795223165, 1), "{s:?}");
            assert!(v.is_exact_position(), "{s:?}");
            assert_eq!(v.input, s);
        }
        for s in [
            "Timestamp(1795223165)",
            "Timestamp(1795223165, 1, 2)",
            "Timestamp({ t: 1795223165 })",
            "Timestamp({ t: 1795223165, x: 1 })",
            "Timestamp(17952 23165, 1)",
            "Timestamp(1795223165, -1)",
            "{\"$date\": 5}",
            "Timestamp(1795223165, 1",
        ] {
            let e = err(s);
            assert!(e.to_string().contains(&format!("`{s}`")), "{s:?}: {e}");
        }
        assert!(matches!(
            err("Timestamp(4294967296, 1)"),
            TimeError::TooLarge { .. }
        ));
        // Spaces are not allowed around the plain forms (as mongorestore).
        assert!(matches!(err(" 5:1"), TimeError::NotDecimal { .. }));
    }

    /// Issue 17 item 16: a millisecond epoch is never taken as seconds; the error
    /// itself (clap shows only the message for a flag value) names the seconds value.
    #[test]
    fn sub_second_epochs_are_refused_with_the_seconds_they_mean() {
        let e = err("1795223165000");
        assert!(matches!(e, TimeError::SubSecondEpoch { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("epoch milliseconds"), "{msg}");
        assert!(
            msg.contains("it has 13 digits, like epoch milliseconds; did you mean `1795223165` (2026-11-21T01:06:05Z)?"),
            "{msg}"
        );
        assert!(e.hint().unwrap().contains("`1795223165`"));
        let msg = err("1795223165123:4").to_string();
        assert!(msg.contains("did you mean `1795223165:4`"), "{msg}");
        assert!(err("1795223165123456").to_string().contains("microseconds"));
        assert!(err("1795223165123456789")
            .to_string()
            .contains("nanoseconds"));
        // Not a sub-second epoch: too large, and no guess.
        assert!(matches!(err("17952231650"), TimeError::TooLarge { .. }));
        assert!(matches!(err("9795223165000"), TimeError::TooLarge { .. }));
        assert!(matches!(err("5:1795223165000"), TimeError::TooLarge { .. }));
    }

    #[test]
    fn from_str_matches_parse_time() {
        let v: TimeValue = "5:1".parse().expect("valid");
        assert_eq!(v, ok("5:1"));
    }
}
