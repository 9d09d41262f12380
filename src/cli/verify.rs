//! `pitr verify`: compare a server's document counts and content hashes with a plan's
//! expectations.
//! The work is in [`crate::verify`]; this file parses flags and prints.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{exit, Failure};
use crate::exec::signals::listen_for_signals;
use crate::exec::Cancel;
use crate::plan::RestorePlan;
use crate::verify::{self, render, VerifyError};

use super::replay::{parse_duration, runtime};

// No doc comment here: the one-line about comes from `Command::Verify` in `cli/mod.rs`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Checks, read-only (listDatabases, listCollections, countDocuments, dbHash):
  - every namespace the plan expects holds exactly the expected number of documents, and \
where the entry at the limit recorded numRecords (a drop), exactly that many too;
  - where the plan predicts a collection's content (plans made by `pitr replay`, or with \
whole documents), its dbHash md5 equals the prediction; where it does not (a capped \
collection on a newer server, string _ids under a collation), the result says so;
  - a namespace the replay dropped is absent (or empty);
  - without expected counts in the plan (--no-expect), the backup's collections exist.
Namespaces on the server that the plan does not mention are listed, not failed.

With --cluster DIR (the merged dump of `pitr replay --cluster`), the server is the
restored cluster's mongos: every namespace of the dump holds as many documents, and its
documents read in _id order through mongos have the same md5 as the dump's (mongos has no
dbHash). The admin database (users, roles) is not compared.

The URI can come from PITR_URI; its user and password are never printed.

Exit codes: 0 every check passed; 1 a check failed; 2 error (no connection, bad plan).

Examples:
  pitr verify --uri mongodb://127.0.0.1:28017/ --expect pitr-plan-1795223165-1/plan.json
  PITR_URI='mongodb://restore:secret@spare:27017/?authSource=admin' pitr verify --expect plan.json --json
  pitr verify --uri mongodb://mongos.restore:27017/ --cluster restored")]
pub struct VerifyArgs {
    /// The server to check (e.g. mongodb://127.0.0.1:28017/)
    #[arg(long, env = "PITR_URI", hide_env_values = true, value_name = "URI")]
    pub uri: String,
    /// The plan.json written by `pitr plan` or `pitr replay` (in the work dir's plan/)
    #[arg(
        long,
        value_name = "PLAN.json",
        required_unless_present = "cluster",
        conflicts_with = "cluster"
    )]
    pub expect: Option<PathBuf>,
    /// The merged dump `pitr replay --cluster` wrote (with its sharding.json): check the
    /// restored cluster, through its mongos, against it
    #[arg(long, value_name = "DIR")]
    pub cluster: Option<PathBuf>,
    /// Print the result as JSON (format pitr-verify/1)
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the server
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
}

pub fn run(a: VerifyArgs) -> Result<u8, Failure> {
    let rt = runtime()?;
    let cancel = Cancel::new();
    let report = match (&a.expect, &a.cluster) {
        (_, Some(dir)) => {
            super::local_only::local_only(
                "--cluster",
                dir,
                "give the merged dump's local directory",
            )?;
            let progress = super::progress::PhaseProgress::for_stderr(a.json);
            rt.block_on(async {
                listen_for_signals(&cancel, None)?;
                tokio::select! {
                    r = verify::cluster::verify_cluster(&a.uri, dir, a.connect_timeout, &progress) => r.map_err(Failure::from),
                    _ = cancel.cancelled() => Err(Failure::from(VerifyError::Cancelled)
                        .with_exit_code(cancel.exit_code().unwrap_or(130))),
                }
            })?
        }
        (Some(expect), None) => {
            let plan = read_plan(expect)?;
            let plan_file = expect.display().to_string();
            let progress = super::progress::PhaseProgress::for_stderr(a.json);
            rt.block_on(async {
                listen_for_signals(&cancel, None)?;
                tokio::select! {
                    r = verify::verify(&a.uri, &plan, Some(&plan_file), a.connect_timeout, &progress) => r.map_err(Failure::from),
                    _ = cancel.cancelled() => Err(Failure::from(VerifyError::Cancelled)
                        .with_exit_code(cancel.exit_code().unwrap_or(130))),
                }
            })?
        }
        (None, None) => {
            return Err(Failure::new("give --expect PLAN.json or --cluster DIR")
                .with_hint("see `pitr verify --help`"))
        }
    };
    drop(rt);
    let stdout = io::stdout();
    let mut w = io::BufWriter::new(stdout.lock());
    if a.json {
        super::output::write_json(&mut w, &report)?;
    } else {
        write!(w, "{}", render::text(&report))?;
    }
    w.flush()?;
    Ok(if report.passed {
        exit::OK
    } else {
        exit::NOT_FOUND
    })
}

fn read_plan(expect: &std::path::Path) -> Result<RestorePlan, Failure> {
    super::local_only::local_only(
        "--expect",
        expect,
        "pass the plan.json that `pitr plan` or `pitr replay` wrote in its local work dir",
    )?;
    let text = std::fs::read_to_string(expect).map_err(|source| VerifyError::ReadPlan {
        path: expect.to_path_buf(),
        source,
    })?;
    Ok(
        RestorePlan::from_json(&text).map_err(|source| VerifyError::ParsePlan {
            path: expect.to_path_buf(),
            source,
        })?,
    )
}
