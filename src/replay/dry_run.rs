//! `pitr replay --dry-run`: the exact commands the replay would run, with the real
//! binary paths (located without running them: a dry run starts no process at all),
//! or a clear note for each program that is missing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::Hint;
use crate::exec::binaries::{Origin, Tool};
use crate::plan::steps::{self, shell_line, Step};
use crate::plan::RestorePlan;

use super::commands::{self, Values};
use super::record::StepKind;
use super::tools::Probed;
use super::workdir::WorkDir;

/// The `format` of `--dry-run --json`.
pub const FORMAT: &str = "pitr-replay-dry-run/1";

/// One program. JSON: `tool`, `path`, `origin` and `version` (null when missing),
/// `standin` (pitr's test stand-in), `error` and `hint` (why it is missing).
#[derive(Clone, Debug, Serialize)]
pub struct DryBinary {
    pub tool: Tool,
    pub path: Option<PathBuf>,
    pub origin: Option<Origin>,
    pub version: Option<String>,
    pub standin: bool,
    pub error: Option<String>,
    pub hint: Option<String>,
}

/// What a dry run shows. JSON: `format`, `workdir`, `binaries`, `steps` (as in the
/// plan, with real paths: `number`, `title`, `commands` as argv arrays, `note`),
/// `ready` (every program was found), `exit_code` and `refusal` (the code the real
/// run would end with before starting anything, and why; 0 and null when it would
/// go ahead), `incidents_replayed` (the run would go ahead but end with exit 1:
/// its range replays critical or high incidents and `--accept-incidents` was not
/// given; null otherwise), `plan` (the whole plan).
#[derive(Clone, Debug, Serialize)]
pub struct DryRun<'a> {
    pub format: &'static str,
    pub workdir: String,
    pub binaries: Vec<DryBinary>,
    pub ready: bool,
    pub exit_code: u8,
    pub refusal: Option<String>,
    pub incidents_replayed: Option<String>,
    pub steps: Vec<Step>,
    pub plan: &'a RestorePlan,
}

/// What the user allowed on the command line (`--ignore-lint-errors`,
/// `--accept-incidents`), which changes the verdict.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allow {
    pub ignore_lint_errors: bool,
    pub accept_incidents: bool,
}

/// Whether the real run would refuse to start, in the order it checks: the
/// programs first (exit 2), then the plan's lint errors unless ignored (exit 1).
/// A refused plan never gets this far (exit 2, from planning).
pub fn verdict(
    missing: &[&str],
    lint_errors: usize,
    ignore_lint_errors: bool,
) -> (u8, Option<String>) {
    if !missing.is_empty() {
        return (
            crate::error::exit::ERROR,
            Some(format!(
                "{} missing: pitr replay would stop before starting anything",
                missing.join(", ")
            )),
        );
    }
    if lint_errors > 0 && !ignore_lint_errors {
        return (
            crate::error::exit::NOT_FOUND,
            Some(format!(
                "the lint found {}: pitr replay refuses this plan without --ignore-lint-errors",
                crate::table::counted(lint_errors as u64, "error", "errors")
            )),
        );
    }
    (crate::error::exit::OK, None)
}

/// The commands of `plan` with the programs [`super::tools::probe`] found.
pub fn prepare<'a>(
    plan: &'a RestorePlan,
    work: &WorkDir,
    probed: &[Probed],
    out: Option<&Path>,
    port: Option<u16>,
    pitr: &Path,
    allow: Allow,
) -> DryRun<'a> {
    let Allow {
        ignore_lint_errors,
        accept_incidents,
    } = allow;
    let binaries: Vec<DryBinary> = probed
        .iter()
        .map(|p| match &p.found {
            Ok(b) => DryBinary {
                tool: p.tool,
                path: Some(b.path.clone()),
                origin: Some(b.origin),
                version: b.version.clone(),
                standin: b.is_standin,
                error: None,
                hint: None,
            },
            Err(e) => DryBinary {
                tool: p.tool,
                path: None,
                origin: None,
                version: None,
                standin: false,
                hint: e.hint(),
                error: Some(e.to_string()),
            },
        })
        .collect();
    let path_of = |t: Tool| -> PathBuf {
        binaries
            .iter()
            .find(|b| b.tool == t)
            .and_then(|b| b.path.clone())
            .unwrap_or_else(|| PathBuf::from(format!("<{} not found>", t.name())))
    };
    let (mongod, mongorestore) = (path_of(Tool::Mongod), path_of(Tool::Mongorestore));
    let mongodump = out.map(|_| path_of(Tool::Mongodump));
    let log = work.mongod_log();
    let dbpath = work.root.join("pitr-spare-XXXXXX").join("db");
    let dump_tmp = out.map(|o| {
        o.parent()
            .unwrap_or(Path::new("."))
            .join(".pitr-dump-XXXXXX")
    });
    let v = commands::values(&Values {
        mongod: &mongod,
        mongorestore: &mongorestore,
        mongodump: mongodump.as_deref(),
        pitr,
        port,
        dbpath: Some(&dbpath),
        logpath: &log,
        dump_dir: dump_tmp.as_deref(),
    });
    let kinds = StepKind::sequence(plan.restore.slice_dir.is_some());
    let mut list = steps::steps(&plan.restore, &v);
    for (st, kind) in list.iter_mut().zip(kinds) {
        match kind {
            StepKind::StartSpare => {
                st.commands = vec![commands::spare_mongod_argv(&v)];
                st.note = Some(format!(
                    "started and watched by pitr: {} is a free loopback port{}; the dbpath is a new directory in the work dir, \
                     removed at the end unless --keep; ready once its log says so, the port answers and a `ping` reaches this very process",
                    commands::PORT_PLACEHOLDER,
                    if port.is_some() { " (here: --port)" } else { "" }
                ));
            }
            StepKind::Verify => {
                st.note =
                    Some("run inside pitr replay, with the same code as `pitr verify`".into());
            }
            StepKind::Dump if out.is_none() => {
                st.commands.clear();
                st.note = Some("skipped: no --out given".into());
            }
            StepKind::Dump => {
                st.note = Some(format!(
                    "into a new temporary directory beside --out (.pitr-dump-XXXXXX), renamed to `{}` once every dump succeeded",
                    out.map(|o| o.display().to_string()).unwrap_or_default()
                ));
            }
            StepKind::Shutdown => {
                st.note = Some(
                    "pitr sends SIGTERM to the spare's process group itself (what this command does), SIGKILL after the grace period, \
                     then removes its directory; --keep leaves it running instead"
                        .into(),
                );
            }
            _ => {}
        }
    }
    let missing: Vec<&str> = binaries
        .iter()
        .filter(|b| b.path.is_none())
        .map(|b| b.tool.name())
        .collect();
    let (mut exit_code, refusal) = verdict(&missing, plan.lint_errors(), ignore_lint_errors);
    let incidents_replayed = incident_verdict(plan, accept_incidents);
    if exit_code == 0 && incidents_replayed.is_some() {
        exit_code = 1;
    }
    DryRun {
        format: FORMAT,
        workdir: work.root.display().to_string(),
        ready: missing.is_empty(),
        exit_code,
        refusal,
        incidents_replayed,
        binaries,
        steps: list,
        plan,
    }
}

