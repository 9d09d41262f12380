//! The documents of the archive format and their exact encoding.
//!
//! Layout (mongo-tools `common/archive/spec.md`, checked against `parser.go`,
//! `prelude.go`, `multiplexer.go` and real archives):
//!
//! ```text
//! archive  = magic header metadata* TERMINATOR (segment | eof)*
//! magic    = 6d e2 99 81              (uint32 0x8199e26d, little-endian)
//! segment  = ns-header document* TERMINATOR   (mongodump writes zero documents
//!                                               for empty collections and views)
//! eof      = eof-header TERMINATOR
//! TERMINATOR = ff ff ff ff
//! ```
//!
//! Field order and BSON types below are those Go's `bson.Marshal` produces for the
//! structs in `archive.go`, so [`super::writer`] can reproduce mongodump byte for byte.

use bson::{RawBsonRef, RawDocument};

/// First four bytes of every archive (`archive.go` `MagicNumber`, little-endian).
pub const MAGIC: [u8; 4] = [0x6d, 0xe2, 0x99, 0x81];

/// Ends the prelude and every segment (`archive.go` `terminator`).
pub const TERMINATOR: [u8; 4] = [0xff; 4];

/// The only archive format version there is (`archive.go` `archiveFormatVersion`).
pub const FORMAT_VERSION: &str = "0.1";

/// `system.buckets.` (mongo-tools `common.TimeseriesBucketPrefix`).
pub const TIMESERIES_BUCKET_PREFIX: &str = "system.buckets.";

/// The archive header (`archive.go` `Header`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// `concurrent_collections`: mongodump's `--numParallelCollections`.
    pub concurrent_collections: i32,
    /// `version`: the archive format version, `"0.1"`.
    pub format_version: String,
    /// `server_version`: version of the server that was dumped (may be `"unknown"`).
    pub server_version: String,
    /// `tool_version`: version of the mongodump that wrote the archive (may be empty).
    pub tool_version: String,
}

impl Header {
    /// A header as mongodump writes it (`prelude.go` `NewPrelude`).
    pub fn new(
        server_version: impl Into<String>,
        tool_version: impl Into<String>,
        concurrent_collections: i32,
    ) -> Header {
        Header {
            concurrent_collections,
            format_version: FORMAT_VERSION.into(),
            server_version: server_version.into(),
            tool_version: tool_version.into(),
        }
    }

    /// Whether the dumped server stores time-series data under the collection's own
    /// name (8.3+, "viewless" time series) rather than under `system.buckets.<name>`
    /// (mongo-tools `db.Version.SupportsRawData`, used by `archive.CreateDemux`). An
    /// unparseable version counts as old, as in mongorestore.
    pub fn viewless_timeseries(&self) -> bool {
        parse_version(&self.server_version).is_some_and(|v| v >= (8, 3, 0))
    }

    pub fn to_bson(&self) -> Vec<u8> {
        let mut d = DocBuilder::new();
        d.int32("concurrent_collections", self.concurrent_collections);
        d.string("version", &self.format_version);
        d.string("server_version", &self.server_version);
        d.string("tool_version", &self.tool_version);
        d.finish()
    }

    /// Parses like Go's `bson.Unmarshal` into `Header`: missing fields stay empty,
    /// unknown fields are ignored, a field of the wrong type is an error.
    pub fn from_bson(bytes: &[u8]) -> Result<Header, String> {
        let mut h = Header {
            concurrent_collections: 0,
            format_version: String::new(),
            server_version: String::new(),
            tool_version: String::new(),
        };
        for el in raw(bytes)?.iter() {
            let (key, value) = el.map_err(|e| e.to_string())?;
            match key {
                "concurrent_collections" => h.concurrent_collections = int32(key, value)?,
                "version" => h.format_version = string(key, value)?.into(),
                "server_version" => h.server_version = string(key, value)?.into(),
                "tool_version" => h.tool_version = string(key, value)?.into(),
                _ => {}
            }
        }
        Ok(h)
    }
}

