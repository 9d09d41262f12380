//! (stand-in) An oplog that keeps being written, caps that make old entries fall
//! off, and a rollback of the newest entries: what `pitr archive` is tested against.
//!
//! - `PITR_STANDIN_OPLOG_WRITER=rate=N,epoch=T[,count=K][,pad=B]`: entry `k` (from 0)
//!   is an insert into `bench.events` with `_id: k` and a `pad` of B bytes (default
//!   64), at `ts = (T + k / N, k % N + 1)`, `wall = T s + k / N s`, and it appears in
//!   `local.oplog.rs` once the clock passes its wall time (at most K entries). The
//!   content depends only on `k` and the term, so two processes given the same
//!   knob hold the same history whenever they started: that is how two members of a
//!   replica set are played (see `members`).
//! - `PITR_STANDIN_OPLOG_MAX_ENTRIES=N`: the oplog keeps its newest N entries; older
//!   ones fall off as new ones come (a capped collection, counted in entries rather
//!   than bytes). A tailable cursor whose position fell off fails its next `getMore`
//!   with 136 `CappedPositionLost`, as on a real server.
//! - fault `rollback-after-getmores=N`: the (N+1)th `getMore` on `local.oplog.rs`
//!   plays a rollback after a failover: the term goes up, the newest 5 entries are
//!   replaced by the first 3 of them rewritten with the new term `t` (so 3 entries
//!   differ and 2 are gone), every tailable cursor on the oplog is killed and the
//!   `getMore` fails with 11602 `InterruptedDueToReplStateChange`. The writer goes on
//!   with the new term; without a writer, the new primary writes one no-op
//!   (`{op: "n", o: {msg: "new primary"}}`) one second after the newest entry it
//!   had, as a real one does on stepping up (mongo
//!   `src/mongo/db/repl/replication_coordinator_external_state_impl.cpp`). Once per
//!   process.

use bson::{doc, Bson, Document, Timestamp};

use super::state::{CmdError, State};

/// The writer's settings and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writer {
    pub rate: u64,
    pub epoch: u32,
    pub count: Option<u64>,
    pub pad: usize,
    /// The next entry to write.
    pub next: u64,
}

impl Writer {
    /// Parses the knob's value.
    pub fn parse(v: &str) -> Result<Writer, String> {
        let mut w = Writer {
            rate: 0,
            epoch: 0,
            count: None,
            pad: 64,
            next: 0,
        };
        for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, val) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not key=value"))?;
            let n: u64 = val.parse().map_err(|e| format!("`{part}`: {e}"))?;
            match k {
                "rate" => w.rate = n,
                "epoch" => w.epoch = u32::try_from(n).map_err(|e| format!("`{part}`: {e}"))?,
                "count" => w.count = Some(n),
                "pad" => w.pad = n as usize,
                _ => return Err(format!("unknown setting `{k}` (rate, epoch, count, pad)")),
            }
        }
        if w.rate == 0 || w.rate > u32::MAX as u64 || w.epoch == 0 {
            return Err("needs rate=N (1 or more) and epoch=T (unix seconds)".into());
        }
        Ok(w)
    }

    /// How many entries exist at `now_ms` (entry k appears at its wall time).
    pub fn due(&self, now_ms: i64) -> u64 {
        let start = self.epoch as i64 * 1000;
        if now_ms < start {
            return 0;
        }
        let n = ((now_ms - start) as u128 * self.rate as u128 / 1000) as u64 + 1;
        self.count.map_or(n, |c| n.min(c))
    }

    pub fn ts(&self, k: u64) -> Timestamp {
        Timestamp {
            time: self.epoch + (k / self.rate) as u32,
            increment: (k % self.rate) as u32 + 1,
        }
    }

    /// Entry `k` written in `term`.
    pub fn entry(&self, k: u64, term: i64) -> Document {
        let wall_ms = self.epoch as i64 * 1000 + (k as u128 * 1000 / self.rate as u128) as i64;
        doc! {
            "op": "i",
            "ns": "bench.events",
            "ui": bson::Binary::from_uuid(bson::Uuid::from_bytes([7; 16])),
            "o": {"_id": k as i64, "pad": "x".repeat(self.pad)},
            "ts": self.ts(k),
            "t": term,
            "v": 2i64,
            "wall": bson::DateTime::from_millis(wall_ms),
        }
    }
}

