//! Finding `mongod`, `mongorestore` and `mongodump`, and which versions they are.
//!
//! Search order: the directory given with `--mongodb-bin`, then the directory in
//! `PITR_MONGODB_BIN`, then `PATH`. A directory that was given but does not exist is
//! an error rather than a silent fall-through to `PATH`: a typo there would otherwise
//! run whatever other version happens to be installed.
//!
//! pitr's test suite builds stand-ins with the same names; they say `pitr stand-in`
//! in their `--version` output, and [`ToolBinary::is_standin`] carries that into every
//! report, so a stand-in run is never presented as a real-server result.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use super::child::{ChildError, Command};
use super::signals::Cancel;
use crate::error::Hint;

/// The environment variable naming a directory that holds the MongoDB binaries.
pub const ENV_BIN_DIR: &str = "PITR_MONGODB_BIN";

/// What a stand-in's `--version` output contains.
pub const STANDIN_MARKER: &str = "pitr stand-in";

/// `--version` answers at once; anything slower is hung (e.g. waiting on a broken
/// NFS mount).
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);

/// A MongoDB program pitr runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    Mongod,
    Mongorestore,
    Mongodump,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Mongod => "mongod",
            Tool::Mongorestore => "mongorestore",
            Tool::Mongodump => "mongodump",
        }
    }

    fn install_hint(self) -> &'static str {
        match self {
            Tool::Mongod => {
                "install MongoDB Community Server (https://www.mongodb.com/try/download/community; \
                 on Debian/Ubuntu the `mongodb-org-server` package from MongoDB's repository)"
            }
            Tool::Mongorestore | Tool::Mongodump => {
                "install the MongoDB Database Tools (https://www.mongodb.com/try/download/database-tools; \
                 the `mongodb-database-tools` package); since MongoDB 4.4 they ship separately from the server"
            }
        }
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a binary was found (or which place was searched).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// `--mongodb-bin DIR`
    Flag,
    /// `PITR_MONGODB_BIN`
    EnvVar,
    /// `PATH`
    Path,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Flag => "--mongodb-bin",
            Origin::EnvVar => ENV_BIN_DIR,
            Origin::Path => "PATH",
        })
    }
}

/// The places to look, in order. Built from the real environment with
/// [`ToolSearch::from_env`], or by hand in tests.
#[derive(Clone, Debug, Default)]
pub struct ToolSearch {
    /// `--mongodb-bin DIR`.
    pub flag_dir: Option<PathBuf>,
    /// The value of `PITR_MONGODB_BIN`.
    pub env_dir: Option<PathBuf>,
    /// The value of `PATH`.
    pub path: Option<OsString>,
}

impl ToolSearch {
    /// `flag_dir` from `--mongodb-bin`; the rest from pitr's environment. An empty
    /// `PITR_MONGODB_BIN` counts as unset.
    pub fn from_env(flag_dir: Option<PathBuf>) -> ToolSearch {
        ToolSearch {
            flag_dir,
            env_dir: std::env::var_os(ENV_BIN_DIR)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            path: std::env::var_os("PATH"),
        }
    }

    /// Every place searched, for messages.
    fn describe(&self) -> String {
        let dir = |d: &Option<PathBuf>, unset: &str| match d {
            Some(d) => format!("`{}`", d.display()),
            None => unset.to_string(),
        };
        format!(
            "--mongodb-bin {}, {ENV_BIN_DIR} {}, PATH {}",
            dir(&self.flag_dir, "(not given)"),
            dir(&self.env_dir, "(not set)"),
            match &self.path {
                Some(p) if !p.is_empty() => format!("`{}`", p.to_string_lossy()),
                _ => "(empty)".to_string(),
            }
        )
    }

    /// The first executable `tool` in the search order, without running it.
    pub fn locate(&self, tool: Tool) -> Result<(PathBuf, Origin), BinaryError> {
        let mut not_executable = Vec::new();
        for (origin, dir) in [
            (Origin::Flag, &self.flag_dir),
            (Origin::EnvVar, &self.env_dir),
        ] {
            let Some(dir) = dir else { continue };
            if !dir.is_dir() {
                return Err(BinaryError::BadDir {
                    origin,
                    dir: dir.clone(),
                    is_file: dir.is_file(),
                });
            }
            if let Some(found) = probe(dir, tool, &mut not_executable) {
                return Ok((found, origin));
            }
        }
        if let Some(path) = &self.path {
            // An empty PATH entry means the current directory; never search that.
            for dir in std::env::split_paths(path).filter(|d| !d.as_os_str().is_empty()) {
                if let Some(found) = probe(&dir, tool, &mut not_executable) {
                    return Ok((found, Origin::Path));
                }
            }
        }
        Err(BinaryError::NotFound {
            tool,
            searched: self.describe(),
            not_executable,
        })
    }

