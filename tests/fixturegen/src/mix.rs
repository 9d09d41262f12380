//! Traffic mixes for the bench scenario (`pitr-gen --scenario bench --mix ...`):
//! the same timeline, incidents and decoys, with the background traffic (and, for
//! `legacy`, the field order) of the kinds of oplog scans meet in the field.
//!
//! - `current`: the default background mix of [`super::traffic`] (57% inserts,
//!   38% updates, no retryable writes to speak of).
//! - `oltp`: a busy OLTP application: about 50% inserts, 35% updates (mostly `$v:2`
//!   diffs, some with nested and array sections), 10% single deletes spread over 64
//!   extra collections (`app.c00`..`app.c63`, so that no collection ever sees a
//!   delete burst), 5% transactions (`applyOps` with `lsid`/`txnNumber` first) and a
//!   few `collMod` commands.
//! - `retryable`: most inserts, updates and deletes are retryable writes, laid out
//!   as a 7.0 primary writes them (mongo-tools' real `collMod_ttl_index/oplog.bson`):
//!   `lsid, txnNumber, op, ns, ui, o, o2, stmtId, ts, t, v, wall, prevOpTime`.
//! - `legacy`: the `current` traffic in the field order of 4.0/4.2 servers (real
//!   samples: `tools-2002/oplog.bson` (4.0), `oplog_partial_skips/oplog.bson` (4.2)):
//!   `ts, t, h, v, op, ns, ui, [fromMigrate,] wall, [lsid, txnNumber, stmtId,
//!   prevOpTime,] o, [o2]`, with a random `h` and `v` as int32.
//! - `large`: a third of the entries insert 8-64 KB documents (`media.assets`).
//! - `tiny`: entries under 200 bytes: small time-series-like documents in 32
//!   collections `metrics.ticks00`..`metrics.ticks31`.
//! - `orders`: 90% of the entries insert into `shop.orders` until the first incident
//!   drops it, so that the drop destroys most of what the oplog wrote (a 428 MB oplog
//!   ends with about 800,000 orders): the case of a large destroyed-documents dump
//!   (`scripts/mem-destroyed.sh`).
//!
//! Everything goes through the world model (pools, limiters, quiet periods), so the
//! planted incidents and `truth.json` stay exact for every mix.

use rand::Rng;

use super::emit::Prev;
use super::ids::Live;
use super::rng::{mix as hash64, weighted};
use super::scenario::{Gen, Params};
use super::shapes::Shape;
use super::world::{CollSpec, IdKind, MAX_BG_DELETES_PER_10S};
use pitr::oplog::elements::Elements;

/// A kind of oplog traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// The default background traffic (57% inserts, 38% updates).
    #[default]
    Current,
    /// 50% inserts, 35% updates, 10% deletes, 5% transactions, a few commands.
    Oltp,
    /// Most writes are retryable writes (`lsid`, `txnNumber` before `op`).
    Retryable,
    /// The current traffic in the 4.0/4.2 field order (`ts, t, h, v, op, ...`).
    Legacy,
    /// A third of the entries insert 8-64 KB documents.
    Large,
    /// Entries under 200 bytes.
    Tiny,
    /// Most entries insert into `shop.orders`, which the first incident drops.
    Orders,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Current => "current",
            Mix::Oltp => "oltp",
            Mix::Retryable => "retryable",
            Mix::Legacy => "legacy",
            Mix::Large => "large",
            Mix::Tiny => "tiny",
            Mix::Orders => "orders",
        }
    }

    /// Approximate mean entry size, to size the traffic rate for a byte target.
    fn mean_entry_bytes(self) -> f64 {
        match self {
            Mix::Current | Mix::Oltp => 330.0,
            Mix::Retryable => 420.0,
            Mix::Legacy => 345.0,
            Mix::Large => 12_500.0,
            Mix::Tiny => 185.0,
            Mix::Orders => 430.0,
        }
    }
}

