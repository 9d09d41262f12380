//! The `PITR_STANDIN_FAULT` knobs: which failure a stand-in should act out.
//!
//! Each binary reads its own variable first (`PITR_STANDIN_MONGOD_FAULT`,
//! `PITR_STANDIN_MONGORESTORE_FAULT`, `PITR_STANDIN_MONGODUMP_FAULT`) and falls back to
//! the shared `PITR_STANDIN_FAULT`. The value is a comma-separated list. In the shared
//! variable an entry that belongs to another tool is ignored (pitr passes its whole
//! environment to every child); an entry no tool knows is an error, so a typo in a
//! test cannot silently test nothing.

use std::fmt;

/// Which stand-in is reading the knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Mongod,
    Mongorestore,
    Mongodump,
}

impl Tool {
    fn own_var(self) -> &'static str {
        match self {
            Tool::Mongod => "PITR_STANDIN_MONGOD_FAULT",
            Tool::Mongorestore => "PITR_STANDIN_MONGORESTORE_FAULT",
            Tool::Mongodump => "PITR_STANDIN_MONGODUMP_FAULT",
        }
    }
}

/// One fault. Names match the knob values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    // mongod
    ExitAtStart,
    NeverListen,
    IgnoreSigterm,
    CrashAfterMs(u64),
    SlowStartMs(u64),
    RolloverAfterGetmores(u64),
    DropConnectionAfterGetmores(u64),
    /// The (N+1)th getMore on the oplog plays a rollback of its newest entries
    /// (see `mongod/oplog_writer.rs`).
    RollbackAfterGetmores(u64),
    /// Every getMore on `local.oplog.rs` answers after N ms, as a server far away
    /// would: keeps a dump running long enough to interrupt it midway.
    SlowGetmoresMs(u64),
    /// No `hello` command (servers before 4.4.2): CommandNotFound, only `isMaster`.
    NoHello,
    /// For N ms after start, range reads of `local.oplog.rs` (a `find` with a
    /// filter) miss the newest 5 entries, as a lagging secondary would, while the
    /// newest-entry query sees them.
    LaggingReadsMs(u64),
    /// After N snapshot reads, the server drops the history older than its newest
    /// point (as WiredTiger may under cache pressure): reads as of an older time
    /// answer 239 SnapshotTooOld.
    HistoryLostAfterReads(u64),
    /// Snapshot reads number `first` to `first + count - 1` (1-based: `find` and
    /// `aggregate` with `readConcern: {level: "snapshot"}`, `getMore` on their
    /// cursors) fail with server error `code`; code 0 closes the connection without
    /// a reply.
    FailSnapshotReads {
        first: u64,
        count: u64,
        code: i32,
    },
    // mongorestore / mongodump
    FailMidway,
    Hang,
    Crash,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::ExitAtStart => write!(f, "exit-at-start"),
            Fault::NeverListen => write!(f, "never-listen"),
            Fault::IgnoreSigterm => write!(f, "ignore-sigterm"),
            Fault::CrashAfterMs(n) => write!(f, "crash-after-ms={n}"),
            Fault::SlowStartMs(n) => write!(f, "slow-start-ms={n}"),
            Fault::RolloverAfterGetmores(n) => write!(f, "rollover-after-getmores={n}"),
            Fault::DropConnectionAfterGetmores(n) => {
                write!(f, "drop-connection-after-getmores={n}")
            }
            Fault::RollbackAfterGetmores(n) => write!(f, "rollback-after-getmores={n}"),
            Fault::NoHello => write!(f, "no-hello"),
            Fault::LaggingReadsMs(n) => write!(f, "lagging-reads-ms={n}"),
            Fault::SlowGetmoresMs(n) => write!(f, "slow-getmores-ms={n}"),
            Fault::HistoryLostAfterReads(n) => write!(f, "history-lost-after-reads={n}"),
            Fault::FailSnapshotReads { first, count, code } => {
                write!(f, "fail-snapshot-reads={first}:{count}:{code}")
            }
            Fault::FailMidway => write!(f, "fail-midway"),
            Fault::Hang => write!(f, "hang"),
            Fault::Crash => write!(f, "crash"),
        }
    }
}

