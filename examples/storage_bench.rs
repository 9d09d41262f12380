//! Throughput and peak memory of the storage layer on loopback, for
//! `scripts/bench-storage.sh` (which runs these steps and prints the table).
//!
//! ```text
//! storage_bench serve ROOT BUCKET          s3s-fs on 127.0.0.1 (a free port); prints
//!                                          `endpoint http://...`, serves until stdin closes
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
        ["serve", root, bucket] => serve(root, bucket),
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

fn serve(root: &str, bucket: &str) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder as ConnBuilder;
    std::fs::create_dir_all(std::path::Path::new(root).join(bucket)).unwrap();
    let fs = s3s_fs::FileSystem::new(root).expect("s3s-fs root");
    let mut b = s3s::service::S3ServiceBuilder::new(fs);
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