/// Adjusts the bench traffic rate to the mix's entry size (the scripted part stays
/// about a fifth of the target). `current` keeps the rate of [`Params`] unchanged.
pub fn tune(params: &mut Params, mix: Mix) {
    if mix == Mix::Current {
        return;
    }
    if let Some(target) = params.target_bytes {
        let secs = 5.0 * (13 * 20 + 5 + 5 + 15) as f64;
        params.rate = (target as f64 / mix.mean_entry_bytes() / secs).clamp(2.0, 2500.0);
        params.window_rate = params.rate;
    }
}

/// Number of extra collections of `oltp` and `tiny`.
const OLTP_COLLS: usize = 64;
const TINY_COLLS: usize = 32;

/// Collections a mix adds to the initial catalogue, with their initial sizes.
pub fn extra_catalogue(mix: Mix) -> Vec<(CollSpec, u64)> {
    let spec = |db: &'static str, name: String, shape: Shape| CollSpec {
        db,
        name,
        shape,
        id_kind: IdKind::Oid,
        first_n: 0,
        indexes: vec![],
        bg: true,
    };
    const OLTP_SHAPES: [Shape; 6] = [
        Shape::Order,
        Shape::Customer,
        Shape::Payment,
        Shape::Profile,
        Shape::SessionLog,
        Shape::Event,
    ];
    match mix {
        Mix::Oltp => (0..OLTP_COLLS)
            .map(|k| {
                (
                    spec(
                        "app",
                        format!("c{k:02}"),
                        OLTP_SHAPES[k % OLTP_SHAPES.len()],
                    ),
                    40,
                )
            })
            .collect(),
        Mix::Tiny => (0..TINY_COLLS)
            .map(|k| (spec("metrics", format!("ticks{k:02}"), Shape::Tick), 40))
            .collect(),
        Mix::Large => vec![(spec("media", "assets".into(), Shape::Asset), 4)],
        _ => vec![],
    }
}

/// One background operation of the run's mix.
pub fn background(g: &mut Gen) {
    match g.mix {
        Mix::Current | Mix::Legacy => g.background(),
        Mix::Oltp => oltp(g),
        Mix::Retryable => retryable(g),
        Mix::Large => large(g),
        Mix::Tiny => tiny(g),
        Mix::Orders => orders(g),
    }
}

/// A random existing background collection of database `db` (any user database
/// for `None`); with `updatable`, only one whose documents normal traffic updates.
fn pick_coll(g: &mut Gen, db: Option<&str>, updatable: bool) -> Option<usize> {
    let n = g.world.colls.len();
    let from = g.rng.random_range(0..n);
    (0..n).map(|k| (from + k) % n).find(|&c| {
        let coll = &g.world.colls[c];
        coll.exists
            && coll.bg
            && coll.is_user()
            && db.is_none_or(|d| coll.db == d)
            && (!updatable || (coll.shape.updatable() && !coll.pool.is_empty()))
    })
}

/// Takes a document of `c` out of its pool for a delete, within the limits that
/// keep background deletes below any burst.
fn deletable(g: &mut Gen, c: usize) -> Option<Live> {
    let sec = g.em.sec();
    let coll = &mut g.world.colls[c];
    if coll.is_quiet(sec)
        || coll.pool.is_empty()
        || !coll.deletes.try_take(sec, 1, MAX_BG_DELETES_PER_10S)
    {
        return None;
    }
    coll.pool.take(&mut g.rng)
}

/// A normal update of a random document of `c`; false when there is none.
fn update_some(g: &mut Gen, c: usize, session: Option<usize>) -> bool {
    let coll = &g.world.colls[c];
    if !coll.shape.updatable() {
        return false;
    }
    let Some(l) = coll.pool.pick(&mut g.rng) else {
        return false;
    };
    match session {
        None => {
            g.update(c, l, None);
        }
        Some(s) => {
            let now = g.em.now_ms(&mut g.rng);
            let coll = &g.world.colls[c];
            g.em.begin_session(&g.sessions[s], "u", &coll.ns, Some(&coll.uuid));
            coll.shape
                .write_update(&mut g.em.w, &mut g.rng, now, g.seed, l);
            g.em.w.doc("o2");
            l.id.write(&mut g.em.w, "_id");
            g.em.w.end();
            g.em.w.i32("stmtId", 0);
            g.em.finish(Prev::Start);
        }
    }
    true
}

