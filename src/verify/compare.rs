//! The checks a plan implies, and comparing them with what a server holds. Pure: no
//! driver here, so every rule is unit-tested.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::plan::expect::is_checked_ns;
use crate::plan::filter::NsFilter;
use crate::plan::{NsKind, RestorePlan};

use super::error::VerifyError;
use super::observe::Observed;

/// What one namespace must look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// Exists with exactly this many documents (and `num_records`, when recorded).
    Count,
    /// Dropped by the replay: absent, or empty.
    Absent,
    /// A restored collection of the backup; the plan has no count for it.
    Exists,
}

/// One expectation, from the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub ns: String,
    pub check: Check,
    pub documents: Option<u64>,
    pub num_records: Option<i64>,
    /// The `dbHash` the engine predicts for the collection's content.
    pub md5: Option<String>,
    /// Why the engine predicts no content for it (said in the row's note).
    pub md5_not_predicted: Option<String>,
}

/// Pass or fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the table. JSON: `ns`, `check` (`count`, `absent`, `exists`),
/// `expected_documents`, `num_records`, `found` (the namespace exists),
/// `documents` (counted; null when absent), `expected_md5` (the engine's predicted
/// `dbHash`), `md5` (the server's `dbHash`), `status` (`pass`/`fail`), `note`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    pub ns: String,
    pub check: Check,
    pub expected_documents: Option<u64>,
    pub num_records: Option<i64>,
    pub found: bool,
    pub documents: Option<u64>,
    pub expected_md5: Option<String>,
    pub md5: Option<String>,
    pub status: Status,
    pub note: String,
}

/// The compared rows, and namespaces on the server the plan does not mention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub rows: Vec<Row>,
    pub extra: Vec<String>,
}

/// The checks `plan` implies; see the module documentation of [`super`].
pub fn expectations(plan: &RestorePlan) -> Result<Vec<Expectation>, VerifyError> {
    let mut out = Vec::new();
    if let Some(exp) = &plan.expected {
        for e in exp.iter().filter(|e| is_checked_ns(&e.ns)) {
            out.push(Expectation {
                ns: e.ns.clone(),
                check: if e.exists {
                    Check::Count
                } else {
                    Check::Absent
                },
                documents: e.exists.then_some(e.documents),
                num_records: e.num_records,
                md5: e.md5.clone().filter(|_| e.exists),
                md5_not_predicted: e.md5_not_predicted.clone().filter(|_| e.exists),
            });
        }
    }
    // The backup's restored collections must exist, whatever the replay did, unless
    // the plan says the replay dropped them (then they are in `expected`).
    let filter = NsFilter::new(&plan.ns_filter).map_err(|e| VerifyError::BadPlan {
        detail: e.to_string(),
    })?;
    let restored_whole = plan.restore.backup_oplog_replay || filter.is_none();
    let covered: BTreeSet<String> = out.iter().map(|e| e.ns.clone()).collect();
    for n in &plan.backup.namespaces {
        let restored = restored_whole || filter.as_ref().is_some_and(|f| f.matches(&n.ns));
        if n.kind == NsKind::Collection
            && is_checked_ns(&n.ns)
            && restored
            && !covered.contains(&n.ns)
            && plan.expected.is_none()
        {
            out.push(Expectation {
                ns: n.ns.clone(),
                check: Check::Exists,
                documents: None,
                num_records: None,
                md5: None,
                md5_not_predicted: None,
            });
        }
    }
    out.sort_by(|a, b| a.ns.cmp(&b.ns));
    out.dedup_by(|a, b| a.ns == b.ns);
    Ok(out)
}

/// Compares each expectation with what the server holds.
pub fn compare(exps: &[Expectation], seen: &Observed) -> Outcome {
    let rows = exps.iter().map(|e| row(e, seen)).collect();
    let mentioned: BTreeSet<&str> = exps.iter().map(|e| e.ns.as_str()).collect();
    let extra = seen
        .namespaces
        .iter()
        .filter(|ns| is_checked_ns(ns) && !mentioned.contains(ns.as_str()))
        .cloned()
        .collect();
    Outcome { rows, extra }
}

