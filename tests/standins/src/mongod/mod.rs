//! The stand-in `mongod`: a MongoDB server (6.0, 7.0 or 8.0 as `PITR_STANDIN_VERSION`
//! says, 7.0.14 by default) in one process, in memory.
//!
//! Start-up follows the real one's contract where pitr depends on it: option
//! parsing errors exit 2, a missing `--dbpath` exits 100 ("Data directory ... not
//! found"), a port in use exits 48, `mongod.lock` holds the pid while running (emptied at exit),
//! SIGTERM/SIGINT shut down cleanly (exit 0), the JSON log says "Waiting for
//! connections" when it listens. Stand-in additions: `--port` is required, only
//! loopback `--bind_ip` is accepted, and `DBPATH/standin-argv.json` records argv.

pub mod applyops;
pub mod args;
pub mod authz;
pub mod commands;
pub mod dbhash;
pub mod insert_rules;
pub mod log;
pub mod members;
pub mod oplog_writer;
pub mod persist;
pub mod router;
pub mod server;
pub mod snapshot;
pub mod state;
pub mod store;
pub mod version;
pub mod views;
pub mod wire;
pub mod writes;

use crate::faults::{self, Fault, Faults, Tool};
use args::MongodArgs;
use log::Logger;
use serde_json::json;
use state::{Mode, State};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entry point of the `mongod` binary.
pub fn main() -> ! {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(run(argv))
}

fn print_version(v: version::ServerVersion) {
    println!("db version v{v}");
    let info = serde_json::to_string_pretty(&json!({
        "version": v.to_string(),
        "gitVersion": "ce59cfc6a3c5e5c067dca0d30697edd68d4f5188",
        "openSSLVersion": "OpenSSL 3.0.2 15 Mar 2022",
        "modules": [],
        "allocator": "tcmalloc",
        "environment": {"distmod": "ubuntu2204", "distarch": "x86_64", "target_arch": "x86_64"}
    }))
    .expect("json");
    // serde_json indents by two spaces; mongod by four.
    let info: Vec<String> = info
        .lines()
        .map(|l| {
            let n = l.len() - l.trim_start().len();
            format!("{}{}", " ".repeat(n * 2), l.trim_start())
        })
        .collect();
    println!("Build Info: {}", info.join("\n"));
    // After the real layout: pitr's binary lookup reads this marker so that no
    // report presents a stand-in run as a real-server result.
    println!("(pitr stand-in mongod: a test double, not MongoDB)");
}

fn is_loopback(ip: &str) -> bool {
    ip == "localhost" || ip == "::1" || ip.starts_with("127.")
}

fn param_value(v: &str) -> bson::Bson {
    match v {
        "true" => bson::Bson::Boolean(true),
        "false" => bson::Bson::Boolean(false),
        _ => match v.parse::<i64>() {
            Ok(i) if i32::try_from(i).is_ok() => bson::Bson::Int32(i as i32),
            Ok(i) => bson::Bson::Int64(i),
            Err(_) => bson::Bson::String(v.to_string()),
        },
    }
}

struct Setup {
    args: MongodArgs,
    port: u16,
    bind_ips: Vec<String>,
    dbpath: PathBuf,
    mode: Mode,
    set_name: String,
    faults: Faults,
    version: version::ServerVersion,
}

fn usage_error(msg: &str) -> i32 {
    eprintln!("{msg}");
    2
}

