//! From a connection string to a checked, read-only connection.
//!
//! - The URI is shown only redacted ([`redact_uri`]): the password and secret query
//!   options never reach a message, and every driver message is scrubbed of them
//!   ([`Target::scrub`]).
//! - The read preference comes from the URI; without one it is `secondaryPreferred`,
//!   to keep the dump's load off the primary.
//! - The topology is checked before anything is read: a `mongos` is refused
//!   (its members are read one by one: `pitr cluster discover`, `--cluster`), and so
//!   is a standalone without an oplog.

use std::time::Duration;

use bson::{Bson, Document};
use mongodb::options::{ClientOptions, ReadPreference, SelectionCriteria};

use super::error::{Class, DriverError, MongoError};
use super::readonly::{Edge, ReadOnlyClient};

/// What replaces a secret in anything shown.
pub const REDACTED: &str = "<redacted>";

/// How long to wait for a suitable server when the URI does not say
/// (`serverSelectionTimeoutMS`); the driver's own default is 30 s.
pub const DEFAULT_SERVER_SELECTION: Duration = Duration::from_secs(15);

/// Query options whose value is secret (compared case-insensitively).
pub(crate) fn is_secret_option(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("token")
        || k == "authmechanismproperties"
}

/// The connection string with its password and secret options replaced by
/// [`REDACTED`]: `mongodb://u:pw@h/?tlsCertificateKeyFilePassword=x` →
/// `mongodb://u:<redacted>@h/?tlsCertificateKeyFilePassword=<redacted>`.
///
/// Userinfo ends at the *last* `@`, so an unescaped `@` in a password is still
/// hidden (at worst more is hidden than needed, never less).
pub fn redact_uri(uri: &str) -> String {
    let Some(scheme_end) = uri.find("://").map(|i| i + 3) else {
        // Not a URI at all: it might be anything, including a bare password.
        return format!("{REDACTED} (not a mongodb:// URI)");
    };
    let (head, rest) = uri.split_at(scheme_end);
    let (userinfo_done, rest) = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let shown = match userinfo.find(':') {
                Some(c) => format!("{}:{REDACTED}@", &userinfo[..c]),
                None => format!("{userinfo}@"),
            };
            (shown, &rest[at + 1..])
        }
        None => (String::new(), rest),
    };
    let (hosts, query) = match rest.find('?') {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    let mut out = format!("{head}{userinfo_done}{hosts}");
    if let Some(q) = query {
        let parts: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if is_secret_option(k) => format!("{k}={REDACTED}"),
                _ => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&parts.join("&"));
    }
    out
}

/// Percent-decoding for the scrubber (invalid escapes are kept as they are).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit()
        {
            let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hex(b[i + 1]) << 4 | hex(b[i + 2]));
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The server being read, as messages show it, and the secrets to keep out of them.
#[derive(Clone, Debug)]
pub struct Target {
    /// The redacted connection string.
    pub display: String,
    /// The user name from the URI, if any (shown in authentication errors).
    pub user: Option<String>,
    secrets: Vec<String>,
}

impl Target {
    pub fn new(uri: &str) -> Target {
        let mut secrets = Vec::new();
        let mut user = None;
        if let Some(scheme_end) = uri.find("://").map(|i| i + 3) {
            let rest = &uri[scheme_end..];
            if let Some(at) = rest.rfind('@') {
                let userinfo = &rest[..at];
                match userinfo.split_once(':') {
                    Some((u, pw)) => {
                        user = Some(percent_decode(u));
                        secrets.push(pw.to_string());
                        secrets.push(percent_decode(pw));
                    }
                    None => user = Some(percent_decode(userinfo)),
                }
            }
            if let Some(q) = rest.find('?') {
                for kv in rest[q + 1..].split('&') {
                    if let Some((k, v)) = kv.split_once('=') {
                        if is_secret_option(k) {
                            secrets.push(v.to_string());
                            secrets.push(percent_decode(v));
                        }
                    }
                }
            }
        } else {
            secrets.push(uri.to_string());
        }
        // The whole URI too, in case a message quotes it verbatim.
        secrets.push(uri.to_string());
        // Longest first, so a secret containing another is removed whole. Very short
        // strings would mangle ordinary words; the structural redaction covers them.
        secrets.retain(|s| s.chars().count() >= 3);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Target {
            display: redact_uri(uri),
            user,
            secrets,
        }
    }

