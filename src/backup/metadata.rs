//! `<coll>.metadata.json` as mongodump writes it (and as an archive's prelude holds
//! it): canonical extended JSON with `options`, `indexes`, `uuid`,
//! `collectionName` and `type` (`collection`, `view`, `timeseries`). mongo-tools
//! `mongorestore/metadata.go` `MetadataFromJSON` reads the same keys.

use std::io::Read;
use std::path::Path;

use bson::{Bson, Document};

use super::error::BackupError;
use crate::oplog::source::decompressed;

/// The parsed metadata of one namespace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    /// `create` options: `capped`, `size`, `max`, `validator`, `collation`,
    /// `timeseries`, `clusteredIndex`, `expireAfterSeconds`, `viewOn`, `pipeline`, ...
    pub options: Document,
    /// Index specs (`v`, `key`, `name`, ...), as dumped.
    pub indexes: Vec<Document>,
    /// The collection UUID as 32 hex digits, when dumped (4.0+ with `--oplog`...).
    pub uuid: Option<String>,
    /// The full collection name, for dumps whose file names were truncated.
    pub collection_name: Option<String>,
    /// `type`: `collection`, `view`, `timeseries` (empty in old dumps).
    pub kind: String,
}

impl Metadata {
    /// A view: `type: "view"`, or `options.viewOn` in dumps older than `type`.
    pub fn is_view(&self) -> bool {
        self.kind == "view" || self.options.contains_key("viewOn")
    }

    pub fn is_timeseries(&self) -> bool {
        self.kind == "timeseries" || self.options.contains_key("timeseries")
    }

    pub fn is_capped(&self) -> bool {
        matches!(self.options.get("capped"), Some(Bson::Boolean(true)))
    }

    /// `(index name, expireAfterSeconds)` of every TTL index.
    pub fn ttl_indexes(&self) -> Vec<(String, i64)> {
        self.indexes
            .iter()
            .filter_map(|ix| {
                let secs = match ix.get("expireAfterSeconds")? {
                    Bson::Int32(n) => *n as i64,
                    Bson::Int64(n) => *n,
                    Bson::Double(d) => *d as i64,
                    _ => return None,
                };
                Some((ix.get_str("name").unwrap_or("?").to_string(), secs))
            })
            .collect()
    }

    /// Parses the JSON text of a metadata file or archive prelude entry.
    pub fn parse(text: &[u8], origin: &Path) -> Result<Metadata, BackupError> {
        let bad = |detail: String| BackupError::Metadata {
            path: origin.to_path_buf(),
            detail,
        };
        let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| bad(e.to_string()))?;
        if !v.is_object() {
            return Err(bad("the top level is not an object".into()));
        }
        let doc = match Bson::try_from(v) {
            Ok(Bson::Document(d)) => d,
            Ok(_) => return Err(bad("the top level is not an object".into())),
            Err(e) => return Err(bad(format!("not extended JSON: {e}"))),
        };
        let options = match doc.get("options") {
            None | Some(Bson::Null) => Document::new(),
            Some(Bson::Document(d)) => d.clone(),
            Some(_) => return Err(bad("`options` is not an object".into())),
        };
        let indexes = match doc.get("indexes") {
            None | Some(Bson::Null) => Vec::new(),
            Some(Bson::Array(a)) => a
                .iter()
                .map(|ix| match ix {
                    Bson::Document(d) => Ok(d.clone()),
                    _ => Err(bad("an entry of `indexes` is not an object".into())),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("`indexes` is not an array".into())),
        };
        let text_of = |k: &str| {
            doc.get_str(k)
                .ok()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Ok(Metadata {
            options,
            indexes,
            uuid: text_of("uuid"),
            collection_name: text_of("collectionName"),
            kind: text_of("type").unwrap_or_default(),
        })
    }

    /// Reads a metadata file, gzip-compressed or not (by content).
    pub fn read(path: &Path) -> Result<Metadata, BackupError> {
        let file = super::open_file(path)?;
        let (mut r, _) = decompressed(&path.display().to_string(), file)?;
        let mut text = Vec::new();
        r.read_to_end(&mut text).map_err(|source| BackupError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Metadata::parse(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_mongodump_writes() {
        // As mongodump 100.x writes it (canonical extended JSON).
        let text = br#"{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"},
            {"v":{"$numberInt":"2"},"key":{"createdAt":{"$numberInt":"1"}},"name":"createdAt_1","expireAfterSeconds":{"$numberInt":"3600"}}],
            "uuid":"0123456789abcdef0123456789abcdef","collectionName":"events","type":"collection",
            "options":{"capped":true,"size":{"$numberLong":"4096"}}}"#;
        let m = Metadata::parse(text, Path::new("x.metadata.json")).unwrap();
        assert!(m.is_capped() && !m.is_view() && !m.is_timeseries());
        assert_eq!(m.indexes.len(), 2);
        assert_eq!(m.ttl_indexes(), vec![("createdAt_1".to_string(), 3600)]);
        assert_eq!(m.uuid.as_deref(), Some("0123456789abcdef0123456789abcdef"));
        assert_eq!(m.collection_name.as_deref(), Some("events"));
        assert_eq!(m.options.get_i64("size").unwrap(), 4096);
    }

    #[test]
    fn old_views_and_timeseries() {
        let v = Metadata::parse(
            br#"{"options":{"viewOn":"orders","pipeline":[]},"indexes":[]}"#,
            Path::new("v"),
        )
        .unwrap();
        assert!(v.is_view());
        let t = Metadata::parse(
            br#"{"options":{"timeseries":{"timeField":"t","granularity":"seconds"}},"indexes":[],"type":"timeseries","collectionName":"weather"}"#,
            Path::new("t"),
        )
        .unwrap();
        assert!(t.is_timeseries());
    }

    #[test]
    fn bad_metadata_is_an_error_naming_the_file() {
        for text in [
            &b"{not json"[..],
            b"[1]",
            br#"{"options":3}"#,
            br#"{"indexes":[1]}"#,
        ] {
            let e = Metadata::parse(text, Path::new("db/c.metadata.json")).unwrap_err();
            assert!(e.to_string().contains("db/c.metadata.json"), "{e}");
        }
    }
}
