//! The summary `pitr replay` prints on stdout when it ends: the stand-in warning,
//! the restore point, each step with its result and timing, the verification
//! table, where the logs and the report are, and how to reach a kept spare.

use std::fmt::Write as _;
use std::time::Duration;

use crate::verify::render;

use super::progress::seconds;
use super::report::ReplayReport;

pub fn text(r: &ReplayReport) -> String {
    let mut s = String::new();
    if let Some(sw) = &r.standin_warning {
        let _ = writeln!(s, "*** {sw} ***");
    }
    let p = &r.restore_point;
    let _ = writeln!(s, "Engine    mongod (a spare mongod and mongorestore)");
    let _ = writeln!(
        s,
        "Replay    limit {} ({}), exclusive: entries with ts < {} applied",
        p.limit, p.limit_utc, p.limit
    );
    if let Some(f) = &p.finding {
        let _ = writeln!(
            s,
            "  stops just before the {} of {} at {} ({})",
            f.kind, f.ns, f.ts, f.details
        );
    } else if let Some(e) = &p.entry_at_limit {
        let _ = writeln!(s, "  first entry not applied: {}", e.describe());
    }
    let _ = writeln!(s, "Steps");
    let rows: Vec<Vec<String>> = r
        .steps
        .iter()
        .map(|st| {
            vec![
                format!("{}.", st.number),
                st.title.clone(),
                st.status.as_str().to_string(),
                st.duration_ms
                    .map_or_else(String::new, |m| seconds(Duration::from_millis(m))),
                st.detail.clone().unwrap_or_default(),
            ]
        })
        .collect();
    s.push_str(&render::table(
        "  ",
        &["#", "STEP", "RESULT", "TOOK", "DETAIL"],
        &rows,
    ));
    if let Some(v) = &r.verify {
        s.push_str(&render::text(v));
    }
    for warn in &r.warnings {
        let _ = writeln!(s, "warning: {warn}");
    }
    if let Some(d) = &r.dump {
        let _ = writeln!(
            s,
            "Dump      {} ({} files, {} bytes)",
            d.dir, d.files, d.bytes
        );
    }
    let programs: Vec<String> = r
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
    let _ = writeln!(s, "Programs  {}", programs.join(", "));
    let _ = writeln!(s, "Logs      {}", r.logs_dir);
    let _ = writeln!(s, "Report    {} (and report.json)", r.report_md);
    if let Some(k) = &r.kept {
        let _ = writeln!(s, "Spare     still running (--keep), pid {}", k.pid);
        let _ = writeln!(s, "  connect: mongosh 'mongodb://127.0.0.1:{}/'", k.port);
        let _ = writeln!(
            s,
            "  stop:    kill {} (then remove {})",
            k.pid,
            k.dir.display()
        );
    }
    let _ = writeln!(
        s,
        "Result    {} (exit {})",
        r.result.headline(),
        r.exit_code
    );
    if let Some(sw) = &r.standin_warning {
        let _ = writeln!(s, "*** {sw} ***");
    }
    s
}