/// Why a run that goes ahead would end with exit 1: the incidents it replays
/// without `--accept-incidents` (None when there are none, or they are accepted).
pub fn incident_verdict(plan: &RestorePlan, accept_incidents: bool) -> Option<String> {
    let inc = &plan.stake.incidents;
    if inc.is_empty() || accept_incidents {
        return None;
    }
    let list: Vec<String> = inc.iter().map(|i| i.describe()).collect();
    Some(format!(
        "it replays {} incident{} ({}), so the restore would hold {} damage; stop before the first with --until {}, \
         or pass --accept-incidents",
        inc.len(),
        if inc.len() == 1 { "" } else { "s" },
        list.join("; "),
        if inc.len() == 1 { "its" } else { "their" },
        inc[0].oplog_limit
    ))
}

/// The text after the plan: binaries, then the commands.
pub fn text(d: &DryRun<'_>) -> String {
    let mut s = binaries_text(d);
    let _ = writeln!(s);
    s.push_str(&commands_text(d));
    let _ = writeln!(s);
    let _ = writeln!(s, "Work dir  {} (the plan is in plan/)", d.workdir);
    match &d.refusal {
        Some(why) => {
            let _ = writeln!(
                s,
                "Verdict   the real run would refuse: {why} (exit code {}).",
                d.exit_code
            );
        }
        None => s.push_str(&go_ahead_text(d.incidents_replayed.as_deref())),
    }
    let _ = writeln!(s, "Nothing was run (--dry-run).");
    s
}

/// The verdict of a run that goes ahead: exit 0, or 1 with why (`incidents`).
pub fn go_ahead_text(incidents: Option<&str>) -> String {
    match incidents {
        Some(why) => format!(
            "Verdict   the real run would go ahead and end with exit code 1 (INCIDENT REPLAYED): {why}.\n"
        ),
        None => "Verdict   the real run would go ahead (exit code 0).\n".to_string(),
    }
}

/// The commands the real run would run, in order, with their notes.
pub fn commands_text(d: &DryRun<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Commands  pitr replay would run, in this order");
    for st in &d.steps {
        let _ = writeln!(s, "  {}. {}", st.number, st.title);
        for c in &st.commands {
            let _ = writeln!(s, "       {}", shell_line(c));
        }
        if let Some(n) = &st.note {
            let _ = writeln!(s, "       # {n}");
        }
    }
    s
}

/// The programs found (path, version, where from) or why one is missing.
pub fn binaries_text(d: &DryRun<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Binaries  (--dry-run runs nothing but each program's `--version`)"
    );
    for b in &d.binaries {
        match (&b.path, &b.error) {
            (Some(p), _) => {
                let _ = writeln!(
                    s,
                    "  {:<13} {:<10} {} (from {}){}",
                    b.tool.name(),
                    b.version.as_deref().unwrap_or("?"),
                    p.display(),
                    b.origin.map_or_else(String::new, |o| o.to_string()),
                    if b.standin {
                        "  STAND-IN (pitr's test stand-in)"
                    } else {
                        ""
                    }
                );
            }
            (None, e) => {
                let _ = writeln!(
                    s,
                    "  {:<13} MISSING: {}",
                    b.tool.name(),
                    e.as_deref().unwrap_or("not found")
                );
                if let Some(h) = &b.hint {
                    let _ = writeln!(s, "                hint: {h}");
                }
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn the_verdict_follows_the_real_runs_order() {
        assert_eq!(verdict(&[], 0, false), (0, None));
        assert_eq!(verdict(&[], 3, true).0, 0);
        let (code, why) = verdict(&[], 3, false);
        assert_eq!(code, 1);
        assert!(why.unwrap().contains("3 errors"));
        // Missing programs come first, whatever the lint says.
        let (code, why) = verdict(&["mongod", "mongorestore"], 3, false);
        assert_eq!(code, 2);
        assert!(why.unwrap().starts_with("mongod, mongorestore missing"));
    }
}
