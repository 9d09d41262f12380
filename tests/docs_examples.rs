//! Every command example in the documentation runs here, against the bundled
//! fixtures, so the pages cannot drift from the program (several `--help` and README
//! examples had). `trycmd` (by clap's maintainers) reads the ```` ```console ````
//! blocks of `README.md` and of every `docs/*.md`: each `$ pitr ...` line is run and
//! its stdout and stderr (merged, as a terminal shows them) must match the lines
//! under it, where `...` alone on a line skips lines and `[..]` skips part of a line
//! (timings, work-dir names); `? N` under the command is the exit code it must have
//! (0 when absent). A changed output fails the test.
//!
//! Where the examples run: each page in a fresh temp dir of its own, holding only a
//! `fixtures` link to the repository's `fixtures/`, so `fixtures/incident/...` paths
//! work and commands that write (`replay --out`, `plan --out`) write there, never
//! into the repository. (trycmd's own sandbox, a `<page>.in/` copied to a temp dir,
//! copies a symlink as it is, so a relative link to the fixtures would break there,
//! and copying the fixtures into the docs would duplicate them.) trycmd runs a
//! `.md` case in the test process's current directory, so the pages run one after
//! another, each with the current directory set to its own temp dir.
//!
//! Blocks that cannot run here are ```` ```sh ```` (trycmd skips every language but
//! `console` and `trycmd`): the pages and why are in [`UNEXECUTED`], and a test
//! checks that no other page holds a `pitr` command outside a `console` block.
//!
//! After an intended change of output: `TRYCMD=overwrite cargo test --test
//! docs_examples` rewrites the expected lines in place (it keeps `...` and `[..]` as
//! far as it can); read the diff before committing it.

use std::path::{Path, PathBuf};

/// Pages with examples that are not run, and why. Everything else is run.
const UNEXECUTED: &[(&str, &str)] = &[
    ("README.md", "the set-up commands (`cargo run`, `cargo test`) and the runbook's placeholders (DUMP, OPLOG) are for a person, the rehearse example needs a replica set; its console block runs"),
    ("docs/find-drop.md", "pipelines over a user's own files (`| jq`, `mongodump ... | pitr find-drop -`); the same commands run on the fixtures above them"),
    ("docs/plan.md", "examples over a user's own `dump/` and `oplog.bson`; the same commands run on the fixtures above them"),
    ("docs/replay-and-verify.md", "`--engine mongod` and `pitr verify` need a mongod (tests/replay_e2e.rs runs them against the stand-in mongod and the real mongo-tools)"),
    ("docs/live-source-and-archive.md", "`status`, `dump-oplog`, `find-drop --uri` and `archive` need a replica set (tests/live_source.rs and tests/oplog_archive.rs run them against the stand-in)"),
    ("docs/object-storage.md", "commands over a user's bucket; tests/storage_cli.rs runs the same commands against an s3s-fs bucket on loopback"),
    ("docs/sharded.md", "`cluster discover`, `dump-oplog --cluster` and `archive --cluster` need a mongos and the members' replica sets (tests/cluster_live.rs runs them against stand-ins); the find-drop, plan and replay examples run"),
    ("docs/rehearse.md", "`pitr rehearse` needs a 5.0+ replica set (tests/rehearse.rs runs it against the stand-in mongod, with backups by the real mongodump); its cron and systemd examples are configuration"),
    ("docs/testing.md", "test and script commands (`scripts/e2e-real.sh`, `cargo test`) are what the page is about, not examples to check"),
    ("docs/troubleshooting.md", "errors that need a damaged file (truncated, gzip cut short) or another replica set's oplog, quoted with the tests that pin them (cli_reader, gzip_truncated, never_silently_wrong)"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page under docs/, as paths relative to the repository.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| {
            e.expect("readable docs/")
                .file_name()
                .into_string()
                .expect("UTF-8 name")
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The fenced blocks of a markdown file: (info string, body lines).
fn fenced_blocks(text: &str) -> Vec<(String, Vec<String>)> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let ticks = line.len() - line.trim_start_matches('`').len();
        if ticks < 3 || line.starts_with(' ') {
            continue;
        }
        let fence = &line[..ticks];
        let info = line[ticks..].trim().to_string();
        let mut body = Vec::new();
        for l in lines.by_ref() {
            if l.starts_with(fence) {
                break;
            }
            body.push(l.to_string());
        }
        blocks.push((info, body));
    }
    blocks
}

#[test]
fn every_console_example_in_the_docs_runs_and_prints_what_the_page_shows() {
    // The examples show what a user without these set would see.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PITR_") {
            std::env::remove_var(&k);
        }
    }
    let fixtures = root().join("fixtures");
    let home = std::env::current_dir().expect("a current directory");
    let mut failed = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).expect("readable page");
        let commands = fenced_blocks(&text)
            .iter()
            .filter(|(info, _)| info.split(',').next() == Some("console"))
            .flat_map(|(_, body)| {
                body.iter()
                    .filter(|l| l.starts_with("$ "))
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .count();
        if commands == 0 {
            continue;
        }
        ran += commands;
        let dir = tempfile::tempdir().expect("a temp dir");
        std::os::unix::fs::symlink(&fixtures, dir.path().join("fixtures"))
            .expect("link the fixtures");
        std::env::set_current_dir(dir.path()).expect("enter the temp dir");
        let path: PathBuf = root().join(&page);
        let outcome = std::panic::catch_unwind(|| {
            trycmd::TestCases::new()
                .register_bin("pitr", PathBuf::from(env!("CARGO_BIN_EXE_pitr")))
                // Tables fit 200 columns when no terminal says otherwise; say it here too.
                .env("COLUMNS", "200")
                .case(&path)
                .run();
        });
        std::env::set_current_dir(&home).expect("leave the temp dir");
        if outcome.is_err() {
            failed.push(page);
        }
    }
    assert!(
        failed.is_empty(),
        "examples whose output no longer matches the page: {failed:?} (details above)"
    );
    assert!(
        ran >= 40,
        "only {ran} documented commands found: are the docs' console blocks still there?"
    );
}

