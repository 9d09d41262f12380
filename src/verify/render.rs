//! The pass/fail table, as the terminal and `report.md` show it.

use std::fmt::Write as _;

use super::compare::{Check, Row};
use super::VerifyReport;

/// The text cells of one row: namespace, expected, found, result, note.
pub fn cells(r: &Row) -> [String; 5] {
    let expected = match r.check {
        Check::Count => r
            .expected_documents
            .map_or_else(|| "?".to_string(), |n| n.to_string()),
        Check::Absent => "absent".to_string(),
        Check::Exists => "exists".to_string(),
    };
    let found = match (r.found, r.documents) {
        (false, _) => "missing".to_string(),
        (true, Some(n)) => n.to_string(),
        (true, None) => "exists".to_string(),
    };
    [
        r.ns.clone(),
        expected,
        found,
        r.status.as_str().to_string(),
        r.note.clone(),
    ]
}

pub const HEADER: [&str; 5] = ["NAMESPACE", "EXPECTED", "FOUND", "RESULT", "NOTE"];

/// Left-aligned columns, two spaces apart, the last one unpadded; each line starts
/// with `indent`.
pub fn table(indent: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    crate::table::render(indent, header, rows)
}

/// The whole verification as text: heading, table, extra namespaces, verdict.
pub fn text(v: &VerifyReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Verify    {} against the {} at limit {} (exclusive)",
        v.target,
        if v.plan_file
            .as_deref()
            .is_some_and(|f| f.ends_with("sharding.json"))
        {
            "merged dump"
        } else {
            "plan's counts"
        },
        v.limit
    );
    if v.server.standin {
        let _ = writeln!(
            s,
            "  STAND-IN: the server is pitr's test stand-in, not a real MongoDB result"
        );
    }
    if let Some(n) = &v.note {
        let _ = writeln!(s, "  note: {n}");
    }
    let rows: Vec<Vec<String>> = v.rows.iter().map(|r| cells(r).to_vec()).collect();
    s.push_str(&table("    ", &HEADER, &rows));
    if !v.extra_namespaces.is_empty() {
        let _ = writeln!(
            s,
            "  also on the server, not in the plan (not checked): {}",
            v.extra_namespaces.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "  {}: {}, {} passed, {} failed",
        if v.passed { "PASSED" } else { "FAILED" },
        crate::table::counted(v.checked as u64, "check", "checks"),
        v.checked - v.failed,
        v.failed
    );
    s
}
