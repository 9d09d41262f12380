//! A small driver connection for verification, and the spare mongod's readiness
//! probe. Connection strings are only ever shown with their credentials replaced
//! ([`redact_uri`]), and driver messages are scrubbed of the password.
//!
//! (`src/mongo/` has the fuller connection handling for reading live oplogs; this
//! one only needs to count documents on a server pitr was pointed at.)

use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Bson, Document};
use mongodb::options::ClientOptions;
use mongodb::Client;

use crate::exec::spare::{Probe, ProbeError, ProbeTarget};

use super::error::VerifyError;

/// The connection string with credentials replaced (shared with the live-source
/// code, so there is one redaction to get right).
pub use crate::mongo::connect::redact_uri;

/// A driver error as text fit to show: every secret of `uri` removed.
pub fn driver_message(uri: &str, e: &mongodb::error::Error) -> String {
    crate::mongo::connect::Target::new(uri).scrub(&e.to_string())
}

/// A client for `uri`. `timeout` bounds server selection and the TCP connect unless
/// the URI sets them. Nothing is sent to the server until the first command.
pub async fn connect(uri: &str, timeout: Duration) -> Result<Client, VerifyError> {
    let mut opts = ClientOptions::parse(uri)
        .await
        .map_err(|e| VerifyError::BadUri {
            uri: redact_uri(uri),
            detail: driver_message(uri, &e),
        })?;
    opts.server_selection_timeout.get_or_insert(timeout);
    opts.connect_timeout.get_or_insert(timeout);
    opts.app_name
        .get_or_insert_with(|| "pitr verify".to_string());
    Client::with_options(opts).map_err(|e| VerifyError::BadUri {
        uri: redact_uri(uri),
        detail: driver_message(uri, &e),
    })
}

/// Ends `client` before it is dropped: its sessions ended and its connections
/// closed, in order, while the runtime runs. A client only dropped ends its
/// sessions from a task the driver spawns, which can still be running when the
/// runtime shuts down at the end of the command; the driver then panics on a closed
/// channel (mongodb 3.9.1, `cmap/connection_requester.rs`: "called
/// `Result::unwrap()` on an `Err` value: SendError"), and its backtrace is printed
/// after pitr's output. (`immediate`: nothing of pitr's is still open to wait for.)
pub async fn close(client: Client) {
    client.shutdown().immediate(true).await;
}

/// An integer field of a server reply, whatever its BSON number type.
pub(crate) fn int_field(d: &Document, key: &str) -> Option<i64> {
    match d.get(key)? {
        Bson::Int32(n) => Some(*n as i64),
        Bson::Int64(n) => Some(*n),
        Bson::Double(f) if f.fract() == 0.0 => Some(*f as i64),
        _ => None,
    }
}

/// The spare's readiness check: a driver `ping`, and `serverStatus.pid` must be the
/// mongod pitr started (another server that grabbed the port would answer too).
pub fn spare_probe() -> Probe {
    Arc::new(|target: ProbeTarget| {
        Box::pin(async move {
            let client = connect(&target.uri, Duration::from_secs(2))
                .await
                .map_err(|e| -> ProbeError { Box::new(e) })?;
            let admin = client.database("admin");
            let uri = target.uri.clone();
            let msg = |e: mongodb::error::Error| -> ProbeError { driver_message(&uri, &e).into() };
            let status = async {
                admin.run_command(doc! { "ping": 1 }).await.map_err(msg)?;
                admin
                    .run_command(doc! { "serverStatus": 1 })
                    .await
                    .map_err(msg)
            }
            .await;
            close(client).await;
            same_process(&status?, target.port, target.pid).map_err(ProbeError::from)
        })
    })
}

/// Whether `serverStatus` came from the process pitr started: its `pid` must be
/// there (every mongod reports it) and equal ours. A server without a `pid` is not
/// trusted: it could be anything that answers on the port.
fn same_process(status: &Document, port: u16, pid: u32) -> Result<(), String> {
    match int_field(status, "pid") {
        Some(p) if p == pid as i64 => Ok(()),
        Some(p) => Err(format!(
            "port {port} is answered by another process (pid {p}), not the mongod pitr started (pid {pid})"
        )),
        None => Err(format!(
            "the server on port {port} does not report its pid in serverStatus, so pitr cannot tell that it is the \
             mongod it started (pid {pid})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_needs_our_pid() {
        assert!(same_process(&doc! {"pid": 42i64}, 1, 42).is_ok());
        assert!(same_process(&doc! {"pid": 42i32}, 1, 42).is_ok());
        let other = same_process(&doc! {"pid": 7i64}, 27999, 42).unwrap_err();
        assert!(other.contains("another process (pid 7)"), "{other}");
        let none = same_process(&doc! {"ok": 1.0}, 27999, 42).unwrap_err();
        assert!(none.contains("does not report its pid"), "{none}");
    }

    #[test]
    fn credentials_never_shown() {
        for uri in [
            "mongodb://admin:s3cret@db1:27017,db2/?replicaSet=rs0",
            "mongodb+srv://u:s3cret@x@c.example.net/?tlsCertificateKeyFilePassword=s3cret&w=1",
        ] {
            let shown = redact_uri(uri);
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("<redacted>"), "{shown}");
        }
        assert_eq!(
            redact_uri("mongodb://127.0.0.1:27999/?directConnection=true"),
            "mongodb://127.0.0.1:27999/?directConnection=true"
        );
        assert_eq!(redact_uri("hunter2"), "<redacted> (not a mongodb:// URI)");
    }
}
