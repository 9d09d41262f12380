//! The transaction coordinator's decision document, a second source of the decision
//! of a cross-shard (prepared) transaction (rule R2 of
//! shared/reference/sharded-pitr.md: "any participant's commit entry, or the
//! coordinator's decision doc").
//!
//! The coordinator (a shard) writes its decision into `config.transaction_coordinators`
//! before it sends `commitTransaction` or `abortTransaction` to any participant
//! (`src/mongo/db/s/transaction_coordinator.cpp`: `persistDecision`, then
//! `sendCommit`/`sendAbort`). The write is an upsert whose update is the whole
//! document (`transaction_coordinator_util.cpp` `persistDecisionBlocking`:
//! `setU(doc.toBSON())` in 4.2, `parseFromClassicUpdate(doc.toBSON())` later, a
//! replacement either way), so its oplog entry is an `op: "u"` whose `o` is the
//! document itself, the same in every release since 4.2:
//!
//! ```text
//! { _id: { lsid: { id, uid[, txnUUID] }, txnNumber[, txnRetryCounter] },
//!   participants: [ ... ],
//!   decision: { decision: "commit", commitTimestamp: Timestamp } | { decision: "abort" },
//!   [affectedNamespaces: [ ... ]] }
//! ```
//!
//! (`transaction_coordinator_document.idl`, `CoordinatorCommitDecision`). A
//! participant's own entry can be missing from the oplogs at hand when it committed
//! late (after its oplog dump ended) while the coordinator's document is there: with
//! it, the transaction is decided instead of refused. An update of that collection in
//! another shape (a modifier, `$set` or a `$v: 2` diff) is not the server's decision
//! write and is not read.

use bson::{RawBsonRef, RawDocument};

use crate::engine::walk::{session_label, TxnDecision};
use crate::oplog::{Entry, Op, Ts};

/// The coordinator's collection (`NamespaceString::kTransactionCoordinatorsNamespace`).
pub const COORDINATORS: &str = "config.transaction_coordinators";

/// A decision the coordinator wrote: the transaction's key (as
/// [`Entry::transaction_key`] builds it from a participant's entry: the `lsid`
/// document's bytes, then `txnNumber` little-endian), its label, the decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorDecision {
    pub key: Vec<u8>,
    pub label: String,
    pub decision: TxnDecision,
}

/// The decision `e` records, when it is the coordinator's write of one; `None` for
/// any other entry (the document's first write, which lists the participants and no
/// decision, included). A decision document that says `commit` without a
/// `commitTimestamp`, or something else than `commit`/`abort`, is an error.
pub fn decision_of(e: &Entry<'_>) -> Result<Option<CoordinatorDecision>, String> {
    if e.op != Op::Update || e.ns != COORDINATORS {
        return Ok(None);
    }
    let Some(o) = e.o else { return Ok(None) };
    // A replacement has no operator fields.
    let replacement = o.iter().flatten().all(|(k, _)| !k.starts_with('$'));
    if !replacement {
        return Ok(None);
    }
    let decision = match o.get("decision") {
        Ok(Some(RawBsonRef::Document(d))) => d,
        Ok(None) => return Ok(None),
        Ok(Some(v)) => {
            return Err(format!(
                "the coordinator's document at {} has a `decision` of type {:?}, not a document",
                e.ts,
                v.element_type()
            ))
        }
        Err(x) => return Err(format!("the coordinator's document at {}: {x}", e.ts)),
    };
    let id = o
        .get_document("_id")
        .ok()
        .or_else(|| e.o2.and_then(|o2| o2.get_document("_id").ok()))
        .ok_or_else(|| {
            format!(
                "the coordinator's decision at {} has no `_id` document",
                e.ts
            )
        })?;
    let (lsid, txn_number) = session_of(id).ok_or_else(|| {
        format!(
            "the coordinator's decision at {} has no `_id.lsid` and `_id.txnNumber`",
            e.ts
        )
    })?;
    let decision = match decision.get_str("decision") {
        Ok("commit") => {
            let ct = decision.get_timestamp("commitTimestamp").map_err(|_| {
                format!(
                    "the coordinator's commit decision at {} has no commitTimestamp",
                    e.ts
                )
            })?;
            TxnDecision::Commit(Ts::new(ct.time, ct.increment))
        }
        Ok("abort") => TxnDecision::Abort,
        other => {
            return Err(format!(
                "the coordinator's decision at {} is {other:?}, neither `commit` nor `abort`",
                e.ts
            ))
        }
    };
    Ok(Some(CoordinatorDecision {
        key: crate::oplog::entry::session_key(lsid, txn_number),
        label: session_label(Some(lsid), Some(txn_number)),
        decision,
    }))
}

