//! The MongoDB programs a replay runs: found once, versions read, stand-ins named.

use std::path::PathBuf;

use crate::exec::binaries::{BinaryError, Origin, Tool, ToolBinary, ToolSearch};
use crate::exec::Cancel;

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
    /// Locates `mongod`, `mongorestore` and (`need_dump`) `mongodump`, and reads
    /// their versions (each `--version` is a short supervised child).
    pub async fn find(
        search: &ToolSearch,
        need_dump: bool,
        cancel: &Cancel,
    ) -> Result<Tools, BinaryError> {
        let mongod = search.find(Tool::Mongod, cancel).await?;
        let mongorestore = search.find(Tool::Mongorestore, cancel).await?;
        let mongodump = match need_dump {
            true => Some(search.find(Tool::Mongodump, cancel).await?),
            false => None,
        };
        Ok(Tools {
            mongod,
            mongorestore,
            mongodump,
        })
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

/// `--dry-run`: where each program is, without running anything (not even
/// `--version`).
pub struct Located {
    pub tool: Tool,
    pub found: Result<(PathBuf, Origin), BinaryError>,
}

pub fn locate(search: &ToolSearch, need_dump: bool) -> Vec<Located> {
    let mut tools = vec![Tool::Mongod, Tool::Mongorestore];
    if need_dump {
        tools.push(Tool::Mongodump);
    }
    tools
        .into_iter()
        .map(|tool| Located {
            tool,
            found: search.locate(tool),
        })
        .collect()
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
