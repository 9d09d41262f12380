//! The embedded engine on real peer data: mongo-tools' transaction cases
//! (`common/txn/testdata/oplog_entries.json`: unprepared and prepared
//! transactions, large ones split with `partialTxn`, aborts, `applyOps` without a
//! transaction, `lsid`/`txnNumber` without one, `multiOpType`), each with the exact
//! documents its namespace must hold afterwards. The cases are applied as
//! mongorestore applies them (the lenient phase: by namespace, collections created
//! by their first insert), through the one walk (`engine::walk::Walker`).

mod common;

use bson::{Bson, Document, RawDocumentBuf};

use pitr::engine::replica::{Content, Phase, Replica, ReplicaOptions};
use pitr::engine::walk::{Source, Walker};
use pitr::oplog::Entry;
use pitr::plan::expect::Model;
use pitr::plan::versions::RestoreRules;

/// The legacy extended JSON some cases use (`{"$binary": "<b64>", "$type": "04"}`,
/// mongo-tools' older form) rewritten as the canonical form the bson crate reads.
fn modernize(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(b)), Some(Value::String(t))) =
                (m.get("$binary"), m.get("$type"))
            {
                let (b, t) = (b.clone(), t.clone());
                m.clear();
                m.insert(
                    "$binary".into(),
                    serde_json::json!({ "base64": b, "subType": t }),
                );
                return;
            }
            for x in m.values_mut() {
                modernize(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(modernize),
        _ => {}
    }
}

#[test]
fn mongo_tools_transaction_cases_give_their_post_images() {
    let test = "mongo_tools_transaction_cases_give_their_post_images";
    let Some(peer) = common::peer_dir(test) else {
        return;
    };
    let path = peer.join("common/txn/testdata/oplog_entries.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    modernize(&mut v);
    let cases = v.as_object().unwrap();
    assert!(cases.len() >= 10, "{} cases", cases.len());
    let mut checked = 0;
    for (name, case) in cases {
        let replica = Replica::new(ReplicaOptions {
            content: Content::Documents,
            ..ReplicaOptions::default()
        });
        let mut m = Model::from_replica(
            replica,
            true,
            Phase::Lenient,
            Phase::Lenient,
            Default::default(),
        );
        let mut a = Walker::new(RestoreRules::newest());
        for op in case["ops"].as_array().unwrap() {
            let doc = match Bson::try_from(op.clone()).unwrap() {
                Bson::Document(d) => d,
                other => panic!("{name}: not a document: {other}"),
            };
            let raw = RawDocumentBuf::from_document(&doc).unwrap();
            a.feed(&Entry::parse(&raw).unwrap(), Source::Slice, &mut m)
                .unwrap();
            if let Some(e) = m.take_error() {
                panic!("{name}: {e}");
            }
        }
        let ns = case["ns"].as_str().unwrap();
        // `not transaction with multiOpType` has no post-image (only its walk is checked).
        let Some(post) = case["postimage"].as_array() else {
            continue;
        };
        checked += 1;
        let want: Vec<Document> = post
            .iter()
            .map(|d| match Bson::try_from(d.clone()).unwrap() {
                Bson::Document(d) => d,
                other => panic!("{name}: {other}"),
            })
            .collect();
        let mut got = Vec::new();
        m.replica()
            .for_each_document(ns, &mut |d| {
                got.push(bson::from_slice::<Document>(d).unwrap());
                Ok(())
            })
            .unwrap();
        // Exact documents, field order included.
        let bytes = |v: &[Document]| -> Vec<Vec<u8>> {
            v.iter().map(|d| bson::to_vec(d).unwrap()).collect()
        };
        assert_eq!(bytes(&got), bytes(&want), "case `{name}` on {ns}: {got:?}");
    }
    assert!(checked >= 11, "{checked} cases with post-images");
}