/// `_id.lsid` and `_id.txnNumber` (an int64, as the server writes it; an int32 read
/// too).
fn session_of(id: &RawDocument) -> Option<(&RawDocument, i64)> {
    let lsid = id.get_document("lsid").ok()?;
    let n = match id.get("txnNumber").ok()?? {
        RawBsonRef::Int64(n) => n,
        RawBsonRef::Int32(n) => i64::from(n),
        _ => return None,
    };
    Some((lsid, n))
}

#[cfg(test)]
mod tests {
    use bson::{doc, Binary, Bson, Document, Timestamp};

    use super::*;

    fn uuid(b: u8) -> Bson {
        Bson::Binary(Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: vec![b; 16],
        })
    }

    fn lsid() -> Document {
        doc! { "id": uuid(7), "uid": Bson::Binary(Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 32] }) }
    }

    fn parse(d: &Document) -> Result<Option<CoordinatorDecision>, String> {
        let bytes = bson::to_vec(d).unwrap();
        let raw = RawDocument::from_bytes(&bytes).unwrap();
        let e = Entry::parse(raw).unwrap();
        decision_of(&e)
    }

    fn write(o: Document) -> Document {
        doc! { "op": "u", "ns": COORDINATORS, "ui": uuid(3), "o": o,
        "o2": { "_id": { "lsid": lsid(), "txnNumber": 4i64 } },
        "ts": Timestamp { time: 100, increment: 2 }, "t": 1i64, "v": 2i64 }
    }

    /// The server's decision write (a replacement of the whole document) is read;
    /// its key is the one a participant's `commitTransaction` of the same session
    /// and transaction number has.
    #[test]
    fn the_servers_decision_write_is_read_with_the_participants_key() {
        let id = doc! { "lsid": lsid(), "txnNumber": 4i64 };
        let commit = write(
            doc! { "_id": id.clone(), "participants": ["shard0", "shard1"],
            "decision": { "decision": "commit", "commitTimestamp": Timestamp { time: 99, increment: 5 } } },
        );
        let d = parse(&commit).unwrap().expect("a decision");
        assert_eq!(d.decision, TxnDecision::Commit(Ts::new(99, 5)));
        let participant = doc! { "lsid": lsid(), "txnNumber": 4i64, "op": "c", "ns": "admin.$cmd",
        "o": { "commitTransaction": 1, "commitTimestamp": Timestamp { time: 99, increment: 5 } },
        "ts": Timestamp { time: 101, increment: 1 }, "t": 1i64 };
        let bytes = bson::to_vec(&participant).unwrap();
        let e = Entry::parse(RawDocument::from_bytes(&bytes).unwrap()).unwrap();
        assert_eq!(Some(d.key), e.transaction_key());
        assert_eq!(d.label, crate::engine::walk::txn_label(&e));

        let abort = write(
            doc! { "_id": id.clone(), "participants": ["shard0"], "decision": { "decision": "abort" } },
        );
        assert_eq!(parse(&abort).unwrap().unwrap().decision, TxnDecision::Abort);
    }

    /// Not a decision: the first write (participants, no decision), a modifier
    /// update, another collection's update. Malformed decisions are errors.
    #[test]
    fn other_writes_are_not_decisions_and_malformed_ones_are_errors() {
        let id = doc! { "lsid": lsid(), "txnNumber": 4i64 };
        assert_eq!(
            parse(&write(
                doc! { "_id": id.clone(), "participants": ["shard0"] }
            ))
            .unwrap(),
            None
        );
        let diff =
            write(doc! { "$v": 2, "diff": { "i": { "decision": { "decision": "abort" } } } });
        assert_eq!(parse(&diff).unwrap(), None);
        let mut other = write(doc! { "_id": id.clone(), "decision": { "decision": "abort" } });
        other.insert("ns", "config.other");
        assert_eq!(parse(&other).unwrap(), None);
        let no_ct = write(doc! { "_id": id.clone(), "decision": { "decision": "commit" } });
        assert!(parse(&no_ct).unwrap_err().contains("no commitTimestamp"));
        let odd = write(doc! { "_id": id, "decision": { "decision": "maybe" } });
        assert!(parse(&odd).unwrap_err().contains("neither"));
    }
}