fn parse_one(entry: &str) -> Result<Fault, String> {
    let (name, value) = match entry.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (entry.trim(), None),
    };
    let number = || -> Result<u64, String> {
        value
            .ok_or_else(|| format!("`{name}` needs a value: `{name}=N`"))?
            .parse::<u64>()
            .map_err(|e| format!("`{entry}`: {e}"))
    };
    let no_value = |f: Fault| -> Result<Fault, String> {
        match value {
            None => Ok(f),
            Some(_) => Err(format!("`{name}` takes no value")),
        }
    };
    match name {
        "exit-at-start" => no_value(Fault::ExitAtStart),
        "never-listen" => no_value(Fault::NeverListen),
        "ignore-sigterm" => no_value(Fault::IgnoreSigterm),
        "crash-after-ms" => Ok(Fault::CrashAfterMs(number()?)),
        "slow-start-ms" => Ok(Fault::SlowStartMs(number()?)),
        "rollover-after-getmores" => Ok(Fault::RolloverAfterGetmores(number()?)),
        "drop-connection-after-getmores" => Ok(Fault::DropConnectionAfterGetmores(number()?)),
        "rollback-after-getmores" => Ok(Fault::RollbackAfterGetmores(number()?)),
        "no-hello" => no_value(Fault::NoHello),
        "lagging-reads-ms" => Ok(Fault::LaggingReadsMs(number()?)),
        "slow-getmores-ms" => Ok(Fault::SlowGetmoresMs(number()?)),
        "history-lost-after-reads" => Ok(Fault::HistoryLostAfterReads(number()?)),
        "fail-snapshot-reads" => parse_fail_snapshot_reads(entry, value),
        "fail-midway" => no_value(Fault::FailMidway),
        "hang" => no_value(Fault::Hang),
        "crash" => no_value(Fault::Crash),
        _ => Err(format!("unknown fault `{entry}`")),
    }
}

/// The server errors `fail-snapshot-reads` can answer (0: the connection closes), with the
/// code name and message a server gives (`src/mongo/base/error_codes.yml`).
pub const READ_ERRORS: &[(i32, &str, &str)] = &[
    (0, "", "(the connection closes without a reply)"),
    (
        11602,
        "InterruptedDueToReplStateChange",
        "operation was interrupted because a replica set state change occurred",
    ),
    (
        91,
        "ShutdownInProgress",
        "The server is in quiesce mode and will shut down",
    ),
    (43, "CursorNotFound", "cursor id not found"),
    (13, "Unauthorized", "not authorized to execute command"),
    (2, "BadValue", "injected BadValue"),
];

fn parse_fail_snapshot_reads(entry: &str, value: Option<&str>) -> Result<Fault, String> {
    let v = value.ok_or_else(|| {
        "`fail-snapshot-reads` needs a value: `fail-snapshot-reads=N:K:CODE`".to_string()
    })?;
    let parts: Vec<&str> = v.split(':').collect();
    let [first, count, code] = parts[..] else {
        return Err(format!("`{entry}`: want `fail-snapshot-reads=N:K:CODE`"));
    };
    let n = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("`{entry}`: {e}"))
    };
    let (first, count) = (n(first)?, n(count)?);
    let code: i32 = code.trim().parse().map_err(|e| format!("`{entry}`: {e}"))?;
    if first == 0 || count == 0 {
        return Err(format!("`{entry}`: N and K count from 1"));
    }
    if !READ_ERRORS.iter().any(|(c, _, _)| *c == code) {
        let known: Vec<String> = READ_ERRORS.iter().map(|(c, _, _)| c.to_string()).collect();
        return Err(format!(
            "`{entry}`: code {code} is not one of {}",
            known.join(", ")
        ));
    }
    Ok(Fault::FailSnapshotReads { first, count, code })
}

fn applies_to(fault: &Fault, tool: Tool) -> bool {
    use Fault::*;
    match fault {
        IgnoreSigterm => true,
        ExitAtStart
        | NeverListen
        | CrashAfterMs(_)
        | SlowStartMs(_)
        | RolloverAfterGetmores(_)
        | DropConnectionAfterGetmores(_)
        | RollbackAfterGetmores(_)
        | NoHello
        | LaggingReadsMs(_)
        | SlowGetmoresMs(_)
        | HistoryLostAfterReads(_)
        | FailSnapshotReads { .. } => tool == Tool::Mongod,
        FailMidway | Hang | Crash => tool != Tool::Mongod,
    }
}

/// Parse a knob value for `tool`. `shared` is true for `PITR_STANDIN_FAULT`, where
/// other tools' entries are skipped instead of refused.
pub fn parse(value: &str, tool: Tool, shared: bool) -> Result<Vec<Fault>, String> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let fault = parse_one(entry)?;
        if applies_to(&fault, tool) {
            out.push(fault);
        } else if !shared {
            return Err(format!("fault `{entry}` does not apply to {tool:?}"));
        }
    }
    Ok(out)
}