/// A single delete of a document of `c`; false when the limits say no.
fn delete_some(g: &mut Gen, c: usize, session: Option<usize>) -> bool {
    let Some(l) = deletable(g, c) else {
        return false;
    };
    match session {
        None => {
            g.delete(c, l, false, None);
        }
        Some(s) => {
            let coll = &mut g.world.colls[c];
            g.em.begin_session(&g.sessions[s], "d", &coll.ns, Some(&coll.uuid));
            g.em.w.doc("o");
            l.id.write(&mut g.em.w, "_id");
            g.em.w.end();
            g.em.w.i32("stmtId", 0);
            coll.deleted();
            g.em.finish(Prev::Start);
        }
    }
    true
}

/// A committed transaction of 2-4 operations on `app` collections: inserts,
/// updates and at most one delete, in one `applyOps` led by `lsid`/`txnNumber`.
fn oltp_txn(g: &mut Gen) -> bool {
    let Some(s) = g.next_session() else {
        return false;
    };
    let n = g.rng.random_range(2..5);
    let mut inserted = Vec::new();
    let mut deleted = Vec::new();
    g.em.begin_session(&g.sessions[s], "c", "admin.$cmd", None);
    g.em.w.doc("o");
    g.em.w.arr("applyOps");
    for k in 0..n {
        let Some(c) = pick_coll(g, Some("app"), false) else {
            break;
        };
        let roll = g.rng.random_range(0..10);
        if roll < 4 || g.world.colls[c].pool.is_empty() {
            let sec = g.em.sec();
            let l = g.world.colls[c].new_live(&mut g.rng, &mut g.oids, sec);
            g.inner_insert(c, l);
            inserted.push((c, l));
        } else if roll < 9 || k > 0 || !deleted.is_empty() {
            let l = g.world.colls[c]
                .pool
                .pick(&mut g.rng)
                .expect("pool is not empty");
            g.inner_update(c, l);
        } else if let Some(l) = deletable(g, c) {
            g.inner_delete(c, l);
            deleted.push(c);
        } else {
            let l = g.world.colls[c]
                .pool
                .pick(&mut g.rng)
                .expect("pool is not empty");
            g.inner_update(c, l);
        }
    }
    g.em.w.end();
    g.em.w.end();
    g.em.finish(Prev::Start);
    for (c, l) in inserted {
        g.world.colls[c].inserted(&mut g.rng, l);
    }
    for c in deleted {
        g.world.colls[c].deleted();
    }
    true
}

/// A harmless `collMod` (validation settings) of an `app` collection.
fn oltp_command(g: &mut Gen) -> bool {
    let Some(c) = pick_coll(g, Some("app"), false) else {
        return false;
    };
    let coll = &g.world.colls[c];
    let level = if g.rng.random_bool(0.5) {
        "moderate"
    } else {
        "strict"
    };
    g.em.begin("c", "app.$cmd", Some(&coll.uuid));
    g.em.w.doc("o");
    g.em.w.str("collMod", &coll.name);
    g.em.w.str("validationLevel", level);
    g.em.w.end();
    g.em.w.doc("o2");
    g.em.w.doc("collectionOptions_old");
    g.em.w.uuid("uuid", &coll.uuid);
    g.em.w.end();
    g.em.w.end();
    g.em.finish(Prev::None);
    true
}

#[derive(Clone, Copy)]
enum Op {
    Insert,
    Update,
    Delete,
    Txn,
    Command,
}

