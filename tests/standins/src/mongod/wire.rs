//! The MongoDB wire protocol, server side: OP_MSG (2013) requests and replies, and
//! OP_QUERY (2004) / OP_REPLY (1) for a legacy `isMaster` handshake. The Rust driver
//! 3.x sends only OP_MSG; OP_QUERY is answered for older clients and probes.

use bson::Document;
use tokio::io::{AsyncRead, AsyncReadExt};

pub const OP_REPLY: i32 = 1;
pub const OP_QUERY: i32 = 2004;
pub const OP_MSG: i32 = 2013;

/// OP_MSG flag bits.
pub const CHECKSUM_PRESENT: u32 = 1;
pub const MORE_TO_COME: u32 = 1 << 1;

/// The largest message accepted (`maxMessageSizeBytes`).
pub const MAX_MESSAGE: i32 = 48_000_000;

#[derive(Debug)]
pub enum Request {
    /// An OP_MSG, with its document sequences merged into the body as arrays.
    Msg {
        request_id: i32,
        flags: u32,
        body: Document,
    },
    /// A legacy OP_QUERY (only commands on `db.$cmd` are answered).
    Query {
        request_id: i32,
        collection: String,
        query: Document,
    },
    /// Anything else (OP_COMPRESSED, OP_INSERT, ...): answered by closing the socket.
    Unsupported { op_code: i32 },
    /// A well-framed OP_MSG whose documents the stand-in cannot hold (the bson crate
    /// refuses e.g. strings that are not UTF-8, which a real server stores as they
    /// are): answered with an error instead of a silent change or a dropped socket.
    Unreadable { request_id: i32, error: String },
}

fn invalid(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

fn read_cstring(buf: &[u8], pos: &mut usize) -> std::io::Result<String> {
    let start = *pos;
    let end = buf[start..]
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| invalid("unterminated cstring"))?;
    *pos = start + end + 1;
    String::from_utf8(buf[start..start + end].to_vec()).map_err(|e| invalid(e.to_string()))
}

fn read_doc(buf: &[u8], pos: &mut usize) -> std::io::Result<Document> {
    if buf.len() < *pos + 4 {
        return Err(invalid("truncated document"));
    }
    let len = i32::from_le_bytes(buf[*pos..*pos + 4].try_into().unwrap());
    if len < 5 || *pos + len as usize > buf.len() {
        return Err(invalid(format!("bad document length {len}")));
    }
    let slice = &buf[*pos..*pos + len as usize];
    *pos += len as usize;
    let doc = Document::from_reader(&mut &slice[..]).map_err(|e| invalid(e.to_string()))?;
    // Stored documents must hash like the server's, so a document that would not
    // re-encode to the bytes received (the bson crate drops repeated field names and
    // sorts regex options) is refused rather than silently changed.
    if bson::to_vec(&doc).ok().as_deref() != Some(slice) {
        return Err(invalid(
            "a document would not keep its exact bytes (a repeated field name, or regex options not in alphabetical order)",
        ));
    }
    Ok(doc)
}

/// Read one request; `Ok(None)` when the peer closed the connection cleanly.
pub async fn read_request<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Request>> {
    let mut header = [0u8; 16];
    match r.read_exact(&mut header).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = i32::from_le_bytes(header[0..4].try_into().unwrap());
    let request_id = i32::from_le_bytes(header[4..8].try_into().unwrap());
    let op_code = i32::from_le_bytes(header[12..16].try_into().unwrap());
    if !(16..=MAX_MESSAGE).contains(&len) {
        return Err(invalid(format!("message length {len} out of range")));
    }
    let mut buf = vec![0u8; len as usize - 16];
    r.read_exact(&mut buf).await?;
    match op_code {
        OP_MSG => {
            if buf.len() < 4 {
                return Err(invalid("OP_MSG without flags"));
            }
            let flags = u32::from_le_bytes(buf[0..4].try_into().unwrap());
            let mut end = buf.len();
            if flags & CHECKSUM_PRESENT != 0 {
                // CRC-32C of the message; trusted on loopback, not verified.
                end = end
                    .checked_sub(4)
                    .ok_or_else(|| invalid("missing checksum"))?;
            }
            let buf = &buf[..end];
            match parse_msg_sections(buf) {
                Ok(body) => Ok(Some(Request::Msg {
                    request_id,
                    flags,
                    body,
                })),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    Ok(Some(Request::Unreadable {
                        request_id,
                        error: e.to_string(),
                    }))
                }
                Err(e) => Err(e),
            }
        }
        OP_QUERY => {
            let mut pos = 4; // flags
            let collection = read_cstring(&buf, &mut pos)?;
            pos += 8; // numberToSkip, numberToReturn
            let query = read_doc(&buf, &mut pos)?;
            Ok(Some(Request::Query {
                request_id,
                collection,
                query,
            }))
        }
        other => Ok(Some(Request::Unsupported { op_code: other })),
    }
}

/// The sections of an OP_MSG after its flags: one body, document sequences merged
/// into it as arrays.
fn parse_msg_sections(buf: &[u8]) -> std::io::Result<Document> {
    let mut pos = 4;
    let mut body: Option<Document> = None;
    let mut sequences: Vec<(String, Vec<Document>)> = Vec::new();
    while pos < buf.len() {
        let kind = buf[pos];
        pos += 1;
        match kind {
            0 => {
                if body.is_some() {
                    return Err(invalid("more than one kind 0 section"));
                }
                body = Some(read_doc(buf, &mut pos)?);
            }
            1 => {
                if buf.len() < pos + 4 {
                    return Err(invalid("truncated document sequence"));
                }
                let size = i32::from_le_bytes(buf[pos..pos + 4].try_into().unwrap());
                let seq_end = pos + size as usize;
                if size < 4 || seq_end > buf.len() {
                    return Err(invalid("bad document sequence size"));
                }
                pos += 4;
                let ident = read_cstring(buf, &mut pos)?;
                let mut docs = Vec::new();
                while pos < seq_end {
                    docs.push(read_doc(buf, &mut pos)?);
                }
                sequences.push((ident, docs));
            }
            k => return Err(invalid(format!("unknown OP_MSG section kind {k}"))),
        }
    }
    let mut body = body.ok_or_else(|| invalid("OP_MSG without a body"))?;
    for (ident, docs) in sequences {
        body.insert(
            ident,
            bson::Bson::Array(docs.into_iter().map(bson::Bson::Document).collect()),
        );
    }
    Ok(body)
}

static NEXT_ID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);

fn header(len: usize, response_to: i32, op_code: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as i32).to_le_bytes());
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&response_to.to_le_bytes());
    out.extend_from_slice(&op_code.to_le_bytes());
    out
}

/// An OP_MSG reply with one kind 0 section and no flags.
pub fn encode_msg(response_to: i32, doc: &Document) -> Vec<u8> {
    let body = bson::to_vec(doc).expect("serializable reply");
    let len = 16 + 4 + 1 + body.len();
    let mut out = header(len, response_to, OP_MSG);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&body);
    out
}

/// An OP_REPLY carrying one document.
pub fn encode_reply(response_to: i32, doc: &Document) -> Vec<u8> {
    let body = bson::to_vec(doc).expect("serializable reply");
    let len = 16 + 20 + body.len();
    let mut out = header(len, response_to, OP_REPLY);
    out.extend_from_slice(&0i32.to_le_bytes()); // responseFlags
    out.extend_from_slice(&0i64.to_le_bytes()); // cursorID
    out.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
    out.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
    out.extend_from_slice(&body);
    out
}
