//! `--until`: from what the user typed to the exact exclusive limit `t:i`.
//!
//! - `t:i` with an ordinal is used as is (the plan says whether an entry has exactly
//!   that ts: that entry is the first one not applied);
//! - a wall-clock value (RFC 3339, epoch seconds, `T`/`T:`, `oid:`) is mapped to the
//!   FIRST entry at or after that second (`ts >= T:0`, over the backup's oplog up to
//!   its end and the replay oplog), and that entry's ts is the limit: everything
//!   before the second is applied, nothing from it on; the plan names the entry;
//! - `auto`: the first critical or high-severity destructive operation after the
//!   backup's end (as `pitr find-drop` reports it, with the backup's metadata to tell
//!   routine operations apart: those are never chosen), its `oplog_limit`;
//! - `end`: just after the last entry of the backup's oplog and the replay oplog
//!   (replays everything those files hold).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::forensics::{Finding, Kind, Severity};
use crate::oplog::Ts;
use crate::time::{parse_time, TimeError, TimeValue};

use super::coverage::CoverageError;
use super::error::PlanError;
use super::filter::NsFilter;
use super::scan::{EntryRef, OplogScan};
use super::ts_json;

/// A parsed `--until`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UntilSpec {
    Time(TimeValue),
    Auto,
    End,
}

/// A `--until` that is neither a time value nor `auto`/`end`.
#[derive(Debug, thiserror::Error)]
#[error("{0} (or `auto`: just before the first destructive operation; `end`: replay everything)")]
pub struct UntilParseError(#[source] pub TimeError);

/// clap value parser for `--until`.
pub fn parse_until(s: &str) -> Result<UntilSpec, UntilParseError> {
    match s {
        "auto" => Ok(UntilSpec::Auto),
        "end" => Ok(UntilSpec::End),
        _ => parse_time(s).map(UntilSpec::Time).map_err(UntilParseError),
    }
}

impl fmt::Display for UntilSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UntilSpec::Time(t) => f.write_str(&t.input),
            UntilSpec::Auto => f.write_str("auto"),
            UntilSpec::End => f.write_str("end"),
        }
    }
}

/// The destructive operation `--until auto` chose. JSON: `kind`, `severity`, `ns`,
/// `ts`, `oplog_limit`, `num_records`, `collections`, `details` (as in find-drop).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingRef {
    pub kind: String,
    pub severity: String,
    pub ns: String,
    #[serde(deserialize_with = "ts_json::de")]
    pub ts: Ts,
    #[serde(deserialize_with = "ts_json::de")]
    pub oplog_limit: Ts,
    pub num_records: Option<i64>,
    pub collections: Vec<String>,
    pub details: String,
    /// The incident's last entry (a burst's last delete); null in older plans.
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub last_ts: Option<Ts>,
    /// Entries involved (a burst's deletes or updates).
    #[serde(default)]
    pub count: u64,
}

impl FindingRef {
    fn of(f: &Finding) -> FindingRef {
        FindingRef {
            kind: f.kind.as_str().to_string(),
            severity: f.severity.as_str().to_string(),
            ns: f.ns.clone(),
            ts: f.ts,
            oplog_limit: f.oplog_limit,
            num_records: f.num_records,
            collections: f.collections.clone(),
            details: f.details.clone(),
            last_ts: Some(f.last_ts),
            count: f.count,
        }
    }
}

/// How the limit was chosen. JSON: `input` (as typed), `form` (`oplog_ts`,
/// `epoch_seconds`, `rfc3339`, `object_id`, `auto`, `end`), `limit` (`"t:i"`),
/// `limit_utc`, `exclusive` (always true: entries with ts < limit are applied),
/// `mapped` (a wall-clock value mapped to the first entry at or after it),
/// `requested` (`"t:i"` the value itself stands for, or null for auto/end),
/// `exact_entry` (an entry has exactly ts = limit), `entry_at_limit` (the first
/// entry at or after the limit: the first one NOT applied; null when none is known),
/// `finding` (for auto), `explanation` (one sentence).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntilSection {
    pub input: String,
    pub form: String,
    #[serde(deserialize_with = "ts_json::de")]
    pub limit: Ts,
    pub limit_utc: String,
    pub exclusive: bool,
    pub mapped: bool,
    #[serde(default, deserialize_with = "ts_json::de_opt")]
    pub requested: Option<Ts>,
    pub exact_entry: bool,
    pub entry_at_limit: Option<EntryRef>,
    pub finding: Option<FindingRef>,
    pub explanation: String,
}

