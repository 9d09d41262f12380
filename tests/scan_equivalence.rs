//! Every byte-level shortcut of `Scanner::feed_bytes` (inserts and no-ops passed
//! over from their `op` in any field order, harmless updates recognised from their
//! bytes) must find exactly what a full parse of every entry finds, on every traffic
//! mix the bench uses (`pitr-gen --mix`) and every field order among them.

use std::path::Path;

use pitr::forensics::{BurstRule, Finding, Scanner};
use pitr::oplog::{self, Entry, ReadOptions};
use pitr_fixturegen::mix::Mix;
use pitr_fixturegen::{generate, Options, Scenario, DEFAULT_START_SECS};

fn entries(path: &Path) -> Vec<Vec<u8>> {
    let mut r = oplog::open(path.to_str().unwrap(), ReadOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some((d, _, _)) = r.next_bytes().unwrap() {
        out.push(d.to_vec());
    }
    out
}

fn findings(docs: &[Vec<u8>], fast: bool) -> Vec<Finding> {
    let mut s = Scanner::new(BurstRule::default());
    for d in docs {
        if fast {
            s.feed_bytes(d).unwrap();
        } else {
            let raw = bson::RawDocument::from_bytes(d).unwrap();
            s.feed(&Entry::parse(raw).unwrap()).unwrap();
        }
    }
    s.finish().0
}

#[test]
fn fast_paths_find_what_the_full_parse_finds_on_every_mix() {
    for mix in [
        Mix::Current,
        Mix::Oltp,
        Mix::Retryable,
        Mix::Legacy,
        Mix::Large,
        Mix::Tiny,
    ] {
        let dir = tempfile::tempdir().unwrap();
        generate(&Options {
            out: dir.path().to_path_buf(),
            seed: 11,
            scenario: Scenario::Bench,
            target_bytes: 3 << 20,
            start: DEFAULT_START_SECS,
            mix,
        })
        .unwrap();
        let docs = entries(&dir.path().join("oplog.bson"));
        let truth: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("truth.json")).unwrap()).unwrap();
        let full = findings(&docs, false);
        let fast = findings(&docs, true);
        assert_eq!(fast, full, "mix {}", mix.name());
        // The planted incidents are all found, so the comparison is not vacuous.
        let planted = truth["incidents"].as_array().unwrap().len();
        assert!(
            full.len() >= planted && planted > 5,
            "mix {}: {} findings for {planted} incidents",
            mix.name(),
            full.len()
        );
        // The mix has the layout it claims: op first, behind a session, or legacy.
        let layout = |d: &Vec<u8>| match (d[4], &d[5..7]) {
            (0x02, b"op") => "op first",
            (0x03, b"ls") => "session first",
            (0x11, b"ts") => "ts first",
            _ => "other",
        };
        let count = |what: &str| docs.iter().filter(|d| layout(d) == what).count();
        match mix {
            Mix::Legacy => assert_eq!(count("ts first"), docs.len()),
            Mix::Retryable => assert!(count("session first") * 2 > docs.len(), "mix retryable"),
            _ => assert!(count("op first") * 2 > docs.len(), "mix {}", mix.name()),
        }
    }
}
