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

/// What replaces credentials in anything shown.
pub const REDACTED: &str = "<redacted>";

/// The connection string with its userinfo (user and password) and any secret
/// query option replaced: `mongodb://u:pw@h/?x=1` → `mongodb://<redacted>@h/?x=1`.
/// Userinfo ends at the last `@`, so at worst more is hidden than needed.
pub fn redact_uri(uri: &str) -> String {
    let Some(start) = uri.find("://").map(|i| i + 3) else {
        return format!("{REDACTED} (not a mongodb:// URI)");
    };
    let (head, rest) = uri.split_at(start);
    let rest = match rest.rfind('@') {
        Some(at) => format!("{REDACTED}@{}", &rest[at + 1..]),
        None => rest.to_string(),
    };
    let Some((path, query)) = rest.split_once('?') else {
        return format!("{head}{rest}");
    };
    let query: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if is_secret_option(k) => format!("{k}={REDACTED}"),
            _ => kv.to_string(),
        })
        .collect();
    format!("{head}{path}?{}", query.join("&"))
}

fn is_secret_option(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("token")
        || k == "authmechanismproperties"
}

/// Replaces the password (as given, and percent-decoded) in a driver message.
fn scrub(uri: &str, text: &str) -> String {
    let mut out = text.to_string();
    let Some(start) = uri.find("://").map(|i| i + 3) else {
        return out;
    };
    let rest = &uri[start..];
    if let Some(at) = rest.rfind('@') {
        if let Some((_, pw)) = rest[..at].split_once(':') {
            if !pw.is_empty() {
                out = out.replace(pw, REDACTED);
                let decoded = percent_decode(pw);
                if !decoded.is_empty() {
                    out = out.replace(&decoded, REDACTED);
                }
            }
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A driver error as text fit to show: the password removed.
pub fn driver_message(uri: &str, e: &mongodb::error::Error) -> String {
    scrub(uri, &e.to_string())
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
            admin.run_command(doc! { "ping": 1 }).await.map_err(msg)?;
            let status = admin
                .run_command(doc! { "serverStatus": 1 })
                .await
                .map_err(msg)?;
            match int_field(&status, "pid") {
                Some(pid) if pid != target.pid as i64 => Err(format!(
                    "port {} is answered by another process (pid {pid}), not the mongod pitr started (pid {})",
                    target.port, target.pid
                )
                .into()),
                _ => Ok(()),
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_shown() {
        assert_eq!(
            redact_uri("mongodb://admin:s3cret@db1:27017,db2/?replicaSet=rs0"),
            "mongodb://<redacted>@db1:27017,db2/?replicaSet=rs0"
        );
        assert_eq!(
            redact_uri("mongodb://127.0.0.1:27999/?directConnection=true"),
            "mongodb://127.0.0.1:27999/?directConnection=true"
        );
        assert_eq!(
            redact_uri("mongodb+srv://u:p@x@c.example.net/?tlsCertificateKeyFilePassword=k&w=1"),
            "mongodb+srv://<redacted>@c.example.net/?tlsCertificateKeyFilePassword=<redacted>&w=1"
        );
        assert_eq!(redact_uri("hunter2"), "<redacted> (not a mongodb:// URI)");
        assert_eq!(
            scrub("mongodb://u:p%40ss@h/", "auth failed for p@ss and p%40ss"),
            "auth failed for <redacted> and <redacted>"
        );
        assert_eq!(percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
    }
}