/// The limit and how it was chosen (`entry_at_limit`/`exact_entry`/`explanation`
/// are completed by the caller once the slice pass has seen the entries at the
/// limit: see [`explain`]).
pub fn resolve(
    spec: &UntilSpec,
    backup_end: Ts,
    backup: Option<&OplogScan>,
    oplog: &OplogScan,
    filter: Option<&NsFilter>,
    known_ns: &[String],
) -> Result<UntilSection, PlanError> {
    let section =
        |input: String, form: &str, limit: Ts, mapped: bool, requested: Option<Ts>| UntilSection {
            input,
            form: form.to_string(),
            limit,
            limit_utc: limit.utc_string(),
            exclusive: true,
            mapped,
            requested,
            exact_entry: false,
            entry_at_limit: None,
            finding: None,
            explanation: String::new(),
        };
    let union_last = backup_end.max(oplog.last_ts.unwrap_or(backup_end));
    match spec {
        UntilSpec::Time(tv) if tv.is_exact_position() => Ok(section(
            tv.input.clone(),
            tv.form.as_str(),
            tv.ts,
            false,
            Some(tv.ts),
        )),
        UntilSpec::Time(tv) => {
            // The backup's oplog speaks for positions up to its end, the replay
            // oplog for the rest.
            let from_backup = backup
                .and_then(|b| b.at_or_after_target.clone())
                .filter(|e| e.ts <= backup_end);
            let from_oplog = oplog.at_or_after_target.clone();
            let first = match (from_backup, from_oplog) {
                (Some(a), Some(b)) => Some(if a.ts <= b.ts { a } else { b }),
                (a, b) => a.or(b),
            };
            let Some(entry) = first else {
                return Err(CoverageError::UntilAfterOplog {
                    until: tv.describe(),
                    oplog: oplog.name.clone(),
                    last: union_last,
                }
                .into());
            };
            let mut s = section(
                tv.input.clone(),
                tv.form.as_str(),
                entry.ts,
                true,
                Some(tv.ts),
            );
            s.exact_entry = true;
            s.entry_at_limit = Some(entry);
            Ok(s)
        }
        UntilSpec::Auto => {
            let chosen = oplog.findings.iter().find(|f| {
                f.ts > backup_end
                    && !f.is_routine()
                    && f.severity >= Severity::High
                    && filter.is_none_or(|nf| finding_selected(f, nf, known_ns))
            });
            let Some(f) = chosen else {
                return Err(PlanError::NoIncident {
                    backup_end,
                    oplog: oplog.name.clone(),
                    entries: oplog.entries,
                    backups_own: oplog.is_the_backups_own(backup),
                });
            };
            let mut s = section("auto".into(), "auto", f.oplog_limit, false, None);
            s.finding = Some(FindingRef::of(f));
            Ok(s)
        }
        UntilSpec::End => Ok(section(
            "end".into(),
            "end",
            union_last.successor(),
            false,
            None,
        )),
    }
}

fn finding_selected(f: &Finding, nf: &NsFilter, known: &[String]) -> bool {
    nf.matches(&f.ns)
        || f.collections.iter().any(|c| nf.matches(c))
        || (f.kind == Kind::DropDatabase && nf.matches_db(&f.ns, known.iter().map(String::as_str)))
}

