//! Gzip-compressed input, recognised by its bytes (`1f 8b`), never by a file name:
//! `mongodump --oplog --gzip` writes gzip content into a file still named
//! `oplog.bson` (mongo-tools `mongodump/prepare.go` names the oplog intent
//! `oplog.bson` whatever the compression), and users rename files.
//!
//! Every decoder handles multi-member files (what `pitr dump-oplog --gzip` and
//! `cat a.gz b.gz` produce) as one stream, like `gzip -dc`.

use std::io::{BufReader, Read};

/// The two magic bytes every gzip member starts with (RFC 1952).
pub const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// True when `head` starts like a gzip stream.
pub fn is_gzip(head: &[u8]) -> bool {
    head.starts_with(&MAGIC)
}

/// A reader of the decompressed bytes of `compressed` (all members).
pub fn decoder(compressed: impl Read + Send + 'static) -> Box<dyn Read + Send> {
    Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
        1 << 20,
        compressed,
    )))
}
