//! `pitr ts <time value>`: one time value in every form pitr and mongorestore use,
//! with the `--oplogLimit` it corresponds to. Handy to check what a `--since` or
//! `--until` will mean before running anything.

use std::io::{self, Write};

use crate::error::{exit, Failure};
use crate::objectid;
use crate::time::{self, TimeForm, TimeValue};

use super::oid::to_json;

// No doc comment here: the one-line about comes from `Command::Ts` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:\n  \
    pitr ts 1700000000:3                   # an exact oplog position\n  \
    pitr ts 2026-11-21T03:12:00+01:00      # RFC 3339, converted to UTC\n  \
    pitr ts oid:47cc67093475061e3d95369d   # an ObjectId's creation second\n  \
    pitr ts 'Timestamp({ t: 1700000000, i: 3 })'  # as mongosh prints it\n  \
    pitr ts 1700000000 --json | jq -r .oplog_limit\n\n\
    TIME forms: T:I (oplog position, as mongorestore --oplogLimit), T or T: (second T, \
    ordinal 0), epoch seconds, RFC 3339 with Z or an offset (fractions of a second are \
    dropped), oid:<24 hex digits>, and a timestamp pasted as a shell or extended JSON \
    prints it: Timestamp(T, I) (legacy shell), Timestamp({ t: T, i: I }) (mongosh), \
    {\"$timestamp\": {\"t\": T, \"i\": I}} (oplog cat --json, bsondump); each means T:I. \
    The same forms are accepted by every flag that takes a time (--until, --since, \
    --skip, ...). A 13-digit number is epoch milliseconds and is refused with the \
    seconds value it most likely means. --oplogLimit is exclusive: entries with \
    ts < limit are replayed.")]
pub struct TsArgs {
    /// T:I, T, T:, epoch seconds, RFC 3339 with Z or an offset, oid:<hex>, or
    /// Timestamp(T, I) / Timestamp({ t: T, i: I }) as the shells print it
    #[arg(value_name = "TIME", allow_hyphen_values = true)]
    pub value: String,
    /// One JSON object (keys: input, form, description, ts, t, i, epoch_seconds, utc,
    /// exact_position, subsec_dropped, lowest_object_id, oplog_limit)
    #[arg(long)]
    pub json: bool,
}

/// `pitr ts --json`, one object. Keys:
/// - `input`: the value as given; `form`: `oplog_ts`, `epoch_seconds`, `rfc3339` or
///   `object_id`; `description`: a one-line human description;
/// - `ts`: `"t:i"`; `t`, `i`: its halves as numbers;
/// - `epoch_seconds`, `utc`: the second (RFC 3339 UTC);
/// - `exact_position`: true only for `T:I` with an explicit ordinal;
/// - `subsec_dropped`: true when an RFC 3339 fraction of a second was dropped;
/// - `lowest_object_id`: the lowest ObjectId of that second, 24 hex digits;
/// - `oplog_limit`: the mongorestore `--oplogLimit` value (exclusive).
#[derive(Debug, serde::Serialize)]
struct TsJson {
    input: String,
    form: &'static str,
    description: String,
    ts: String,
    t: u32,
    i: u32,
    epoch_seconds: u32,
    utc: String,
    exact_position: bool,
    subsec_dropped: bool,
    lowest_object_id: String,
    oplog_limit: String,
}

pub fn run(a: TsArgs) -> Result<u8, Failure> {
    let value = time::parse_time(&a.value)?;
    let report = report(&value);
    let mut out = io::BufWriter::new(io::stdout().lock());
    if a.json {
        writeln!(out, "{}", to_json(&report)?)?;
    } else {
        write_human(&mut out, &value, &report)?;
    }
    out.flush()?;
    Ok(exit::OK)
}

fn report(v: &TimeValue) -> TsJson {
    TsJson {
        input: v.input.clone(),
        form: v.form.as_str(),
        description: v.describe(),
        ts: v.ts.to_string(),
        t: v.ts.t,
        i: v.ts.i,
        epoch_seconds: v.ts.t,
        utc: v.ts.utc_string(),
        exact_position: v.is_exact_position(),
        subsec_dropped: matches!(
            v.form,
            TimeForm::Rfc3339 {
                subsec_dropped: true
            }
        ),
        lowest_object_id: objectid::lowest_at(v.ts.t).to_hex(),
        oplog_limit: v.ts.to_string(),
    }
}

fn write_human(out: &mut impl Write, v: &TimeValue, r: &TsJson) -> io::Result<()> {
    writeln!(out, "input          {}  ({})", r.input, form_label(v.form))?;
    writeln!(out, "t:i            {}", r.ts)?;
    writeln!(out, "epoch seconds  {}", r.epoch_seconds)?;
    writeln!(out, "UTC            {}", r.utc)?;
    writeln!(
        out,
        "ObjectId       {}  (lowest of that second)",
        r.lowest_object_id
    )?;
    writeln!(
        out,
        "--oplogLimit   {}  ({})",
        r.oplog_limit,
        limit_meaning(v)
    )?;
    for note in notes(v) {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

fn form_label(form: TimeForm) -> &'static str {
    match form {
        TimeForm::OplogTs {
            ordinal_given: true,
        } => "oplog position",
        TimeForm::OplogTs {
            ordinal_given: false,
        } => "oplog position, ordinal 0",
        TimeForm::EpochSeconds => "epoch seconds",
        TimeForm::Rfc3339 { .. } => "RFC 3339, converted to UTC",
        TimeForm::ObjectId => "ObjectId creation second",
    }
}

/// What mongorestore does with this value as `--oplogLimit` (it is exclusive).
fn limit_meaning(v: &TimeValue) -> String {
    if v.is_exact_position() {
        format!(
            "exclusive: replays entries before {}; the entry at {} itself is not applied",
            v.ts, v.ts
        )
    } else {
        format!(
            "exclusive: replays entries before {}; nothing from that second",
            v.ts.utc_string()
        )
    }
}

/// 2009-01-01T00:00:00Z: an oplog position before this is almost certainly a typo,
/// such as `12:30` meant as a time of day (it reads as second 12, ordinal 30).
const MONGODB_EXISTS: u32 = 1_230_768_000;

fn notes(v: &TimeValue) -> Vec<String> {
    let mut notes = Vec::new();
    if let TimeForm::Rfc3339 {
        subsec_dropped: true,
    } = v.form
    {
        notes.push(
            "the fraction of a second was dropped: oplog positions are whole seconds plus an \
             ordinal"
                .to_string(),
        );
    }
    if v.form == TimeForm::ObjectId {
        notes.push(
            "an ObjectId's time is the inserting client's clock; to stop just before that \
             insert, use the ts of the oplog entry that inserted that _id"
                .to_string(),
        );
    }
    if v.ts.t < MONGODB_EXISTS {
        notes.push(format!(
            "{} is before MongoDB existed; for a time of day write RFC 3339 such as \
             `2026-11-21T03:12:00Z`",
            v.ts.utc_string()
        ));
    }
    if !v.is_exact_position() && v.ts.t < u32::MAX {
        notes.push(format!(
            "to replay that whole second as well, use --oplogLimit {}:0",
            v.ts.t + 1
        ));
    }
    notes
}