/// `StrToVersion` in mongo-tools `common/db/version.go`: build suffixes after `-` or
/// `+` dropped, exactly three numeric parts.
fn parse_version(v: &str) -> Option<(i64, i64, i64)> {
    let v = v.split('-').next()?.split('+').next()?;
    let mut parts = v.splitn(3, '.');
    let a = parts.next()?.parse().ok()?;
    let b = parts.next()?.parse().ok()?;
    let c = parts.next()?.parse().ok()?;
    Some((a, b, c))
}

/// What a prelude entry describes (`CollectionMetadata.Type`, from the `type` field
/// of `listCollections`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CollectionType {
    /// `"collection"`.
    Collection,
    /// `"view"`: mongodump writes an empty data block for it.
    View,
    /// `"timeseries"`: the data is in `system.buckets.<name>` (before 8.3).
    Timeseries,
    /// `""` or no `type` field: the oplog, users/roles entries, archives from tools
    /// older than the `type` field.
    Unset,
    /// Anything else, kept as written.
    Other(String),
}

impl CollectionType {
    pub fn parse(s: &str) -> CollectionType {
        match s {
            "collection" => CollectionType::Collection,
            "view" => CollectionType::View,
            "timeseries" => CollectionType::Timeseries,
            "" => CollectionType::Unset,
            other => CollectionType::Other(other.into()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            CollectionType::Collection => "collection",
            CollectionType::View => "view",
            CollectionType::Timeseries => "timeseries",
            CollectionType::Unset => "",
            CollectionType::Other(s) => s,
        }
    }
}

/// One prelude entry (`archive.go` `CollectionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionMetadata {
    pub db: String,
    pub collection: String,
    /// The `<coll>.metadata.json` text (options, indexes, uuid, type) as canonical
    /// extended JSON; empty for the oplog and users/roles entries.
    pub metadata: String,
    /// `size`: mongodump 100.x never sets it, so it is 0 in every archive seen.
    pub size: i64,
    pub kind: CollectionType,
}

impl CollectionMetadata {
    pub fn new(
        db: impl Into<String>,
        collection: impl Into<String>,
        metadata: impl Into<String>,
        kind: CollectionType,
    ) -> CollectionMetadata {
        CollectionMetadata {
            db: db.into(),
            collection: collection.into(),
            metadata: metadata.into(),
            size: 0,
            kind,
        }
    }

    /// The prelude entry mongodump writes for `--oplog` (`prepare.go`
    /// `CreateOplogIntents`: database `""`, collection `oplog`, no metadata).
    pub fn oplog() -> CollectionMetadata {
        CollectionMetadata::new("", "oplog", "", CollectionType::Unset)
    }

    /// The namespace under which this entry's documents appear in the archive:
    /// `system.buckets.<name>` for time series from servers before 8.3
    /// (`demultiplexer.go` `CreateDemux`, `intents.Intent.DataCollection`).
    pub fn data_namespace(&self, header: &Header) -> Namespace {
        if self.kind == CollectionType::Timeseries && !header.viewless_timeseries() {
            Namespace::new(
                self.db.clone(),
                format!("{TIMESERIES_BUCKET_PREFIX}{}", self.collection),
            )
        } else {
            Namespace::new(self.db.clone(), self.collection.clone())
        }
    }

    pub fn to_bson(&self) -> Vec<u8> {
        let mut d = DocBuilder::new();
        d.string("db", &self.db);
        d.string("collection", &self.collection);
        d.string("metadata", &self.metadata);
        // Go `int`: the driver writes int32 when the value fits, int64 otherwise.
        match i32::try_from(self.size) {
            Ok(n) => d.int32("size", n),
            Err(_) => d.int64("size", self.size),
        }
        d.string("type", self.kind.as_str());
        d.finish()
    }