    /// Locates `tool` and reads its version.
    pub async fn find(&self, tool: Tool, cancel: &Cancel) -> Result<ToolBinary, BinaryError> {
        let (path, origin) = self.locate(tool)?;
        let info = read_version(&path, cancel)
            .await
            .map_err(|source| BinaryError::Version {
                tool,
                path: path.clone(),
                source,
            })?;
        let version = parse_version(tool, &info);
        Ok(ToolBinary {
            tool,
            path,
            origin,
            version: version.number,
            version_line: version.first_line,
            is_standin: version.is_standin,
        })
    }
}

/// `dir/name` if it is an executable file; remembers a non-executable one for the
/// error message.
fn probe(dir: &Path, tool: Tool, not_executable: &mut Vec<PathBuf>) -> Option<PathBuf> {
    let candidate = dir.join(tool.name());
    let meta = std::fs::metadata(&candidate).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.permissions().mode() & 0o111 == 0 {
        not_executable.push(candidate);
        return None;
    }
    Some(candidate)
}

/// A located tool and what it says about itself.
#[derive(Clone, Debug, Serialize)]
pub struct ToolBinary {
    pub tool: Tool,
    pub path: PathBuf,
    pub origin: Origin,
    /// `7.0.14`, `100.9.4`; `None` when the output had no recognisable version.
    pub version: Option<String>,
    /// The first line of `--version`, kept verbatim for reports.
    pub version_line: String,
    /// A pitr test stand-in, not the real MongoDB program.
    pub is_standin: bool,
}

/// What `--version` output says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionInfo {
    pub number: Option<String>,
    pub first_line: String,
    pub is_standin: bool,
}

/// Runs `path --version` and returns its stdout and stderr (stdout first).
pub async fn read_version(path: &Path, cancel: &Cancel) -> Result<String, ChildError> {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    Command::new(path)
        .arg("--version")
        .timeout(VERSION_TIMEOUT)
        .grace(Duration::from_secs(1))
        .on_line(move |_, l| {
            if let Ok(mut v) = sink.lock() {
                // Build Info is a few dozen lines; cap against a misbehaving binary.
                if v.len() < 1000 {
                    v.push(l.to_string());
                }
            }
        })
        .run(cancel)
        .await?;
    let text = lines.lock().map(|v| v.join("\n")).unwrap_or_default();
    Ok(text)
}

/// Parses `--version` output:
///
/// - mongod: `db version v7.0.14` then `Build Info: {...}`;
/// - the database tools: `mongorestore version: 100.9.4`, `git version: ...`, `Go version: ...`;
/// - older tools: `mongorestore version: r4.0.28`; unknown formats: the first line kept.
pub fn parse_version(tool: Tool, output: &str) -> VersionInfo {
    let first_line = output
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    let is_standin = output.to_ascii_lowercase().contains(STANDIN_MARKER);
    // The line that names this program's version, else any line with a version.
    let own = match tool {
        Tool::Mongod => "db version",
        Tool::Mongorestore => "mongorestore version",
        Tool::Mongodump => "mongodump version",
    };
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    let number = lines
        .iter()
        .filter(|l| l.to_ascii_lowercase().starts_with(own))
        .chain(lines.iter().filter(|l| {
            let l = l.to_ascii_lowercase();
            // `git version`/`Go version` are the build's, not the tool's.
            l.contains("version") && !l.starts_with("git version") && !l.starts_with("go version")
        }))
        .find_map(|l| version_after_keyword(l));
    VersionInfo {
        number,
        first_line,
        is_standin,
    }
}

/// The dotted number after the word `version` (and an optional `:`, `v` or `r`).
fn version_after_keyword(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find("version")? + "version".len();
    let rest = line[at..].trim_start_matches([':', ' ', '\t']);
    let rest = rest.strip_prefix(['v', 'r']).unwrap_or(rest);
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
        .collect();
    let starts_with_digit = number.chars().next().is_some_and(|c| c.is_ascii_digit());
    (starts_with_digit && number.contains('.')).then_some(number)
}

