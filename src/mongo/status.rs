//! `status`: what a server is and how much oplog it keeps.
//!
//! Version (`buildInfo`), topology (`hello`; members from `replSetGetStatus` when
//! the user may run it), the oplog window (oldest and newest entry), and its size and
//! configured maximum (`collStats`, when permitted and reported). Anything optional
//! that the server refuses or does not report is `None`, shown as "unknown".

use bson::{Bson, Document};
use serde::Serialize;

use super::connect::Topology;
use super::error::MongoError;
use super::oplog_source::{window, Window};
use super::readonly::{ReadCommand, ReadOnlyClient};
use crate::oplog::Ts;

/// One replica set member.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Member {
    pub name: String,
    /// `PRIMARY`, `SECONDARY`, ...; `None` when only `hello` was available.
    pub state: Option<String>,
    pub health: Option<f64>,
    /// The member's last applied position.
    pub optime: Option<Ts>,
}

/// Where the member list came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MembersFrom {
    ReplSetGetStatus,
    /// `replSetGetStatus` was refused or failed: names only, from `hello`.
    Hello,
    None,
}

/// Everything `pitr status` shows.
#[derive(Clone, Debug)]
pub struct ServerStatus {
    pub target: String,
    pub version: Option<String>,
    /// True when the server says it is pitr's test stand-in.
    pub standin: bool,
    pub topology: Topology,
    pub members: Vec<Member>,
    pub members_from: MembersFrom,
    pub window: Option<Window>,
    /// Bytes of entries in the oplog (`collStats.size`).
    pub oplog_size: Option<u64>,
    /// Configured maximum (`collStats.maxSize`).
    pub oplog_max: Option<u64>,
    /// Why size or maximum are unknown, when they are.
    pub size_note: Option<String>,
}

/// A non-negative count as the server reports it (int32, int64 or double).
pub(super) fn as_u64(v: Option<&Bson>) -> Option<u64> {
    match v? {
        Bson::Int32(i) if *i >= 0 => Some(*i as u64),
        Bson::Int64(i) if *i >= 0 => Some(*i as u64),
        Bson::Double(d) if *d >= 0.0 && d.is_finite() => Some(*d as u64),
        _ => None,
    }
}

fn as_f64(v: Option<&Bson>) -> Option<f64> {
    match v? {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// Members from a `replSetGetStatus` reply.
pub fn members_of(status: &Document) -> Vec<Member> {
    let Ok(ms) = status.get_array("members") else {
        return Vec::new();
    };
    ms.iter()
        .filter_map(|m| m.as_document())
        .map(|m| Member {
            name: m.get_str("name").unwrap_or("?").to_string(),
            state: m.get_str("stateStr").ok().map(str::to_string),
            health: as_f64(m.get("health")),
            optime: match m.get("optime") {
                Some(Bson::Document(o)) => o.get_timestamp("ts").ok().map(Ts::from),
                Some(Bson::Timestamp(t)) => Some(Ts::from(*t)),
                _ => None,
            },
        })
        .collect()
}

/// Gathers the status; only the oplog window is required, the rest degrades to
/// "unknown".
pub async fn gather(
    client: &ReadOnlyClient,
    topology: &Topology,
) -> Result<ServerStatus, MongoError> {
    let build = client.command(ReadCommand::BuildInfo).await.ok();
    let version = build
        .as_ref()
        .and_then(|b| b.get_str("version").ok().map(str::to_string));
    let standin = build
        .as_ref()
        .is_some_and(|b| b.get_bool("pitrStandIn").unwrap_or(false));

    let (members, members_from) = match topology {
        Topology::StandaloneWithOplog => (Vec::new(), MembersFrom::None),
        Topology::ReplicaSet { hosts, .. } => {
            match client.command(ReadCommand::ReplSetGetStatus).await {
                Ok(st) if st.contains_key("members") => {
                    (members_of(&st), MembersFrom::ReplSetGetStatus)
                }
                _ => (
                    hosts
                        .iter()
                        .map(|h| Member {
                            name: h.clone(),
                            state: None,
                            health: None,
                            optime: None,
                        })
                        .collect(),
                    MembersFrom::Hello,
                ),
            }
        }
    };

    let window = window(client).await?;

    let (oplog_size, oplog_max, size_note) = match client.command(ReadCommand::OplogCollStats).await
    {
        Ok(cs) => {
            let size = as_u64(cs.get("size"));
            let max = as_u64(cs.get("maxSize"));
            let note =
                (size.is_none() || max.is_none()).then(|| "not reported by collStats".to_string());
            (size, max, note)
        }
        Err(e) => (
            None,
            None,
            Some(format!("collStats refused or unsupported: {e}")),
        ),
    };

    Ok(ServerStatus {
        target: client.target().display.clone(),
        version,
        standin,
        topology: topology.clone(),
        members,
        members_from,
        window,
        oplog_size,
        oplog_max,
        size_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    #[test]
    fn members_from_repl_set_get_status() {
        let st = doc! {"members": [
            {"name": "a:1", "stateStr": "PRIMARY", "health": 1.0, "optime": {"ts": Timestamp { time: 5, increment: 2 }, "t": 1i64}},
            {"name": "b:2", "stateStr": "SECONDARY", "health": 1i32},
            "junk",
        ]};
        let ms = members_of(&st);
        assert_eq!(ms.len(), 2);
        assert_eq!(ms[0].optime, Some(Ts::new(5, 2)));
        assert_eq!(ms[1].state.as_deref(), Some("SECONDARY"));
        assert_eq!(ms[1].health, Some(1.0));
        assert!(members_of(&doc! {}).is_empty());
        assert_eq!(as_u64(Some(&Bson::Double(-1.0))), None);
        assert_eq!(as_u64(Some(&Bson::Int64(7))), Some(7));
    }
}
