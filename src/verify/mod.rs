//! `pitr verify`: compare a server's namespaces and document counts with what a
//! restore plan expects after its replay. Read-only: it lists databases and
//! collections and counts documents, nothing else.
//!
//! What is checked (see [`mod@compare`]):
//!
//! - every namespace the plan expects to exist holds exactly the expected number of
//!   documents, and, where the entry at the limit recorded `o2.numRecords` (a drop
//!   or a rename over the collection), exactly that many too;
//! - a namespace the plan expects to be gone (dropped by the replay) is absent or
//!   empty (mongorestore builds indexes after the replay, which can re-create a
//!   dropped collection empty);
//! - without expected counts in the plan (`--no-expect`, or too many `_id`s), every
//!   restored collection of the backup exists.
//!
//! Namespaces found on the server that the plan does not mention are listed, not
//! failed. Files: [`mod@connect`] (driver connection, URI redaction, the spare's
//! readiness probe), [`mod@observe`] (what the server holds), [`mod@compare`] (pure),
//! [`render`] (the pass/fail table), [`error`].

pub mod cluster;
pub mod compare;
pub mod connect;
pub mod error;
pub mod observe;
pub mod render;

use std::time::Duration;

use serde::Serialize;

use crate::oplog::Ts;
use crate::plan::RestorePlan;

pub use compare::{compare, expectations, Check, Expectation, Row, Status};
pub use connect::{connect, redact_uri, spare_probe};
pub use error::VerifyError;
pub use observe::{observe, Observed};

/// The `format` of a verification result.
pub const FORMAT: &str = "pitr-verify/1";

/// How long to wait for the server before giving up (server selection and connect).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The outcome of one verification. JSON (`pitr-verify/1`): `format`, `target` (the
/// URI, credentials redacted), `server` (`version`, `standin`), `plan_file`,
/// `limit` (`"t:i"`, exclusive), `passed`, `checked`, `failed`, `rows` (see
/// [`Row`]), `extra_namespaces` (on the server, not in the plan), `note`.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyReport {
    pub format: &'static str,
    pub target: String,
    pub server: ServerInfo,
    pub plan_file: Option<String>,
    pub limit: Ts,
    pub passed: bool,
    pub checked: usize,
    pub failed: usize,
    pub rows: Vec<Row>,
    pub extra_namespaces: Vec<String>,
    pub note: Option<String>,
}

/// What the server says about itself (`buildInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerInfo {
    pub version: Option<String>,
    /// `buildInfo.pitrStandIn`: pitr's test stand-in, not a real MongoDB server.
    pub standin: bool,
}

/// Connects to `uri`, looks at what the plan's checks need, and compares. The
/// caller races this against its cancellation token.
pub async fn verify(
    uri: &str,
    plan: &RestorePlan,
    plan_file: Option<&str>,
    timeout: Duration,
    progress: &dyn crate::plan::Progress,
) -> Result<VerifyReport, VerifyError> {
    let exps = expectations(plan)?;
    let client = connect(uri, timeout).await?;
    let wanted: Vec<String> = exps.iter().map(|e| e.ns.clone()).collect();
    let hashed: Vec<String> = exps
        .iter()
        .filter(|e| e.md5.is_some())
        .map(|e| e.ns.clone())
        .collect();
    let observed = observe(&client, uri, &wanted, &hashed, progress).await;
    connect::close(client).await;
    let observed = observed?;
    let outcome = compare(&exps, &observed);
    let note = plan.expected.is_none().then(|| {
        format!(
            "the plan has no expected counts ({}): only the existence of the backup's collections is checked",
            plan.expected_note.as_deref().unwrap_or("not computed")
        )
    });
    Ok(VerifyReport::of(
        uri,
        observed.server.clone(),
        plan_file.map(str::to_string),
        plan.limit(),
        outcome,
        note,
    ))
}

impl VerifyReport {
    /// The report of `outcome` (failed rows counted).
    pub fn of(
        uri: &str,
        server: ServerInfo,
        plan_file: Option<String>,
        limit: Ts,
        outcome: compare::Outcome,
        note: Option<String>,
    ) -> VerifyReport {
        let failed = outcome
            .rows
            .iter()
            .filter(|r| r.status == Status::Fail)
            .count();
        VerifyReport {
            format: FORMAT,
            target: redact_uri(uri),
            server,
            plan_file,
            limit,
            passed: failed == 0,
            checked: outcome.rows.len(),
            failed,
            rows: outcome.rows,
            extra_namespaces: outcome.extra,
            note,
        }
    }
}