fn setup(argv: Vec<String>) -> Result<Setup, i32> {
    let args = match args::parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("Error parsing command line: {e}");
            eprintln!("try 'mongod --help' for more information");
            return Err(2);
        }
    };
    if args.flag("help") {
        println!("Options:\n  --port arg, --bind_ip arg, --dbpath arg, --logpath arg, --logappend,\n  --setParameter arg, --replSet arg, --nounixsocket, --quiet, --version\n(pitr stand-in mongod; see tests/standins/README.md)");
        return Err(0);
    }
    let version = match version::ServerVersion::from_env() {
        Ok(v) => v,
        Err(e) => return Err(usage_error(&format!("pitr stand-in mongod: {e}"))),
    };
    if args.flag("version") {
        print_version(version);
        return Err(0);
    }
    if args.value("config").is_some() {
        return Err(usage_error(
            "pitr stand-in mongod: --config is not implemented; pass options on the command line",
        ));
    }
    if args.flag("fork") {
        return Err(usage_error(
            "pitr stand-in mongod: refusing --fork: pitr must supervise mongod in the foreground",
        ));
    }
    let Some(port) = args.value("port").and_then(|p| p.parse::<u16>().ok()) else {
        return Err(usage_error(
            "pitr stand-in mongod: --port is required (the stand-in never uses the default 27017)",
        ));
    };
    let allow_any = args.flag("standin-allow-any-bind");
    let requested: Vec<String> = match (args.value("bind_ip"), args.flag("bind_ip_all")) {
        (_, true) if !allow_any => {
            return Err(usage_error("pitr stand-in mongod: refusing --bind_ip_all: only loopback addresses are allowed (pass --standin-allow-any-bind to allow)"))
        }
        (_, true) => vec!["0.0.0.0".into()],
        (Some(list), false) => list.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        (None, false) => vec!["127.0.0.1".into()],
    };
    for ip in &requested {
        if !is_loopback(ip) && !allow_any {
            return Err(usage_error(&format!(
                "pitr stand-in mongod: refusing --bind_ip {ip}: only loopback addresses are allowed (pass --standin-allow-any-bind to allow)"
            )));
        }
    }
    // Even when allowed, only loopback addresses are actually bound.
    let mut bind_ips: Vec<String> = requested
        .iter()
        .filter(|ip| is_loopback(ip))
        .cloned()
        .collect();
    if bind_ips.is_empty() {
        bind_ips.push("127.0.0.1".into());
    }
    let faults = match faults::from_env(Tool::Mongod) {
        Ok(f) => Faults(f),
        Err(e) => return Err(usage_error(&format!("pitr stand-in mongod: {e}"))),
    };
    let env_mode = std::env::var("PITR_STANDIN_MODE").ok();
    let mut mode = match env_mode.as_deref() {
        None | Some("") | Some("standalone") => Mode::Standalone,
        Some("replset") => Mode::Replset,
        Some("mongos") => Mode::Mongos,
        Some("auth") => Mode::Auth,
        Some(other) => {
            return Err(usage_error(&format!(
                "pitr stand-in mongod: PITR_STANDIN_MODE=`{other}` is not one of standalone, replset, mongos, auth"
            )))
        }
    };
    if args.value("replSet").is_some() && mode == Mode::Standalone {
        mode = Mode::Replset;
    }
    if args.flag("auth") && mode == Mode::Standalone {
        mode = Mode::Auth;
    }
    let set_name = args
        .value("replSet")
        .map(|s| s.split('/').next().unwrap_or(s).to_string())
        .unwrap_or_else(|| "rs0".into());
    let dbpath = PathBuf::from(args.value("dbpath").unwrap_or("/data/db"));
    Ok(Setup {
        args,
        port,
        bind_ips,
        dbpath,
        mode,
        set_name,
        faults,
        version,
    })
}

