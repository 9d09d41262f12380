//! Flags that take only a local path. A URL there is refused with what to do
//! instead: taken as a path, `s3://b/out` would quietly become the relative
//! directory `s3:/b/out`. (What reads and writes URLs today: docs/object-storage.md.)

use std::path::{Path, PathBuf};

use crate::error::{exit, Failure};
use crate::storage::Location;

/// `p` as a local path (a `file://` URL decoded), or a clear refusal naming `flag`
/// when it is an `s3://`, `gs://` or `az://` URL (or a URL with a secret).
pub fn local_only(flag: &str, p: &Path, instead: &str) -> Result<PathBuf, Failure> {
    match Location::of_path(p)? {
        Location::Local(path) => Ok(path),
        loc => Err(Failure::new(format!(
            "`{flag} {loc}`: {flag} takes a local path; object storage is not supported there"
        ))
        .with_hint(format!(
            "{instead}; docs/object-storage.md lists what reads and writes URLs today"
        ))
        .with_exit_code(exit::ERROR)),
    }
}

/// [`local_only`] for an optional flag.
pub fn local_only_opt(
    flag: &str,
    p: Option<PathBuf>,
    instead: &str,
) -> Result<Option<PathBuf>, Failure> {
    p.map(|p| local_only(flag, &p, instead)).transpose()
}
