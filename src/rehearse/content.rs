//! The documents: production read as of the point, compared with the rebuild byte for
//! byte.
//!
//! - **Counts**: `aggregate [{$count: "n"}]` as of the point, against the rebuild's.
//! - **`--full`**: every document of production in `_id` order (`find` sorted on
//!   `_id`, batch by batch) merged with the rebuild's documents in the same order (the
//!   engine keeps them in the `_id` index's order, [`crate::engine::compare`]): a
//!   document on one side only is missing on the other; one on both sides must have
//!   the same bytes. Production's batches come from a task on the runtime through a
//!   channel of two batches, so memory stays at a few batches whatever the size.
//! - **`--sample N`**: up to `N` `_id`s drawn from each side (a reservoir over the
//!   rebuild's, `$sample` on production's), and the documents with those `_id`s
//!   fetched from both: a document missing on either side is found when its `_id` is
//!   drawn from the side that has it. A side with no more than `N` documents gives
//!   all of its `_id`s, so a small collection is compared whole.
//!
//! Reads are bounded: `--max-read-rate` documents per second (batches shrink to fit
//! and wait their turn), and retried on transient errors (network, elections, a lost
//! cursor: [`crate::mongo::error::Class::Transient`]) with backoff while the point is
//! still in the server's history; a full scan then resumes after the last `_id` read.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::engine::replica::{Meter, Replica, ReplicaError};
use crate::engine::{compare_values, IdKey};
use crate::mongo::oplog_source::RetryPolicy;
use crate::mongo::readonly::SnapshotReader;
use crate::mongo::DriverError;
use crate::oplog::Ts;

use super::docdiff;
use super::error::RehearseError;
use super::report::{DiffKind, Difference, PathValues, RehearseReport, MAX_PER_NAMESPACE};

/// `_id`s per `find` when fetching sampled documents.
const IDS_PER_FIND: usize = 1000;
/// Longest value shown with `--show-values`.
const MAX_VALUE_CHARS: usize = 200;

/// What was read from production (shared with the reading task).
#[derive(Debug, Default)]
pub struct ReadStats {
    pub commands: AtomicU64,
    pub documents: AtomicU64,
    pub bytes: AtomicU64,
    /// Reads repeated after a transient error.
    pub retries: AtomicU64,
    /// What was retried and why, the first [`MAX_RETRIES_LISTED`].
    pub retried: std::sync::Mutex<Vec<String>>,
}

/// At most this many retries are described in the report (all are counted).
pub const MAX_RETRIES_LISTED: usize = 20;

impl ReadStats {
    fn add(&self, commands: u64, documents: u64, bytes: u64) {
        self.commands.fetch_add(commands, AtomicOrdering::Relaxed);
        self.documents.fetch_add(documents, AtomicOrdering::Relaxed);
        self.bytes.fetch_add(bytes, AtomicOrdering::Relaxed);
    }
}

/// Reads within `--max-read-rate`: waits before a batch until the documents read so
/// far are within the rate since the reads began.
#[derive(Clone)]
struct Pace {
    rate: Option<u64>,
    started: Instant,
    stats: Arc<ReadStats>,
}

impl Pace {
    async fn wait(&self) {
        let Some(rate) = self.rate else { return };
        let done = self.stats.documents.load(AtomicOrdering::Relaxed) as f64;
        let due = Duration::from_secs_f64(done / rate.max(1) as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            tokio::time::sleep(due - elapsed).await;
        }
    }
}

/// When to give up on transient errors.
#[derive(Clone)]
struct Patience {
    retry: RetryPolicy,
    stats: Arc<ReadStats>,
    /// When the point falls out of the server's history (estimated).
    deadline: Instant,
    at: Ts,
    window_secs: u64,
    target: String,
}

impl Patience {
    fn note_retry(&self, line: String) {
        let mut list = self.stats.retried.lock().unwrap_or_else(|p| p.into_inner());
        if list.len() < MAX_RETRIES_LISTED {
            list.push(line);
        }
    }

    /// After failure number `attempt` (1-based): waits and returns `Ok` when worth
    /// another try, else the error to stop with.
    async fn after(&self, e: DriverError, attempt: u32, what: &str) -> Result<(), RehearseError> {
        let delay = self.retry.delay(attempt);
        if e.is_transient()
            && attempt < self.retry.max_attempts
            && Instant::now() + delay < self.deadline
        {
            self.stats.retries.fetch_add(1, AtomicOrdering::Relaxed);
            self.note_retry(format!(
                "{what}: {e}; retried after {} ms (attempt {})",
                delay.as_millis(),
                attempt + 1
            ));
            tokio::time::sleep(delay).await;
            return Ok(());
        }
        Err(read_error(e, what, &self.target, self.at, self.window_secs))
    }
}