fn row(e: &Expectation, seen: &Observed) -> Row {
    let found = seen.namespaces.contains(&e.ns);
    let documents = if found {
        seen.counts.get(&e.ns).copied()
    } else {
        None
    };
    let (mut status, mut note) = judge(e, found, documents);
    let md5 = if found {
        seen.hashes.get(&e.ns).cloned()
    } else {
        None
    };
    if let (Some(want), Some(got)) = (&e.md5, &md5) {
        if want != got {
            status = Status::Fail;
            let (theirs, ours) = match seen.content {
                super::observe::ContentKind::DbHash => ("dbHash", "the engine predicts"),
                super::observe::ContentKind::DocumentsInIdOrder => {
                    ("md5 of its documents in _id order", "the dump's is")
                }
            };
            let why = format!(
                "content differs: {theirs} {got}, {ours} {want}{}",
                seen.first_difference
                    .get(&e.ns)
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            );
            note = if note.is_empty() {
                why
            } else {
                format!("{note}; {why}")
            };
        } else if status == Status::Pass {
            let same = match seen.content {
                super::observe::ContentKind::DbHash => "content = the engine's dbHash",
                super::observe::ContentKind::DocumentsInIdOrder => "content = the dump's",
            };
            note = if note.is_empty() {
                same.into()
            } else {
                format!("{note}; {same}")
            };
        }
    }
    if let Some(why) = e.md5_not_predicted.as_ref().filter(|_| found) {
        let said = format!("content not checked ({why})");
        note = if note.is_empty() {
            said
        } else {
            format!("{note}; {said}")
        };
    }
    Row {
        ns: e.ns.clone(),
        check: e.check,
        expected_documents: e.documents,
        num_records: e.num_records,
        found,
        documents,
        expected_md5: e.md5.clone(),
        md5,
        status,
        note,
    }
}