fn parsed_options(s: &Setup) -> bson::Document {
    let mut net = bson::doc! {"port": s.port as i32};
    if let Some(b) = s.args.value("bind_ip") {
        net.insert("bindIp", b);
    }
    let mut d =
        bson::doc! {"net": net, "storage": {"dbPath": s.dbpath.to_string_lossy().to_string()}};
    if let Some(p) = s.args.value("logpath") {
        d.insert("systemLog", bson::doc! {"destination": "file", "path": p, "logAppend": s.args.flag("logappend"), "quiet": s.args.flag("quiet")});
    }
    if let Some(r) = s.args.value("replSet") {
        d.insert("replication", bson::doc! {"replSet": r});
    }
    if !s.args.set_parameters.is_empty() {
        let mut sp = bson::Document::new();
        for (k, v) in &s.args.set_parameters {
            sp.insert(k.clone(), v.clone());
        }
        d.insert("setParameter", sp);
    }
    d
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

fn run(argv: Vec<String>) -> i32 {
    let s = match setup(argv) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let logger = match Logger::open(s.args.value("logpath"), s.args.flag("logappend")) {
        Ok(l) => Arc::new(l),
        Err(e) => {
            eprintln!(
                "Error opening log file `{}`: {e}",
                s.args.value("logpath").unwrap_or_default()
            );
            return 1;
        }
    };
    let pid = std::process::id();
    logger.info("CONTROL", 4615611, "initandlisten", "MongoDB starting", json!({
        "pid": pid, "port": s.port, "dbPath": s.dbpath.to_string_lossy(), "architecture": "64-bit", "host": "localhost"
    }));
    logger.info(
        "CONTROL",
        23403,
        "initandlisten",
        "Build Info",
        json!({"buildInfo": {"version": s.version.to_string()}}),
    );
    logger.info(
        "CONTROL",
        21951,
        "initandlisten",
        "Options set by command line",
        json!({"options": bson::Bson::Document(parsed_options(&s)).into_relaxed_extjson()}),
    );

    if !s.dbpath.is_dir() {
        let p = s.dbpath.to_string_lossy();
        logger.error("STORAGE", 20557, "initandlisten", "DBException in initAndListen, terminating", json!({
            "error": format!("NonExistentPath: Data directory {p} not found. Create the missing directory or specify another path using (1) the --dbpath command line option, or (2) by adding the 'storage.dbPath' option in the configuration file.")
        }));
        logger.info(
            "CONTROL",
            20565,
            "initandlisten",
            "Now exiting",
            serde_json::Value::Null,
        );
        logger.info(
            "CONTROL",
            23138,
            "initandlisten",
            "Shutting down",
            json!({"exitCode": 100}),
        );
        return 100;
    }

    let record = json!({
        "argv": s.args.argv,
        "pid": pid,
        "port": s.port,
        "bind_ip": s.args.value("bind_ip"),
        "bind_ip_all": s.args.flag("bind_ip_all"),
        "dbpath": s.dbpath.to_string_lossy(),
        "logpath": s.args.value("logpath"),
        "logappend": s.args.flag("logappend"),
        "replSet": s.args.value("replSet"),
        "setParameter": s.args.set_parameters.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "flags": s.args.flags,
        "values": s.args.values,
        "mode": s.mode.name(),
        "faults": s.faults.0.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
    });
    let _ = std::fs::write(
        s.dbpath.join("standin-argv.json"),
        serde_json::to_string_pretty(&record).expect("json"),
    );

    let lock_path = s.dbpath.join("mongod.lock");
    if let Ok(text) = std::fs::read_to_string(&lock_path) {
        if let Ok(other) = text.trim().parse::<i32>() {
            if other != pid as i32 && pid_alive(other) {
                logger.error("STORAGE", 20557, "initandlisten", "DBException in initAndListen, terminating", json!({
                    "error": format!("DBPathInUse: Unable to lock the lock file: {} (Resource temporarily unavailable). Another mongod instance is already running on the {} directory", lock_path.display(), s.dbpath.display())
                }));
                return 100;
            }
        }
    }
    if let Err(e) = std::fs::write(&lock_path, format!("{pid}\n")) {
        logger.error("STORAGE", 20557, "initandlisten", "DBException in initAndListen, terminating", json!({"error": format!("IllegalOperation: Unable to create/open the lock file: {} ({e})", lock_path.display())}));
        return 100;
    }
    if let Some(p) = s.args.value("pidfilepath") {
        let _ = std::fs::write(p, format!("{pid}\n"));
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = rt.block_on(serve(&s, logger.clone()));
    // Emptied, not removed, as `clearPidAndUnlock` does
    // (`storage_engine_lock_file_posix.cpp`): an empty lock file is a clean shutdown.
    let _ = std::fs::write(&lock_path, "");
    if let Some(p) = s.args.value("pidfilepath") {
        let _ = std::fs::remove_file(p);
    }
    logger.info(
        "CONTROL",
        23138,
        "initandlisten",
        "Shutting down",
        json!({"exitCode": code}),
    );
    std::process::exit(code)
}

/// Wait for SIGTERM/SIGINT (or a `shutdown` command); `ignore` keeps running through
/// the signals, as the `ignore-sigterm` knob asks.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    ignore: bool,
}

impl Signals {
    fn new(ignore: bool) -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        Signals {
            term: signal(SignalKind::terminate()).expect("SIGTERM handler"),
            int: signal(SignalKind::interrupt()).expect("SIGINT handler"),
            ignore,
        }
    }

    /// Returns when the process should stop.
    async fn wait(
        &mut self,
        logger: &Logger,
        shutdown: Option<&mut tokio::sync::mpsc::UnboundedReceiver<()>>,
    ) {
        let mut shutdown = shutdown;
        loop {
            let (signal, name) = tokio::select! {
                _ = self.term.recv() => (15, "Terminated"),
                _ = self.int.recv() => (2, "Interrupt"),
                Some(_) = async { match shutdown.as_mut() { Some(rx) => rx.recv().await, None => std::future::pending().await } } => return,
            };
            if self.ignore {
                logger.info(
                    "CONTROL",
                    23377,
                    "SignalHandler",
                    "Received signal; ignoring it (PITR_STANDIN_FAULT=ignore-sigterm)",
                    json!({"signal": signal, "error": name}),
                );
                continue;
            }
            logger.info(
                "CONTROL",
                23377,
                "SignalHandler",
                "Received signal",
                json!({"signal": signal, "error": name}),
            );
            logger.info(
                "CONTROL",
                23378,
                "SignalHandler",
                "Signal was sent by kill(2)",
                serde_json::Value::Null,
            );
            return;
        }
    }
}