fn oltp(g: &mut Gen) {
    const W: &[(u32, Op)] = &[
        (500, Op::Insert),
        (350, Op::Update),
        (100, Op::Delete),
        (48, Op::Txn),
        (2, Op::Command),
    ];
    let op = W[weighted(&mut g.rng, W, |w| w.0)].1;
    // Most traffic goes to the app's own collections, some to the shop's.
    let db = if g.rng.random_bool(0.8) {
        Some("app")
    } else {
        None
    };
    let Some(c) = pick_coll(g, db, matches!(op, Op::Update)) else {
        return g.background();
    };
    let done = match op {
        Op::Insert => {
            g.insert(c, None);
            true
        }
        Op::Update => update_some(g, c, None),
        Op::Delete => {
            let c = pick_coll(g, Some("app"), false).unwrap_or(c);
            delete_some(g, c, None)
        }
        Op::Txn => oltp_txn(g),
        Op::Command => oltp_command(g),
    };
    if !done {
        g.insert(c, None);
    }
}

fn retryable(g: &mut Gen) {
    // A few of the ordinary mix (transactions, prepared, batched deletes, plain
    // writes of drivers without retryable writes), then retryable writes.
    if g.rng.random_bool(0.12) {
        return g.background();
    }
    const W: &[(u32, Op)] = &[(52, Op::Insert), (42, Op::Update), (6, Op::Delete)];
    let op = W[weighted(&mut g.rng, W, |w| w.0)].1;
    let Some(c) = pick_coll(g, None, matches!(op, Op::Update)) else {
        return g.background();
    };
    let Some(s) = g.next_session() else {
        return g.background();
    };
    let done = match op {
        Op::Update => update_some(g, c, Some(s)),
        Op::Delete => delete_some(g, c, Some(s)),
        _ => false,
    };
    if !done {
        g.insert(c, Some((s, 0, Prev::Start)));
    }
}

fn large(g: &mut Gen) {
    let Some(assets) = g.world.find("media.assets") else {
        return g.background();
    };
    match g.rng.random_range(0..100) {
        0..35 => {
            g.insert(assets, None);
        }
        35..50 => {
            if !update_some(g, assets, None) {
                g.background();
            }
        }
        50..55 => {
            if !delete_some(g, assets, None) {
                g.background();
            }
        }
        _ => g.background(),
    }
}

fn orders(g: &mut Gen) {
    // Until the drop: after it, the re-created `shop.orders` gets ordinary traffic.
    let first = g.incidents.is_empty();
    match (first, g.world.find("shop.orders")) {
        (true, Some(c)) if g.rng.random_range(0..100) < 90 => {
            g.insert(c, None);
        }
        _ => g.background(),
    }
}

fn tiny(g: &mut Gen) {
    let roll = g.rng.random_range(0..100);
    if roll >= 96 {
        // A little of everything else, so that the scan meets every kind of entry.
        return g.background();
    }
    let Some(c) = pick_coll(g, Some("metrics"), false) else {
        return g.background();
    };
    let done = match roll {
        0..62 => false,
        62..91 => update_some(g, c, None),
        _ => delete_some(g, c, None),
    };
    if !done {
        g.insert(c, None);
    }
}

/// Words of the large documents' text (compresses about like real prose).
const WORDS: &[&str] = &[
    "the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on",
    "are", "as", "with", "his", "they", "at", "be", "this", "have", "from", "or", "one", "had",
    "by", "word", "but", "not", "what", "all", "were", "we", "when", "your", "can", "said",
    "there", "use", "an", "each", "which", "she", "do", "how", "their", "if", "will", "up",
    "other", "about", "out", "many", "then", "them", "these", "so", "some", "her", "would", "make",
    "like", "him", "into", "time", "has", "look", "two", "more", "write", "go", "see", "number",
    "no", "way", "could", "people", "my", "than", "first", "water", "been", "call", "who", "oil",
    "its", "now", "find", "long", "down", "day", "did", "get", "come", "made", "may", "part",
    "restore", "backup", "replica", "primary", "shard", "index", "query",
];