fn judge(e: &Expectation, found: bool, documents: Option<u64>) -> (Status, String) {
    use Status::{Fail, Pass};
    match e.check {
        Check::Count => {
            let want = e.documents.unwrap_or(0);
            let Some(n) = documents.filter(|_| found) else {
                return (
                    Fail,
                    format!("missing: the plan expects {}", crate::table::counted(want, "document", "documents")),
                );
            };
            let mut problems = Vec::new();
            if n != want {
                let diff = n as i128 - want as i128;
                problems.push(format!("expected {want}, found {n} ({diff:+})"));
            }
            match e.num_records {
                Some(r) if r >= 0 && n != r as u64 => problems.push(format!(
                    "the entry at the limit recorded numRecords {r}, found {n}"
                )),
                _ => {}
            }
            if problems.is_empty() {
                let note = match e.num_records {
                    Some(r) if r >= 0 => {
                        format!("= numRecords {r} recorded by the entry at the limit")
                    }
                    _ => String::new(),
                };
                (Pass, note)
            } else {
                (Fail, problems.join("; "))
            }
        }
        Check::Absent => match documents.filter(|_| found) {
            None => (Pass, "absent, as the replay dropped it".into()),
            Some(0) => (
                Pass,
                "empty: the replay dropped it (index builds after the replay can re-create it empty)"
                    .into(),
            ),
            Some(n) => (
                Fail,
                format!(
                    "the replay should have dropped it, but it holds {}",
                    crate::table::counted(n, "document", "documents")
                ),
            ),
        },
        Check::Exists => match documents.filter(|_| found) {
            Some(n) => (Pass, format!(
                    "exists ({}; no expected count in the plan)",
                    crate::table::counted(n, "document", "documents")
                )),
            None => (
                Fail,
                "missing: a collection of the backup (without expected counts pitr cannot tell whether the replay dropped it)"
                    .into(),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn seen(items: &[(&str, u64)]) -> Observed {
        Observed {
            namespaces: items.iter().map(|(n, _)| n.to_string()).collect(),
            counts: items
                .iter()
                .map(|(n, c)| (n.to_string(), *c))
                .collect::<BTreeMap<_, _>>(),
            hashes: BTreeMap::new(),
            first_difference: BTreeMap::new(),
            server: Default::default(),
            content: Default::default(),
        }
    }

    fn exp(
        ns: &str,
        check: Check,
        documents: Option<u64>,
        num_records: Option<i64>,
    ) -> Expectation {
        Expectation {
            ns: ns.into(),
            check,
            documents,
            num_records,
            md5: None,
            md5_not_predicted: None,
        }
    }

    /// A collection whose content the engine could not predict passes on its count
    /// and says that its content was not checked, and why.
    #[test]
    fn unpredicted_content_is_said() {
        let mut a = exp("shop.names", Check::Count, Some(2), None);
        a.md5_not_predicted = Some("not predicted: string _ids ordered by a collation".into());
        let mut s = seen(&[("shop.names", 2)]);
        s.hashes.insert("shop.names".into(), "ffff".into());
        let out = compare(&[a], &s);
        assert_eq!(out.rows[0].status, Status::Pass);
        assert!(
            out.rows[0].note.contains(
                "content not checked (not predicted: string _ids ordered by a collation)"
            ),
            "{}",
            out.rows[0].note
        );
    }

    #[test]
    fn content_hash_mismatch_fails_and_names_the_first_difference() {
        let mut a = exp("shop.orders", Check::Count, Some(2), None);
        a.md5 = Some("aaaa".into());
        let mut b = exp("shop.users", Check::Count, Some(1), None);
        b.md5 = Some("bbbb".into());
        let mut s = seen(&[("shop.orders", 2), ("shop.users", 1)]);
        s.hashes.insert("shop.orders".into(), "ffff".into());
        s.hashes.insert("shop.users".into(), "bbbb".into());
        s.first_difference
            .insert("shop.orders".into(), "first differing _id: 7".into());
        let out = compare(&[a, b], &s);
        assert_eq!(out.rows[0].status, Status::Fail);
        assert!(
            out.rows[0]
                .note
                .contains("dbHash ffff, the engine predicts aaaa"),
            "{}",
            out.rows[0].note
        );
        assert!(out.rows[0].note.contains("first differing _id: 7"));
        assert_eq!(out.rows[1].status, Status::Pass);
        assert!(out.rows[1].note.contains("content = the engine's dbHash"));
    }

    #[test]
    fn counts_num_records_absent_and_exists() {
        let exps = vec![
            exp("shop.orders", Check::Count, Some(113), Some(113)),
            exp("shop.users", Check::Count, Some(5), None),
            exp("shop.gone", Check::Count, Some(2), None),
            exp("analytics.a", Check::Absent, None, None),
            exp("analytics.b", Check::Absent, None, None),
            exp("analytics.c", Check::Absent, None, None),
            exp("crm.leads", Check::Exists, None, None),
            exp("crm.lost", Check::Exists, None, None),
            exp("shop.weird", Check::Count, Some(10), Some(12)),
        ];
        let s = seen(&[
            ("shop.orders", 113),
            ("shop.users", 7),
            ("analytics.b", 0),
            ("analytics.c", 4),
            ("crm.leads", 3),
            ("shop.weird", 10),
            ("shop.new", 1),
            ("admin.system.version", 1),
        ]);
        let out = compare(&exps, &s);
        let st: Vec<(&str, Status)> = out.rows.iter().map(|r| (r.ns.as_str(), r.status)).collect();
        assert_eq!(
            st,
            [
                ("shop.orders", Status::Pass),
                ("shop.users", Status::Fail),
                ("shop.gone", Status::Fail),
                ("analytics.a", Status::Pass),
                ("analytics.b", Status::Pass),
                ("analytics.c", Status::Fail),
                ("crm.leads", Status::Pass),
                ("crm.lost", Status::Fail),
                ("shop.weird", Status::Fail),
            ]
        );
        assert!(out.rows[0].note.contains("numRecords 113"));
        assert_eq!(out.rows[1].note, "expected 5, found 7 (+2)");
        assert!(out.rows[2].note.starts_with("missing"));
        assert_eq!(out.rows[2].documents, None);
        assert!(out.rows[8]
            .note
            .contains("recorded numRecords 12, found 10"));
        assert_eq!(out.extra, ["shop.new"]);
    }
}
