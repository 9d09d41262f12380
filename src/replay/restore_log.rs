//! What mongorestore says about itself in its log that its exit code does not.
//!
//! mongorestore exits 0 when documents fail to insert (duplicate `_id`s, validation)
//! unless `--stopOnError`: each failure is logged `continuing through error: ...`
//! and the run ends with `N document(s) restored successfully. M document(s) failed
//! to restore.` (the same in 100.11.0 and 100.18.0: mongo-tools
//! `mongorestore/main/mongorestore.go`). A restore with M > 0 is not the backup, so
//! pitr reads that line and fails the step.

/// The `M` of the last `... M document(s) failed to restore.` line, if any.
pub fn failed_documents(log: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| {
        let at = l.find(" document(s) failed to restore")?;
        let head = &l[..at];
        let digits: String = head
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        digits.parse().ok()
    })
}

/// The first `continuing through error: ...` line (what went wrong), if any.
pub fn first_error(log: &str) -> Option<&str> {
    log.lines().find_map(|l| {
        l.find("continuing through error: ")
            .map(|at| &l[at + "continuing through error: ".len()..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines as both releases print them (see tests/standins/README.md).
    #[test]
    fn reads_the_count_line() {
        let log = "2026-11-22T16:00:00.000+0000\tcontinuing through error: E11000 duplicate key error collection: app.c index: _id_ dup key: { _id: 1 }\n\
                   2026-11-22T16:00:00.001+0000\tfinished restoring app.c (1 document, 2 failures)\n\
                   2026-11-22T16:00:00.002+0000\t1 document(s) restored successfully. 2 document(s) failed to restore.\n";
        assert_eq!(failed_documents(log), Some(2));
        assert!(first_error(log)
            .unwrap()
            .starts_with("E11000 duplicate key"));
        let ok = "x\t1362 document(s) restored successfully. 0 document(s) failed to restore.\n";
        assert_eq!(failed_documents(ok), Some(0));
        assert_eq!(failed_documents("done\n"), None);
        assert_eq!(first_error(ok), None);
    }
}
