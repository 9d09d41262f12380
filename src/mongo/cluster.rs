//! A sharded cluster seen through its router, read-only: `pitr cluster discover`
//! asks a `mongos` which replica sets make up the cluster, and turns each into a
//! connection string of its own for the live commands that read members directly
//! (`dump-oplog --cluster`, `archive --cluster`).
//!
//! What the router is asked, and where the server defines the answer:
//! - `hello`: a mongos answers `msg: "isdbgrid"` (server `src/mongo/s/commands/cluster_hello_cmd.cpp`);
//! - `find` on `config.shards`: each shard's `_id` and `host`, `"set/h1:p1,h2:p2"` for a
//!   replica set shard (server `src/mongo/s/catalog/type_shard.h`, the `host` field, a
//!   `ConnectionString`), routed by the mongos to the config server;
//! - `serverStatus`: its `sharding.configsvrConnectionString` is the config server's
//!   replica set in the same form (server `src/mongo/s/s_sharding_server_status.cpp`,
//!   checked by `jstests/sharding/server_status.js`).
//!
//! Both need the `clusterMonitor` role (server `src/mongo/db/auth/builtin_roles.cpp`,
//! `addClusterMonitorPrivileges`: `serverStatus`, and read on the `config` database).
//!
//! The members' connection strings carry the router URI's options (`authSource`,
//! `tls`, ...) but never its user or password, nor a secret option: they are written
//! to `cluster.toml`. Credentials for the members come at run time from the
//! environment ([`with_credentials`]).

use bson::{Bson, Document};

use super::connect::{client_options, is_secret_option, Target};
use super::error::MongoError;
use super::readonly::{ReadCommand, ReadOnlyClient};

/// A replica set as a `ConnectionString` names it: `set/h1:p1,h2:p2`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetHosts {
    pub set: String,
    pub hosts: Vec<String>,
}

impl SetHosts {
    /// Parses `set/h1:p1,h2:p2`; `None` for anything else (a standalone shard's
    /// bare `host:port`, an empty set name or host list).
    pub fn parse(s: &str) -> Option<SetHosts> {
        let (set, hosts) = s.split_once('/')?;
        let hosts: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect();
        (!set.trim().is_empty() && !hosts.is_empty()).then(|| SetHosts {
            set: set.trim().to_string(),
            hosts,
        })
    }
}

impl std::fmt::Display for SetHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.set, self.hosts.join(","))
    }
}

/// One shard of `config.shards`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredShard {
    pub id: String,
    pub hosts: SetHosts,
    /// `draining: true`: being removed (`removeShard`), still a member until it is gone.
    pub draining: bool,
}

/// What the router said about its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovered {
    /// The router, redacted.
    pub mongos: String,
    pub config: SetHosts,
    /// In `_id` order.
    pub shards: Vec<DiscoveredShard>,
}

/// Connects to `uri`, refuses anything but a mongos, and reads the cluster's members.
pub async fn discover(uri: &str) -> Result<Discovered, MongoError> {
    let target = Target::new(uri);
    let opts = client_options(uri, &target).await?;
    let client = ReadOnlyClient::new(opts, target)?;
    let result = discover_with(&client).await;
    client.close().await;
    result
}

async fn discover_with(client: &ReadOnlyClient) -> Result<Discovered, MongoError> {
    let t = client.target();
    let hello = client
        .hello()
        .await
        .map_err(|e| t.error("run `hello`", e))?;
    if !hello.get_str("msg").is_ok_and(|m| m == "isdbgrid") {
        return Err(MongoError::NotMongos {
            target: t.display.clone(),
            what: match hello.get_str("setName") {
                Ok(set) if hello.contains_key("configsvr") => {
                    format!("a member of the config server replica set `{set}`")
                }
                Ok(set) => format!("a member of the replica set `{set}`"),
                Err(_) => "a standalone mongod".to_string(),
            },
        });
    }
    let shards = client
        .config_shards()
        .await
        .map_err(|e| for_discovery(t.error("find on `config.shards`", e)))?;
    let shards = shards_of(&t.display, &shards)?;
    let status = client
        .command(ReadCommand::ServerStatus)
        .await
        .map_err(|e| for_discovery(t.error("run `serverStatus`", e)))?;
    let config = config_of(&t.display, &status)?;
    Ok(Discovered {
        mongos: t.display.clone(),
        config,
        shards,
    })
}

/// An authorization failure of discovery gets its own hint (the role discover needs,
/// not the oplog reader's).
fn for_discovery(e: MongoError) -> MongoError {
    match e {
        MongoError::Unauthorized {
            target,
            action,
            source,
        } => MongoError::DiscoveryUnauthorized {
            target,
            action,
            source,
        },
        other => other,
    }
}