/// A `pitr` command in a block trycmd skips is an example nobody runs: only the pages
/// in `UNEXECUTED` may have them, and every fence needs a language (trycmd takes a
/// bare ```` ``` ```` for a test case).
#[test]
fn examples_that_do_not_run_are_only_where_the_test_says_why() {
    let mut unexplained = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).expect("readable page");
        for (info, body) in fenced_blocks(&text) {
            let lang = info.split(',').next().unwrap_or("");
            assert!(
                !lang.is_empty(),
                "{page}: a fenced block without a language (trycmd would run it): {:?}",
                body.first()
            );
            if lang == "console" {
                continue;
            }
            let has_pitr = body.iter().any(|l| {
                let l = l.trim_start_matches("$ ").trim_start();
                l.starts_with("pitr ") || l.contains("| pitr ") || l.contains("&& pitr ")
            });
            if has_pitr && !UNEXECUTED.iter().any(|(p, _)| *p == page) {
                unexplained.push(format!(
                    "{page}: ```{info} block with a pitr command: {:?}",
                    body.first()
                ));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "make these `console` blocks, or add the page to UNEXECUTED with why:\n{}",
        unexplained.join("\n")
    );
}

/// Links between the pages (`[text](page.md#anchor)`, `../fixtures/README.md`) name
/// files that exist: pages move, and a link to where one used to be helps nobody.
#[test]
fn links_between_the_pages_name_files_that_exist() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).expect("readable page");
        let dir = root()
            .join(&page)
            .parent()
            .expect("a page has a folder")
            .to_path_buf();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.contains(' ') {
                continue;
            }
            if !dir.join(target).exists() {
                broken.push(format!("{page}: {target}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to files that do not exist:\n{}",
        broken.join("\n")
    );
}
