//! Reading and writing BSON streams: a `.bson` file is documents back to back,
//! optionally gzip-compressed (`--gzip` dumps).

use bson::Document;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Open a file for reading, gunzipping when `gzip` is set.
pub fn open(path: &Path, gzip: bool) -> io::Result<Box<dyn Read>> {
    let f = BufReader::new(File::open(path)?);
    Ok(if gzip {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(f)))
    } else {
        Box::new(f)
    })
}

/// Read the next document of a stream; `Ok(None)` at a clean end.
pub fn next_doc(r: &mut dyn Read) -> io::Result<Option<Document>> {
    let mut len_buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len_buf[got..])?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "truncated BSON length prefix",
            ));
        }
        got += n;
    }
    let len = i32::from_le_bytes(len_buf);
    if !(5..=64 * 1024 * 1024).contains(&len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("invalid BSONSize: {len} bytes"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    buf[..4].copy_from_slice(&len_buf);
    r.read_exact(&mut buf[4..]).map_err(|e| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("truncated BSON document ({len} bytes declared): {e}"),
        )
    })?;
    Document::from_reader(&mut buf.as_slice())
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// Read a whole BSON file.
pub fn read_all(path: &Path, gzip: bool) -> io::Result<Vec<Document>> {
    let mut r = open(path, gzip)?;
    let mut out = Vec::new();
    while let Some(d) = next_doc(&mut *r)? {
        out.push(d);
    }
    Ok(out)
}

/// A writer of a BSON stream, gzip-compressed when asked.
pub enum BsonWriter {
    Plain(BufWriter<File>),
    // Boxed: the encoder state is large, and the plain variant is tiny.
    Gzip(Box<flate2::write::GzEncoder<BufWriter<File>>>),
}

impl BsonWriter {
    pub fn create(path: &Path, gzip: bool) -> io::Result<Self> {
        let f = BufWriter::new(File::create(path)?);
        Ok(if gzip {
            BsonWriter::Gzip(Box::new(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::fast(),
            )))
        } else {
            BsonWriter::Plain(f)
        })
    }

    pub fn write(&mut self, doc: &Document) -> io::Result<()> {
        let res = match self {
            BsonWriter::Plain(w) => doc.to_writer(w),
            BsonWriter::Gzip(w) => doc.to_writer(w),
        };
        res.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// Flush, and for gzip write the trailer; errors are not lost in a drop.
    pub fn finish(self) -> io::Result<()> {
        match self {
            BsonWriter::Plain(mut w) => w.flush(),
            BsonWriter::Gzip(w) => w.finish()?.flush(),
        }
    }
}

/// Write bytes to a file, gzip-compressed when asked (metadata.json files).
pub fn write_bytes(path: &Path, bytes: &[u8], gzip: bool) -> io::Result<()> {
    let mut f = BufWriter::new(File::create(path)?);
    if gzip {
        let mut enc = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        enc.write_all(bytes)?;
        enc.finish()?.flush()
    } else {
        f.write_all(bytes)?;
        f.flush()
    }
}

/// Read a whole file, gunzipping when asked.
pub fn read_bytes(path: &Path, gzip: bool) -> io::Result<Vec<u8>> {
    let mut r = open(path, gzip)?;
    let mut out = Vec::new();
    r.read_to_end(&mut out)?;
    Ok(out)
}

/// Write documents to a plain `.bson` file (for tests and fixtures).
pub fn write_all(path: &Path, docs: &[Document]) -> io::Result<()> {
    let mut w = BsonWriter::create(path, false)?;
    for d in docs {
        w.write(d)?;
    }
    w.finish()
}
