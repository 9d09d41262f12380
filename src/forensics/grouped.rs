//! Findings made from what the scanner accumulated: bursts, and routine operations
//! grouped per namespace and cause (a reporting job refreshing `reports.daily` every
//! five minutes is one `info` finding, not 288).

use crate::oplog::Ts;

use super::burst::Burst;
use super::catalog::Ttl;
use super::finding::{Finding, Kind};
use super::namespaces::timeseries_view;
use super::routine::{Routine, TTL_CHANGE_CAVEAT_SECS};

/// The TTL that made deletes of one namespace routine from `from` on, and whether a
/// change to it seen in this oplog may have caused a mass expiry (`fresh`: the
/// collection was created just before its TTL, so nothing older was there to expire).
pub(crate) struct TtlEra {
    pub from: Ts,
    pub ttl: Ttl,
    pub fresh: bool,
}

/// `$out`/`mapReduce` replacements of one target.
pub(crate) struct OutGroup {
    pub first: Ts,
    pub first_wall_ms: Option<i64>,
    pub last: Ts,
    pub count: u64,
    /// Documents the target had at the first replacement.
    pub num_records: Option<i64>,
    pub what: &'static str,
    /// The temporary collection was created with `temp: true` in this oplog.
    pub temp_flag: bool,
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A delete or wiping-update burst that is not routine. Deletes of time-series
/// buckets are reported under the time-series collection's name and counted as
/// buckets (each holds many measurements).
pub(crate) fn burst_finding(kind: Kind, b: &Burst) -> Finding {
    let view = timeseries_view(&b.ns);
    let mut f = Finding::new(
        kind,
        view.clone().unwrap_or_else(|| b.ns.clone()),
        b.first,
        b.first_wall_ms,
    );
    f.last_ts = b.last;
    f.count = b.count;
    f.in_transaction = b.in_transaction;
    let what = match (kind, &view) {
        (Kind::DeleteBurst, Some(_)) => "buckets deleted",
        (Kind::DeleteBurst, None) => "deletes",
        _ => "content-wiping updates",
    };
    let span = match b.last.t - b.first.t {
        0 => "within one second".to_string(),
        1 => "in 1 second".to_string(),
        n => format!("in {n} seconds"),
    };
    f.details = format!("{} {what} {span}", b.count);
    if let Some(view) = view {
        f.details.push_str(&format!(
            " (time-series collection {view}: each bucket holds many measurements)"
        ));
    }
    if b.in_transaction {
        f.details.push_str(", applied by a committed transaction");
    }
    f
}

/// TTL expiry bursts, one finding per namespace and TTL (a TTL changed by `collMod`
/// starts a new finding), with a caveat when the TTL was created or lowered in this
/// oplog shortly before the expiry began.
pub(crate) fn ttl_findings(
    bursts: Vec<Burst>,
    eras: &super::FastMap<String, Vec<TtlEra>>,
) -> Vec<Finding> {
    // Bursts come sorted by first ts; group per (ns, era).
    let mut groups: Vec<(String, usize, Vec<Burst>)> = Vec::new();
    for b in bursts {
        let era = eras.get(&b.ns).map_or(0, |v| {
            v.iter().rposition(|e| e.from <= b.first).unwrap_or(0)
        });
        match groups
            .iter_mut()
            .rev()
            .find(|(ns, _, _)| *ns == b.ns)
            .filter(|(_, e, _)| *e == era)
        {
            Some((_, _, v)) => v.push(b),
            None => groups.push((b.ns.clone(), era, vec![b])),
        }
    }
    groups
        .into_iter()
        .map(|(ns, era, bs)| {
            let era = eras.get(&ns).and_then(|v| v.get(era));
            ttl_group(&ns, era, &bs)
        })
        .collect()
}

fn ttl_group(ns: &str, era: Option<&TtlEra>, bs: &[Burst]) -> Finding {
    let (first, last) = (&bs[0], &bs[bs.len() - 1]);
    let view = timeseries_view(ns);
    let routine = if view.is_some() {
        Routine::TimeseriesExpiry
    } else {
        Routine::TtlExpiry
    };
    let mut f = Finding::new(
        Kind::DeleteBurst,
        view.clone().unwrap_or_else(|| ns.to_string()),
        first.first,
        first.first_wall_ms,
    );
    f.make_routine(routine);
    f.last_ts = last.last;
    f.count = bs.iter().map(|b| b.count).sum();
    let what = if view.is_some() {
        "buckets expired"
    } else {
        "documents expired"
    };
    f.details = format!(
        "{} {what} in {} from {} to {}",
        f.count,
        plural(bs.len() as u64, "TTL pass", "TTL passes"),
        first.first.utc_string(),
        last.last.utc_string()
    );
    if let Some(era) = era {
        f.details.push_str(&format!(" ({})", era.ttl.describe()));
    }
    f.details.push_str(&format!(": {}", routine.reason()));
    if let Some((era, ch)) = era.and_then(|e| e.ttl.change.as_ref().map(|c| (e, c))) {
        let after = first.first.t.saturating_sub(ch.ts.t);
        if !era.fresh && first.first >= ch.ts && after <= TTL_CHANGE_CAVEAT_SECS {
            f.details.push_str(&format!(
                ". CHECK: the TTL was {} at {} ({}), {} s before this expiry began: if that change \
                 was a mistake, these documents are lost; to restore to just before it use --until {}",
                ch.how,
                ch.ts,
                ch.ts.utc_string(),
                after,
                ch.ts
            ));
        }
    }
    f
}

/// Capped roll-over bursts, one finding per collection.
pub(crate) fn capped_findings(bursts: Vec<Burst>) -> Vec<Finding> {
    let mut by_ns: Vec<(String, Vec<Burst>)> = Vec::new();
    for b in bursts {
        match by_ns.iter_mut().find(|(ns, _)| *ns == b.ns) {
            Some((_, v)) => v.push(b),
            None => by_ns.push((b.ns.clone(), vec![b])),
        }
    }
    by_ns
        .into_iter()
        .map(|(ns, bs)| {
            let (first, last) = (&bs[0], &bs[bs.len() - 1]);
            let mut f = Finding::new(Kind::DeleteBurst, ns, first.first, first.first_wall_ms);
            f.make_routine(Routine::CappedRollover);
            f.last_ts = last.last;
            f.count = bs.iter().map(|b| b.count).sum();
            f.details = format!(
                "{} oldest documents rolled out of a capped collection from {} to {}: {}",
                f.count,
                first.first.utc_string(),
                last.last.utc_string(),
                Routine::CappedRollover.reason()
            );
            f
        })
        .collect()
}

/// All `$out`/`mapReduce` replacements of one target as one finding, its limit at the
/// first; a target replaced only once says that nothing else refreshes it here.
pub(crate) fn out_finding(ns: String, g: OutGroup) -> Finding {
    let mut f = Finding::new(Kind::RenameDropTarget, ns, g.first, g.first_wall_ms);
    f.make_routine(Routine::OutReplace);
    f.last_ts = g.last;
    f.count = g.count;
    f.num_records = g.num_records;
    let temp = if g.temp_flag {
        "temporary collection (temp: true)"
    } else {
        "temporary collection"
    };
    let had = g
        .num_records
        .map(|n| format!(" (it had {n} documents)"))
        .unwrap_or_default();
    f.details = if g.count > 1 {
        let every = (g.last.t - g.first.t) / (g.count as u32 - 1).max(1);
        format!(
            "replaced {} times by {}, about every {} s, from {} to {}: each time a {temp} was renamed over \
             it with dropTarget; {}",
            g.count,
            g.what,
            every,
            g.first.utc_string(),
            g.last.utc_string(),
            Routine::OutReplace.reason()
        )
    } else {
        format!(
            "replaced by {}{had}: a {temp} renamed over it with dropTarget. CHECK: it is replaced only \
             once in this oplog; if nothing refreshes it on a schedule and that $out was not meant to \
             overwrite it, its previous content is lost: restore with --until {}",
            g.what, g.first
        )
    };
    f
}