/// Parses `PITR_STANDIN_OPLOG_MAX_ENTRIES`.
pub fn parse_max_entries(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{v}` is not a number of entries (1 or more)")),
    }
}

/// Writes the entries due by now, then applies the cap. Called before every command.
pub fn tick(st: &mut State) {
    if let Some(mut w) = st.writer.take() {
        let due = w.due(crate::logline::now_millis());
        if due > w.next {
            st.ensure_oplog();
            let term = st.term;
            let oplog = st.store.get_mut("local", "oplog.rs").expect("created");
            for k in w.next..due {
                let _ = oplog.insert(w.entry(k, term));
            }
            st.last_ts = w.ts(due - 1);
            w.next = due;
        }
        st.writer = Some(w);
    }
    cap(st);
}

/// Drops the oldest entries beyond `PITR_STANDIN_OPLOG_MAX_ENTRIES`.
pub fn cap(st: &mut State) {
    let Some(max) = st.oplog_max_entries else {
        return;
    };
    if let Some(oplog) = st.store.get_mut("local", "oplog.rs") {
        while oplog.len() > max {
            if oplog.pop_oldest().is_none() {
                break;
            }
        }
    }
}

fn ts_of(d: &Document) -> Option<Timestamp> {
    match d.get("ts") {
        Some(Bson::Timestamp(t)) => Some(*t),
        _ => None,
    }
}

/// The `rollback-after-getmores` fault (see the module comment).
pub fn rollback(st: &mut State) -> CmdError {
    st.term += 1;
    let term = st.term;
    let mut rewritten = 0;
    // The newest entry before the rollback: the new primary's no-op comes after it.
    let newest_before = st
        .store
        .get("local", "oplog.rs")
        .and_then(|o| o.iter().last().and_then(|(_, d)| ts_of(&d)));
    if let Some(oplog) = st.store.get_mut("local", "oplog.rs") {
        let newest: Vec<u64> = {
            let all: Vec<u64> = oplog.iter().map(|(r, _)| r).collect();
            all[all.len().saturating_sub(5)..].to_vec()
        };
        let mut removed: Vec<Document> = newest.iter().filter_map(|r| oplog.remove(*r)).collect();
        removed.truncate(3);
        for mut d in removed {
            d.insert("t", term);
            let _ = oplog.insert(d);
            rewritten += 1;
        }
    }
    let last = st
        .store
        .get("local", "oplog.rs")
        .and_then(|o| o.iter().last().and_then(|(_, d)| ts_of(&d)));
    if let Some(l) = last {
        st.last_ts = l;
    }
    if st.writer.is_none() {
        if let (Some(l), Some(oplog)) = (newest_before, st.store.get_mut("local", "oplog.rs")) {
            let ts = Timestamp {
                time: l.time + 1,
                increment: 1,
            };
            let _ = oplog.insert(doc! {
                "op": "n", "ns": "", "o": {"msg": "new primary"},
                "ts": ts, "t": term, "v": 2i64,
                "wall": bson::DateTime::from_millis(ts.time as i64 * 1000),
            });
            st.last_ts = ts;
        }
    }
    st.cursors.retain(|_, c| {
        !(c.db == "local"
            && c.coll == "oplog.rs"
            && matches!(c.kind, super::state::CursorKind::Tailable { .. }))
    });
    st.logger.info(
        "REPL",
        21607,
        "conn",
        "Stand-in fault: rollback of the newest oplog entries",
        serde_json::json!({"term": term, "rewritten": rewritten, "removed": 5 - rewritten}),
    );
    CmdError::new(
        11602,
        "InterruptedDueToReplStateChange",
        "operation was interrupted because of a replication state change (stand-in rollback)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_schedules() {
        let w = Writer::parse("rate=1000,epoch=1800000000,count=5000,pad=10").unwrap();
        assert_eq!(
            (w.rate, w.epoch, w.count, w.pad),
            (1000, 1800000000, Some(5000), 10)
        );
        assert_eq!(w.due(1_799_999_999_999), 0);
        assert_eq!(w.due(1_800_000_000_000), 1);
        assert_eq!(w.due(1_800_000_001_000), 1001);
        assert_eq!(w.due(1_900_000_000_000), 5000);
        assert_eq!(
            w.ts(0),
            Timestamp {
                time: 1800000000,
                increment: 1
            }
        );
        assert_eq!(
            w.ts(1999),
            Timestamp {
                time: 1800000001,
                increment: 1000
            }
        );
        // Same k, same term: same bytes; another term: different bytes.
        let a = bson::to_vec(&w.entry(7, 1)).unwrap();
        assert_eq!(a, bson::to_vec(&w.entry(7, 1)).unwrap());
        assert_ne!(a, bson::to_vec(&w.entry(7, 2)).unwrap());
        assert!(Writer::parse("rate=0,epoch=1").is_err());
        assert!(Writer::parse("rate=10").is_err());
        assert!(Writer::parse("rate=10,epoch=1,speed=2").is_err());
    }
}
