//! What the stand-in plays as a `mongos` of a sharded cluster, for `pitr cluster
//! discover`: `PITR_STANDIN_CLUSTER=config=SET/HOST:PORT,...;ID=SET/HOST:PORT,...;...`
//! (with `PITR_STANDIN_MODE=mongos`). `config=` names the config server's replica
//! set; every other `ID=` is a shard of `config.shards`; `unauthorized=CMD` makes the
//! command CMD fail with 13 Unauthorized, as for a user without the role it needs
//! (`find` for `config.shards`, `serverStatus`).
//!
//! As a real mongos answers (server sources):
//! - `find` on `config.shards`: `{_id, host: "set/h:p,...", state: 1}` per shard, routed
//!   to the config server (`src/mongo/s/catalog/type_shard.h`); a `draining` shard
//!   (`ID!=...` in the knob) also has `draining: true`;
//! - `serverStatus.sharding`: `configsvrConnectionString` and the rest of the section
//!   (`src/mongo/s/s_sharding_server_status.cpp`).

use bson::{doc, Document};

use super::store::Collection;

/// The cluster a stand-in mongos routes to.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub config: String,
    /// `(id, host, draining)`, in the knob's order.
    pub shards: Vec<(String, String, bool)>,
    /// Commands refused with 13 Unauthorized.
    pub unauthorized: Vec<String>,
}

impl Cluster {
    /// Parses the knob's value.
    pub fn parse(v: &str) -> Result<Cluster, String> {
        let mut config = None;
        let mut shards = Vec::new();
        let mut unauthorized = Vec::new();
        for part in v.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((id, host)) = part.split_once('=') else {
                return Err(format!("`{part}` is not ID=SET/HOST:PORT,..."));
            };
            let (id, draining) = match id.strip_suffix('!') {
                Some(i) => (i, true),
                None => (id, false),
            };
            if id == "unauthorized" {
                unauthorized.push(host.to_string());
            } else if id == "config" {
                config = Some(host.to_string());
            } else {
                shards.push((id.to_string(), host.to_string(), draining));
            }
        }
        let config = config.ok_or("no config=SET/HOST:PORT,... (the config server)")?;
        Ok(Cluster {
            config,
            shards,
            unauthorized,
        })
    }

    /// The reply to `name` run on `db` when the knob refuses it: what a real server
    /// answers a user without the privilege (code 13, "not authorized on DB to
    /// execute command ...").
    pub fn refusal(&self, db: &str, name: &str) -> Option<super::state::CmdError> {
        self.unauthorized.iter().any(|c| c == name).then(|| {
            super::state::CmdError::new(
                13,
                "Unauthorized",
                format!("not authorized on {db} to execute command {{ {name}: ... }}"),
            )
        })
    }

    /// `config.shards` as the config server holds it.
    pub fn shards_collection(&self) -> Collection {
        let mut c = Collection::new(Document::new());
        for (id, host, draining) in &self.shards {
            let mut d = doc! {"_id": id.clone(), "host": host.clone(), "state": 1, "topologyTime": bson::Timestamp { time: 1, increment: 1 }};
            if *draining {
                d.insert("draining", true);
            }
            let _ = c.insert(d);
        }
        c
    }

    /// The `sharding` section of a mongos's `serverStatus`.
    pub fn server_status_section(&self) -> Document {
        doc! {
            "routerServiceEnabled": true,
            "configsvrConnectionString": self.config.clone(),
            "lastSeenConfigServerOpTime": {"ts": bson::Timestamp { time: 1, increment: 1 }, "t": -1i64},
            "lastSeenTopologyOpTime": {"ts": bson::Timestamp { time: 1, increment: 1 }, "t": -1i64},
            "maxChunkSizeInBytes": 134_217_728i64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob() {
        let c = Cluster::parse(
            "config=csrs/127.0.0.1:1;shard0=shard0/127.0.0.1:2,127.0.0.1:3;shard1!=rs1/h:4",
        )
        .unwrap();
        assert_eq!(c.config, "csrs/127.0.0.1:1");
        assert_eq!(c.shards.len(), 2);
        assert!(c.shards[1].2 && !c.shards[0].2);
        assert_eq!(c.shards_collection().len(), 2);
        assert!(Cluster::parse("shard0=s/h:1").is_err());
        assert!(Cluster::parse("config").is_err());
        let c = Cluster::parse("config=c/h:1;unauthorized=serverStatus").unwrap();
        assert_eq!(c.refusal("admin", "serverStatus").unwrap().code, 13);
        assert!(c.refusal("config", "find").is_none());
    }
}
