//! `--metrics FILE`: the result in the Prometheus text exposition format, for
//! node_exporter's textfile collector (`--collector.textfile.directory`; the file
//! name must end in `.prom`). Written to a temporary name in the same directory,
//! synced, and renamed over FILE, so the collector never reads half a file; written
//! also when the rehearsal could not run (`pitr_rehearse_success 0`,
//! `pitr_rehearse_exit_code 2`), so a broken chain alerts like a failed one.
//!
//! Every metric is a gauge of the last run; `pitr_rehearse_last_run_timestamp_seconds`
//! lets an alert fire when the nightly run stops running at all.

use std::io::Write;
use std::path::Path;

use super::report::{RehearseReport, Verdict};

/// The metrics text for `r`, finished at `now` (Unix seconds).
pub fn render(r: &RehearseReport, now: f64) -> String {
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: String| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        ));
    };
    let num = |v: Option<u64>| v.map_or("NaN".to_string(), |v| v.to_string());
    gauge(
        "pitr_rehearse_success",
        "1 when the last rehearsal found the rebuild from backup and oplog identical to production, else 0.",
        u8::from(r.result == Verdict::Passed).to_string(),
    );
    gauge(
        "pitr_rehearse_exit_code",
        "Exit code of the last rehearsal: 0 identical, 1 differences found, 2 could not run.",
        r.exit_code.to_string(),
    );
    gauge(
        "pitr_rehearse_recovery_window_seconds",
        "Seconds from the backup's end to the rehearsed point: how far the chain was proven to restore.",
        num(r.recovery_window_secs),
    );
    gauge(
        "pitr_rehearse_backup_age_seconds",
        "Seconds from the backup's end to the start of the rehearsal.",
        num(r.backup.age_secs),
    );
    gauge(
        "pitr_rehearse_duration_seconds",
        "Seconds the whole rehearsal took.",
        format!("{:.3}", r.timing.total_secs),
    );
    gauge(
        "pitr_rehearse_rebuild_seconds",
        "Seconds the embedded engine took to rebuild the state from the backup and the oplog.",
        format!("{:.3}", r.timing.rebuild_secs),
    );
    gauge(
        "pitr_rehearse_documents_compared",
        "Documents compared byte for byte with production.",
        r.documents_compared.to_string(),
    );
    gauge(
        "pitr_rehearse_differences",
        "Differences found (namespaces, catalog entries, counts, documents).",
        r.differences_total.to_string(),
    );
    gauge(
        "pitr_rehearse_namespaces_not_compared",
        "Namespaces (or their catalogs) left out, each with a reason in the report.",
        r.not_compared.len().to_string(),
    );
    gauge(
        "pitr_rehearse_last_run_timestamp_seconds",
        "Unix time the last rehearsal ended.",
        format!("{now:.0}"),
    );
    out
}

/// Writes `text` to `path` all or nothing (temporary file, sync, rename).
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = crate::storage::parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "metrics".into());
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    // The collector reads it as another user: world-readable, like any .prom file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644));
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_help_type_and_a_value() {
        let mut r = RehearseReport::new("mongodb://h/".into(), "sample", Some(1000));
        r.result = Verdict::Passed;
        r.exit_code = 0;
        r.recovery_window_secs = Some(3600);
        let text = render(&r, 1_800_000_000.0);
        assert!(text.contains("pitr_rehearse_success 1\n"));
        assert!(text.contains("pitr_rehearse_recovery_window_seconds 3600\n"));
        assert!(text.contains("pitr_rehearse_backup_age_seconds NaN\n"));
        assert!(text.contains("pitr_rehearse_last_run_timestamp_seconds 1800000000\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.split_once(' ').unwrap();
            assert!(text.contains(&format!("# TYPE {name} gauge")), "{name}");
            assert!(value == "NaN" || value.parse::<f64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn the_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pitr.prom");
        write(&p, "a 1\n").unwrap();
        write(&p, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }
}
