//! A gzip oplog cut short (an interrupted `mongodump --oplog --gzip`, a partial
//! copy) reads like a plain file cut short (issue 17 item 11). It failed with
//! "incomplete deflate stream", no hint, and `--allow-truncated` did not help.
//!
//! Two layouts, cut at many offsets: one member for the whole file (what mongodump's
//! Go `gzip.Writer` and `gzip -c` write) and many members carrying their size (what
//! `pitr dump-oplog --gzip` writes, with the same `write_member`).

mod common;

use std::io::Write;
use std::path::Path;

use common::{code, pitr, stderr, stdout};

const ORACLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/incident/oplog.bson");

/// The fixture's first `n` entries, as one byte string, and each entry's bytes.
fn entries(n: usize) -> Vec<Vec<u8>> {
    let all = std::fs::read(ORACLE).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at < all.len() && out.len() < n {
        let len = i32::from_le_bytes(all[at..at + 4].try_into().unwrap()) as usize;
        out.push(all[at..at + len].to_vec());
        at += len;
    }
    out
}

fn one_member(plain: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(plain).unwrap();
    enc.finish().unwrap()
}

/// Members of `per` entries each, as `pitr dump-oplog --gzip` writes them; also
/// where each member starts.
fn members(es: &[Vec<u8>], per: usize) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut starts = Vec::new();
    for group in es.chunks(per) {
        starts.push(out.len());
        pitr::stream::gzip::write_member(&mut out, &group.concat(), flate2::Compression::default())
            .unwrap();
    }
    (out, starts)
}

/// `pitr oplog cat` lines of a file, or of its first `n` entries.
fn cat_lines(path: &str) -> Vec<String> {
    let o = pitr(&["oplog", "cat", path]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    stdout(&o).lines().map(String::from).collect()
}

/// Cuts `gz` at `cut` bytes and checks both ways of reading it: without the flag an
/// error naming the file, the cut and the count, with a hint; with it exactly the
/// leading entries (at least `at_least`; all of them when `all`).
fn check_cut(dir: &Path, what: &str, gz: &[u8], cut: usize, want: &[String], at_least: usize) {
    let f = dir.join(format!("{what}-{cut}.bson"));
    std::fs::write(&f, &gz[..cut]).unwrap();
    let f = f.to_str().unwrap();
    let ctx = format!("{what} cut at {cut} of {}", gz.len());

    let o = pitr(&["oplog", "stats", f]);
    assert_eq!(code(&o), 2, "{ctx}: {}", stderr(&o));
    assert_eq!(stdout(&o), "", "{ctx}: no report");
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!("error: `{f}` is a truncated gzip stream: its compressed data ({cut} bytes) ends inside gzip member")),
        "{ctx}: {err}"
    );
    assert!(
        err.contains("complete entr") && err.contains("read before the cut"),
        "{ctx}: {err}"
    );
    assert!(
        err.contains("\nhint: ") && err.contains("--allow-truncated"),
        "{ctx}: {err}"
    );
    assert!(!err.contains("incomplete deflate stream\n"), "{ctx}: {err}");

    let o = pitr(&["oplog", "cat", "--allow-truncated", f]);
    assert_eq!(code(&o), 0, "{ctx}: {}", stderr(&o));
    let got: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert!(got.len() >= at_least, "{ctx}: {} entries", got.len());
    assert_eq!(got[..], want[..got.len()], "{ctx}: the leading entries");
    assert!(
        stderr(&o).contains("is a truncated gzip stream")
            && stderr(&o).contains(&format!("{} complete entr", got.len())),
        "{ctx}: {}",
        stderr(&o)
    );

    // The scanning commands too.
    let o = pitr(&["find-drop", "--allow-truncated", f]);
    assert!(code(&o) < 2, "{ctx}: {}", stderr(&o));
    assert!(stdout(&o).contains("truncated gzip stream"), "{ctx}");
}

#[test]
fn a_one_member_gzip_cut_anywhere_reads_its_complete_entries() {
    let es = entries(400);
    let plain = es.concat();
    let tmp = tempfile::tempdir().unwrap();
    let pf = tmp.path().join("plain.bson");
    std::fs::write(&pf, &plain).unwrap();
    let want = cat_lines(pf.to_str().unwrap());
    assert_eq!(want.len(), 400);

    let gz = one_member(&plain);
    let n = gz.len();
    // In the 10-byte header, in the deflate data, in the 8-byte trailer.
    // (One byte is not even the two magic bytes: a plain one-byte truncation.)
    for cut in [2, 5, 9, 11, n / 3, n / 2, n - 9, n - 4, n - 1] {
        // Cut in the trailer: all the data decompressed, only the check is missing.
        let at_least = if cut > n - 8 { 400 } else { 0 };
        check_cut(tmp.path(), "one", &gz, cut, &want, at_least);
    }
}

#[test]
fn a_multi_member_gzip_cut_anywhere_reads_its_complete_entries() {
    let es = entries(400);
    let tmp = tempfile::tempdir().unwrap();
    let pf = tmp.path().join("plain.bson");
    std::fs::write(&pf, es.concat()).unwrap();
    let want = cat_lines(pf.to_str().unwrap());

    let per = 40;
    let (gz, starts) = members(&es, per);
    assert_eq!(starts.len(), 10);
    // The whole file reads as the entries.
    let whole = tmp.path().join("whole.bson");
    std::fs::write(&whole, &gz).unwrap();
    assert_eq!(cat_lines(whole.to_str().unwrap()), want);

    for (k, &start) in starts.iter().enumerate().skip(1) {
        let next = starts.get(k + 1).copied().unwrap_or(gz.len());
        // Members before k are whole: at least their entries.
        let before = k * per;
        for cut in [
            start + 1,          // the magic
            start + 7,          // the fixed header
            start + 14,         // the extra field with the member's size
            (start + next) / 2, // the deflate data
            next - 3,           // the trailer
        ] {
            let at_least = if cut + 8 > next { before + per } else { before };
            check_cut(tmp.path(), "members", &gz, cut, &want, at_least);
        }
    }
}

/// Damage is not a cut: `--allow-truncated` must not turn it into a short read.
#[test]
fn damage_inside_a_gzip_stays_an_error_with_allow_truncated() {
    let es = entries(200);
    let tmp = tempfile::tempdir().unwrap();
    let (gz, starts) = members(&es, 40);
    for (what, bytes) in [
        ("flipped", {
            let mut b = gz.clone();
            b[(starts[2] + starts[3]) / 2] ^= 0xff;
            b
        }),
        ("garbage-after", {
            let mut b = gz.clone();
            b.extend_from_slice(b"not gzip");
            b
        }),
        ("one-member-flipped", {
            let mut b = one_member(&es.concat());
            let mid = b.len() / 2;
            b[mid] ^= 0xff;
            b
        }),
    ] {
        let f = tmp.path().join(format!("{what}.bson"));
        std::fs::write(&f, &bytes).unwrap();
        let o = pitr(&["oplog", "stats", "--allow-truncated", f.to_str().unwrap()]);
        assert_eq!(code(&o), 2, "{what}: {}", stdout(&o));
        assert!(
            !stderr(&o).contains("truncated gzip stream"),
            "{what}: {}",
            stderr(&o)
        );
    }
}
