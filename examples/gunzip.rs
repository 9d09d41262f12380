//! Benchmark reference: decompression alone, no scan. By default through pitr's
//! own gzip reader (`pitr::stream::gzip::decoder`: background threads, members that
//! record their size decompressed in parallel); with `--one-thread`, flate2's
//! `MultiGzDecoder` on the calling thread (the same zlib-rs inflate, one stream).
//! `scripts/bench-scan.sh` compares `pitr find-drop FILE.gz` against both.
//!
//! Usage: cargo run --release --example gunzip -- [--one-thread] FILE

use std::fs::File;
use std::io::{BufReader, Read};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let one_thread = args.iter().any(|a| a == "--one-thread");
    let path = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .expect("usage: gunzip [--one-thread] FILE");
    let f = File::open(path)?;
    let mut src: Box<dyn Read> = if one_thread {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
            1 << 20,
            f,
        )))
    } else {
        pitr::stream::gzip::decoder(f)
    };
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0u64;
    loop {
        let n = src.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    println!("{total} bytes");
    Ok(())
}
