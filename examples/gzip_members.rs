//! Benchmark helper: rewrites a plain BSON oplog as the multi-member gzip that
//! `pitr dump-oplog --gzip` writes (members closed after
//! `GZIP_MEMBER_BYTES` of whole entries, each recording its own size), so that
//! `scripts/bench-scan.sh` can measure reading it without a server.
//!
//! Usage: cargo run --release --example gzip_members -- IN.bson OUT

use std::fs::File;
use std::io::{BufWriter, Write};

use pitr::mongo::dump_file::GZIP_MEMBER_BYTES;
use pitr::oplog::{OplogReader, ReadOptions};
use pitr::stream::gzip;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        return Err("usage: gzip_members IN.bson OUT".into());
    };
    let mut r = OplogReader::new(input.as_str(), File::open(&input)?, ReadOptions::default());
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&output)?);
    let (mut member, mut gz) = (Vec::new(), Vec::new());
    let mut flush = |member: &mut Vec<u8>, out: &mut BufWriter<File>| -> std::io::Result<()> {
        if !member.is_empty() {
            gz.clear();
            gzip::write_member(&mut gz, member, flate2::Compression::default())?;
            out.write_all(&gz)?;
            member.clear();
        }
        Ok(())
    };
    while let Some((doc, _, _)) = r.next_bytes()? {
        member.extend_from_slice(doc);
        if member.len() >= GZIP_MEMBER_BYTES {
            flush(&mut member, &mut out)?;
        }
    }
    flush(&mut member, &mut out)?;
    out.flush()?;
    Ok(())
}