fn discovery(target: &str, command: &str, what: String) -> MongoError {
    MongoError::Discovery {
        target: target.to_string(),
        command: command.to_string(),
        what,
    }
}

/// The shards of `config.shards` documents; refuses none, a document without a
/// string `_id`/`host`, and a shard that is not a replica set (no oplog to read).
pub fn shards_of(target: &str, docs: &[Document]) -> Result<Vec<DiscoveredShard>, MongoError> {
    const CMD: &str = "find on config.shards";
    if docs.is_empty() {
        return Err(discovery(
            target,
            CMD,
            "no shards (a cluster without shards has no data to recover)".into(),
        ));
    }
    docs.iter()
        .map(|d| {
            let id = d.get_str("_id").map_err(|_| {
                discovery(target, CMD, format!("a document without a string `_id`: {d}"))
            })?;
            let host = d.get_str("host").map_err(|_| {
                discovery(target, CMD, format!("shard `{id}` without a string `host`: {d}"))
            })?;
            let hosts = SetHosts::parse(host).ok_or_else(|| {
                discovery(
                    target,
                    CMD,
                    format!(
                        "shard `{id}` at `{host}`, not a replica set (`set/host:port,...`): pitr reads a shard's oplog, which only a replica set has"
                    ),
                )
            })?;
            let draining = matches!(d.get("draining"), Some(Bson::Boolean(true)));
            Ok(DiscoveredShard {
                id: id.to_string(),
                hosts,
                draining,
            })
        })
        .collect()
}

/// The config server's replica set from a mongos's `serverStatus` reply.
pub fn config_of(target: &str, status: &Document) -> Result<SetHosts, MongoError> {
    let cs = status
        .get_document("sharding")
        .ok()
        .and_then(|s| s.get_str("configsvrConnectionString").ok())
        .ok_or_else(|| {
            discovery(
                target,
                "serverStatus",
                "no `sharding.configsvrConnectionString`".into(),
            )
        })?;
    SetHosts::parse(cs).ok_or_else(|| {
        discovery(
            target,
            "serverStatus",
            format!("the config server at `{cs}`, not a replica set (`set/host:port,...`)"),
        )
    })
}

/// Checks that the server `client` reads plays the part the cluster file gives it:
/// a config server's member says `configsvr` in `hello` (server
/// `src/mongo/db/repl/replication_info.cpp`, `configsvr: 2`), a shard's does not. A
/// file with two members' uris swapped would otherwise dump the wrong oplogs under
/// the right names.
pub async fn check_role(client: &ReadOnlyClient, config: bool) -> Result<(), MongoError> {
    let t = client.target();
    let hello = client
        .hello()
        .await
        .map_err(|e| t.error("run `hello`", e))?;
    let is_config = hello.contains_key("configsvr");
    if is_config == config {
        return Ok(());
    }
    let set = hello.get_str("setName").unwrap_or("?");
    let (expected, found) = if config {
        (
            "the config server ([config])".to_string(),
            format!(
                "the replica set `{set}`, not a config server (its `hello` has no `configsvr`)"
            ),
        )
    } else {
        (
            "a shard".to_string(),
            format!("the config server's replica set `{set}`"),
        )
    };
    Err(MongoError::WrongRole {
        target: t.display.clone(),
        expected,
        found,
    })
}

/// Query options of the router's URI that do not apply to a member's replica set.
fn router_only_option(key: &str) -> bool {
    matches!(
        key.to_ascii_lowercase().as_str(),
        "replicaset" | "directconnection" | "loadbalanced" | "srvservicename" | "srvmaxhosts"
    )
}