/// Why a tool could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    #[error("`{tool}` not found (searched {searched})")]
    NotFound {
        tool: Tool,
        searched: String,
        /// Files with the right name that are not executable.
        not_executable: Vec<PathBuf>,
    },

    #[error("{origin} `{}` is not a directory{}", dir.display(), if *is_file { " (it is a file)" } else { " (it does not exist)" })]
    BadDir {
        origin: Origin,
        dir: PathBuf,
        is_file: bool,
    },

    #[error("`{}` does not work: `{tool} --version` did not succeed", path.display())]
    Version {
        tool: Tool,
        path: PathBuf,
        #[source]
        source: ChildError,
    },
}

impl Hint for BinaryError {
    fn hint(&self) -> Option<String> {
        match self {
            BinaryError::NotFound {
                tool,
                not_executable,
                ..
            } => {
                let mut h = String::new();
                for p in not_executable {
                    h.push_str(&format!(
                        "`{}` exists but is not executable (`chmod +x` it); ",
                        p.display()
                    ));
                }
                h.push_str(&format!(
                    "{}; then pass `--mongodb-bin DIR` or set `{ENV_BIN_DIR}=DIR` to the directory holding `{tool}`, or put it on PATH",
                    tool.install_hint()
                ));
                Some(h)
            }
            BinaryError::BadDir {
                origin,
                dir,
                is_file,
            } => Some(if *is_file {
                let parent = dir.parent().unwrap_or(Path::new("."));
                format!(
                    "{origin} takes the directory holding the MongoDB programs, e.g. `{}`",
                    parent.display()
                )
            } else {
                format!("check the spelling of {origin}, or leave it unset to search PATH")
            }),
            BinaryError::Version { source, .. } => Some(source.hint().unwrap_or_else(|| {
                "the binary may be damaged or built for another system; reinstall it".into()
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MONGOD_70: &str = r#"db version v7.0.14
Build Info: {
    "version": "7.0.14",
    "gitVersion": "ce59cfc6a3c5e5c067dca0d30697edd68d4f5188",
    "openSSLVersion": "OpenSSL 3.0.2 15 Mar 2022",
    "modules": [],
    "allocator": "tcmalloc",
    "environment": {
        "distmod": "ubuntu2204",
        "distarch": "x86_64",
        "target_arch": "x86_64"
    }
}"#;

    #[test]
    fn mongod_versions() {
        let v = parse_version(Tool::Mongod, MONGOD_70);
        assert_eq!(v.number.as_deref(), Some("7.0.14"));
        assert_eq!(v.first_line, "db version v7.0.14");
        assert!(!v.is_standin);
        let v = parse_version(Tool::Mongod, "db version v8.0.4-rc1\nBuild Info: {}\n");
        assert_eq!(v.number.as_deref(), Some("8.0.4-rc1"));
        let v = parse_version(Tool::Mongod, "db version v4.2.24\ngit version: abc\n");
        assert_eq!(v.number.as_deref(), Some("4.2.24"));
    }

    #[test]
    fn tools_versions() {
        let out = "mongorestore version: 100.9.4\ngit version: 8fa3cfc8263b9cead37912d7b0447766143c3e3a\nGo version: go1.21.8\n   os: linux\n   arch: amd64\n   compiler: gc\n";
        let v = parse_version(Tool::Mongorestore, out);
        assert_eq!(v.number.as_deref(), Some("100.9.4"));
        assert_eq!(v.first_line, "mongorestore version: 100.9.4");
        // Pre-4.4 tools put an `r` before the number.
        let v = parse_version(
            Tool::Mongodump,
            "mongodump version: r4.0.28\ngit version: x\nGo version: go1.11\n",
        );
        assert_eq!(v.number.as_deref(), Some("4.0.28"));
        // A development build has no number: keep the first line only.
        let v = parse_version(Tool::Mongodump, "mongodump version: built-without-version-string\ngit version: 1.2.3\nGo version: go1.21.8");
        assert_eq!(v.number, None);
        assert_eq!(
            v.first_line,
            "mongodump version: built-without-version-string"
        );
    }

    #[test]
    fn unknown_formats_keep_the_first_line() {
        let v = parse_version(
            Tool::Mongod,
            "\n  Percona Server for MongoDB mongod 7.0.12-7\n",
        );
        assert_eq!(v.number, None);
        assert_eq!(v.first_line, "Percona Server for MongoDB mongod 7.0.12-7");
        let v = parse_version(Tool::Mongod, "");
        assert_eq!((v.number, v.first_line.as_str()), (None, ""));
        let v = parse_version(Tool::Mongod, "mongod, version 6.0.1 (custom)");
        assert_eq!(v.number.as_deref(), Some("6.0.1"));
    }

    #[test]
    fn standins_are_recognised() {
        let out = format!("{MONGOD_70}\n(pitr stand-in mongod; not a real MongoDB server)");
        let v = parse_version(Tool::Mongod, &out);
        assert!(v.is_standin);
        assert_eq!(v.number.as_deref(), Some("7.0.14"));
        let v = parse_version(
            Tool::Mongorestore,
            "mongorestore version: 100.9.4 (PITR STAND-IN)\n",
        );
        assert!(v.is_standin);
    }

    fn fake(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\necho fake\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn lookup_order_flag_then_env_then_path() {
        let root = tempfile::tempdir().unwrap();
        let [flag, env, p1, p2, empty] =
            ["flag", "env", "p1", "p2", "empty"].map(|d| root.path().join(d));
        for d in [&flag, &env, &p1, &p2, &empty] {
            std::fs::create_dir(d).unwrap();
        }
        fake(&flag, "mongod", 0o755);
        fake(&env, "mongod", 0o755);
        fake(&env, "mongorestore", 0o755);
        fake(&p1, "mongodump", 0o644); // not executable: skipped
        fake(&p2, "mongodump", 0o755);
        fake(&p2, "mongorestore", 0o755);
        let path = std::env::join_paths([&p1, &p2]).unwrap();
        let s = ToolSearch {
            flag_dir: Some(flag.clone()),
            env_dir: Some(env.clone()),
            path: Some(path.clone()),
        };
        assert_eq!(
            s.locate(Tool::Mongod).unwrap(),
            (flag.join("mongod"), Origin::Flag)
        );
        assert_eq!(
            s.locate(Tool::Mongorestore).unwrap(),
            (env.join("mongorestore"), Origin::EnvVar)
        );
        assert_eq!(
            s.locate(Tool::Mongodump).unwrap(),
            (p2.join("mongodump"), Origin::Path)
        );

        let none = ToolSearch {
            flag_dir: Some(empty.clone()),
            env_dir: Some(empty.clone()),
            path: Some(std::env::join_paths([&p1]).unwrap()),
        };
        let e = none.locate(Tool::Mongodump).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`mongodump` not found"), "{msg}");
        assert!(
            msg.contains(&format!("--mongodb-bin `{}`", empty.display())),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("PITR_MONGODB_BIN `{}`", empty.display())),
            "{msg}"
        );
        assert!(msg.contains(&format!("PATH `{}`", p1.display())), "{msg}");
        let hint = e.hint().unwrap();
        assert!(hint.contains("Database Tools"), "{hint}");
        assert!(hint.contains("--mongodb-bin DIR") && hint.contains("PITR_MONGODB_BIN=DIR"));
        assert!(hint.contains("is not executable"), "{hint}");

        let unset = ToolSearch::default();
        let e = unset.locate(Tool::Mongod).unwrap_err();
        assert!(e
            .to_string()
            .contains("--mongodb-bin (not given), PITR_MONGODB_BIN (not set), PATH (empty)"));
        assert!(e.hint().unwrap().contains("Community Server"));
    }

    #[test]
    fn a_given_dir_must_exist() {
        let root = tempfile::tempdir().unwrap();
        let file = fake(root.path(), "mongod", 0o755);
        let s = ToolSearch {
            flag_dir: Some(file.clone()),
            ..Default::default()
        };
        let e = s.locate(Tool::Mongod).unwrap_err();
        assert!(e.to_string().contains("is not a directory (it is a file)"));
        assert!(e
            .hint()
            .unwrap()
            .contains(&format!("`{}`", root.path().display())));
        let s = ToolSearch {
            env_dir: Some(root.path().join("nope")),
            path: Some(root.path().as_os_str().to_owned()),
            ..Default::default()
        };
        let e = s.locate(Tool::Mongod).unwrap_err();
        assert!(e.to_string().starts_with("PITR_MONGODB_BIN `"), "{e}");
    }
}
