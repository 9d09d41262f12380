//! Throughput and peak memory of the storage layer on loopback, for
//! `scripts/bench-storage.sh` (which runs these steps and prints the table).
//!
//! ```text
//! storage_bench serve ROOT BUCKET [CHUNK]  s3s-fs on 127.0.0.1 (a free port); prints
//!                                          `endpoint http://...`, serves until stdin closes;
//!                                          with CHUNK, GetObject reads the file in CHUNK-byte
//!                                          reads instead of s3s-fs's 4 KiB ([`ChunkedGet`])
//! storage_bench local FILE                 reads FILE with std::fs (1 MiB reads)
//! storage_bench get ENDPOINT URL           reads URL through pitr::storage (1 MiB reads)
//! storage_bench put ENDPOINT FILE URL      writes FILE to URL through pitr::storage
//! ```
//!
//! Each client step prints one line: `<step> <bytes> bytes <seconds> s <MB/s> MB/s
//! peak_rss <KiB> KiB cpu <user+sys> s`, the peak being this process's VmHWM and the
//! CPU all its threads' (the server runs in its own process so that neither counts it).
//! The storage tuning comes from the environment as pitr's (`PITR_STORAGE_READ_RANGES`,
//! `PITR_STORAGE_READ_RANGE_MIB`: see docs/testing.md).

use std::io::{Read, Write};
use std::time::Instant;

use pitr::storage::{Location, Settings, Storage, Tuning};

const ACCESS_KEY: &str = "AKIAPITRBENCH";
const SECRET_KEY: &str = "pitr-bench-secret";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["serve", root, bucket] => serve(root, bucket, None),
        ["serve", root, bucket, chunk] => serve(root, bucket, Some(chunk.parse().expect("CHUNK"))),
        ["local", file] => {
            let t = Instant::now();
            let n = drain(std::fs::File::open(file).expect("open"));
            report("local-read", n, t);
        }
        ["get", endpoint, url] => {
            let s = storage(endpoint);
            let t = Instant::now();
            let r = s.open_read(&Location::parse(url).unwrap()).expect("open");
            let n = drain(r);
            report("storage-get", n, t);
        }
        ["put", endpoint, file, url] => {
            let s = storage(endpoint);
            let t = Instant::now();
            let mut f = std::fs::File::open(file).expect("open");
            let mut w = s
                .create_all_or_nothing(&Location::parse(url).unwrap())
                .expect("create");
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let k = f.read(&mut buf).expect("read");
                if k == 0 {
                    break;
                }
                w.write_all(&buf[..k]).expect("write");
            }
            let written = w.finish().expect("finish");
            report("storage-put", written.size, t);
        }
        _ => {
            eprintln!("usage: see the comment at the top of examples/storage_bench.rs");
            std::process::exit(2);
        }
    }
}

fn storage(endpoint: &str) -> Storage {
    let settings = Settings::from_pairs([
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
    ]);
    Storage::new(settings, Tuning::from_env())
}

fn drain(mut r: impl Read) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        match r.read(&mut buf).expect("read") {
            0 => return n,
            k => n += k as u64,
        }
    }
}

fn report(step: &str, bytes: u64, t: Instant) {
    let s = t.elapsed().as_secs_f64();
    println!(
        "{step} {bytes} bytes {s:.2} s {:.0} MB/s peak_rss {} KiB cpu {:.2} s",
        bytes as f64 / s / 1e6,
        peak_rss_kib(),
        cpu_seconds()
    );
}

/// User and system CPU time of this process so far (all threads).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn serve(root: &str, bucket: &str, chunk: Option<usize>) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder as ConnBuilder;
    std::fs::create_dir_all(std::path::Path::new(root).join(bucket)).unwrap();
    let fs = s3s_fs::FileSystem::new(root).expect("s3s-fs root");
    let mut b = match chunk {
        None => s3s::service::S3ServiceBuilder::new(fs),
        Some(chunk) => s3s::service::S3ServiceBuilder::new(ChunkedGet {
            fs,
            root: std::fs::canonicalize(root).expect("root"),
            chunk,
        }),
    };
    b.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
    let service = b.build();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    println!("endpoint http://{}", listener.local_addr().unwrap());
    std::io::stdout().flush().unwrap();
    rt.spawn(async move {
        let http = std::sync::Arc::new(ConnBuilder::new(TokioExecutor::new()));
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let (http, service) = (std::sync::Arc::clone(&http), service.clone());
            tokio::spawn(async move {
                let _ = http.serve_connection(TokioIo::new(socket), service).await;
            });
        }
    });
    // Serve until whoever started us closes our stdin.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// s3s-fs with one change, for measuring pitr rather than the test server: s3s-fs
