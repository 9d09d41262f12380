//! Real object-storage servers on loopback for the storage tests (never a mock of the
//! client): `s3s-fs`, an S3 server that checks SigV4 signatures and conditional
//! writes, run in-process on its own runtime, which a test can kill (every open
//! connection dropped mid-body) and restart on the same port.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use pitr::storage::{Location, Settings, Storage, Tuning};
use s3s::auth::SimpleAuth;
use s3s::service::{S3Service, S3ServiceBuilder};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub const ACCESS_KEY: &str = "AKIAPITRTEST";
pub const SECRET_KEY: &str = "pitr-test-secret-key";

/// A key held to the read-only policy of docs/object-storage.md ("Bucket
/// permissions"): `s3:GetObject` and `s3:ListBucket` only.
pub const READER_KEY: &str = "AKIAPITRREADER";
/// A key held to the archiver's policy there: `s3:GetObject`, `s3:ListBucket`,
/// `s3:PutObject`, `s3:AbortMultipartUpload`, `s3:DeleteObject`.
pub const WRITER_KEY: &str = "AKIAPITRWRITER";
/// The archiver's policy without `s3:DeleteObject`.
pub const NO_DELETE_KEY: &str = "AKIAPITRNODELETE";
/// A key whose every request the server refuses as S3 does a request signed by a
/// machine whose clock is off by more than 15 minutes: 403 `RequestTimeTooSkewed`.
/// (s3s-fs compares the signature's time with its own clock, which a test cannot
/// move; this key makes the same answer go through the real HTTP stack.)
pub const SKEWED_KEY: &str = "AKIAPITRSKEWED";
/// The secret of [`READER_KEY`], [`WRITER_KEY`], [`NO_DELETE_KEY`] and [`SKEWED_KEY`].
pub const POLICY_SECRET: &str = "pitr-policy-secret-key";

/// The IAM action an S3 operation needs (the mapping of AWS's "Actions, resources,
/// and condition keys for Amazon S3": HeadObject is `s3:GetObject`, HeadBucket and
/// the listings `s3:ListBucket`, every step of a multipart upload but the abort
/// `s3:PutObject`; a copy also needs `s3:GetObject` on its source, checked in
/// [`Policy`]).
fn iam_action(op: &str) -> &'static str {
    match op {
        "GetObject" | "HeadObject" => "s3:GetObject",
        "ListObjects" | "ListObjectsV2" | "HeadBucket" => "s3:ListBucket",
        "PutObject"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "CompleteMultipartUpload"
        | "CopyObject"
        | "UploadPartCopy" => "s3:PutObject",
        "AbortMultipartUpload" => "s3:AbortMultipartUpload",
        "DeleteObject" | "DeleteObjects" => "s3:DeleteObject",
        "ListParts" => "s3:ListMultipartUploadParts",
        "ListMultipartUploads" => "s3:ListBucketMultipartUploads",
        _ => "s3:Other",
    }
}