    /// `text` with every secret of the connection string replaced.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                let replacement = if s.contains("://") {
                    self.display.as_str()
                } else {
                    REDACTED
                };
                out = out.replace(s.as_str(), replacement);
            }
        }
        out
    }

    /// A driver error, classified and scrubbed.
    pub fn driver_error(&self, e: &mongodb::error::Error) -> DriverError {
        DriverError::new(e, |t| self.scrub(t))
    }

    /// The user, for authentication errors.
    pub fn user_phrase(&self) -> String {
        match &self.user {
            Some(u) if !u.is_empty() => format!("user `{u}`"),
            _ => "the connection".to_string(),
        }
    }

    /// Maps a failure of `what` to the most helpful error: authentication,
    /// authorization, unreachable servers get their own variants.
    pub fn error(&self, what: &str, e: DriverError) -> MongoError {
        let target = self.display.clone();
        match e.class {
            Class::Authentication => MongoError::Authentication {
                target,
                user: self.user_phrase(),
                source: e,
            },
            Class::Unauthorized => MongoError::Unauthorized {
                target,
                action: what.to_string(),
                source: e,
            },
            Class::ServerSelection => MongoError::Unreachable { target, source: e },
            _ => MongoError::Command {
                target,
                command: what.to_string(),
                source: e,
            },
        }
    }
}

/// What the server is, from `hello`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    ReplicaSet {
        name: String,
        /// `hosts` (+ `passives`, `arbiters`) as hello lists them.
        hosts: Vec<String>,
        primary: Option<String>,
        /// The member that answered.
        me: Option<String>,
    },
    /// A standalone mongod that has an oplog (e.g. a member restarted without
    /// `--replSet` for maintenance).
    StandaloneWithOplog,
}

impl Topology {
    pub fn set_name(&self) -> Option<&str> {
        match self {
            Topology::ReplicaSet { name, .. } => Some(name),
            Topology::StandaloneWithOplog => None,
        }
    }
}

/// Parses `uri` into driver options: the read preference defaults to
/// `secondaryPreferred`, the server selection timeout to
/// [`DEFAULT_SERVER_SELECTION`]. Nothing is contacted yet (except DNS for
/// `mongodb+srv://`).
pub async fn client_options(uri: &str, target: &Target) -> Result<ClientOptions, MongoError> {
    let mut opts = ClientOptions::parse(uri)
        .await
        .map_err(|e| MongoError::InvalidUri {
            target: target.display.clone(),
            source: target.driver_error(&e),
        })?;
    if opts.selection_criteria.is_none() {
        opts.selection_criteria = Some(SelectionCriteria::ReadPreference(
            ReadPreference::SecondaryPreferred { options: None },
        ));
    }
    if opts.server_selection_timeout.is_none() {
        opts.server_selection_timeout = Some(DEFAULT_SERVER_SELECTION);
    }
    if opts.app_name.is_none() {
        opts.app_name = Some("pitr".to_string());
    }
    Ok(opts)
}

/// Connects, runs `hello`, and refuses what pitr cannot read a usable oplog from.
pub async fn connect(uri: &str) -> Result<(ReadOnlyClient, Topology), MongoError> {
    let target = Target::new(uri);
    let opts = client_options(uri, &target).await?;
    let client = ReadOnlyClient::new(opts, target)?;
    let hello = client
        .hello()
        .await
        .map_err(|e| client.target().error("run `hello`", e))?;
    let topology = topology_of(&hello, &client.target().display)?;
    if topology == Topology::StandaloneWithOplog {
        // hello alone cannot tell "standalone" from "standalone with an oplog".
        let oldest = client
            .oplog_edge(Edge::Oldest)
            .await
            .map_err(|e| client.target().error("read `local.oplog.rs`", e))?;
        if oldest.is_none() {
            return Err(MongoError::NoOplog {
                target: client.target().display.clone(),
            });
        }
    }
    Ok((client, topology))
}

