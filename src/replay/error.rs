//! Why a replay could not start. Failures of a running step are reported through
//! the step's own error (a child's exit code and stderr tail, the spare's log).

use std::path::PathBuf;

use crate::error::Hint;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("--workdir `{}` exists and is not a directory", .0.display())]
    WorkDirNotDir(PathBuf),

    #[error("refusing to use --workdir `{}`: it is not empty (it holds `{entry}`)", dir.display())]
    WorkDirNotEmpty { dir: PathBuf, entry: String },

    #[error("--out `{}` exists and is not an empty directory", .0.display())]
    OutNotEmpty(PathBuf),

    #[error("cannot create `{}`", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("the plan's lint found {}: the replay would fail or lose data as planned ({codes})", crate::table::counted(*count as u64, "error", "errors"))]
    LintErrors { count: usize, codes: String },

    #[error("cannot write the report `{}`", path.display())]
    Report {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Hint for ReplayError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            ReplayError::WorkDirNotDir(_) | ReplayError::WorkDirNotEmpty { .. } => {
                "pass a new or empty directory to --workdir (each replay keeps its plan, logs and report there), \
                 or leave it out to get ./pitr-replay-<time>"
                    .into()
            }
            ReplayError::OutNotEmpty(_) => {
                "--out must name a new (or empty) directory: the dump is written beside it and renamed into place when complete".into()
            }
            ReplayError::Create { .. } | ReplayError::Report { .. } => {
                "check that the directory is writable and the disk has free space".into()
            }
            ReplayError::LintErrors { .. } => {
                "see `pitr plan` with the same flags for each item; choose another --until, --skip the entry, \
                 or pass --ignore-lint-errors to replay anyway"
                    .into()
            }
        })
    }
}