/// The faults this tool should act out, from the environment.
pub fn from_env(tool: Tool) -> Result<Vec<Fault>, String> {
    if let Ok(v) = std::env::var(tool.own_var()) {
        return parse(&v, tool, false).map_err(|e| format!("{}: {e}", tool.own_var()));
    }
    match std::env::var("PITR_STANDIN_FAULT") {
        Ok(v) => parse(&v, tool, true).map_err(|e| format!("PITR_STANDIN_FAULT: {e}")),
        Err(_) => Ok(Vec::new()),
    }
}

/// Set of faults with lookups.
#[derive(Clone, Debug, Default)]
pub struct Faults(pub Vec<Fault>);

impl Faults {
    pub fn has(&self, f: &Fault) -> bool {
        self.0.contains(f)
    }
    pub fn crash_after_ms(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::CrashAfterMs(n) => Some(*n),
            _ => None,
        })
    }
    pub fn history_lost_after_reads(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::HistoryLostAfterReads(n) => Some(*n),
            _ => None,
        })
    }

    /// `fail-snapshot-reads`: the `(first, count, code)`.
    pub fn fail_snapshot_reads(&self) -> Option<(u64, u64, i32)> {
        self.0.iter().find_map(|f| match f {
            Fault::FailSnapshotReads { first, count, code } => Some((*first, *count, *code)),
            _ => None,
        })
    }

    pub fn lagging_reads_ms(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::LaggingReadsMs(n) => Some(*n),
            _ => None,
        })
    }

    pub fn slow_getmores_ms(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::SlowGetmoresMs(n) => Some(*n),
            _ => None,
        })
    }

    pub fn slow_start_ms(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::SlowStartMs(n) => Some(*n),
            _ => None,
        })
    }
    pub fn rollover_after(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::RolloverAfterGetmores(n) => Some(*n),
            _ => None,
        })
    }
    pub fn rollback_after(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::RollbackAfterGetmores(n) => Some(*n),
            _ => None,
        })
    }
    pub fn drop_connection_after(&self) -> Option<u64> {
        self.0.iter().find_map(|f| match f {
            Fault::DropConnectionAfterGetmores(n) => Some(*n),
            _ => None,
        })
    }
}

/// Ignore SIGTERM and SIGINT for the rest of the process (the `ignore-sigterm` knob of
/// the tools, which have no async runtime watching signals).
pub fn ignore_termination_signals() {
    // SAFETY: installing SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
}

/// Sleep until killed.
pub fn hang_forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_variable_skips_other_tools_entries() {
        let f = parse("fail-midway,never-listen", Tool::Mongod, true).unwrap();
        assert_eq!(f, vec![Fault::NeverListen]);
        let f = parse("fail-midway,never-listen", Tool::Mongorestore, true).unwrap();
        assert_eq!(f, vec![Fault::FailMidway]);
    }

    #[test]
    fn own_variable_refuses_other_tools_entries_and_typos() {
        assert!(parse("fail-midway", Tool::Mongod, false).is_err());
        assert!(parse("nevr-listen", Tool::Mongod, true).is_err());
        assert!(parse("crash-after-ms", Tool::Mongod, true).is_err());
        assert_eq!(
            parse(" crash-after-ms=250 ", Tool::Mongod, false).unwrap(),
            vec![Fault::CrashAfterMs(250)]
        );
        assert_eq!(
            parse("slow-getmores-ms=300", Tool::Mongod, false).unwrap(),
            vec![Fault::SlowGetmoresMs(300)]
        );
        assert_eq!(
            Fault::SlowGetmoresMs(300).to_string(),
            "slow-getmores-ms=300"
        );
    }

    #[test]
    fn fail_snapshot_reads_takes_first_count_and_a_known_code() {
        assert_eq!(
            parse("fail-snapshot-reads=3:2:11602", Tool::Mongod, false).unwrap(),
            vec![Fault::FailSnapshotReads {
                first: 3,
                count: 2,
                code: 11602
            }]
        );
        for bad in [
            "fail-snapshot-reads",
            "fail-snapshot-reads=3:2",
            "fail-snapshot-reads=0:1:0",
            "fail-snapshot-reads=1:1:12345",
        ] {
            assert!(parse(bad, Tool::Mongod, false).is_err(), "{bad}");
        }
        let shown = Fault::FailSnapshotReads {
            first: 1,
            count: 2,
            code: 0,
        }
        .to_string();
        assert_eq!(parse(&shown, Tool::Mongod, false).unwrap().len(), 1);
    }
}
