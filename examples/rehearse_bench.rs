//! Builds a production for `pitr rehearse` to measure, for `scripts/bench-rehearse.sh`
//! (which starts the stand-in mongod, calls this, takes the backup with the real
//! mongodump, calls this again, and runs the rehearsal):
//!
//! ```text
//! rehearse_bench load  PORT MIB      inserts about MIB MiB of documents (~1 KiB each)
//!                                    into bench.orders and bench.events
//! rehearse_bench churn PORT MIB N    after the backup (N: the documents `load` wrote): about MIB MiB of oplog (new
//!                                    documents in bench.events, updates of bench.orders
//!                                    that rewrite a 700-byte field, a few deletes)
//! ```
//!
//! Each prints one line: `<step> <documents> docs <bytes> bytes <seconds> s`.
//! The server is pitr's test stand-in (tests/standins), NOT MongoDB: its numbers say
//! what pitr's side costs, not what a real server's reads cost.

use std::time::{Duration, Instant};

use bson::{doc, Document};

const BATCH: usize = 1000;
const PAD: usize = 700;

fn client(port: &str) -> (tokio::runtime::Runtime, mongodb::Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let c = rt.block_on(async {
        let mut o = mongodb::options::ClientOptions::parse(format!(
            "mongodb://127.0.0.1:{port}/?directConnection=true"
        ))
        .await
        .expect("uri");
        o.server_selection_timeout = Some(Duration::from_secs(10));
        // The stand-in runs each statement under one lock: on a loaded machine a
        // multi-update keeps the driver's monitor waiting longer than its default
        // 10 s connect timeout, and the pool was cleared mid-churn.
        o.connect_timeout = Some(Duration::from_secs(120));
        o.heartbeat_freq = Some(Duration::from_secs(60));
        mongodb::Client::with_options(o).expect("client")
    });
    (rt, c)
}

/// A document of about 1 KiB: varied types, a nested array, a 700-byte string.
fn order(i: i64, rev: i64) -> Document {
    let fill = char::from(b'a' + (i % 26) as u8);
    let status = ["open", "paid", "shipped", "returned"][(i % 4) as usize];
    doc! {
        "_id": i,
        "status": status,
        "total": i as f64 * 0.25,
        "qty": (i % 17) as i32,
        "rev": rev,
        "customer": format!("c{:06}", i % 50_000),
        "items": [{"sku": format!("s{}", i % 997), "n": 1}, {"sku": "x", "n": (i % 5) as i32}],
        "at": bson::DateTime::from_millis(1_700_000_000_000 + i),
        "note": fill.to_string().repeat(PAD),
    }
}

fn insert(rt: &tokio::runtime::Runtime, c: &mongodb::Client, coll: &str, docs: Vec<Document>) {
    rt.block_on(async {
        c.database("bench")
            .run_command(doc! {"insert": coll, "documents": docs, "ordered": true})
            .await
    })
    .unwrap_or_else(|e| panic!("insert into bench.{coll}: {e}"));
}

fn load(port: &str, mib: u64) {
    let (rt, c) = client(port);
    let t = Instant::now();
    let target = mib << 20;
    let (mut bytes, mut n) = (0u64, 0i64);
    while bytes < target {
        let docs: Vec<Document> = (0..BATCH as i64).map(|k| order(n + k, 0)).collect();
        bytes += docs
            .iter()
            .map(|d| bson::to_vec(d).map_or(0, |v| v.len() as u64))
            .sum::<u64>();
        // Three documents in four go to orders, one to events.
        let coll = if (n / BATCH as i64) % 4 == 3 {
            "events"
        } else {
            "orders"
        };
        insert(&rt, &c, coll, docs);
        n += BATCH as i64;
    }
    println!(
        "load {n} docs {bytes} bytes {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

/// An `_id` that `load` put in bench.orders (batches 0, 1, 2 of every 4).
fn an_order_id(loaded: i64, pick: i64) -> i64 {
    let order_batches = (loaded / BATCH as i64 / 4 * 3).max(1);
    let idx = pick.rem_euclid(order_batches);
    let batch = idx / 3 * 4 + idx % 3;
    batch * BATCH as i64 + pick.rem_euclid(BATCH as i64)
}

fn churn(port: &str, mib: u64, loaded: i64) {
    let (rt, c) = client(port);
    let t = Instant::now();
    let target = mib << 20;
    let (mut bytes, mut n) = (0u64, 0u64);
    let mut next_id: i64 = 1 << 40;
    let mut round: i64 = 0;
    while bytes < target {
        // Half of the oplog: new events.
        let docs: Vec<Document> = (0..BATCH as i64).map(|k| order(next_id + k, 0)).collect();
        bytes += docs
            .iter()
            .map(|d| bson::to_vec(d).map_or(0, |v| v.len() as u64 + 120))
            .sum::<u64>();
        insert(&rt, &c, "events", docs);
        next_id += BATCH as i64;
        n += BATCH as u64;
        // The other half: updates that rewrite `note` (each entry carries ~700 bytes),
        // one statement over a run of 1000 `_id`s of bench.orders (the stand-in scans
        // the collection once per statement, so one statement per id would crawl).
        round += 1;
        let fill = char::from(b'A' + (round % 26) as u8)
            .to_string()
            .repeat(PAD);
        let first = an_order_id(loaded, round * 7919) / BATCH as i64 * BATCH as i64;
        rt.block_on(async {
            c.database("bench")
                .run_command(doc! {"update": "orders", "updates": [{
                    "q": {"_id": {"$gte": first, "$lt": first + BATCH as i64}},
                    "u": {"$set": {"note": &fill, "rev": round}},
                    "multi": true,
                }]})
                .await
        })
        .expect("update bench.orders");
        bytes += BATCH as u64 * (PAD as u64 + 150);
        n += BATCH as u64;
        // And a few deletes.
        rt.block_on(async {
            c.database("bench")
                .run_command(doc! {"delete": "orders", "deletes": [{"q": {"_id": an_order_id(loaded, round * 13)}, "limit": 1}]})
                .await
        })
        .expect("delete from bench.orders");
    }
    println!(
        "churn {n} docs {bytes} bytes {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mib = |s: &str| -> u64 {
        s.parse()
            .unwrap_or_else(|_| panic!("`{s}` is not a number of MiB (e.g. 768)"))
    };
    match a.as_slice() {
        ["load", port, m] => load(port, mib(m)),
        ["churn", port, m, n] => churn(
            port,
            mib(m),
            n.parse()
                .unwrap_or_else(|_| panic!("`{n}` is not a document count (load prints it)")),
        ),
        _ => {
            eprintln!("usage: rehearse_bench load PORT MIB | churn PORT MIB LOADED_DOCS (see scripts/bench-rehearse.sh)");
            std::process::exit(2);
        }
    }
}