/// A read failure as the rehearsal reports it.
pub fn read_error(
    e: DriverError,
    what: &str,
    target: &str,
    at: Ts,
    window_secs: u64,
) -> RehearseError {
    match e.code {
        // SnapshotTooOld (`wiredtiger_recovery_unit.cpp`): the point fell out of history.
        Some(239) => RehearseError::SnapshotTooOld {
            at,
            window_secs,
            source: e,
        },
        // SnapshotUnavailable, InvalidOptions, NotAReplicaSet: snapshot reads refused.
        Some(246) | Some(72) | Some(123) => RehearseError::SnapshotRefused {
            target: target.to_string(),
            source: e,
        },
        _ => RehearseError::Read {
            what: what.to_string(),
            target: target.to_string(),
            source: e,
        },
    }
}

/// Reads production as of the point and compares with the rebuild.
pub struct Comparer<'a> {
    pub rt: &'a tokio::runtime::Runtime,
    reader: Option<SnapshotReader>,
    pace: Pace,
    patience: Patience,
    batch_size: u32,
    pub show_values: bool,
    pub stats: Arc<ReadStats>,
}

/// Settings of a [`Comparer`].
pub struct ComparerSettings {
    pub max_read_rate: Option<u64>,
    pub batch_size: u32,
    pub retry: RetryPolicy,
    pub deadline: Instant,
    pub at: Ts,
    pub window_secs: u64,
    pub target: String,
    pub show_values: bool,
}

/// One namespace's document comparison so far.
#[derive(Debug, Default)]
pub struct NsTally {
    pub compared: u64,
    pub differences: u64,
}

fn split(ns: &str) -> (String, String) {
    match ns.split_once('.') {
        Some((d, c)) => (d.to_string(), c.to_string()),
        None => (ns.to_string(), String::new()),
    }
}

fn id_of(doc: &RawDocument) -> Option<RawBsonRef<'_>> {
    doc.get("_id").ok().flatten()
}

fn show_id(id: Option<RawBsonRef<'_>>) -> String {
    match id {
        Some(v) => docdiff::shown(v, MAX_VALUE_CHARS),
        None => "(no _id)".to_string(),
    }
}

impl<'a> Comparer<'a> {
    pub fn new(
        rt: &'a tokio::runtime::Runtime,
        reader: SnapshotReader,
        s: ComparerSettings,
    ) -> Self {
        let stats = Arc::new(ReadStats::default());
        let batch_size = match s.max_read_rate {
            Some(r) => s.batch_size.min(r.clamp(1, u32::MAX as u64) as u32),
            None => s.batch_size,
        };
        Comparer {
            rt,
            reader: Some(reader),
            pace: Pace {
                rate: s.max_read_rate,
                started: Instant::now(),
                stats: stats.clone(),
            },
            patience: Patience {
                retry: s.retry,
                stats: stats.clone(),
                deadline: s.deadline,
                at: s.at,
                window_secs: s.window_secs,
                target: s.target,
            },
            batch_size,
            show_values: s.show_values,
            stats,
        }
    }

    /// Production's document count of `data_ns` as of the point.
    pub fn count(&mut self, data_ns: &str) -> Result<u64, RehearseError> {
        let (db, coll) = split(data_ns);
        let patience = self.patience.clone();
        let pace = self.pace.clone();
        let stats = self.stats.clone();
        let reader = self.reader.as_mut().expect("reader");
        self.rt.block_on(async move {
            let mut attempt = 0;
            loop {
                pace.wait().await;
                match reader.count(&db, &coll).await {
                    Ok(n) => {
                        stats.add(1, 0, 0);
                        return Ok(n);
                    }
                    Err(e) => {
                        attempt += 1;
                        patience
                            .after(e, attempt, &format!("counting `{db}.{coll}`"))
                            .await?
                    }
                }
            }
        })
    }

