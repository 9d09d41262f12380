//! Why a verification could not be carried out (as opposed to a check that failed,
//! which is a result). All of these exit with code 2.

use std::path::PathBuf;

use crate::error::Hint;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("`{uri}` is not a usable connection string: {detail}")]
    BadUri { uri: String, detail: String },

    #[error("cannot reach `{uri}`: {detail}")]
    Unreachable { uri: String, detail: String },

    #[error("{what} on `{uri}` failed: {detail}")]
    Command {
        what: String,
        uri: String,
        detail: String,
    },

    #[error("cannot read the plan `{}`", path.display())]
    ReadPlan {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{}` is not a pitr plan", path.display())]
    ParsePlan {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    #[error("the plan is inconsistent: {detail}")]
    BadPlan { detail: String },

    #[error("`{}` is not the merged dump of `pitr replay --cluster`: {why}", dir.display())]
    NotAMergedDump { dir: PathBuf, why: String },

    #[error("verification did not finish within {}", humantime::format_duration(*.0))]
    TimedOut(std::time::Duration),

    #[error("verification was interrupted")]
    Cancelled,
}

impl Hint for VerifyError {
    fn hint(&self) -> Option<String> {
        match self {
            VerifyError::BadUri { .. } => Some(
                "pass a connection string such as `mongodb://127.0.0.1:27017/?directConnection=true` \
                 (a password in it is never printed)"
                    .into(),
            ),
            VerifyError::Unreachable { .. } => Some(
                "check the host and port, that the server runs, and (for a remote server) the network; \
                 raise --connect-timeout for a slow link"
                    .into(),
            ),
            VerifyError::Command { .. } => Some(
                "check that the server runs and listens there, and that the user may list databases and \
                 read the collections (pitr verify only reads)"
                    .into(),
            ),
            VerifyError::ReadPlan { .. } | VerifyError::ParsePlan { .. } | VerifyError::BadPlan { .. } => Some(
                "pass the plan.json written by `pitr plan` (in its --out directory) or by `pitr replay` \
                 (in its work directory, under plan/)"
                    .into(),
            ),
            VerifyError::NotAMergedDump { .. } => Some(
                "pass the --out directory of `pitr replay --cluster` (it holds sharding.json and a directory per database)"
                    .into(),
            ),
            VerifyError::TimedOut(_) => {
                Some("counting large collections takes time: give it more with --step-timeout".into())
            }
            VerifyError::Cancelled => None,
        }
    }
}
