//! Handing the restored data over: ready-to-paste `mongorestore` commands for what
//! the incident touched, not "restore everything" (which rolls every namespace
//! back to the limit and loses every later write on them).
//!
//! mongorestore selects namespaces with `--nsInclude` and renames them with
//! `--nsFrom`/`--nsTo` (mongo-tools `mongorestore/options.go`: the patterns take `*`
//! wildcards, and `--nsFrom`/`--nsTo` pair up in order). A time-series collection is
//! named by its own name, not its buckets (mongorestore maps `system.buckets.X`
//! itself).

use serde::Serialize;

use crate::forensics::namespaces::timeseries_view;
use crate::plan::steps::shell_line;
use crate::plan::until::FindingRef;

/// One command, with what it does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HandoverCommand {
    pub what: String,
    pub command: String,
}

/// How the dump at `out` was written.
#[derive(Clone, Copy, Debug)]
pub struct DumpForm {
    pub archive: bool,
    pub gzip: bool,
}

/// The namespaces an incident touched, as mongorestore patterns: a collection's
/// name, or `db.*` for a dropped database.
pub fn affected(f: &FindingRef) -> Vec<String> {
    match f.kind.as_str() {
        "dropDatabase" => vec![format!("{}.*", f.ns)],
        _ => vec![timeseries_view(&f.ns).unwrap_or_else(|| f.ns.clone())],
    }
}

/// `shop.orders` -> `shop.orders_restored`; `analytics.*` -> `analytics_restored.*`.
fn renamed(pattern: &str) -> String {
    match pattern.strip_suffix(".*") {
        Some(db) => format!("{db}_restored.*"),
        None => format!("{pattern}_restored"),
    }
}

fn base(out: &str, form: DumpForm) -> Vec<String> {
    let mut v = vec!["mongorestore".to_string()];
    if form.gzip {
        v.push("--gzip".into());
    }
    if form.archive {
        v.push(format!("--archive={out}"));
    }
    v
}

fn finish(mut v: Vec<String>, out: &str, form: DumpForm) -> String {
    if !form.archive {
        v.push(out.to_string());
    }
    shell_line(&v)
}

/// The commands for the dump at `out`: each affected namespace back under its own
/// name and beside the live one under a new name; with none, the whole dump.
pub fn commands(out: &str, form: DumpForm, affected: &[String]) -> Vec<HandoverCommand> {
    let mut cmds = Vec::new();
    for ns in affected {
        let mut v = base(out, form);
        v.push(format!("--nsInclude={ns}"));
        cmds.push(HandoverCommand {
            what: format!("{ns} under its own name (into a server where it is absent)"),
            command: finish(v, out, form),
        });
        let to = renamed(ns);
        let mut v = base(out, form);
        v.push(format!("--nsInclude={ns}"));
        v.push(format!("--nsFrom={ns}"));
        v.push(format!("--nsTo={to}"));
        cmds.push(HandoverCommand {
            what: format!("{ns} beside the live data, as {to}"),
            command: finish(v, out, form),
        });
    }
    if affected.is_empty() {
        cmds.push(HandoverCommand {
            what: "every namespace in the dump (collections that exist on the target keep their documents; \
                   --drop would replace them, losing their writes after the limit)"
                .into(),
            command: finish(base(out, form), out, form),
        });
    }
    cmds
}

/// The text lines of the handover (a heading, then each command under what it does).
pub fn text_lines(out: &str, cmds: &[HandoverCommand]) -> Vec<String> {
    let mut v = vec![format!(
        "Hand over the dump in {out} with mongorestore (add the target's connection, e.g. --uri; it defaults to localhost:27017):"
    )];
    for c in cmds {
        v.push(format!("  # {}", c.what));
        v.push(format!("  {}", c.command));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(kind: &str, ns: &str) -> FindingRef {
        FindingRef {
            kind: kind.into(),
            severity: "critical".into(),
            ns: ns.into(),
            ts: crate::oplog::Ts::new(1, 1),
            oplog_limit: crate::oplog::Ts::new(1, 1),
            num_records: None,
            collections: vec![],
            details: String::new(),
            last_ts: None,
            count: 1,
        }
    }

    #[test]
    fn affected_namespaces_and_commands() {
        assert_eq!(affected(&finding("drop", "shop.orders")), ["shop.orders"]);
        assert_eq!(
            affected(&finding("dropDatabase", "analytics")),
            ["analytics.*"]
        );
        assert_eq!(
            affected(&finding("deleteBurst", "metrics.system.buckets.cpu")),
            ["metrics.cpu"]
        );
        let dir = DumpForm {
            archive: false,
            gzip: false,
        };
        let c = commands("/r/out", dir, &["shop.orders".into()]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].command, "mongorestore --nsInclude=shop.orders /r/out");
        assert_eq!(
            c[1].command,
            "mongorestore --nsInclude=shop.orders --nsFrom=shop.orders --nsTo=shop.orders_restored /r/out"
        );
        let c = commands(
            "/r/out.archive",
            DumpForm {
                archive: true,
                gzip: true,
            },
            &["analytics.*".into()],
        );
        assert_eq!(
            c[1].command,
            "mongorestore --gzip --archive=/r/out.archive '--nsInclude=analytics.*' '--nsFrom=analytics.*' '--nsTo=analytics_restored.*'"
        );
        let c = commands("/r/my out", dir, &[]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].command, "mongorestore '/r/my out'");
    }
}