    /// Records one document difference (listed within the namespace's cap).
    fn document_difference(
        &self,
        report: &mut RehearseReport,
        tally: &mut NsTally,
        ns: &str,
        rebuild: Option<&RawDocument>,
        production: Option<&RawDocument>,
    ) {
        tally.differences += 1;
        if tally.differences > MAX_PER_NAMESPACE {
            report.differences_total += 1;
            return;
        }
        let (kind, id, paths, detail) = match (rebuild, production) {
            (Some(r), None) => {
                let id = show_id(id_of(r));
                (
                    DiffKind::DocumentMissingInProduction,
                    id.clone(),
                    Vec::new(),
                    format!("the rebuild has a document with _id {id}; production had none as of the point"),
                )
            }
            (None, Some(p)) => {
                let id = show_id(id_of(p));
                (
                    DiffKind::DocumentMissingInRebuild,
                    id.clone(),
                    Vec::new(),
                    format!("production had a document with _id {id} as of the point; the rebuild has none"),
                )
            }
            (Some(r), Some(p)) => {
                let paths = docdiff::differing_paths(r, p);
                let id = show_id(id_of(p));
                let detail = format!("the document with _id {id} differs at {}", paths.join(", "));
                (DiffKind::DocumentDiffers, id, paths, detail)
            }
            (None, None) => return,
        };
        let values = (self.show_values).then(|| match (rebuild, production) {
            (Some(r), Some(p)) => paths
                .iter()
                .map(|path| PathValues {
                    path: path.clone(),
                    rebuild: docdiff::value_at(r, path, MAX_VALUE_CHARS),
                    production: docdiff::value_at(p, path, MAX_VALUE_CHARS),
                })
                .collect(),
            (Some(r), None) => vec![PathValues {
                path: String::new(),
                rebuild: docdiff::shown(RawBsonRef::Document(r), MAX_VALUE_CHARS),
                production: "(absent)".into(),
            }],
            (None, Some(p)) => vec![PathValues {
                path: String::new(),
                rebuild: "(absent)".into(),
                production: docdiff::shown(RawBsonRef::Document(p), MAX_VALUE_CHARS),
            }],
            (None, None) => Vec::new(),
        });
        report.differ(Difference {
            ns: ns.to_string(),
            kind,
            id: Some(id),
            paths,
            detail,
            values,
        });
    }

    fn compare_pair(
        &self,
        report: &mut RehearseReport,
        tally: &mut NsTally,
        ns: &str,
        rebuild: &RawDocument,
        production: &RawDocument,
    ) {
        tally.compared += 1;
        if rebuild.as_bytes() != production.as_bytes() {
            self.document_difference(report, tally, ns, Some(rebuild), Some(production));
        }
    }

