//! `--out`: the rebuilt state at `T` written as mongodump writes a dump (a
//! directory, `--gzip`, `--archive`, `--archive --gzip`), with the embedded replay's
//! writer ([`crate::engine::replica::dump`]): under a temporary name beside `--out`,
//! renamed when complete, never over an existing dump. The report lists each
//! namespace written with its documents and its `dbHash` (the MD5 the server's
//! `dbHash` gives once the real mongorestore has restored it), so a restore can be
//! checked against the rehearsal.
//!
//! Written once the comparison has run (passed or found differences): the dump is
//! the state a restore from this chain gives, whatever production says. Not written
//! when the rehearsal could not run. The checks on `--out` itself (new or an empty
//! directory, its directory writable, the space) are the CLI's, before anything
//! starts, as for `pitr replay`.
//!
//! `--out` in a bucket (`s3://`, `gs://`, `az://`): the dump is streamed there as it is
//! written, readable once complete, with no copy on local disk (the dump writer's,
//! as `pitr replay --out s3://...`).

use std::path::PathBuf;
use std::time::Instant;

use crate::engine::replica::dump::{self, DumpFormat};
use crate::engine::replica::{Meter, Replica};
use crate::error::Failure;
use crate::plan::{Progress, Unit};

use super::report::{OutFacts, OutNamespace};
use super::RehearseError;

/// Where and how to write the rebuilt state. `path` is a local path, or a bucket
/// URL as a path (`Location::display_path`): the dump writer streams it there.
#[derive(Clone, Debug)]
pub struct OutSpec {
    pub path: PathBuf,
    pub format: DumpFormat,
}

/// The form's name in the report.
pub fn format_name(f: DumpFormat) -> &'static str {
    match f {
        DumpFormat::Directory { gzip: false } => "directory",
        DumpFormat::Directory { gzip: true } => "directory (gzip)",
        DumpFormat::Archive { gzip: false } => "archive",
        DumpFormat::Archive { gzip: true } => "archive (gzip)",
    }
}

/// Writes the namespaces `include` keeps (by `db.coll` as users know it) to
/// `spec`; returns what the report says about it.
pub fn write(
    spec: &OutSpec,
    replica: &mut Replica,
    include: &dyn Fn(&str) -> bool,
    server_version: &str,
    progress: &dyn Progress,
) -> Result<OutFacts, Failure> {
    let t0 = Instant::now();
    let fail = |e: dump::DumpError| Failure::from(RehearseError::Out(e));
    replica.flush().map_err(|e| fail(e.into()))?;
    let items = dump::select(replica, &|it| include(&format!("{}.{}", it.db, it.coll)))
        .map_err(|e| fail(e.into()))?;
    let meter = Meter::new();
    let pending = {
        let _phase = progress.phase(
            "writing --out",
            Unit::Documents,
            Some(dump::documents(replica, &items)),
            &meter,
        );
        dump::prepare_flushed(
            replica,
            &spec.path,
            spec.format,
            &items,
            server_version,
            &meter,
        )
        .map_err(fail)?
    };
    // Hashed before the rename: a dump in place is one the report describes.
    let mut namespaces = Vec::new();
    for it in &items {
        let hash = match &it.data_ns {
            Some(ns) => replica
                .collection_hash(ns)
                .map_err(|e| fail(e.into()))?
                .and_then(|h| h.predicted().map(str::to_string)),
            None => None,
        };
        namespaces.push(OutNamespace {
            ns: format!("{}.{}", it.db, it.coll),
            kind: it.kind,
            documents: it.data_ns.as_deref().map_or(0, |ns| replica.count(ns)),
            data_ns: it.data_ns.clone(),
            dbhash: hash,
        });
    }
    pending.commit().map_err(fail)?;
    Ok(OutFacts {
        path: spec.path.display().to_string(),
        format: format_name(spec.format),
        documents: namespaces.iter().map(|n| n.documents).sum(),
        write_secs: t0.elapsed().as_secs_f64(),
        namespaces,
    })
}