/// The server's access control, as a bucket policy and IAM would do it: the
/// actions each key is allowed ([`READER_KEY`], [`WRITER_KEY`], [`NO_DELETE_KEY`];
/// [`ACCESS_KEY`] may do anything), and objects no key may read (as an object
/// encrypted with a KMS key the role cannot use): `AccessDenied`, a 403.
struct Policy {
    unreadable: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl s3s::access::S3Access for Policy {
    async fn check(&self, cx: &mut s3s::access::S3AccessContext<'_>) -> s3s::S3Result<()> {
        let Some(key) = cx.credentials().map(|c| c.access_key.clone()) else {
            return Err(s3s::s3_error!(AccessDenied, "Signature is required"));
        };
        if key == SKEWED_KEY {
            return Err(s3s::s3_error!(
                RequestTimeTooSkewed,
                "The difference between the request time and the current time is too large."
            ));
        }
        let action = iam_action(cx.s3_op().name());
        let allowed: &[&str] = match key.as_str() {
            ACCESS_KEY => &[
                "s3:GetObject",
                "s3:ListBucket",
                "s3:PutObject",
                "s3:AbortMultipartUpload",
                "s3:DeleteObject",
                "s3:ListMultipartUploadParts",
                "s3:ListBucketMultipartUploads",
                "s3:Other",
            ],
            READER_KEY => &["s3:GetObject", "s3:ListBucket"],
            WRITER_KEY => &[
                "s3:GetObject",
                "s3:ListBucket",
                "s3:PutObject",
                "s3:AbortMultipartUpload",
                "s3:DeleteObject",
            ],
            NO_DELETE_KEY => &[
                "s3:GetObject",
                "s3:ListBucket",
                "s3:PutObject",
                "s3:AbortMultipartUpload",
            ],
            _ => &[],
        };
        if !allowed.contains(&action) {
            return Err(s3s::s3_error!(
                AccessDenied,
                "{key} is not allowed to perform {action}"
            ));
        }
        // A copy reads its source: AWS asks `s3:GetObject` on it besides
        // `s3:PutObject` on the target, and a source no key may read fails it.
        if let Some(source) = cx
            .headers()
            .get("x-amz-copy-source")
            .and_then(|v| v.to_str().ok())
        {
            let source = source.trim_start_matches('/');
            let source = source.split('?').next().unwrap_or(source);
            if !allowed.contains(&"s3:GetObject") {
                return Err(s3s::s3_error!(
                    AccessDenied,
                    "{key} is not allowed to perform s3:GetObject on the copy's source {source}"
                ));
            }
            if self.unreadable.lock().unwrap().iter().any(|u| u == source) {
                return Err(s3s::s3_error!(AccessDenied, "{source} cannot be decrypted"));
            }
        }
        if let s3s::path::S3Path::Object {
            bucket,
            key: object,
        } = cx.s3_path()
        {
            let path = format!("{bucket}/{object}");
            if action == "s3:GetObject" && self.unreadable.lock().unwrap().contains(&path) {
                return Err(s3s::s3_error!(AccessDenied, "{path} cannot be decrypted"));
            }
        }
        Ok(())
    }
}

/// The environment a user would export for the server at `endpoint`
/// ([`S3Server::endpoint`]), with the key allowed everything.
pub fn env_for(endpoint: &str) -> [(&'static str, &str); 5] {
    [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
    ]
}

/// An s3s-fs server on 127.0.0.1 serving the buckets (directories) under `root`.
pub struct S3Server {
    pub addr: SocketAddr,
    pub root: PathBuf,
    /// GET requests answered, by request path (`/bucket/key`).
    gets: Arc<Mutex<HashMap<String, usize>>>,
    /// Objects (`bucket/key`) no key may read ([`S3Server::deny_reads`]).
    unreadable: Arc<Mutex<Vec<String>>>,
    service: S3Service,
    rt: tokio::runtime::Runtime,
    accept: Option<tokio::task::JoinHandle<()>>,
}

impl S3Server {
    /// Starts a server on a free port; `buckets` are created as directories.
    pub fn start(root: &Path, buckets: &[&str]) -> S3Server {
        for b in buckets {
            std::fs::create_dir_all(root.join(b)).unwrap();
        }
        let fs = s3s_fs::FileSystem::new(root).expect("s3s-fs root");
        let mut b = S3ServiceBuilder::new(fs);
        let mut auth = SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY);
        for key in [READER_KEY, WRITER_KEY, NO_DELETE_KEY, SKEWED_KEY] {
            auth.register(key.to_string(), POLICY_SECRET.into());
        }
        b.set_auth(auth);
        let unreadable = Arc::<Mutex<Vec<String>>>::default();
        b.set_access(Policy {
            unreadable: Arc::clone(&unreadable),
        });
        let service = b.build();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        let mut s = S3Server {
            addr,
            root: root.to_path_buf(),
            gets: Arc::default(),
            unreadable,
            service,
            rt,
            accept: None,
        };
        s.serve(listener);
        s
    }

    fn serve(&mut self, listener: TcpListener) {
        let service = self.service.clone();
        let gets = Arc::clone(&self.gets);
        self.accept = Some(self.rt.spawn(async move {
            // Connections live in this set: aborting the accept task drops it, which
            // aborts every connection, as a killed server would.
            let mut conns = JoinSet::new();
            let http = Arc::new(ConnBuilder::new(TokioExecutor::new()));
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let http = Arc::clone(&http);
                let service = service.clone();
                let gets = Arc::clone(&gets);
                let counted = hyper::service::service_fn(move |req: Request<Incoming>| {
                    if req.method() == hyper::Method::GET {
                        let mut g = gets.lock().unwrap();
                        *g.entry(req.uri().path().to_string()).or_default() += 1;
                    }
                    let service = service.clone();
                    async move { service.call(req.map(s3s::Body::from)).await }
                });
                conns.spawn(async move {
                    let _ = http.serve_connection(TokioIo::new(socket), counted).await;
                });
                while conns.try_join_next().is_some() {}
            }
        }));
    }

