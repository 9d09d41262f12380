//! ObjectIds as evidence of time: parsing what people paste, reading the creation
//! second (unsigned, so ids after 2038 work), showing both layouts of the other eight
//! bytes, and making the lowest/highest id of a second for `_id` range filters.
//!
//! The creation time is the inserting client's clock with 1 s resolution. It tells
//! you roughly when a document was made; it is never an oplog position.

use bson::oid::ObjectId;
use chrono::{DateTime, Utc};

use crate::error::Hint;

/// Number of hex digits in an ObjectId.
pub const HEX_LEN: usize = 24;

/// Why a string is not an ObjectId. Each variant names the value as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectIdError {
    #[error("`{input}` is not an ObjectId: it has {len} characters, an ObjectId has {HEX_LEN} hex digits")]
    WrongLength { input: String, len: usize },

    #[error("`{input}` is not an ObjectId: character {position} (`{found}`) is not a hex digit ({len} characters)")]
    NotHex {
        input: String,
        len: usize,
        /// 1-based position within the hex digits.
        position: usize,
        found: char,
    },
}

impl Hint for ObjectIdError {
    fn hint(&self) -> Option<String> {
        Some(format!(
            "an ObjectId is {HEX_LEN} hex digits (0-9, a-f), e.g. `47cc67093475061e3d95369d`; \
             `ObjectId(\"...\")` as printed by the shell is accepted too"
        ))
    }
}

/// Parses an ObjectId as a person pastes it: bare hex (either case), or wrapped as
/// `ObjectId("...")` / `ObjectId('...')`, with surrounding whitespace.
pub fn parse(input: &str) -> Result<ObjectId, ObjectIdError> {
    let hex = unwrap_shell_form(input.trim());
    let len = hex.chars().count();
    if let Some((index, found)) = hex
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_hexdigit())
    {
        // A wrong character is the more useful complaint, unless the length is far off.
        if len == HEX_LEN {
            return Err(ObjectIdError::NotHex {
                input: input.to_string(),
                len,
                position: index + 1,
                found,
            });
        }
    }
    if len != HEX_LEN {
        return Err(ObjectIdError::WrongLength {
            input: input.to_string(),
            len,
        });
    }
    Ok(ObjectId::from_bytes(hex_to_bytes(hex)))
}

/// `ObjectId("x")`, `ObjectId('x')` and `new ObjectId("x")` → `x`; anything else unchanged.
fn unwrap_shell_form(s: &str) -> &str {
    let s = s.strip_prefix("new ").map(str::trim_start).unwrap_or(s);
    let Some(inner) = s
        .strip_prefix("ObjectId(")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return s;
    };
    let inner = inner.trim();
    for quote in ['"', '\''] {
        if let Some(hex) = inner
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return hex.trim();
        }
    }
    inner
}

/// Converts exactly 24 ASCII hex digits (checked by the caller) to 12 bytes.
fn hex_to_bytes(hex: &str) -> [u8; 12] {
    let digits = hex.as_bytes();
    let mut bytes = [0u8; 12];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = (nibble(digits[2 * i]) << 4) | nibble(digits[2 * i + 1]);
    }
    bytes
}

