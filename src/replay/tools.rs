//! The MongoDB programs a replay runs: found once, versions read, stand-ins named.

use crate::exec::binaries::{BinaryError, Tool, ToolBinary, ToolSearch};
use crate::exec::Cancel;
use crate::plan::versions::{VersionHints, VersionSource};

/// What every output says when a stand-in ran.
pub const STANDIN_BANNER: &str = "STAND-IN: not a real MongoDB result";

/// The located programs.
#[derive(Clone, Debug)]
pub struct Tools {
    pub mongod: ToolBinary,
    pub mongorestore: ToolBinary,
    /// Only with `--out`.
    pub mongodump: Option<ToolBinary>,
}

impl Tools {
    /// The programs of a [`probe`], or the first one that is missing or broken.
    pub fn from_probe(probed: Vec<Probed>) -> Result<Tools, BinaryError> {
        let mut mongod = None;
        let mut mongorestore = None;
        let mut mongodump = None;
        for p in probed {
            let b = p.found?;
            match p.tool {
                Tool::Mongod => mongod = Some(b),
                Tool::Mongorestore => mongorestore = Some(b),
                Tool::Mongodump => mongodump = Some(b),
            }
        }
        Ok(Tools {
            mongod: mongod.expect("probe always asks for mongod"),
            mongorestore: mongorestore.expect("probe always asks for mongorestore"),
            mongodump,
        })
    }

    /// The programs as a [`probe`] that found each of them reports them (for a dry
    /// run's list of binaries).
    pub fn as_probed(&self) -> Vec<Probed> {
        let mut v = vec![
            Probed {
                tool: Tool::Mongod,
                found: Ok(self.mongod.clone()),
            },
            Probed {
                tool: Tool::Mongorestore,
                found: Ok(self.mongorestore.clone()),
            },
        ];
        v.extend(self.mongodump.as_ref().map(|b| Probed {
            tool: Tool::Mongodump,
            found: Ok(b.clone()),
        }));
        v
    }

    pub fn all(&self) -> Vec<&ToolBinary> {
        let mut v = vec![&self.mongod, &self.mongorestore];
        v.extend(self.mongodump.as_ref());
        v
    }

    /// Names of the stand-ins among them.
    pub fn standins(&self) -> Vec<&'static str> {
        self.all()
            .into_iter()
            .filter(|b| b.is_standin)
            .map(|b| b.tool.name())
            .collect()
    }
}

/// One program as [`probe`] found it: located and its `--version` read, or why not.
pub struct Probed {
    pub tool: Tool,
    pub found: Result<ToolBinary, BinaryError>,
}

/// Locates `mongod`, `mongorestore` and (`need_dump`) `mongodump` and reads their
/// versions: each `--version` is a short supervised child, the only process a dry run
/// starts. Their versions decide the plan's lint rules.
pub async fn probe(search: &ToolSearch, need_dump: bool, cancel: &Cancel) -> Vec<Probed> {
    let mut tools = vec![Tool::Mongod, Tool::Mongorestore];
    if need_dump {
        tools.push(Tool::Mongodump);
    }
    let mut out = Vec::new();
    for tool in tools {
        out.push(Probed {
            tool,
            found: search.find(tool, cancel).await,
        });
    }
    out
}

/// The versions the programs report, for the plan's rules.
pub fn version_hints(probed: &[Probed]) -> VersionHints {
    let of = |t: Tool| {
        probed
            .iter()
            .find(|p| p.tool == t)
            .and_then(|p| p.found.as_ref().ok())
            .map(|b| {
                (
                    b.version.clone().unwrap_or_else(|| b.version_line.clone()),
                    VersionSource::Binary,
                )
            })
    };
    VersionHints {
        mongorestore: of(Tool::Mongorestore),
        mongod: of(Tool::Mongod),
        backup_server: None,
    }
}

/// One line per binary: `mongod  7.0.14  /path (from --mongodb-bin)  STAND-IN`.
pub fn describe(b: &ToolBinary) -> String {
    format!(
        "{:<13} {:<10} {} (from {}){}",
        b.tool.name(),
        b.version.as_deref().unwrap_or("?"),
        b.path.display(),
        b.origin,
        if b.is_standin {
            "  STAND-IN (pitr's test stand-in)"
        } else {
            ""
        }
    )
}
