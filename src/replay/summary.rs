//! The `--engine mongod` replay told once: the summary `pitr replay` prints on stdout
//! when it ends and the `report.md` kept in the work dir for the post-mortem are two
//! renderings of the same [`Section`]s ([`super::describe`]), as the embedded
//! engine's are. The summary: the stand-in warning, the restore point, each step with
//! its result and timing, the verification table, where the logs and the report are,
//! how to reach a kept spare. The report adds what a post-mortem reads without pitr:
//! why this limit, the inputs and coverage, the lint, every command as run and the
//! last output of a failed step, the binaries (and whether they were stand-ins).

use std::time::Duration;

use crate::plan::Mode;
use crate::table::counted;
use crate::verify::{render, VerifyReport};

use super::describe::{self, Item, Section, Table};
use super::progress::seconds;
use super::report::{ReplayReport, RestorePoint};

/// What the terminal shows when the replay ends.
pub fn text(r: &ReplayReport) -> String {
    describe::text(&sections(r))
}

/// `report.md`.
pub fn markdown(r: &ReplayReport) -> String {
    describe::markdown("pitr replay (engine: mongod)", &sections(r))
}

fn ms(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |m| seconds(Duration::from_millis(m)))
}

fn table(header: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> Item {
    Item::Table(Table {
        header: header.iter().map(|h| h.to_string()).collect(),
        rows,
        right: (0..header.len()).map(|c| right.contains(&c)).collect(),
    })
}

/// The report, section by section, in the order both renderings show them.
fn sections(r: &ReplayReport) -> Vec<Section> {
    let mut v = Vec::new();
    if let Some(sw) = &r.standin_warning {
        v.push(Section::new("", format!("*** {sw} ***")).summary_only());
        v.push(
            Section::new(
                "",
                format!("> **{sw}.** This run exercised pitr's orchestration only."),
            )
            .report_only(),
        );
    }
    v.push(Section::new(
        "Engine",
        "mongod (a spare mongod and mongorestore)",
    ));
    v.extend(restore_point(r));
    v.push(run(r));
    v.push(inputs(r));
    v.push(Section::new("Predicted", r.prediction.clone()));
    v.extend(stake(r));
    v.push(lint(r));
    v.extend(steps(r));
    v.extend(verification(r));
    let about_inputs = r.lint.iter().filter(|l| l.about_the_inputs());
    let warnings: Vec<&str> = about_inputs
        .map(|l| l.message.as_str())
        .chain(r.warnings.iter().map(String::as_str))
        .collect();
    if !warnings.is_empty() {
        let mut w = Section::new("", "").titled("Warnings");
        for warn in warnings {
            w = w.line(format!("warning: {warn}"));
        }
        v.push(w);
    }
    if let Some(d) = &r.dump {
        v.push(
            Section::new(
                "Dump",
                format!(
                    "{} ({} files, {} bytes: {})",
                    d.dir,
                    d.files,
                    d.bytes,
                    if d.namespaces.is_empty() {
                        "every restored namespace".to_string()
                    } else {
                        d.namespaces.join(", ")
                    }
                ),
            )
            .titled("Hand-over dump"),
        );
    }
    v.extend(programs(r));
    v.push(spare(r));
    v.extend(logs(r));
    if let Some(e) = &r.error {
        let mut err = Section::new("Error", e.message.clone()).report_only();
        if let Some(h) = &e.hint {
            err = err.line(format!("hint: {h}"));
        }
        v.push(err);
    }
    v.push(Section::new("Report", format!("{} (and report.json)", r.report_md)).summary_only());
    v.push(Section::new(
        "Result",
        format!("{} (exit {})", r.result.headline(), r.exit_code),
    ));
    if let Some(sw) = &r.standin_warning {
        v.push(Section::new("", format!("*** {sw} ***")).summary_only());
    }
    v
}

/// The limit and what it stops before, as both engines' reports say it (with the
/// first entry not applied when no finding explains the limit, if `entry_too`).
pub fn restore_point_section(p: &RestorePoint, entry_too: bool) -> Section {
    let replay = Section::new(
        "Replay",
        format!(
            "limit {} ({}), exclusive: entries with ts < {} applied",
            p.limit, p.limit_utc, p.limit
        ),
    )
    .titled("Restore point");
    match (&p.finding, &p.entry_at_limit) {
        (Some(f), _) => replay.line(format!(
            "stops just before the {} of {} at {} ({})",
            f.kind, f.ns, f.ts, f.details
        )),
        (None, Some(e)) if entry_too => {
            replay.line(format!("first entry not applied: {}", e.describe()))
        }
        _ => replay,
    }
}

/// The limit, what it stops before, and (in the report) why.
fn restore_point(r: &ReplayReport) -> Vec<Section> {
    let p = &r.restore_point;
    let replay = restore_point_section(p, true);
    let explained = Section::new("Explained", p.explanation.clone())
        .titled("Why this limit")
        .line(format!(
            "`--until {}` gave the limit `{}`: the entry at the limit and everything after it were not applied",
            p.until, p.limit
        ))
        .report_only();
    vec![replay, explained]
}

/// When, and where the work dir, logs and plan are (the report only).
fn run(r: &ReplayReport) -> Section {
    Section::new(
        "Run",
        format!(
            "started {}, finished {}, took {}",
            r.started_utc,
            r.finished_utc,
            seconds(Duration::from_millis(r.duration_ms))
        ),
    )
    .line(format!("work directory: `{}`", r.workdir))
    .line(format!("logs: `{}`", r.logs_dir))
    .line(format!("plan: `{}`", r.plan_file))
    .report_only()
}

/// The backup, the oplog, the coverage and the slice (the report only).
fn inputs(r: &ReplayReport) -> Section {
    let b = &r.backup;
    let o = &r.oplog;
    let c = &r.coverage;
    let sl = &r.slice;
    let coverage = match c.mode {
        Mode::WithinBackupOplog => format!(
            "the limit lies inside the backup's own oplog; it was replayed up to `{}` and no slice was needed",
            c.limit
        ),
        Mode::AfterBackup if !c.oplog_needed => {
            "nothing lies between the backup's end and the limit".to_string()
        }
        Mode::AfterBackup => format!(
            "the oplog reaches back to the backup's end `{}` and forward to the limit `{}`",
            c.backup_end, c.limit
        ),
    };
    let kept = match sl.kept {
        true => format!("`{}`", sl.oplog_file),
        false => "(applied as read, not kept: `--keep-slice` keeps it)".to_string(),
    };
    let mut slice = format!(
        "slice {kept}: {}, ts > `{}` and < `{}`",
        counted(sl.entries, "entry", "entries"),
        sl.from_exclusive,
        sl.to_exclusive
    );
    if sl.filtered_out > 0 {
        slice.push_str(&format!(", {} filtered out by --ns", sl.filtered_out));
    }
    if sl.skipped > 0 {
        slice.push_str(&format!(", {} left out by --skip", sl.skipped));
    }
    Section::new("Inputs", "")
        .titled("Backup, oplog and coverage")
        .line(format!(
            "backup `{}`: {} documents, complete up to `{}` ({}; from {})",
            b.dir, b.documents, b.end_ts, b.end_utc, b.end_source
        ))
        .line(format!(
            "oplog `{}`: {}, `{}` .. `{}`{}",
            o.path,
            counted(o.entries, "entry", "entries"),
            o.first_ts.map_or_else(|| "-".into(), |t| t.to_string()),
            o.last_ts.map_or_else(|| "-".into(), |t| t.to_string()),
            if o.sorted {
                ""
            } else {
                " (NOT in ts order; the slice was sorted)"
            }
        ))
        .line(format!("coverage: {coverage}"))
        .line(slice)
        .report_only()
}

/// What the replayed range holds that a person would not want back: the plan's
/// stake in the report, and the incidents replayed on both.
fn stake(r: &ReplayReport) -> Vec<Section> {
    let limit = r.restore_point.limit;
    let mut v = Vec::new();
    let mut at_stake = Section::new("At stake", "").report_only().item(Item::Pre(
        r.stake.text_lines(limit).into_iter().skip(1).collect(),
    ));
    if r.accept_incidents && r.stake.has_incidents() {
        at_stake =
            at_stake.line("the incidents above were replayed deliberately (`--accept-incidents`)");
    }
    v.push(at_stake);
    if r.stake.has_incidents() {
        let list: Vec<String> = r.stake.incidents.iter().map(|i| i.describe()).collect();
        v.push(Section::new(
            "Replayed",
            format!(
                "{}{}: {}",
                counted(list.len() as u64, "incident", "incidents"),
                if r.accept_incidents {
                    " on purpose (--accept-incidents)"
                } else {
                    ", NOT undone"
                },
                list.join("; ")
            ),
        ));
    }
    v
}

/// The plan's lint (the report only).
fn lint(r: &ReplayReport) -> Section {
    let s = Section::new("Lint", "").report_only();
    if r.lint.is_empty() {
        return s.line("nothing to report");
    }
    let rows = r
        .lint
        .iter()
        .map(|l| {
            vec![
                l.severity.as_str().to_string(),
                l.code.to_string(),
                l.ts.map_or_else(String::new, |t| t.to_string()),
                l.ns.clone(),
                l.count.to_string(),
                l.message.clone(),
            ]
        })
        .collect();
    s.item(table(
        &["severity", "code", "ts", "namespace", "count", "message"],
        rows,
        &[4],
    ))
}

/// Each step with its result and timing; in the report also every command as run
/// and the last output of the steps that printed some.
fn steps(r: &ReplayReport) -> Vec<Section> {
    let rows = r
        .steps
        .iter()
        .map(|st| {
            vec![
                format!("{}.", st.number),
                st.title.clone(),
                st.status.as_str().to_string(),
                ms(st.duration_ms),
                st.exit_code.map_or_else(String::new, |c| c.to_string()),
                st.detail.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let mut v = vec![Section::new("Steps", "").item(table(
        &["#", "STEP", "RESULT", "TOOK", "EXIT", "DETAIL"],
        rows,
        &[3, 4],
    ))];
    let mut commands = Vec::new();
    for st in r.steps.iter().filter(|s| !s.commands.is_empty()) {
        commands.push(format!("# {}. {}", st.number, st.title));
        commands.extend(st.commands.iter().cloned());
    }
    v.push(
        Section::new("Commands", "")
            .titled("Commands, as run")
            .item(Item::Pre(commands))
            .report_only(),
    );
    for st in r.steps.iter().filter(|s| !s.stderr_tail.is_empty()) {
        v.push(
            Section::new(
                "",
                format!("Last output of step {} ({}):", st.number, st.title),
            )
            .item(Item::Pre(st.stderr_tail.clone()))
            .report_only(),
        );
    }
    v
}

/// The verification: verify's own table on the terminal, the same rows in the report.
fn verification(r: &ReplayReport) -> Vec<Section> {
    let Some(v) = &r.verify else {
        return vec![Section::new("Verify", "not run")
            .titled("Verification")
            .report_only()];
    };
    let summary = Section::new("", "")
        .item(Item::Pre(
            render::text(v).lines().map(str::to_string).collect(),
        ))
        .summary_only();
    vec![summary, verification_report(v)]
}

fn verification_report(v: &VerifyReport) -> Section {
    let mut s = Section::new(
        "Verify",
        format!(
            "{} ({} of {} checks passed) on `{}`; expected counts at limit `{}` (exclusive)",
            if v.passed { "**PASSED**" } else { "**FAILED**" },
            v.checked - v.failed,
            v.checked,
            v.target,
            v.limit
        ),
    )
    .titled("Verification")
    .report_only();
    if let Some(n) = &v.note {
        s = s.line(format!("note: {n}"));
    }
    if !v.extra_namespaces.is_empty() {
        s = s.line(format!(
            "also on the server, not in the plan (not checked): {}",
            v.extra_namespaces.join(", ")
        ));
    }
    let rows = v
        .rows
        .iter()
        .map(|row| render::cells(row).to_vec())
        .collect();
    s.item(table(&render::HEADER, rows, &[1, 2]))
}

/// The programs that ran: one line on the terminal, a table in the report.
fn programs(r: &ReplayReport) -> Vec<Section> {
    let line: Vec<String> = r
        .binaries
        .iter()
        .map(|b| {
            format!(
                "{} {}{}",
                b.tool.name(),
                b.version.as_deref().unwrap_or("?"),
                if b.is_standin { " (STAND-IN)" } else { "" }
            )
        })
        .collect();
    let rows = r
        .binaries
        .iter()
        .map(|b| {
            vec![
                b.tool.name().to_string(),
                b.version.clone().unwrap_or_else(|| b.version_line.clone()),
                format!("`{}`", b.path.display()),
                b.origin.to_string(),
                if b.is_standin {
                    "**YES: not a real MongoDB program**".to_string()
                } else {
                    "no".to_string()
                },
            ]
        })
        .collect();
    vec![
        Section::new("Programs", line.join(", ")).summary_only(),
        Section::new("", "")
            .titled("Binaries")
            .item(table(
                &["tool", "version", "path", "found via", "stand-in"],
                rows,
                &[],
            ))
            .report_only(),
    ]
}

/// The spare: how to reach it when kept, else how it ended (the report only).
fn spare(r: &ReplayReport) -> Section {
    match (&r.spare, &r.kept) {
        (Some(_), Some(k)) => {
            Section::new("Spare", format!("still running (--keep), pid {}", k.pid))
                .titled("Spare mongod")
                .line(format!(
                    "connect: mongosh 'mongodb://127.0.0.1:{}/'",
                    k.port
                ))
                .line(format!(
                    "stop:    kill {} (then remove {})",
                    k.pid,
                    k.dir.display()
                ))
                .line(format!(
                    "data in {}, log {}",
                    k.dbpath.display(),
                    k.log_path.display()
                ))
        }
        (None, _) => Section::new("Spare", "never became ready")
            .titled("Spare mongod")
            .report_only(),
        (Some(sp), None) => Section::new(
            "Spare",
            format!(
                "pid {} on port {}; {}; its log: `{}`",
                sp.pid,
                sp.port,
                sp.stopped.as_deref().unwrap_or("stopped"),
                sp.log
            ),
        )
        .titled("Spare mongod")
        .report_only(),
    }
}

/// Where the logs are: the directory on the terminal, each step's log in the report.
fn logs(r: &ReplayReport) -> Vec<Section> {
    let mut report = Section::new("Logs", format!("`{}`", r.logs_dir)).report_only();
    for st in &r.steps {
        if let Some(l) = &st.log {
            report = report.line(format!("step {} ({}): `{l}`", st.number, st.title));
        }
    }
    report = report.line(format!("this report as JSON: `{}/report.json`", r.workdir));
    vec![
        Section::new("Logs", r.logs_dir.clone()).summary_only(),
        report,
    ]
}