/// 0.14.1 streams a GetObject body in 4 KiB reads (`src/s3.rs`, `get_object`:
/// `ReaderStream::with_capacity(file, 4096)`), each a round trip to tokio's blocking
/// pool, which costs it 6-12 CPU-seconds per GiB served on this machine. This server
/// lets s3s-fs answer the request (range checks, headers, ETag, errors) and then
/// serves the same bytes of the same file in `chunk`-byte reads. Every other
/// operation the bench uses is s3s-fs's own.
struct ChunkedGet {
    fs: s3s_fs::FileSystem,
    root: std::path::PathBuf,
    chunk: usize,
}

/// The impl of `S3` for `ChunkedGet`: the listed operations handed to s3s-fs, then
/// the methods given. (The whole impl is built here because `async_trait` rewrites
/// the `async fn`s it sees, and it does not see into a macro called inside the impl.)
macro_rules! delegating_impl {
    ([$($op:ident: $input:ident -> $output:ident;)*] $($own:tt)*) => {
        #[async_trait::async_trait]
        impl s3s::S3 for ChunkedGet {
            $(
                async fn $op(
                    &self,
                    req: s3s::S3Request<s3s::dto::$input>,
                ) -> s3s::S3Result<s3s::S3Response<s3s::dto::$output>> {
                    self.fs.$op(req).await
                }
            )*
            $($own)*
        }
    };
}

delegating_impl! {
    [
        create_bucket: CreateBucketInput -> CreateBucketOutput;
        head_bucket: HeadBucketInput -> HeadBucketOutput;
        list_buckets: ListBucketsInput -> ListBucketsOutput;
        put_object: PutObjectInput -> PutObjectOutput;
        head_object: HeadObjectInput -> HeadObjectOutput;
        delete_object: DeleteObjectInput -> DeleteObjectOutput;
        delete_objects: DeleteObjectsInput -> DeleteObjectsOutput;
        list_objects: ListObjectsInput -> ListObjectsOutput;
        list_objects_v2: ListObjectsV2Input -> ListObjectsV2Output;
        create_multipart_upload: CreateMultipartUploadInput -> CreateMultipartUploadOutput;
        upload_part: UploadPartInput -> UploadPartOutput;
        complete_multipart_upload: CompleteMultipartUploadInput -> CompleteMultipartUploadOutput;
        abort_multipart_upload: AbortMultipartUploadInput -> AbortMultipartUploadOutput;
    ]

    async fn get_object(
        &self,
        req: s3s::S3Request<s3s::dto::GetObjectInput>,
    ) -> s3s::S3Result<s3s::S3Response<s3s::dto::GetObjectOutput>> {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let path = self.root.join(&req.input.bucket).join(&req.input.key);
        let mut resp = self.fs.get_object(req).await?;
        let out = &mut resp.output;
        let left = out.content_length.unwrap_or(0) as u64;
        // "bytes FIRST-LAST/SIZE" when a range was asked for.
        let first: u64 = out
            .content_range
            .as_deref()
            .and_then(|r| r.strip_prefix("bytes "))
            .and_then(|r| r.split('-').next())
            .map_or(0, |f| f.parse().expect("content range"));
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| s3s::s3_error!(e, InternalError))?;
        file.seek(std::io::SeekFrom::Start(first))
            .await
            .map_err(|e| s3s::s3_error!(e, InternalError))?;
        let chunk = self.chunk;
        let body = futures_util::stream::unfold((file, left), move |(mut file, left)| async move {
            if left == 0 {
                return None;
            }
            let mut buf = vec![0u8; chunk.min(left as usize)];
            match file.read_exact(&mut buf).await {
                Ok(n) => Some((Ok(bytes::Bytes::from(buf)), (file, left - n as u64))),
                Err(e) => Some((Err(e), (file, 0))),
            }
        });
        out.body = Some(s3s::dto::StreamingBlob::wrap(body));
        Ok(resp)
    }
}
