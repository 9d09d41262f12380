//! `report.md`: the replay for the post-mortem, readable without pitr: what was
//! restored to which limit and why, coverage, lint, every step with its command and
//! timing, the verification table, the binaries (and whether they were stand-ins),
//! and where the logs are.

use std::fmt::Write as _;
use std::time::Duration;

use crate::plan::Mode;
use crate::verify::render;

use super::progress::seconds;
use super::report::ReplayReport;

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn ms(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |m| seconds(Duration::from_millis(m)))
}

/// `report.md`, section by section.
pub fn render(r: &ReplayReport) -> String {
    let mut s = String::new();
    head(&mut s, r);
    restore_point(&mut s, r);
    inputs(&mut s, r);
    lint(&mut s, r);
    steps(&mut s, r);
    verification(&mut s, r);
    spare(&mut s, r);
    binaries(&mut s, r);
    logs(&mut s, r);
    s
}

/// The title, the result, where things are, the error and warnings.
fn head(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "# pitr replay report\n");
    let _ = writeln!(
        w,
        "Engine: **{}** (a spare mongod and mongorestore)\n",
        r.engine
    );
    if let Some(sw) = &r.standin_warning {
        let _ = writeln!(
            w,
            "> **{sw}.** This run exercised pitr's orchestration only.\n"
        );
    }
    let _ = writeln!(
        w,
        "**Result: {}** (exit code {})\n",
        r.result.headline(),
        r.exit_code
    );
    let _ = writeln!(
        w,
        "- started {}, finished {}, took {}",
        r.started_utc,
        r.finished_utc,
        seconds(Duration::from_millis(r.duration_ms))
    );
    let _ = writeln!(w, "- work directory: `{}`", r.workdir);
    let _ = writeln!(w, "- logs: `{}`", r.logs_dir);
    let _ = writeln!(w, "- plan: `{}`", r.plan_file);
    if let Some(e) = &r.error {
        let _ = writeln!(w, "\n## Error\n\n```text\n{}\n```", e.message);
        if let Some(h) = &e.hint {
            let _ = writeln!(w, "\nHint: {h}");
        }
    }
    for warn in &r.warnings {
        let _ = writeln!(w, "\n> warning: {warn}");
    }
}

/// `## Restore point`.
fn restore_point(w: &mut String, r: &ReplayReport) {
    let p = &r.restore_point;
    let _ = writeln!(w, "\n## Restore point\n");
    let _ = writeln!(
        w,
        "- `--until {}` → limit **`{}`** ({}), **exclusive**: entries with ts < {} were applied, the entry at the limit and everything after it were not",
        p.until, p.limit, p.limit_utc, p.limit
    );
    if let Some(f) = &p.finding {
        let _ = writeln!(
            w,
            "- finding: {} **{}** of `{}` at `{}`: {}",
            f.severity, f.kind, f.ns, f.ts, f.details
        );
    }
    if let Some(e) = &p.entry_at_limit {
        let _ = writeln!(w, "- first entry not applied: `{}`", e.describe());
    }
    let _ = writeln!(w, "- {}", p.explanation);
}

/// `## Backup, oplog and coverage`.
fn inputs(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "\n## Backup, oplog and coverage\n");
    let b = &r.backup;
    let _ = writeln!(
        w,
        "- backup `{}`: {} documents, complete up to `{}` ({}; from {})",
        b.dir, b.documents, b.end_ts, b.end_utc, b.end_source
    );
    let o = &r.oplog;
    let _ = writeln!(
        w,
        "- oplog `{}`: {}, `{}` .. `{}`{}",
        o.path,
        crate::table::counted(o.entries, "entry", "entries"),
        o.first_ts.map_or_else(|| "-".into(), |t| t.to_string()),
        o.last_ts.map_or_else(|| "-".into(), |t| t.to_string()),
        if o.sorted {
            ""
        } else {
            " (NOT in ts order; the slice was sorted)"
        }
    );
    let c = &r.coverage;
    let _ = writeln!(
        w,
        "- coverage: {}",
        match c.mode {
            Mode::WithinBackupOplog => format!(
                "the limit lies inside the backup's own oplog; it was replayed up to `{}` and no slice was needed",
                c.limit
            ),
            Mode::AfterBackup if !c.oplog_needed => "nothing lies between the backup's end and the limit".to_string(),
            Mode::AfterBackup => format!(
                "the oplog reaches back to the backup's end `{}` and forward to the limit `{}`",
                c.backup_end, c.limit
            ),
        }
    );
    let sl = &r.slice;
    let _ = writeln!(
        w,
        "- slice `{}`: {}, ts > `{}` and < `{}`{}{}",
        sl.oplog_file,
        crate::table::counted(sl.entries, "entry", "entries"),
        sl.from_exclusive,
        sl.to_exclusive,
        if sl.filtered_out > 0 {
            format!(", {} filtered out by --ns", sl.filtered_out)
        } else {
            String::new()
        },
        if sl.skipped > 0 {
            format!(", {} left out by --skip", sl.skipped)
        } else {
            String::new()
        },
    );
}

