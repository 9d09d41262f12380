//! Helpers shared by the `archive_*` integration tests: peer data and real tools
//! (skipped with a printed reason where absent, a failure under `CI`), an archive
//! inventory, and a stand-in mongod for the real tools to talk to.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pitr::archive::{ArchiveReader, CrcCheck, Event};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `SKIPPED <test>: <reason>`, or a panic when `CI` is set (CI must run everything).
pub fn skip(test: &str, reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {reason}, and CI is set: the test must run there");
    }
    eprintln!("SKIPPED {test}: {reason}");
}

/// `../shared/peer-data/mongo-tools/mongorestore/testdata`, or `None` (skipped).
pub fn peer_testdata(test: &str) -> Option<PathBuf> {
    let dir = repo().join("../shared/peer-data/mongo-tools/mongorestore/testdata");
    if dir.is_dir() {
        Some(dir)
    } else {
        skip(test, &format!("peer data not found at {}", dir.display()));
        None
    }
}

/// Folders holding the real `mongodump`/`mongorestore`: `PITR_MONGO_TOOLS_BIN`, else
/// the 100.18.0 and 100.11.0 releases beside the repository.
pub fn real_tools(test: &str) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = match std::env::var_os("PITR_MONGO_TOOLS_BIN") {
        Some(d) => vec![PathBuf::from(d)],
        None => ["100.18.0", "100.11.0"]
            .iter()
            .map(|v| repo().join(format!("../shared/tools/mongo-tools-{v}")))
            .collect(),
    };
    let found: Vec<PathBuf> = dirs
        .into_iter()
        .filter(|d| d.join("mongodump").is_file() && d.join("mongorestore").is_file())
        .collect();
    if found.is_empty() {
        skip(
            test,
            "the real mongo-tools were not found (set PITR_MONGO_TOOLS_BIN or provide ../shared/tools/mongo-tools-100.18.0)",
        );
    }
    found
}

/// What an archive holds, read in one pass: documents and CRC per namespace.
#[derive(Debug, Default)]
pub struct Inventory {
    pub counts: BTreeMap<String, u64>,
    pub crcs: BTreeMap<String, CrcCheck>,
    /// Namespaces in the order of their EOF headers.
    pub ended: Vec<String>,
    pub documents: BTreeMap<String, Vec<Vec<u8>>>,
}

pub fn inventory(mut r: ArchiveReader) -> Result<Inventory, pitr::archive::ArchiveError> {
    let mut inv = Inventory::default();
    while let Some(ev) = r.next_event()? {
        match ev {
            Event::Document(d) => inv
                .documents
                .entry(d.namespace.to_string())
                .or_default()
                .push(d.bytes.to_vec()),
            Event::End(e) => {
                let ns = e.namespace.to_string();
                inv.counts.insert(ns.clone(), e.documents);
                inv.crcs.insert(ns.clone(), e.crc);
                inv.ended.push(ns);
            }
        }
    }
    Ok(inv)
}

/// A stand-in mongod (the project's test double) on a free loopback port; killed on
/// drop.
pub struct Mongod {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Mongod {
    /// Starts a stand-in mongod on a free port. The port is found by binding port 0
    /// and letting it go, so another process (a concurrent test run) can take it
    /// before the stand-in binds it; the stand-in then exits, and another port is
    /// tried, instead of taking someone else's listener for ours.
    pub fn start(replset: bool) -> Mongod {
        for _ in 0..5 {
            if let Some(m) = Mongod::try_start(replset) {
                return m;
            }
        }
        panic!("the stand-in mongod exited on 5 ports in a row (see its log)");
    }

    fn try_start(replset: bool) -> Option<Mongod> {
        let bin = crate::common::standin_bin_dir().join("mongod");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("db")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(bin);
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind_ip",
            "127.0.0.1",
            "--dbpath",
        ])
        .arg(dir.path().join("db"))
        .arg("--logpath")
        .arg(dir.path().join("mongod.log"))
        .env(
            "PITR_STANDIN_MODE",
            if replset { "replset" } else { "standalone" },
        )
        .env_remove("PITR_STANDIN_FAULT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("start the stand-in mongod");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            // Ours, not a listener someone else has on the same port: it is running.
            if let Some(status) = child.try_wait().expect("wait on the stand-in mongod") {
                eprintln!("stand-in mongod exited ({status}) on port {port}; trying another");
                return None;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "stand-in mongod did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Still running once something answers: had the port been taken, its bind
        // would have failed before the first answer, or just after.
        std::thread::sleep(Duration::from_millis(100));
        if child
            .try_wait()
            .expect("wait on the stand-in mongod")
            .is_some()
        {
            return None;
        }
        Some(Mongod {
            child,
            port,
            _dir: dir,
        })
    }

    /// Runs a real tool against this server; panics with its output on failure.
    pub fn run(&self, tool: &Path, args: &[&str]) -> Output {
        let out = Command::new(tool)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run a real mongo tool");
        assert!(
            out.status.success(),
            "{} {args:?} failed ({}):\n{}",
            tool.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

impl Drop for Mongod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes back what `r` holds through `ArchiveWriter`, in the same order: the
/// writer starts a segment whenever the namespace changes, as mongodump's
/// multiplexer does, so the output must equal the input byte for byte (except the
/// prelude of tools older than the `type` field).
pub fn replay(mut r: ArchiveReader, gzip: bool) -> Vec<u8> {
    use pitr::archive::{ArchiveWriter, WriterOptions};
    let header = r.header().clone();
    let prelude = r.prelude().to_vec();
    let mut w = ArchiveWriter::new(Vec::new(), &header, &prelude, WriterOptions { gzip }).unwrap();
    while let Some(ev) = r.next_event().unwrap() {
        match ev {
            Event::Document(d) => w.write_document(d.namespace, d.bytes).unwrap(),
            Event::End(e) => w.end_namespace(e.namespace).unwrap(),
        }
    }
    w.finish().unwrap()
}

/// Where the prelude of a (decompressed) archive ends: after the magic, the header,
/// the metadata documents and the terminator.
pub fn prelude_end(archive: &[u8]) -> usize {
    let mut p = 4;
    loop {
        let n = u32::from_le_bytes(archive[p..p + 4].try_into().unwrap());
        p += 4;
        if n == u32::MAX {
            return p;
        }
        p += n as usize - 4;
    }
}

pub fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}
