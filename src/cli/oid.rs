//! `pitr oid ...`: ObjectIds as evidence of time. `decode` reads an id's creation
//! second and other bytes; `at` makes the boundary ids of a second for `_id` filters.

use std::io::{self, Write};

use bson::oid::ObjectId;

use crate::error::{exit, Failure};
use crate::objectid::{self, Decoded};
use crate::time::{self, TimeValue};

#[derive(Debug, clap::Subcommand)]
pub enum OidCommand {
    /// Show ObjectIds' creation time and both readings of their other bytes
    #[command(after_long_help = "Examples:\n  \
        pitr oid decode 47cc67093475061e3d95369d\n  \
        pitr oid decode 'ObjectId(\"47cc67093475061e3d95369d\")' 65a1b2c3d4e5f60718293a4b\n  \
        pitr oid decode 47cc67093475061e3d95369d --json | jq .utc\n\n\
        The creation time is the inserting client's clock, to the second. Do not use it \
        as --oplogLimit: find the oplog entry that inserted that _id and use its ts.")]
    Decode(DecodeArgs),
    /// Lowest and highest ObjectId of a second, with ready-to-paste `_id` filters
    #[command(after_long_help = "Examples:\n  \
        pitr oid at 2026-11-21T03:12:00+01:00\n  \
        pitr oid at 1700000000\n  \
        pitr oid at oid:47cc67093475061e3d95369d --json\n\n\
        TIME is any time value: T:I, T, T:, epoch seconds, RFC 3339 with Z or an offset, \
        oid:<24 hex digits>. The ordinal of T:I is ignored: ObjectIds have whole seconds.")]
    At(AtArgs),
}

#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// ObjectIds: 24 hex digits, or `ObjectId("...")` as the shell prints them
    #[arg(required = true, value_name = "OBJECTID")]
    pub ids: Vec<String>,
    /// One JSON object per id, one per line (keys: object_id, epoch_seconds, utc,
    /// current {random, counter}, historic {machine_id, pid_hex, pid, counter})
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct AtArgs {
    /// The second: T:I, T, epoch seconds, RFC 3339 with Z or an offset, or oid:<hex>
    #[arg(value_name = "TIME", allow_hyphen_values = true)]
    pub time: String,
    /// One JSON object (keys: input, epoch_seconds, utc, lowest, highest, filter_gte,
    /// filter_lte, filter_within)
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: OidCommand) -> Result<u8, Failure> {
    match cmd {
        OidCommand::Decode(a) => decode(a),
        OidCommand::At(a) => at(a),
    }
}

/// Parses every id before printing anything, so a bad one leaves no partial output.
fn decode(a: DecodeArgs) -> Result<u8, Failure> {
    let ids = a
        .ids
        .iter()
        .map(|s| objectid::parse(s))
        .collect::<Result<Vec<ObjectId>, _>>()?;
    let decoded: Vec<Decoded> = ids.iter().map(objectid::decode).collect();
    let mut out = io::BufWriter::new(io::stdout().lock());
    if a.json {
        for d in &decoded {
            writeln!(out, "{}", to_json(d)?)?;
        }
    } else {
        for d in &decoded {
            write_decoded(&mut out, d)?;
        }
        writeln!(
            out,
            "note: the creation time is the inserting client's clock, to the second. Do not \
             use it directly as --oplogLimit: find the oplog entry that inserted that _id and \
             use its ts."
        )?;
    }
    out.flush()?;
    Ok(exit::OK)
}

fn write_decoded(out: &mut impl Write, d: &Decoded) -> io::Result<()> {
    writeln!(out, "{}", d.object_id)?;
    writeln!(
        out,
        "  created        {}  (epoch seconds {})",
        d.utc, d.epoch_seconds
    )?;
    writeln!(
        out,
        "  current spec   random {}  counter {} (0x{:06x})",
        d.current.random, d.current.counter, d.current.counter
    )?;
    writeln!(
        out,
        "  historic       machine {}  pid {} (0x{})  counter {} (0x{:06x})",
        d.historic.machine_id,
        d.historic.pid,
        d.historic.pid_hex,
        d.historic.counter,
        d.historic.counter
    )?;
    writeln!(out)
}

/// `pitr oid at --json`, one object. Keys:
/// - `input`: the time value as given;
/// - `epoch_seconds`, `utc`: the second (any ordinal dropped);
/// - `lowest`, `highest`: the boundary ids, 24 hex digits;
/// - `filter_gte`, `filter_lte`, `filter_within`: mongo shell `_id` filters for
///   "created in or after", "in or before" and "within" that second.
#[derive(Debug, serde::Serialize)]
struct AtJson {
    input: String,
    epoch_seconds: u32,
    utc: String,
    lowest: String,
    highest: String,
    filter_gte: String,
    filter_lte: String,
    filter_within: String,
}

fn at(a: AtArgs) -> Result<u8, Failure> {
    let value = time::parse_time(&a.time)?;
    let report = at_report(&value);
    let mut out = io::BufWriter::new(io::stdout().lock());
    if a.json {
        writeln!(out, "{}", to_json(&report)?)?;
    } else {
        write_at(&mut out, &value, &report)?;
    }
    out.flush()?;
    Ok(exit::OK)
}

fn at_report(value: &TimeValue) -> AtJson {
    let secs = value.ts.t;
    let lowest = objectid::shell_literal(&objectid::lowest_at(secs));
    let highest = objectid::shell_literal(&objectid::highest_at(secs));
    AtJson {
        input: value.input.clone(),
        epoch_seconds: secs,
        utc: value.ts.utc_string(),
        lowest: objectid::lowest_at(secs).to_hex(),
        highest: objectid::highest_at(secs).to_hex(),
        filter_gte: format!("{{_id: {{$gte: {lowest}}}}}"),
        filter_lte: format!("{{_id: {{$lte: {highest}}}}}"),
        filter_within: format!("{{_id: {{$gte: {lowest}, $lte: {highest}}}}}"),
    }
}

fn write_at(out: &mut impl Write, value: &TimeValue, r: &AtJson) -> io::Result<()> {
    writeln!(out, "time      {}", value.describe())?;
    writeln!(
        out,
        "second    {}  (epoch seconds {})",
        r.utc, r.epoch_seconds
    )?;
    writeln!(out, "lowest    {}", r.lowest)?;
    writeln!(out, "highest   {}", r.highest)?;
    writeln!(out)?;
    writeln!(out, "created in or after that second:   {}", r.filter_gte)?;
    writeln!(out, "created in or before that second:  {}", r.filter_lte)?;
    writeln!(
        out,
        "created within that second:        {}",
        r.filter_within
    )?;
    if value.is_exact_position() && value.ts.i != 0 {
        writeln!(
            out,
            "note: the ordinal :{} is ignored: ObjectIds have whole-second resolution",
            value.ts.i
        )?;
    }
    writeln!(
        out,
        "note: ObjectId times come from the inserting clients' clocks; allow for clock skew"
    )
}

/// Serialising these plain structs cannot fail; if it ever did, say so.
pub(super) fn to_json(v: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string(v).map_err(|e| Failure::new("cannot write the JSON output").with_cause(e))
}