fn strings(d: &Document, key: &str) -> Vec<String> {
    match d.get(key) {
        Some(Bson::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// The topology a `hello` reply describes; a mongos is an error.
pub fn topology_of(hello: &Document, target: &str) -> Result<Topology, MongoError> {
    if hello.get_str("msg").is_ok_and(|m| m == "isdbgrid") {
        return Err(MongoError::Mongos {
            target: target.to_string(),
        });
    }
    match hello.get_str("setName") {
        Ok(name) => {
            let mut hosts = strings(hello, "hosts");
            hosts.extend(strings(hello, "passives"));
            hosts.extend(strings(hello, "arbiters"));
            Ok(Topology::ReplicaSet {
                name: name.to_string(),
                hosts,
                primary: hello.get_str("primary").ok().map(str::to_string),
                me: hello.get_str("me").ok().map(str::to_string),
            })
        }
        Err(_) => Ok(Topology::StandaloneWithOplog),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn redacts_password_and_secret_options() {
        assert_eq!(
            redact_uri("mongodb://alice:s3cret@h1:27017,h2/?replicaSet=rs0&authSource=admin"),
            "mongodb://alice:<redacted>@h1:27017,h2/?replicaSet=rs0&authSource=admin"
        );
        assert_eq!(redact_uri("mongodb://h1/"), "mongodb://h1/");
        assert_eq!(
            redact_uri("mongodb://bob@h1/?authMechanism=MONGODB-X509"),
            "mongodb://bob@h1/?authMechanism=MONGODB-X509"
        );
        assert_eq!(
            redact_uri("mongodb+srv://u:p@x.example.net/?tlsCertificateKeyFilePassword=k&authMechanismProperties=AWS_SESSION_TOKEN:t"),
            "mongodb+srv://u:<redacted>@x.example.net/?tlsCertificateKeyFilePassword=<redacted>&authMechanismProperties=<redacted>"
        );
        // An unescaped `@` inside the password is still hidden.
        let r = redact_uri("mongodb://u:p@ss@h/");
        assert_eq!(r, "mongodb://u:<redacted>@h/");
        assert!(!redact_uri("hunter2-not-a-uri").contains("hunter2"));
    }

    #[test]
    fn scrub_removes_raw_and_decoded_passwords() {
        let t = Target::new("mongodb://alice:p%40ssw0rd@h/");
        assert_eq!(t.user.as_deref(), Some("alice"));
        assert_eq!(
            t.scrub("bad p@ssw0rd and p%40ssw0rd"),
            "bad <redacted> and <redacted>"
        );
        assert_eq!(
            t.scrub("could not parse mongodb://alice:p%40ssw0rd@h/"),
            "could not parse mongodb://alice:<redacted>@h/"
        );
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%41%zz"), "A%zz");
    }

    #[test]
    fn topology_from_hello() {
        let rs = doc! {"setName": "rs0", "hosts": ["a:1", "b:2"], "arbiters": ["c:3"], "primary": "a:1", "me": "b:2"};
        assert_eq!(
            topology_of(&rs, "t").unwrap(),
            Topology::ReplicaSet {
                name: "rs0".into(),
                hosts: vec!["a:1".into(), "b:2".into(), "c:3".into()],
                primary: Some("a:1".into()),
                me: Some("b:2".into()),
            }
        );
        assert!(matches!(
            topology_of(&doc! {"msg": "isdbgrid"}, "t"),
            Err(MongoError::Mongos { .. })
        ));
        assert_eq!(
            topology_of(&doc! {"isWritablePrimary": true}, "t").unwrap(),
            Topology::StandaloneWithOplog
        );
    }
}
