//! Helpers for the stand-ins' own tests: start the stand-in mongod on a free port
//! with a temp dbpath, connect the real driver to it, run the stand-in tools, and
//! make sure every process started here is killed when the test ends, pass or fail.

#![allow(dead_code)]

use bson::{doc, Bson, Document};
use mongodb::options::ClientOptions;
use mongodb::Client;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub const MONGOD: &str = env!("CARGO_BIN_EXE_mongod");
pub const MONGORESTORE: &str = env!("CARGO_BIN_EXE_mongorestore");
pub const MONGODUMP: &str = env!("CARGO_BIN_EXE_mongodump");

/// A child process that is SIGKILLed and reaped when dropped.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Wait up to `timeout` for the process to exit.
    pub fn wait_for(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .expect("addr")
        .port()
}

pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(100)).is_ok()
}

pub fn wait_port(port: u16, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if port_open(port) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A stand-in mongod with its own temp dbpath.
pub struct Mongod {
    pub proc: Proc,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Mongod {
    pub fn dbpath(&self) -> PathBuf {
        self.dir.path().join("db")
    }
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mongod.log")).unwrap_or_default()
    }
    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }
}

/// Spawn mongod (not waiting for it to listen).
pub fn spawn_mongod(extra: &[&str], env: &[(&str, &str)]) -> Mongod {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("db")).expect("dbpath");
    let port = free_port();
    let mut cmd = Command::new(MONGOD);
    cmd.arg("--port")
        .arg(port.to_string())
        .arg("--bind_ip")
        .arg("127.0.0.1")
        .arg("--dbpath")
        .arg(dir.path().join("db"))
        .arg("--logpath")
        .arg(dir.path().join("mongod.log"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for k in [
        "PITR_STANDIN_MODE",
        "PITR_STANDIN_FAULT",
        "PITR_STANDIN_MONGOD_FAULT",
        "PITR_STANDIN_OPLOG",
        "PITR_STANDIN_VERSION",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("spawn mongod");
    Mongod {
        proc: Proc { child },
        port,
        dir,
    }
}

/// Spawn mongod and wait until it accepts connections.
pub fn start_mongod(extra: &[&str], env: &[(&str, &str)]) -> Mongod {
    let mut m = spawn_mongod(extra, env);
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if port_open(m.port) {
            return m;
        }
        if let Ok(Some(st)) = m.proc.child.try_wait() {
            panic!("mongod exited early with {st}; log:\n{}", m.log());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("mongod did not listen within 10s; log:\n{}", m.log());
}

pub async fn client(port: u16) -> Client {
    let mut o = ClientOptions::parse(format!("mongodb://127.0.0.1:{port}/?directConnection=true"))
        .await
        .expect("uri");
    o.server_selection_timeout = Some(Duration::from_secs(3));
    Client::with_options(o).expect("client")
}

pub async fn admin(c: &Client, cmd: Document) -> mongodb::error::Result<Document> {
    c.database("admin").run_command(cmd).await
}

pub fn code_of(e: &mongodb::error::Error) -> Option<i32> {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => Some(c.code),
        _ => None,
    }
}

/// Run a stand-in tool to completion (with a timeout), env knobs cleared unless given.
pub fn run_tool(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args).stdin(Stdio::null());
    for k in [
        "PITR_STANDIN_FAULT",
        "PITR_STANDIN_MONGORESTORE_FAULT",
        "PITR_STANDIN_MONGODUMP_FAULT",
        "PITR_STANDIN_RECORD",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tool");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(out) => out.expect("output"),
        Err(_) => {
            // SAFETY: killing the child started above.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("{bin} {args:?} did not finish within 30s");
        }
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// An oplog insert entry.
pub fn insert_entry(ns: &str, t: u32, i: u32, doc: Document) -> Document {
    doc! {"ts": bson::Timestamp { time: t, increment: i }, "t": 1i64, "h": 0i64, "v": 2, "op": "i", "ns": ns, "o": doc}
}

pub fn write_bson(path: &Path, docs: &[Document]) {
    pitr_standins::bsonfile::write_all(path, docs).expect("write bson");
}

/// The mongo-tools known-answer dump: `test.data` with `_id` 0-9 and an oplog
/// inserting 10-13 at ts 1416342265:2..5 and 14 at 1500000000:1.
pub fn known_answer_dump(root: &Path) -> PathBuf {
    let dump = root.join("dump_with_oplog");
    std::fs::create_dir_all(dump.join("test")).expect("mkdir");
    let docs: Vec<Document> = (0..10).map(|i| doc! {"_id": i}).collect();
    write_bson(&dump.join("test/data.bson"), &docs);
    let mut oplog = Vec::new();
    for (n, i) in (2..=5).enumerate() {
        oplog.push(insert_entry(
            "test.data",
            1416342265,
            i,
            doc! {"_id": 10 + n as i32},
        ));
    }
    oplog.push(insert_entry("test.data", 1500000000, 1, doc! {"_id": 14}));
    write_bson(&dump.join("oplog.bson"), &oplog);
    dump
}

/// `_id`s of a collection in ascending order.
pub async fn ids(c: &Client, db: &str, coll: &str) -> Vec<i32> {
    let mut cur = c
        .database(db)
        .collection::<Document>(coll)
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .expect("find");
    let mut out = Vec::new();
    while cur.advance().await.expect("advance") {
        let d = cur.deserialize_current().expect("doc");
        out.push(match d.get("_id") {
            Some(Bson::Int32(i)) => *i,
            Some(Bson::Int64(i)) => *i as i32,
            Some(Bson::Double(f)) => *f as i32,
            other => panic!("non-numeric _id {other:?}"),
        });
    }
    out
}