/// The fields of a large document (8-64 KB): title, tags, a long text body and an
/// embedded thumbnail. Content is a function of the document's stream `r`.
pub fn write_asset(w: &mut super::bsonw::BsonW, r: &mut super::rng::DocRng, l: Live) {
    use rand::RngCore;
    let size = r.random_range(8 * 1024..64 * 1024);
    let n = r.random_range(0..WORDS.len());
    w.str_fmt(
        "title",
        format_args!("{} {} {}", WORDS[n], WORDS[(n * 7) % WORDS.len()], l.born),
    );
    w.arr("tags");
    for _ in 0..r.random_range(1..5) {
        w.str("", WORDS[r.random_range(0..WORDS.len())]);
    }
    w.end();
    let thumb = size / 8;
    let mut body = String::with_capacity(size);
    while body.len() < size - thumb {
        body.push_str(WORDS[r.random_range(0..WORDS.len())]);
        body.push(if r.random_range(0..12) == 0 { '.' } else { ' ' });
    }
    w.str("body", &body);
    let mut bin = vec![0u8; thumb];
    r.fill_bytes(&mut bin);
    w.bin("thumb", 0, &bin);
    w.date("createdAt", l.born as i64 * 1000);
}

// ---------------------------------------------------------------------------------
// legacy field order

/// Top-level fields in the order 4.0/4.2 servers write them; anything else follows
/// in its original order.
const LEGACY_ORDER: [&[u8]; 15] = [
    b"ts",
    b"t",
    b"h",
    b"v",
    b"op",
    b"ns",
    b"ui",
    b"fromMigrate",
    b"wall",
    b"lsid",
    b"txnNumber",
    b"stmtId",
    b"prevOpTime",
    b"o",
    b"o2",
];

/// Rewrites the concatenated entries of `src` into `out` in the 4.0/4.2 field
/// order, adding `h` (a random int64 derived from the entry's bytes) and writing
/// `v` as int32, as those servers did.
pub fn to_legacy(src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut pos = 0;
    while pos + 4 <= src.len() {
        let len = i32::from_le_bytes(src[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let doc = &src[pos..pos + len];
        pos += len;
        let els: Vec<_> = Elements::new(doc)
            .map(|e| e.expect("the generator writes valid BSON"))
            .collect();
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        let element = |out: &mut Vec<u8>, kind: u8, key: &[u8], value: &[u8]| {
            out.push(kind);
            out.extend_from_slice(key);
            out.push(0);
            out.extend_from_slice(value);
        };
        for key in LEGACY_ORDER {
            match key {
                b"h" => {
                    let h = hash64(doc.iter().fold(len as u64, |a, b| {
                        a.wrapping_mul(31).wrapping_add(*b as u64)
                    }));
                    element(out, 0x12, b"h", &h.to_le_bytes());
                }
                b"v" => element(out, 0x10, b"v", &2i32.to_le_bytes()),
                _ => {
                    if let Some(e) = els.iter().find(|e| e.key == key) {
                        element(out, e.kind, e.key, e.value);
                    }
                }
            }
        }
        for e in &els {
            if !LEGACY_ORDER.contains(&e.key) {
                element(out, e.kind, e.key, e.value);
            }
        }
        out.push(0);
        let n = (out.len() - start) as i32;
        out[start..start + 4].copy_from_slice(&n.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};

    #[test]
    fn legacy_order_matches_a_4_2_entry() {
        let modern = doc! {
            "lsid": { "id": 1 }, "txnNumber": 3i64, "op": "i", "ns": "a.b", "o": { "_id": 1 },
            "o2": { "_id": 1 }, "stmtId": 0, "ts": bson::Timestamp { time: 5, increment: 1 },
            "t": 2i64, "v": 2i64, "wall": bson::DateTime::from_millis(5000),
            "prevOpTime": { "ts": bson::Timestamp { time: 0, increment: 0 }, "t": -1i64 },
        };
        let bytes = bson::to_vec(&modern).unwrap();
        let mut out = Vec::new();
        to_legacy(&[bytes.clone(), bytes].concat(), &mut out);
        let first = Document::from_reader(&out[..]).unwrap();
        let keys: Vec<&str> = first.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "ts",
                "t",
                "h",
                "v",
                "op",
                "ns",
                "wall",
                "lsid",
                "txnNumber",
                "stmtId",
                "prevOpTime",
                "o",
                "o2"
            ]
        );
        assert_eq!(first.get_i32("v").unwrap(), 2);
        let second = Document::from_reader(&out[out.len() / 2..]).unwrap();
        assert_eq!(first, second);
    }
}