fn nibble(d: u8) -> u8 {
    match d {
        b'0'..=b'9' => d - b'0',
        b'a'..=b'f' => d - b'a' + 10,
        b'A'..=b'F' => d - b'A' + 10,
        _ => 0,
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The creation second: bytes 0-3 as an **unsigned** big-endian integer
/// (1970-01-01 to 2106-02-07T06:28:15Z).
pub fn creation_seconds(oid: &ObjectId) -> u32 {
    let b = oid.bytes();
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The creation second as a UTC instant.
pub fn creation_time(oid: &ObjectId) -> DateTime<Utc> {
    seconds_to_utc(creation_seconds(oid))
}

fn seconds_to_utc(secs: u32) -> DateTime<Utc> {
    // Every u32 second is inside chrono's range; the fallback is unreachable.
    DateTime::from_timestamp(i64::from(secs), 0).unwrap_or(DateTime::UNIX_EPOCH)
}

/// RFC 3339 UTC to the second, e.g. `2008-03-03T21:00:57Z`.
pub fn utc_string(secs: u32) -> String {
    seconds_to_utc(secs).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The lowest ObjectId of second `secs`: the time bytes then eight `00`.
/// `{_id: {$gte: lowest_at(T)}}` selects documents created from T on.
pub fn lowest_at(secs: u32) -> ObjectId {
    boundary(secs, 0x00)
}

/// The highest ObjectId of second `secs`: the time bytes then eight `ff`.
/// `{_id: {$lte: highest_at(T)}}` selects documents created up to the end of T.
pub fn highest_at(secs: u32) -> ObjectId {
    boundary(secs, 0xff)
}

fn boundary(secs: u32, fill: u8) -> ObjectId {
    let mut bytes = [fill; 12];
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

/// How the shell writes an id: `ObjectId("...")`.
pub fn shell_literal(oid: &ObjectId) -> String {
    format!("ObjectId(\"{}\")", oid.to_hex())
}

/// The eight bytes after the time read as the historic layout (old drivers and docs).
/// Multi-byte numbers are read big-endian; old drivers did not agree on the pid's
/// byte order, so the raw bytes are kept too.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HistoricLayout {
    /// Bytes 4-6, hex: a hash of the machine name.
    pub machine_id: String,
    /// Bytes 7-8, hex.
    pub pid_hex: String,
    /// Bytes 7-8 as a big-endian process id.
    pub pid: u16,
    /// Bytes 9-11 as a big-endian counter.
    pub counter: u32,
}

/// The eight bytes after the time read as the current specification (server 3.4+,
/// drivers since 2018).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CurrentLayout {
    /// Bytes 4-8, hex: a random value chosen once per process.
    pub random: String,
    /// Bytes 9-11 as a big-endian counter (starts at a random value).
    pub counter: u32,
}

/// Everything an ObjectId says. Serialises with the keys documented on each field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decoded {
    /// The id as 24 lowercase hex digits.
    pub object_id: String,
    /// Creation second, epoch seconds (unsigned).
    pub epoch_seconds: u32,
    /// Creation second, RFC 3339 UTC.
    pub utc: String,
    /// Current-spec reading of bytes 4-11.
    pub current: CurrentLayout,
    /// Historic reading of bytes 4-11.
    pub historic: HistoricLayout,
}

/// Decodes an id into its creation time and both readings of the other bytes.
pub fn decode(oid: &ObjectId) -> Decoded {
    let b = oid.bytes();
    let secs = creation_seconds(oid);
    let counter = u32::from_be_bytes([0, b[9], b[10], b[11]]);
    Decoded {
        object_id: oid.to_hex(),
        epoch_seconds: secs,
        utc: utc_string(secs),
        current: CurrentLayout {
            random: hex_of(&b[4..9]),
            counter,
        },
        historic: HistoricLayout {
            machine_id: hex_of(&b[4..7]),
            pid_hex: hex_of(&b[7..9]),
            pid: u16::from_be_bytes([b[7], b[8]]),
            counter,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(s: &str) -> ObjectId {
        parse(s).expect("valid test id")
    }

    #[test]
    fn docs_example_decodes_to_2008() {
        let d = decode(&oid("47cc67093475061e3d95369d"));
        assert_eq!(d.utc, "2008-03-03T21:00:57Z");
        assert_eq!(d.epoch_seconds, 1204578057);
        assert_eq!(d.current.random, "3475061e3d");
        assert_eq!(d.current.counter, 0x95369d);
        assert_eq!(d.historic.machine_id, "347506");
        assert_eq!(d.historic.pid_hex, "1e3d");
        assert_eq!(d.historic.pid, 0x1e3d);
        assert_eq!(d.historic.counter, 0x95369d);
    }

    #[test]
    fn time_bytes_are_unsigned_after_2038() {
        assert_eq!(
            creation_time(&oid("ffffffff0000000000000000")).to_rfc3339(),
            "2106-02-07T06:28:15+00:00"
        );
        assert_eq!(
            decode(&oid("800000000000000000000000")).utc,
            "2038-01-19T03:14:08Z"
        );
        assert_eq!(
            decode(&oid("000000000000000000000000")).utc,
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn boundary_ids_fill_with_00_and_ff() {
        assert_eq!(lowest_at(1204578057).to_hex(), "47cc67090000000000000000");
        assert_eq!(highest_at(1204578057).to_hex(), "47cc6709ffffffffffffffff");
        assert_eq!(highest_at(u32::MAX).to_hex(), "ffffffffffffffffffffffff");
        let id = oid("47cc67093475061e3d95369d");
        assert!(lowest_at(1204578057) <= id && id <= highest_at(1204578057));
        assert!(highest_at(1204578056) < id && id < lowest_at(1204578058));
        assert_eq!(
            shell_literal(&lowest_at(0)),
            "ObjectId(\"000000000000000000000000\")"
        );
    }

    #[test]
    fn accepts_shell_wrappers_whitespace_and_uppercase() {
        let want = oid("47cc67093475061e3d95369d");
        for s in [
            "  47cc67093475061e3d95369d\n",
            "47CC67093475061E3D95369D",
            "ObjectId(\"47cc67093475061e3d95369d\")",
            "ObjectId('47cc67093475061e3d95369d')",
            " new ObjectId( \"47cc67093475061e3d95369d\" ) ",
        ] {
            assert_eq!(parse(s), Ok(want), "{s:?}");
        }
    }

    #[test]
    fn wrong_length_names_value_and_length() {
        let e = parse("47cc6709").unwrap_err();
        assert_eq!(
            e,
            ObjectIdError::WrongLength {
                input: "47cc6709".into(),
                len: 8
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains("`47cc6709`") && msg.contains("8 characters"),
            "{msg}"
        );
        assert!(e.hint().is_some_and(|h| h.contains("24 hex digits")));
        assert!(matches!(
            parse(""),
            Err(ObjectIdError::WrongLength { len: 0, .. })
        ));
        assert!(matches!(
            parse("47cc67093475061e3d95369d0"),
            Err(ObjectIdError::WrongLength { len: 25, .. })
        ));
    }

    #[test]
    fn non_hex_names_the_character() {
        let e = parse("47cc67093475061e3d95369g").unwrap_err();
        assert!(matches!(
            e,
            ObjectIdError::NotHex {
                position: 24,
                found: 'g',
                len: 24,
                ..
            }
        ));
        // Multi-byte characters count as one and never panic.
        assert!(matches!(
            parse("47cc67093475061e3d9536é9"),
            Err(ObjectIdError::NotHex { found: 'é', .. })
        ));
        assert!(matches!(
            parse("ééé"),
            Err(ObjectIdError::WrongLength { len: 3, .. })
        ));
    }
}