    pub fn from_bson(bytes: &[u8]) -> Result<CollectionMetadata, String> {
        let mut m = CollectionMetadata::new("", "", "", CollectionType::Unset);
        for el in raw(bytes)?.iter() {
            let (key, value) = el.map_err(|e| e.to_string())?;
            match key {
                "db" => m.db = string(key, value)?.into(),
                "collection" => m.collection = string(key, value)?.into(),
                "metadata" => m.metadata = string(key, value)?.into(),
                "size" => {
                    m.size = match value {
                        RawBsonRef::Int32(n) => n.into(),
                        RawBsonRef::Int64(n) => n,
                        other => return Err(wrong_type(key, "an integer", other)),
                    }
                }
                "type" => m.kind = CollectionType::parse(string(key, value)?),
                _ => {}
            }
        }
        Ok(m)
    }
}

/// A namespace as the archive names it. The oplog of `mongodump --oplog` is
/// database `""`, collection `oplog`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace {
    pub db: String,
    pub collection: String,
}

impl Namespace {
    pub fn new(db: impl Into<String>, collection: impl Into<String>) -> Namespace {
        Namespace {
            db: db.into(),
            collection: collection.into(),
        }
    }

    /// Where `mongodump --archive --oplog` puts the oplog.
    pub fn oplog() -> Namespace {
        Namespace::new("", "oplog")
    }

    pub fn is_oplog(&self) -> bool {
        self.db.is_empty() && self.collection == "oplog"
    }
}

impl std::fmt::Display for Namespace {
    /// `db.collection`; the root-level oplog (database `""`) shows as `oplog`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.db.is_empty() {
            f.write_str(&self.collection)
        } else {
            write!(f, "{}.{}", self.db, self.collection)
        }
    }
}

/// The document that opens a segment or closes a namespace (`archive.go`
/// `NamespaceHeader`, with its hand-written `MarshalBSON`/`UnmarshalBSON`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceHeader {
    pub db: String,
    pub collection: String,
    pub eof: bool,
    /// Only meaningful when `eof`; `0` in segment headers.
    pub crc: u64,
}

impl NamespaceHeader {
    pub fn to_bson(&self) -> Vec<u8> {
        let mut d = DocBuilder::new();
        d.string("db", &self.db);
        d.string("collection", &self.collection);
        d.boolean("EOF", self.eof);
        d.int64("CRC", self.crc as i64);
        d.finish()
    }

    /// As strict as Go's `UnmarshalBSON`: unknown fields and wrong types are errors.
    pub fn from_bson(bytes: &[u8]) -> Result<NamespaceHeader, String> {
        let mut h = NamespaceHeader {
            db: String::new(),
            collection: String::new(),
            eof: false,
            crc: 0,
        };
        for el in raw(bytes)?.iter() {
            let (key, value) = el.map_err(|e| e.to_string())?;
            match key {
                "db" => h.db = string(key, value)?.into(),
                "collection" => h.collection = string(key, value)?.into(),
                "EOF" => match value {
                    RawBsonRef::Boolean(b) => h.eof = b,
                    other => return Err(wrong_type(key, "a boolean", other)),
                },
                "CRC" => match value {
                    RawBsonRef::Int64(n) => h.crc = n as u64,
                    other => return Err(wrong_type(key, "an int64", other)),
                },
                other => return Err(format!("unknown field `{other}` in a namespace header")),
            }
        }
        Ok(h)
    }
}

fn raw(bytes: &[u8]) -> Result<&RawDocument, String> {
    RawDocument::from_bytes(bytes).map_err(|e| e.to_string())
}

fn string<'a>(key: &str, v: RawBsonRef<'a>) -> Result<&'a str, String> {
    match v {
        RawBsonRef::String(s) => Ok(s),
        other => Err(wrong_type(key, "a string", other)),
    }
}