/// Fills in the entry at the limit and the one-sentence explanation.
pub fn explain(s: &mut UntilSection, at_or_after: Option<EntryRef>, union_last: Ts) {
    if s.entry_at_limit.is_none() {
        s.entry_at_limit = at_or_after.filter(|e| e.ts >= s.limit);
    }
    s.exact_entry = s.entry_at_limit.as_ref().is_some_and(|e| e.ts == s.limit);
    let stop = match &s.entry_at_limit {
        Some(e) if e.ts == s.limit => {
            format!("stops just before the entry at {} ({})", s.limit, e.what())
        }
        Some(e) => format!(
            "no entry has exactly ts {}; the first entry not applied is {}",
            s.limit,
            e.describe()
        ),
        None => format!("no entry at or after {} is known", s.limit),
    };
    s.explanation = match s.form.as_str() {
        "auto" => {
            let f = s.finding.as_ref();
            format!(
                "just before the first destructive operation after the backup's end, {} of {}: {stop}",
                f.map_or("?", |f| f.kind.as_str()),
                f.map_or("?", |f| f.ns.as_str())
            )
        }
        "end" => format!(
            "just after the last entry {union_last}: everything the backup's oplog and the oplog hold is replayed; \
             writes after {} are not in these files",
            union_last.utc_string()
        ),
        _ if s.mapped => format!(
            "{} maps to the first entry at or after that second: everything before it is applied; {stop}",
            s.requested.map_or_else(String::new, |r| r.utc_string())
        ),
        _ => stop,
    };
    s.explanation
        .push_str(" (the limit is exclusive: entries with ts < limit are applied)");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_with(target: Option<EntryRef>, last: Ts) -> OplogScan {
        OplogScan {
            name: "o.bson".into(),
            entries: 3,
            first_ts: Some(Ts::new(1, 1)),
            last_ts: Some(last),
            at_or_after_target: target,
            ..OplogScan::default()
        }
    }

    fn entry(t: u32, i: u32) -> EntryRef {
        EntryRef {
            ts: Ts::new(t, i),
            op: "i".into(),
            ns: "shop.orders".into(),
            command: None,
            target: Some("shop.orders".into()),
            num_records: None,
            wall: None,
            transaction: false,
        }
    }

    #[test]
    fn parses_keywords_and_times() {
        assert_eq!(parse_until("auto").unwrap(), UntilSpec::Auto);
        assert_eq!(parse_until("end").unwrap(), UntilSpec::End);
        assert!(matches!(parse_until("5:1").unwrap(), UntilSpec::Time(t) if t.ts == Ts::new(5, 1)));
        let err = parse_until("soon").unwrap_err().to_string();
        assert!(err.contains("`soon`") && err.contains("`auto`"), "{err}");
    }

    #[test]
    fn wall_clock_maps_to_first_entry_at_or_after() {
        let tv = parse_time("1970-01-01T00:01:40Z").unwrap();
        let s = resolve(
            &UntilSpec::Time(tv),
            Ts::new(50, 1),
            None,
            &scan_with(Some(entry(100, 4)), Ts::new(200, 1)),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(
            (s.limit, s.mapped, s.requested),
            (Ts::new(100, 4), true, Some(Ts::new(100, 0)))
        );
        let mut s = s;
        explain(&mut s, None, Ts::new(200, 1));
        assert!(s.exact_entry);
        assert!(
            s.explanation
                .contains("stops just before the entry at 100:4 (i shop.orders)"),
            "{}",
            s.explanation
        );
        assert!(s.explanation.contains("exclusive"));
        // Nothing at or after it: a gap, not a guess.
        let tv = parse_time("300").unwrap();
        let err = resolve(
            &UntilSpec::Time(tv),
            Ts::new(50, 1),
            None,
            &scan_with(None, Ts::new(200, 1)),
            None,
            &[],
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("after the last entry 200:1"),
            "{err}"
        );
    }

    #[test]
    fn exact_and_end() {
        let tv = parse_time("150:2").unwrap();
        let mut s = resolve(
            &UntilSpec::Time(tv),
            Ts::new(50, 1),
            None,
            &scan_with(None, Ts::new(200, 1)),
            None,
            &[],
        )
        .unwrap();
        assert_eq!((s.limit, s.mapped), (Ts::new(150, 2), false));
        explain(&mut s, Some(entry(151, 1)), Ts::new(200, 1));
        assert!(!s.exact_entry);
        assert!(
            s.explanation
                .starts_with("no entry has exactly ts 150:2; the first entry not applied is 151:1"),
            "{}",
            s.explanation
        );
        let s = resolve(
            &UntilSpec::End,
            Ts::new(250, 1),
            None,
            &scan_with(None, Ts::new(200, 1)),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(s.limit, Ts::new(250, 2));
    }
}