/// `## Lint`.
fn lint(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "\n## Lint\n");
    if r.lint.is_empty() {
        let _ = writeln!(w, "Nothing to report.");
    } else {
        let _ = writeln!(w, "| severity | code | ts | namespace | count | message |");
        let _ = writeln!(w, "|---|---|---|---|---|---|");
        for l in &r.lint {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} |",
                l.severity.as_str(),
                l.code,
                l.ts.map_or_else(String::new, |t| t.to_string()),
                cell(&l.ns),
                l.count,
                cell(&l.message)
            );
        }
    }
}

/// `## Steps`.
fn steps(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "\n## Steps\n");
    let _ = writeln!(w, "| # | step | result | took | exit | detail |");
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for st in &r.steps {
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} |",
            st.number,
            cell(&st.title),
            st.status.as_str(),
            ms(st.duration_ms),
            st.exit_code.map_or_else(String::new, |c| c.to_string()),
            cell(st.detail.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(w, "\nCommands, as run:\n\n```sh");
    for st in &r.steps {
        if st.commands.is_empty() {
            continue;
        }
        let _ = writeln!(w, "# {}. {}", st.number, st.title);
        for c in &st.commands {
            let _ = writeln!(w, "{c}");
        }
    }
    let _ = writeln!(w, "```");
    for st in r.steps.iter().filter(|s| !s.stderr_tail.is_empty()) {
        let _ = writeln!(
            w,
            "\nLast output of step {} ({}):\n\n```text",
            st.number, st.title
        );
        for l in &st.stderr_tail {
            let _ = writeln!(w, "{l}");
        }
        let _ = writeln!(w, "```");
    }
}

/// `## Verification`.
fn verification(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "\n## Verification\n");
    match &r.verify {
        None => {
            let _ = writeln!(w, "Not run.");
        }
        Some(v) => {
            let _ = writeln!(
                w,
                "{} ({} of {} checks passed) on `{}`; expected counts at limit `{}` (exclusive).\n",
                if v.passed { "**PASSED**" } else { "**FAILED**" },
                v.checked - v.failed,
                v.checked,
                v.target,
                v.limit
            );
            if let Some(n) = &v.note {
                let _ = writeln!(w, "Note: {n}\n");
            }
            let _ = writeln!(w, "| {} |", render::HEADER.join(" | ").to_lowercase());
            let _ = writeln!(w, "|---|---|---|---|---|");
            for row in &v.rows {
                let c = render::cells(row);
                let _ = writeln!(
                    w,
                    "| {} |",
                    c.iter().map(|x| cell(x)).collect::<Vec<_>>().join(" | ")
                );
            }
            if !v.extra_namespaces.is_empty() {
                let _ = writeln!(
                    w,
                    "\nAlso on the server, not in the plan (not checked): {}",
                    v.extra_namespaces.join(", ")
                );
            }
        }
    }

    if let Some(d) = &r.dump {
        let _ = writeln!(w, "\n## Hand-over dump\n");
        let _ = writeln!(
            w,
            "`{}`: {} files, {} bytes ({})",
            d.dir,
            d.files,
            d.bytes,
            if d.namespaces.is_empty() {
                "every restored namespace".to_string()
            } else {
                d.namespaces.join(", ")
            }
        );
    }
}

/// `## Spare mongod`.
fn spare(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "\n## Spare mongod\n");
    match (&r.spare, &r.kept) {
        (None, _) => {
            let _ = writeln!(w, "Never became ready.");
        }
        (Some(_), Some(k)) => {
            let _ = writeln!(
                w,
                "Kept running (`--keep`): pid {}, `mongosh 'mongodb://127.0.0.1:{}/'`; data in `{}`, log `{}`. Stop it with `kill {}`, then remove `{}`.",
                k.pid,
                k.port,
                k.dbpath.display(),
                k.log_path.display(),
                k.pid,
                k.dir.display()
            );
        }
        (Some(sp), None) => {
            let _ = writeln!(
                w,
                "pid {} on port {}; {}; its log: `{}`.",
                sp.pid,
                sp.port,
                sp.stopped.as_deref().unwrap_or("stopped"),
                sp.log
            );
        }
    }
}

/// `## Binaries`.
fn binaries(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "\n## Binaries\n");
    let _ = writeln!(w, "| tool | version | path | found via | stand-in |");
    let _ = writeln!(w, "|---|---|---|---|---|");
    for b in &r.binaries {
        let _ = writeln!(
            w,
            "| {} | {} | `{}` | {} | {} |",
            b.tool.name(),
            cell(b.version.as_deref().unwrap_or(&b.version_line)),
            b.path.display(),
            b.origin,
            if b.is_standin {
                "**YES: not a real MongoDB program**"
            } else {
                "no"
            }
        );
    }
}

/// `## Logs`.
fn logs(w: &mut String, r: &ReplayReport) {
    let _ = writeln!(w, "\n## Logs\n");
    for st in &r.steps {
        if let Some(l) = &st.log {
            let _ = writeln!(w, "- step {} ({}): `{l}`", st.number, st.title);
        }
    }
    let _ = writeln!(w, "- this report as JSON: `{}/report.json`", r.workdir);
}