fn int32(key: &str, v: RawBsonRef<'_>) -> Result<i32, String> {
    match v {
        RawBsonRef::Int32(n) => Ok(n),
        RawBsonRef::Int64(n) => {
            i32::try_from(n).map_err(|_| format!("`{key}` is {n}, out of range"))
        }
        other => Err(wrong_type(key, "an int32", other)),
    }
}

fn wrong_type(key: &str, want: &str, got: RawBsonRef<'_>) -> String {
    format!("`{key}` is BSON {:?}, expected {want}", got.element_type())
}

/// Builds a BSON document field by field, in the order given (the order Go's
/// `bson.Marshal` uses for struct fields).
struct DocBuilder(Vec<u8>);

impl DocBuilder {
    fn new() -> DocBuilder {
        DocBuilder(vec![0; 4])
    }

    fn key(&mut self, tag: u8, key: &str) {
        self.0.push(tag);
        self.0.extend_from_slice(key.as_bytes());
        self.0.push(0);
    }

    fn string(&mut self, key: &str, v: &str) {
        self.key(0x02, key);
        self.0
            .extend_from_slice(&((v.len() + 1) as i32).to_le_bytes());
        self.0.extend_from_slice(v.as_bytes());
        self.0.push(0);
    }

    fn int32(&mut self, key: &str, v: i32) {
        self.key(0x10, key);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn int64(&mut self, key: &str, v: i64) {
        self.key(0x12, key);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn boolean(&mut self, key: &str, v: bool) {
        self.key(0x08, key);
        self.0.push(v as u8);
    }

    fn finish(mut self) -> Vec<u8> {
        self.0.push(0);
        let len = self.0.len() as i32;
        self.0[..4].copy_from_slice(&len.to_le_bytes());
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_round_trip_and_match_the_bson_crate() {
        let h = Header::new("7.0.14", "100.18.0", 4);
        assert_eq!(Header::from_bson(&h.to_bson()).unwrap(), h);
        let via_crate = bson::to_vec(&bson::doc! {
            "concurrent_collections": 4i32, "version": "0.1",
            "server_version": "7.0.14", "tool_version": "100.18.0",
        })
        .unwrap();
        assert_eq!(h.to_bson(), via_crate);

        let m = CollectionMetadata::new(
            "shop",
            "orders",
            "{\"options\":{}}",
            CollectionType::Collection,
        );
        assert_eq!(CollectionMetadata::from_bson(&m.to_bson()).unwrap(), m);
        let big = CollectionMetadata {
            size: 1 << 40,
            ..m.clone()
        };
        assert_eq!(CollectionMetadata::from_bson(&big.to_bson()).unwrap(), big);

        let n = NamespaceHeader {
            db: "".into(),
            collection: "oplog".into(),
            eof: true,
            crc: u64::MAX - 5,
        };
        assert_eq!(NamespaceHeader::from_bson(&n.to_bson()).unwrap(), n);
    }

    #[test]
    fn namespace_header_is_strict_like_go() {
        let extra = bson::to_vec(&bson::doc! { "db": "a", "collection": "b", "x": 1 }).unwrap();
        assert!(NamespaceHeader::from_bson(&extra)
            .unwrap_err()
            .contains("unknown field"));
        let crc32 =
            bson::to_vec(&bson::doc! { "db": "a", "collection": "b", "CRC": 1i32 }).unwrap();
        assert!(NamespaceHeader::from_bson(&crc32)
            .unwrap_err()
            .contains("CRC"));
    }

    #[test]
    fn timeseries_data_namespace_follows_the_server_version() {
        let ts = CollectionMetadata::new("d", "t", "", CollectionType::Timeseries);
        for (v, coll) in [
            ("5.0.3", "system.buckets.t"),
            ("8.2.9", "system.buckets.t"),
            ("unknown", "system.buckets.t"),
            ("8.3.0-rc1", "t"),
            ("9.0.0", "t"),
        ] {
            assert_eq!(
                ts.data_namespace(&Header::new(v, "", 1)).collection,
                coll,
                "{v}"
            );
        }
    }
}