    /// `--full`: every document of `data_ns` on both sides (see the module comment).
    pub fn full(
        &mut self,
        replica: &Replica,
        ns: &str,
        data_ns: &str,
        report: &mut RehearseReport,
        meter: &Meter,
    ) -> Result<NsTally, RehearseError> {
        let (db, coll) = split(data_ns);
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<RawDocumentBuf>, RehearseError>>(2);
        let reader = self.reader.take().expect("reader");
        let job = ScanJob {
            db,
            coll,
            pace: self.pace.clone(),
            patience: self.patience.clone(),
            stats: self.stats.clone(),
            batch_size: self.batch_size,
        };
        let producer = self.rt.spawn(scan_production(reader, job, tx));

        let mut prod = Incoming {
            rx,
            pending: VecDeque::new(),
            closed: false,
        };
        let mut tally = NsTally::default();
        let mut failure: Option<RehearseError> = None;
        let mut cur: Option<RawDocumentBuf> = match prod.next() {
            Ok(d) => d,
            Err(e) => {
                failure = Some(e);
                None
            }
        };
        let walked = if failure.is_some() {
            Ok(())
        } else {
            replica.for_each_document(data_ns, &mut |bytes: &[u8]| -> Result<(), ReplicaError> {
                meter.add(1);
                let Ok(edoc) = RawDocument::from_bytes(bytes) else {
                    return Ok(());
                };
                let Some(eid) = id_of(edoc) else {
                    return Ok(());
                };
                loop {
                    let Some(p) = cur.as_ref() else {
                        self.document_difference(report, &mut tally, ns, Some(edoc), None);
                        return Ok(());
                    };
                    let ord = match id_of(p) {
                        Some(pid) => compare_values(eid, pid),
                        None => Ordering::Greater,
                    };
                    match ord {
                        Ordering::Less => {
                            self.document_difference(report, &mut tally, ns, Some(edoc), None);
                            return Ok(());
                        }
                        Ordering::Greater => {
                            self.document_difference(report, &mut tally, ns, None, Some(p));
                        }
                        Ordering::Equal => {
                            self.compare_pair(report, &mut tally, ns, edoc, p);
                        }
                    }
                    let done = ord == Ordering::Equal;
                    cur = match prod.next() {
                        Ok(d) => d,
                        Err(e) => {
                            failure = Some(e);
                            // Stops the walk; `failure` says why.
                            return Err(ReplicaError::Interrupted);
                        }
                    };
                    if done {
                        return Ok(());
                    }
                }
            })
        };
        if failure.is_none() && walked.is_ok() {
            while let Some(p) = cur.take() {
                self.document_difference(report, &mut tally, ns, None, Some(&p));
                match prod.next() {
                    Ok(d) => cur = d,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
        }
        drop(prod);
        let reader = self.rt.block_on(producer).map_err(|e| RehearseError::Io {
            what: "read production in",
            path: std::path::PathBuf::from(ns),
            source: std::io::Error::other(e),
        })?;
        self.reader = Some(reader);
        if let Some(e) = failure {
            return Err(e);
        }
        walked?;
        Ok(tally)
    }

    /// `--sample N`: up to `per_side` `_id`s from each side (see the module comment).
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &mut self,
        replica: &Replica,
        ns: &str,
        data_ns: &str,
        per_side: u64,
        seed: u64,
        report: &mut RehearseReport,
        meter: &Meter,
    ) -> Result<NsTally, RehearseError> {
        let (db, coll) = split(data_ns);
        // The rebuild's side: a reservoir over its `_id`s (keys only, no documents read).
        let k = per_side as usize;
        let mut rng = SplitMix(seed);
        let mut reservoir: Vec<IdKey> = Vec::with_capacity(k.min(1 << 16));
        let mut seen = 0u64;
        replica.any_id(data_ns, &mut |key| {
            seen += 1;
            if reservoir.len() < k {
                reservoir.push(key.clone());
            } else {
                let j = rng.below(seen) as usize;
                if j < k {
                    reservoir[j] = key.clone();
                }
            }
            false
        })?;
        let mut ids: BTreeSet<IdKey> = reservoir.into_iter().collect();
        // Production's side.
        let patience = self.patience.clone();
        let pace = self.pace.clone();
        let stats = self.stats.clone();
        let reader = self.reader.as_mut().expect("reader");
        let drawn: Vec<Bson> = self.rt.block_on(async {
            let mut attempt = 0;
            loop {
                pace.wait().await;
                match reader.sample_ids(&db, &coll, per_side).await {
                    Ok(v) => {
                        stats.add(1, v.len() as u64, 0);
                        return Ok::<_, RehearseError>(v);
                    }
                    Err(e) => {
                        attempt += 1;
                        patience
                            .after(e, attempt, &format!("sampling `{db}.{coll}`"))
                            .await?
                    }
                }
            }
        })?;
        for id in &drawn {
            if let Some(k) = key_of(id) {
                ids.insert(k);
            }
        }
        // Both sides' documents with those `_id`s.
        let all: Vec<IdKey> = ids.into_iter().collect();
        let mut tally = NsTally::default();
        for chunk in all.chunks(IDS_PER_FIND) {
            let values: Vec<Bson> = chunk
                .iter()
                .filter_map(|k| k.value().ok().and_then(|v| Bson::try_from(v).ok()))
                .collect();
            let reader = self.reader.as_mut().expect("reader");
            let found: Vec<RawDocumentBuf> = self.rt.block_on(async {
                let mut attempt = 0;
                loop {
                    pace.wait().await;
                    match reader.by_ids(&db, &coll, &values).await {
                        Ok(v) => {
                            let bytes = v.iter().map(|d| d.as_bytes().len() as u64).sum();
                            stats.add(1, v.len() as u64, bytes);
                            return Ok::<_, RehearseError>(v);
                        }
                        Err(e) => {
                            attempt += 1;
                            patience
                                .after(
                                    e,
                                    attempt,
                                    &format!("reading sampled documents of `{db}.{coll}`"),
                                )
                                .await?
                        }
                    }
                }
            })?;
            let mut by_key: BTreeMap<IdKey, RawDocumentBuf> = BTreeMap::new();
            for d in found {
                if let Some(id) = id_of(&d) {
                    by_key.insert(IdKey::from_value(id), d);
                }
            }
            for key in chunk {
                meter.add(1);
                let rebuilt = replica.document(data_ns, key)?;
                let rebuilt = rebuilt
                    .as_deref()
                    .and_then(|b| RawDocument::from_bytes(b).ok());
                let produced = by_key.get(key).map(|d| d.as_ref());
                match (rebuilt, produced) {
                    (Some(r), Some(p)) => self.compare_pair(report, &mut tally, ns, r, p),
                    (r, p) => {
                        tally.compared += 1;
                        self.document_difference(report, &mut tally, ns, r, p)
                    }
                }
            }
        }
        let _ = seen;
        Ok(tally)
    }

    /// Gives the reader back (to close its session).
    pub fn into_reader(mut self) -> Option<SnapshotReader> {
        self.reader.take()
    }
}

/// One collection's `--full` read (see [`scan_production`]).
struct ScanJob {
    db: String,
    coll: String,
    pace: Pace,
    patience: Patience,
    stats: Arc<ReadStats>,
    batch_size: u32,
}

/// Production's documents of one collection in `_id` order, batch by batch into `tx`
/// (an error ends it); a transient failure reopens the scan after the last `_id`
/// delivered. Gives the reader back.
async fn scan_production(
    mut reader: SnapshotReader,
    job: ScanJob,
    tx: tokio::sync::mpsc::Sender<Result<Vec<RawDocumentBuf>, RehearseError>>,
) -> SnapshotReader {
    let ScanJob {
        db,
        coll,
        pace,
        patience,
        stats,
        batch_size,
    } = job;
    let what = format!("reading `{db}.{coll}`");
    let mut after: Option<Bson> = None;
    let mut attempt = 0u32;
    'scan: loop {
        pace.wait().await;
        let mut scan = match reader.scan(&db, &coll, after.as_ref(), batch_size).await {
            Ok(s) => s,
            Err(e) => {
                attempt += 1;
                if let Err(err) = patience.after(e, attempt, &what).await {
                    let _ = tx.send(Err(err)).await;
                    break 'scan;
                }
                continue 'scan;
            }
        };
        loop {
            let batch = match reader.next_batch(&mut scan).await {
                None => break 'scan,
                Some(Ok(b)) => b,
                Some(Err(e)) => {
                    attempt += 1;
                    if let Err(err) = patience.after(e, attempt, &what).await {
                        let _ = tx.send(Err(err)).await;
                        break 'scan;
                    }
                    // Reopened after the last _id delivered.
                    continue 'scan;
                }
            };
            attempt = 0;
            let mut docs = Vec::new();
            let mut bytes = 0u64;
            let slices = match batch.doc_slices() {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx
                        .send(Err(read_error(
                            DriverError::new(&e, |t| t.to_string()),
                            &what,
                            &patience.target,
                            patience.at,
                            patience.window_secs,
                        )))
                        .await;
                    break 'scan;
                }
            };
            for d in slices.into_iter().flatten() {
                if let Some(doc) = d.as_document() {
                    bytes += doc.as_bytes().len() as u64;
                    docs.push(doc.to_owned());
                }
            }
            if let Some(last) = docs.last() {
                after = id_of(last).and_then(|v| Bson::try_from(v).ok());
            }
            stats.add(1, docs.len() as u64, bytes);
            if tx.send(Ok(docs)).await.is_err() {
                break 'scan;
            }
            pace.wait().await;
        }
    }
    reader
}