    /// Stops the server: the listener closes and open connections are cut.
    pub fn kill(&mut self) {
        if let Some(h) = self.accept.take() {
            h.abort();
            let _ = self.rt.block_on(h);
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        let listener = self
            .rt
            .block_on(TcpListener::bind(self.addr))
            .expect("bind the same port again");
        self.serve(listener);
    }

    /// How many GET requests for `s3://bucket/key` the server has answered (each
    /// ranged GET counts; listings are GETs of the bucket and are not counted here).
    pub fn gets_of(&self, bucket: &str, key: &str) -> usize {
        let g = self.gets.lock().unwrap();
        g.get(&format!("/{bucket}/{key}")).copied().unwrap_or(0)
    }

    /// From now on no key may read `s3://bucket/key` (GET and HEAD answer 403
    /// `AccessDenied`), as an object encrypted with a KMS key the role cannot use.
    pub fn deny_reads(&self, bucket: &str, key: &str) {
        self.unreadable
            .lock()
            .unwrap()
            .push(format!("{bucket}/{key}"));
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The settings a user would export for this server.
    pub fn settings(&self) -> Settings {
        self.settings_with(ACCESS_KEY, SECRET_KEY)
    }

    pub fn settings_with(&self, key: &str, secret: &str) -> Settings {
        Settings::from_pairs(self.env_with(key, secret))
    }

    /// [`S3Server::env`] with another key (one held to a policy: [`READER_KEY`]...).
    pub fn env_with(&self, key: &str, secret: &str) -> [(&'static str, String); 5] {
        [
            ("AWS_ACCESS_KEY_ID", key.to_string()),
            ("AWS_SECRET_ACCESS_KEY", secret.to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
    }

    /// Points a pitr command at this server with `key`'s credentials: the test's
    /// own `AWS_*` variables removed, [`S3Server::env_with`] set, and retries
    /// short (a failure shows in seconds, not after minutes of backoff).
    pub fn point(&self, c: &mut std::process::Command, key: &str, secret: &str) {
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("AWS_") {
                c.env_remove(&k);
            }
        }
        c.envs(self.env_with(key, secret))
            .env("PITR_STORAGE_RETRIES", "1")
            .env("PITR_STORAGE_RETRY_SECS", "3");
    }

    pub fn storage(&self) -> Storage {
        Storage::new(self.settings(), quick_tuning())
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Production tuning with waits short enough for tests, and parts of 5 MiB (S3's
/// minimum) so that multipart uploads start at small sizes.
pub fn quick_tuning() -> Tuning {
    Tuning {
        retries: 2,
        retry_timeout: std::time::Duration::from_secs(10),
        resume_backoff: std::time::Duration::from_millis(100),
        part_size: 5 * 1024 * 1024,
        ..Tuning::default()
    }
}

/// Deterministic bytes: `len` bytes of a xorshift stream from `seed`, so a large
/// object can be checked without keeping a copy.
pub struct Pattern {
    state: u64,
    left: u64,
}

impl Pattern {
    pub fn new(seed: u64, len: u64) -> Pattern {
        Pattern {
            state: seed | 1,
            left: len,
        }
    }
}

impl std::io::Read for Pattern {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.left) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let b = self.state.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Compares two readers byte for byte; returns the first differing offset, if any,
/// and the lengths read.
pub fn first_difference(
    mut a: impl std::io::Read,
    mut b: impl std::io::Read,
) -> (Option<u64>, u64, u64) {
    let mut ba = vec![0u8; 1 << 16];
    let mut bb = vec![0u8; 1 << 16];
    let (mut la, mut lb) = (0u64, 0u64);
    loop {
        let na = read_full(&mut a, &mut ba);
        let nb = read_full(&mut b, &mut bb);
        if let Some(i) = (0..na.min(nb)).find(|&i| ba[i] != bb[i]) {
            return (Some(la + i as u64), la + na as u64, lb + nb as u64);
        }
        la += na as u64;
        lb += nb as u64;
        if na != nb {
            return (Some(la.min(lb)), la, lb);
        }
        if na == 0 {
            return (None, la, lb);
        }
    }
}

fn read_full(r: &mut impl std::io::Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]).expect("read") {
            0 => break,
            k => n += k,
        }
    }
    n
}

/// Uploads every file under `from` to `to` (a prefix), through pitr's own writer.
pub fn upload_tree(storage: &Storage, from: &Path, to: &Location) {
    let mut stack = vec![from.to_path_buf()];
    while let Some(d) = stack.pop() {
        if d.is_file() {
            upload_file(storage, &d, to);
            continue;
        }
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(from).unwrap().to_str().unwrap().to_string();
                upload_file(storage, &p, &to.join(&rel));
            }
        }
    }
}

pub fn upload_file(storage: &Storage, file: &Path, to: &Location) {
    let mut w = storage.create_all_or_nothing(to).unwrap();
    std::io::copy(&mut std::fs::File::open(file).unwrap(), &mut w).unwrap();
    w.finish().unwrap();
}

/// What an embedded replay restored, from its report.json: per namespace, whether it
/// exists, its documents and its dbHash md5 (the part that must not depend on where
/// the inputs were read from).
pub fn restored(report: &serde_json::Value) -> Vec<serde_json::Value> {
    report["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            serde_json::json!({
                "ns": n["ns"], "exists": n["exists"], "documents": n["documents"], "md5": n["md5"]
            })
        })
        .collect()
}

/// Every object under `prefix`, as (key below it, bytes).
pub fn objects(storage: &Storage, prefix: &Location) -> Vec<(String, Vec<u8>)> {
    storage
        .list(prefix)
        .unwrap()
        .into_iter()
        .map(|o| {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut storage.open_read(&o.location).unwrap(), &mut bytes)
                .unwrap();
            (o.location.relative_to(prefix).unwrap(), bytes)
        })
        .collect()
}

/// Takes a dump's manifest (`.pitr-dump.json`) out of its `objects` (from
/// [`objects`]), checking that it lists every other object; panics without one.
pub fn take_manifest(objects: &mut Vec<(String, Vec<u8>)>) -> serde_json::Value {
    let manifest = objects
        .iter()
        .position(|(k, _)| k == ".pitr-dump.json")
        .map(|i| objects.remove(i))
        .expect("the manifest is written");
    let m: serde_json::Value = serde_json::from_slice(&manifest.1).unwrap();
    assert_eq!(m["objects"].as_array().unwrap().len(), objects.len());
    m
}
