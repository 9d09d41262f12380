//! `pitr oplog stats` costs what the entries cost, never what their time span costs
//! (issue 17 item 7). mongo-tools' `dump_local_oplog` has an entry at ts `0:1` and
//! others in 2015: the timeline printed 16,796 rows where `--help` promises about 60,
//! and with `--bucket 1s` it grew to 24 GB until the kernel killed it. Peak memory
//! is measured by `scripts/mem-oplog-stats.sh`; these tests pin the rows.

mod common;

use std::path::Path;

use common::{code, pitr, stderr, stdout};
use serde_json::Value;

fn dump_local_oplog(test: &str) -> Option<String> {
    let dir = common::peer_dir(test)?.join("mongorestore/testdata/dump_local_oplog");
    Some(dir.to_str().unwrap().to_string())
}

/// The timeline rows of the text output.
fn timeline_rows(out: &str) -> Vec<&str> {
    out.lines()
        .skip_while(|l| !l.starts_with("Activity by oplog time"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

/// `n` inserts, `gap` seconds apart from `start`.
fn spread_oplog(path: &Path, n: u32, start: u32, gap: u32) {
    let mut bytes = Vec::new();
    for k in 0..n {
        let d = bson::doc! {
            "ts": bson::Timestamp { time: start + k * gap, increment: 1 },
            "t": 1i64, "v": 2i32, "op": "i", "ns": "shop.orders", "o": { "_id": k as i64 },
        };
        bytes.extend(bson::to_vec(&d).unwrap());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_dump_spanning_45_years_prints_a_handful_of_rows() {
    let Some(dump) = dump_local_oplog("a_dump_spanning_45_years_prints_a_handful_of_rows") else {
        return;
    };
    let o = pitr(&["oplog", "stats", &dump]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let rows = timeline_rows(&out);
    // Was 16,796 rows of one day each.
    assert!(rows.len() <= 60, "{} rows:\n{out}", rows.len());
    assert!(
        rows.iter().any(|r| r.contains("empty buckets")),
        "the empty years are one row:\n{out}"
    );
    assert!(out.contains("364days per row"), "{out}");
}

#[test]
fn one_second_buckets_over_45_years_are_three_rows() {
    let Some(dump) = dump_local_oplog("one_second_buckets_over_45_years_are_three_rows") else {
        return;
    };
    let o = pitr(&["oplog", "stats", &dump, "--bucket", "1s"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let rows = timeline_rows(&out);
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows[0].starts_with("  1970-01-01 00:00:00  ") && rows[0].contains(" 99 "));
    assert!(
        rows[1].contains("... 1450127226 empty buckets (45years"),
        "{}",
        rows[1]
    );
    assert!(
        rows[2].starts_with("  2015-12-14 21:07:07  "),
        "{}",
        rows[2]
    );

    let o = pitr(&["oplog", "stats", &dump, "--bucket", "1s", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = v["timeline"].as_array().unwrap();
    let got: Vec<(u64, u64, u64)> = t
        .iter()
        .map(|r| {
            (
                r["start_ts"]
                    .as_str()
                    .unwrap()
                    .split(':')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap(),
                r["buckets"].as_u64().unwrap(),
                r["total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(0, 1, 99), (1, 1_450_127_226, 0), (1_450_127_227, 1, 1)]
    );
}

#[test]
fn a_bucket_needing_more_than_the_cap_is_refused_with_one_that_fits() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("busy.bson");
    // 10,050 busy seconds, 2 s apart: 10,050 one-second buckets with entries.
    spread_oplog(&f, 10_050, 1_795_000_000, 2);
    let f = f.to_str().unwrap();

    let o = pitr(&["oplog", "stats", f, "--bucket", "1s"]);
    assert_eq!(code(&o), 2, "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "", "no partial report");
    let err = stderr(&o);
    assert!(
        err.starts_with("error: `--bucket 1s` needs more than 10000 timeline buckets"),
        "{err}"
    );
    assert!(err.contains("\nhint: leave --bucket out"), "{err}");
    assert!(err.contains("`--bucket 5s` or more"), "{err}");

    // The suggested size works, and so does leaving --bucket out.
    let o = pitr(&["oplog", "stats", f, "--bucket", "5s"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = pitr(&["oplog", "stats", f]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(timeline_rows(&out).len() <= 60, "{out}");
    assert!(out.contains("10050"), "{out}");
}

/// Was "window 0s (0 s)" for entries all in one second.
#[test]
fn a_window_within_one_second_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("one.bson");
    spread_oplog(&f, 1, 1_795_000_000, 1);
    let o = pitr(&["oplog", "stats", f.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("  window        within one second"), "{out}");
    assert!(!out.contains("0 s)"), "{out}");
}