/// How the data files are used by this start (persist.rs), from the options.
fn start_mode(s: &Setup) -> persist::StartMode {
    let param = |k: &str| {
        s.args
            .set_parameters
            .iter()
            .any(|(n, v)| n == k && v == "true")
    };
    if s.mode == Mode::Replset {
        persist::StartMode::Member
    } else if param("recoverFromOplogAsStandalone") {
        persist::StartMode::Recovery {
            take_unstable_on_shutdown: param("takeUnstableCheckpointOnShutdown"),
        }
    } else {
        persist::StartMode::Standalone
    }
}

async fn serve(s: &Setup, logger: Arc<Logger>) -> i32 {
    let mut signals = Signals::new(s.faults.has(&Fault::IgnoreSigterm));
    if s.faults.has(&Fault::ExitAtStart) {
        logger.log(
            "F",
            "CONTROL",
            20574,
            "initandlisten",
            "Error during global initialization",
            json!({"error": "InternalError: stand-in fault exit-at-start (PITR_STANDIN_FAULT)"}),
        );
        return 1;
    }
    if let Some(ms) = s.faults.crash_after_ms() {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            eprintln!("pitr stand-in mongod: crash-after-ms={ms}: aborting");
            std::process::abort();
        });
    }
    if let Some(ms) = s.faults.slow_start_ms() {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
            _ = signals.wait(&logger, None) => return 0,
        }
    }
    if s.faults.has(&Fault::NeverListen) {
        logger.info(
            "CONTROL",
            1,
            "initandlisten",
            "Stand-in fault never-listen: not opening any port",
            serde_json::Value::Null,
        );
        signals.wait(&logger, None).await;
        return 0;
    }

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let me = format!("{}:{}", s.bind_ips[0], s.port);
    let mut st = State::new(
        s.mode,
        s.set_name.clone(),
        me,
        s.faults.clone(),
        logger.clone(),
        s.version,
    );
    st.argv = s.args.argv.clone();
    st.log_commands = s.args.verbosity > 0
        || s.args
            .value("slowms")
            .and_then(|v| v.parse::<i64>().ok())
            .is_some_and(|ms| ms < 0);
    st.parsed = parsed_options(s);
    for (k, v) in &s.args.set_parameters {
        st.params.insert(k.clone(), param_value(v));
    }
    if let Ok(path) = std::env::var("PITR_STANDIN_OPLOG") {
        match crate::bsonfile::read_all(Path::new(&path), false) {
            Ok(entries) => {
                logger.info(
                    "REPL",
                    2,
                    "initandlisten",
                    "Stand-in: seeded local.oplog.rs",
                    json!({"file": path, "entries": entries.len()}),
                );
                st.seed_oplog(entries);
            }
            Err(e) => {
                logger.error(
                    "REPL",
                    2,
                    "initandlisten",
                    "Stand-in: cannot read PITR_STANDIN_OPLOG",
                    json!({"file": path, "error": e.to_string()}),
                );
                return 1;
            }
        }
    }
    // The oplog tests of `pitr archive` (see oplog_writer.rs and members.rs).
    if let Ok(v) = std::env::var("PITR_STANDIN_OPLOG_WRITER") {
        match oplog_writer::Writer::parse(&v) {
            Ok(w) => {
                st.ensure_oplog();
                st.writer = Some(w);
            }
            Err(e) => {
                eprintln!("pitr stand-in mongod: PITR_STANDIN_OPLOG_WRITER: {e}");
                return 2;
            }
        }
    }
    if let Ok(v) = std::env::var("PITR_STANDIN_OPLOG_MAX_ENTRIES") {
        match oplog_writer::parse_max_entries(&v) {
            Ok(n) => st.oplog_max_entries = Some(n),
            Err(e) => {
                eprintln!("pitr stand-in mongod: PITR_STANDIN_OPLOG_MAX_ENTRIES: {e}");
                return 2;
            }
        }
    }
    // A mongos's cluster (router.rs).
    if let Ok(v) = std::env::var("PITR_STANDIN_CLUSTER") {
        match router::Cluster::parse(&v) {
            Ok(c) if s.mode == Mode::Mongos => {
                st.store.put("config", "shards", c.shards_collection());
                st.cluster = Some(c);
            }
            Ok(_) => {
                eprintln!(
                    "pitr stand-in mongod: PITR_STANDIN_CLUSTER needs PITR_STANDIN_MODE=mongos"
                );
                return 2;
            }
            Err(e) => {
                eprintln!("pitr stand-in mongod: PITR_STANDIN_CLUSTER: {e}");
                return 2;
            }
        }
    }
    if let Ok(v) = std::env::var("PITR_STANDIN_MEMBERS") {
        match members::Members::parse(&v, &st.me) {
            Ok(m) => st.members = Some(m),
            Err(e) => {
                eprintln!("pitr stand-in mongod: PITR_STANDIN_MEMBERS: {e}");
                return 2;
            }
        }
    }
    let persist_mode = start_mode(s);
    if persist::wanted(&s.dbpath) {
        if let Err(code) = persist::start(&mut st, &s.dbpath, persist_mode) {
            return code;
        }
    }
    oplog_writer::tick(&mut st);
    // Snapshot reads reach back to here at most (see snapshot.rs).
    st.history = snapshot::History::starting(&st.store, st.last_ts);
    let has_members = st.members.is_some();
    let shared = Arc::new(server::Shared {
        state: Mutex::new(st),
        logger: logger.clone(),
        shutdown: tx,
    });

    let mut listeners = Vec::new();
    for ip in &s.bind_ips {
        let host = if ip == "localhost" {
            "127.0.0.1"
        } else {
            ip.as_str()
        };
        match tokio::net::TcpListener::bind((host, s.port)).await {
            Ok(l) => listeners.push(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                logger.error("NETWORK", 23024, "initandlisten", "Failed to set up listener", json!({"error": {"code": 9001, "codeName": "SocketException", "errmsg": "Address already in use"}}));
                logger.error("CONTROL", 20568, "initandlisten", "Error setting up listener", json!({"error": {"code": 9001, "codeName": "SocketException", "errmsg": "Address already in use"}}));
                return 48;
            }
            Err(e) if ip == "::1" && s.bind_ips.len() > 1 => {
                logger.log(
                    "W",
                    "NETWORK",
                    23024,
                    "initandlisten",
                    "Skipping IPv6 loopback",
                    json!({"error": e.to_string()}),
                );
            }
            Err(e) => {
                logger.error("CONTROL", 20568, "initandlisten", "Error setting up listener", json!({"error": {"code": 9001, "codeName": "SocketException", "errmsg": e.to_string()}}));
                return 48;
            }
        }
    }
    for l in listeners {
        tokio::spawn(server::accept_loop(l, shared.clone()));
    }
    if has_members {
        tokio::spawn(members::watch(shared.clone()));
    }
    logger.info(
        "NETWORK",
        23015,
        "listener",
        "Listening on",
        json!({"address": s.bind_ips[0]}),
    );
    logger.info(
        "NETWORK",
        23016,
        "listener",
        "Waiting for connections",
        json!({"port": s.port, "ssl": "off"}),
    );

    signals.wait(&logger, Some(&mut rx)).await;
    if let Ok(st) = shared.state.lock() {
        persist::shutdown(&st, persist_mode);
    }
    logger.info(
        "CONTROL",
        4784900,
        "SignalHandler",
        "Stepping down the ReplicationCoordinator for shutdown",
        serde_json::Value::Null,
    );
    logger.info(
        "CONTROL",
        20565,
        "SignalHandler",
        "Now exiting",
        serde_json::Value::Null,
    );
    0
}
