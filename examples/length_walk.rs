//! Benchmark reference: the fastest possible walk over a BSON oplog dump. It only
//! reads the 4-byte length prefix of each document and skips the rest, using the
//! same buffered `read()` strategy as pitr's reader. `scripts/bench-scan.sh`
//! compares `pitr find-drop` against it.
//!
//! Usage: cargo run --release --example length_walk -- FILE

use std::fs::File;
use std::io::Read;
use std::time::Instant;

fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).expect("usage: length_walk FILE");
    let mut f = File::open(&path)?;
    let mut buf = vec![0u8; 256 << 10];
    let (mut filled, mut pos) = (0usize, 0usize);
    let (mut entries, mut bytes) = (0u64, 0u64);
    let start = Instant::now();
    loop {
        // Walk complete documents in the buffer.
        while filled - pos >= 4 {
            let len = i32::from_le_bytes(buf[pos..pos + 4].try_into().unwrap()) as usize;
            if len < 5 || filled - pos < len {
                break;
            }
            pos += len;
            entries += 1;
        }
        buf.copy_within(pos..filled, 0);
        filled -= pos;
        pos = 0;
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let n = f.read(&mut buf[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
        bytes += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{entries} entries, {bytes} bytes in {secs:.3} s: {:.0} MB/s",
        bytes as f64 / 1e6 / secs
    );
    Ok(())
}
