//! Guessing what a file is when it is not BSON, so the error can say so.

/// Like [`looks_like`], but only for clear signs (a known magic number or text):
/// binary data that merely fails to frame may still be a damaged BSON dump.
pub fn clearly_not_bson(head: &[u8]) -> Option<&'static str> {
    looks_like(head).filter(|w| !w.starts_with("random"))
}

/// Given the first bytes of a source that failed to frame as BSON, a short
/// description of what it appears to be, or `None` for empty input.
pub fn looks_like(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Some("gzip-compressed data");
    }
    if head.starts_with(b"BZh") {
        return Some("bzip2-compressed data");
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Some("zstd-compressed data");
    }
    if head.starts_with(&[0x6d, 0xe2, 0x99, 0x81]) {
        return Some("a mongodump --archive file");
    }
    if head.starts_with(b"PK\x03\x04") {
        return Some("a zip archive");
    }
    let sample = &head[..head.len().min(512)];
    if sample.is_empty() {
        return None;
    }
    let text = sample
        .iter()
        .all(|&b| b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80);
    if text && (std::str::from_utf8(sample).is_ok() || sample.len() == 512) {
        let first = sample.iter().find(|b| !b.is_ascii_whitespace());
        return Some(match first {
            Some(b'{') | Some(b'[') => {
                "JSON text (extended JSON, e.g. from bsondump or mongoexport)"
            }
            _ => "text, not BSON",
        });
    }
    Some("random or corrupt bytes, not BSON")
}

#[cfg(test)]
mod tests {
    use super::looks_like;

    #[test]
    fn recognises_common_mistakes() {
        assert!(looks_like(b"{\"op\": \"i\"}").unwrap().contains("JSON"));
        assert!(looks_like(b"  [ {} ]").unwrap().contains("JSON"));
        assert!(looks_like(b"hello world\n").unwrap().contains("text"));
        assert!(looks_like(&[0x1f, 0x8b, 8, 0]).unwrap().contains("gzip"));
        assert!(looks_like(&[0x6d, 0xe2, 0x99, 0x81, 1])
            .unwrap()
            .contains("archive"));
        assert!(looks_like(&[0xff, 0x00, 0x13, 0x02])
            .unwrap()
            .contains("random"));
    }
}