/// An `_id` value as a key.
fn key_of(id: &Bson) -> Option<IdKey> {
    let d = RawDocumentBuf::from_document(&bson::doc! {"_id": id.clone()}).ok()?;
    IdKey::from_document_id(&d).ok()
}

/// Production's documents as the reading task delivers them.
struct Incoming {
    rx: tokio::sync::mpsc::Receiver<Result<Vec<RawDocumentBuf>, RehearseError>>,
    pending: VecDeque<RawDocumentBuf>,
    closed: bool,
}

impl Incoming {
    /// The next document (blocking this thread, never a runtime worker), `None` at
    /// the end.
    fn next(&mut self) -> Result<Option<RawDocumentBuf>, RehearseError> {
        loop {
            if let Some(d) = self.pending.pop_front() {
                return Ok(Some(d));
            }
            if self.closed {
                return Ok(None);
            }
            match self.rx.blocking_recv() {
                None => self.closed = true,
                Some(Ok(v)) => self.pending.extend(v),
                Some(Err(e)) => {
                    self.closed = true;
                    return Err(e);
                }
            }
        }
    }
}

/// A small deterministic generator for the rebuild's sample (reproducible runs).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservoir_generator_is_deterministic_and_in_range() {
        let mut a = SplitMix(7);
        let mut b = SplitMix(7);
        for n in 1..100 {
            let x = a.below(n);
            assert_eq!(x, b.below(n));
            assert!(x < n);
        }
    }

    #[test]
    fn keys_from_values_agree_across_number_types() {
        assert_eq!(key_of(&Bson::Int32(1)), key_of(&Bson::Double(1.0)));
        assert_ne!(key_of(&Bson::Int32(1)), key_of(&Bson::String("1".into())));
    }
}