/// The connection string of one member's replica set: `set`'s hosts with
/// `replicaSet=<set>`, followed by the router URI's query options except secret ones
/// and those that only apply to the router; never the router's user or password.
/// A `mongodb+srv://` router implies TLS (the URI spec's SRV rule), so `tls=true` is
/// added when that URI does not set `tls`/`ssl` itself.
pub fn member_uri(router_uri: &str, set: &SetHosts) -> String {
    let mut options = vec![format!("replicaSet={}", set.set)];
    let srv = router_uri.starts_with("mongodb+srv://");
    let query = router_uri
        .split_once("://")
        .map(|(_, rest)| rest)
        .and_then(|rest| {
            // The query starts after the host list; a `?` in userinfo is percent-encoded.
            let after_at = rest.rfind('@').map_or(rest, |a| &rest[a + 1..]);
            after_at.split_once('?').map(|(_, q)| q)
        })
        .unwrap_or("");
    let mut tls_given = false;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let key = kv.split_once('=').map_or(kv, |(k, _)| k);
        if is_secret_option(key) || router_only_option(key) {
            continue;
        }
        if key.eq_ignore_ascii_case("tls") || key.eq_ignore_ascii_case("ssl") {
            tls_given = true;
        }
        options.push(kv.to_string());
    }
    if srv && !tls_given {
        options.push("tls=true".into());
    }
    format!("mongodb://{}/?{}", set.hosts.join(","), options.join("&"))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `uri` (a member's, from `cluster.toml`, without a password) with `user` and
/// `password` as its userinfo, percent-encoded. A user already in `uri` is kept;
/// without a password nothing changes.
pub fn with_credentials(uri: &str, user: Option<&str>, password: Option<&str>) -> String {
    let (Some((scheme, rest)), Some(pw)) = (uri.split_once("://"), password) else {
        return uri.to_string();
    };
    let (existing, hosts) = match rest.rfind('@') {
        Some(a) => (Some(&rest[..a]), &rest[a + 1..]),
        None => (None, rest),
    };
    let user = match (existing, user) {
        (Some(u), _) => u.split(':').next().unwrap_or(u).to_string(),
        (None, Some(u)) => percent_encode(u),
        (None, None) => return uri.to_string(),
    };
    format!("{scheme}://{user}:{}@{hosts}", percent_encode(pw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn set_hosts_parse_the_connection_string_form() {
        let s = SetHosts::parse("rs0/h1:27018,h2:27018").unwrap();
        assert_eq!(s.set, "rs0");
        assert_eq!(s.hosts, ["h1:27018", "h2:27018"]);
        assert_eq!(s.to_string(), "rs0/h1:27018,h2:27018");
        assert_eq!(SetHosts::parse("h1:27018"), None);
        assert_eq!(SetHosts::parse("/h1:1"), None);
        assert_eq!(SetHosts::parse("rs0/"), None);
    }

    #[test]
    fn member_uris_keep_options_but_never_credentials() {
        let set = SetHosts::parse("shard0/a:1,b:2").unwrap();
        assert_eq!(
            member_uri("mongodb://alice:s3cret@m1:27017,m2/?authSource=admin&tlsCertificateKeyFilePassword=k&replicaSet=x&tls=true", &set),
            "mongodb://a:1,b:2/?replicaSet=shard0&authSource=admin&tls=true"
        );
        assert_eq!(
            member_uri(
                "mongodb+srv://u:p@cluster.example.net/?authSource=admin",
                &set
            ),
            "mongodb://a:1,b:2/?replicaSet=shard0&authSource=admin&tls=true"
        );
        assert_eq!(
            member_uri("mongodb://m1/", &set),
            "mongodb://a:1,b:2/?replicaSet=shard0"
        );
        // A `?` or `&` inside the password does not start the options.
        let u = member_uri("mongodb://u:p%3Fw?x&y@m1/?appName=z", &set);
        assert_eq!(u, "mongodb://a:1,b:2/?replicaSet=shard0&appName=z");
    }

    #[test]
    fn credentials_are_added_percent_encoded() {
        assert_eq!(
            with_credentials(
                "mongodb://a:1/?replicaSet=s",
                Some("bob"),
                Some("p@ss:w/rd")
            ),
            "mongodb://bob:p%40ss%3Aw%2Frd@a:1/?replicaSet=s"
        );
        assert_eq!(
            with_credentials("mongodb://carol@a:1/", Some("bob"), Some("x")),
            "mongodb://carol:x@a:1/"
        );
        assert_eq!(
            with_credentials("mongodb://a:1/", None, Some("x")),
            "mongodb://a:1/"
        );
        assert_eq!(
            with_credentials("mongodb://a:1/", Some("bob"), None),
            "mongodb://a:1/"
        );
    }

    #[test]
    fn replies_of_a_mongos() {
        let shards = shards_of(
            "t",
            &[
                doc! {"_id": "shard0", "host": "shard0/a:1,b:2", "state": 1},
                doc! {"_id": "shard1", "host": "rs1/c:3", "state": 1, "draining": true},
            ],
        )
        .unwrap();
        assert_eq!(shards[1].id, "shard1");
        assert_eq!(shards[1].hosts.set, "rs1");
        assert!(shards[1].draining && !shards[0].draining);
        for bad in [
            vec![],
            vec![doc! {"_id": "s", "host": "a:1"}],
            vec![doc! {"_id": 1, "host": "s/a:1"}],
            vec![doc! {"_id": "s"}],
        ] {
            assert!(
                matches!(shards_of("t", &bad), Err(MongoError::Discovery { .. })),
                "{bad:?}"
            );
        }
        let status = doc! {"process": "mongos", "sharding": {"configsvrConnectionString": "csrs/c1:27019,c2:27019"}};
        assert_eq!(
            config_of("t", &status).unwrap().to_string(),
            "csrs/c1:27019,c2:27019"
        );
        assert!(config_of("t", &doc! {"process": "mongos"}).is_err());
    }
}
