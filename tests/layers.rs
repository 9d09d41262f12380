//! The layering written at the top of `src/lib.rs` holds: every `crate::ROOM` path
//! in non-test code points to a room on a lower floor (or to the room itself). The
//! table is read from `src/lib.rs`, so the rule and its check cannot drift apart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// room -> floor, from the `//! | N | a, b | ... |` rows of src/lib.rs.
fn floors() -> BTreeMap<String, u32> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut m = BTreeMap::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! | ") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Ok(floor) = cells[0].parse::<u32>() else {
            continue;
        };
        for room in cells[1].split(',') {
            m.insert(room.trim().to_string(), floor);
        }
    }
    m
}

/// The text without `#[cfg(test)] mod x { ... }` blocks and `//` comments.
fn non_test_code(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        match after.find('{') {
            Some(open) if after[..open].contains("mod ") => {
                let mut depth = 0;
                let mut end = after.len();
                for (i, c) in after[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            _ => {
                out.push_str("#[cfg(test)]");
                rest = &after["#[cfg(test)]".len()..];
            }
        }
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().unwrap() != "tests" {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_name().unwrap().to_string_lossy();
            if name != "tests.rs" && !name.ends_with("_tests.rs") {
                out.push(p);
            }
        }
    }
}

#[test]
fn no_import_crosses_upward() {
    let floors = floors();
    assert!(floors.len() >= 10, "the table in src/lib.rs: {floors:?}");
    let mut rooms: Vec<String> = Vec::new();
    for e in std::fs::read_dir(src()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if name != "lib"
            && name != "main"
            && (p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        {
            rooms.push(name);
        }
    }
    let mut problems = Vec::new();
    for room in &rooms {
        let Some(&floor) = floors.get(room) else {
            problems.push(format!("room `{room}` is not in the table of src/lib.rs"));
            continue;
        };
        let mut files = Vec::new();
        let dir = src().join(room);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src().join(format!("{room}.rs")));
        }
        for f in files {
            let code = non_test_code(&std::fs::read_to_string(&f).unwrap());
            let mut targets: Vec<String> = Vec::new();
            for (i, _) in code.match_indices("crate::") {
                let tail = &code[i + "crate::".len()..];
                if let Some(group) = tail.strip_prefix('{') {
                    let inner = &group[..group.find('}').unwrap_or(group.len())];
                    for part in inner.split(',') {
                        let name: String = part
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        targets.push(name);
                    }
                } else {
                    targets.push(
                        tail.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect(),
                    );
                }
            }
            for t in targets {
                if t == *room {
                    continue;
                }
                if let Some(&tf) = floors.get(&t) {
                    if tf >= floor {
                        problems.push(format!(
                            "{} (floor {floor}) uses `crate::{t}` (floor {tf})",
                            f.strip_prefix(src()).unwrap().display()
                        ));
                    }
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "imports that cross upward (see the table at the top of src/lib.rs):\n{}",
        problems.join("\n")
    );
}

/// The check itself finds an upward import (it would pass vacuously otherwise).
#[test]
fn the_check_sees_an_upward_import() {
    let code = non_test_code(
        "use crate::plan::x;\n#[cfg(test)]\nmod tests { use crate::cli::y; }\n// crate::replay\n",
    );
    assert!(code.contains("crate::plan"));
    assert!(!code.contains("crate::cli") && !code.contains("crate::replay"));
}
