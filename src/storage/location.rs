//! Where something is: a local path or an object in a bucket, parsed from what the user
//! typed.
//!
//! A `Location` never holds a secret: a URL carrying credentials (`s3://key:secret@bucket`)
//! or a query string (a pre-signed or SAS URL) is refused while parsing, and the refusal
//! itself prints the URL with that part masked. So `Display` and `Debug` of a `Location`
//! are safe to print anywhere.
//!
//! Object keys are taken as typed, without percent-decoding, as `aws s3` and `gsutil` take
//! them; only `file://` URLs are percent-decoded (RFC 8089).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::error::StorageError;

/// The object stores pitr speaks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Amazon S3 and S3-compatible stores (MinIO, Ceph, ...): `s3://bucket/key`.
    S3,
    /// Google Cloud Storage: `gs://bucket/key`.
    Gcs,
    /// Azure Blob Storage: `az://container/key` (the account from `AZURE_STORAGE_ACCOUNT_NAME`).
    Azure,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::S3 => "s3",
            Scheme::Gcs => "gs",
            Scheme::Azure => "az",
        }
    }

    /// What the bucket is called in this store's own documentation.
    pub fn bucket_word(self) -> &'static str {
        match self {
            Scheme::Azure => "container",
            Scheme::S3 | Scheme::Gcs => "bucket",
        }
    }
}

/// A local path, or an object (or a prefix of objects) in a bucket.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Location {
    Local(PathBuf),
    Object {
        scheme: Scheme,
        bucket: String,
        /// The key without a leading or trailing `/`; empty for the bucket's root.
        key: String,
    },
}

/// The schemes accepted, for error messages.
const ACCEPTED: &str = "s3://, gs://, az://, file:// or a local path";

impl Location {
    /// Parses what the user typed: `s3://bucket/prefix`, `gs://...`, `az://container/...`,
    /// `file:///path`, or a bare path (which stays a local path, even if it does not exist).
    pub fn parse(input: &str) -> Result<Location, StorageError> {
        let Some((scheme, rest)) = split_scheme(input) else {
            if input.is_empty() {
                return Err(StorageError::InvalidLocation {
                    input: String::new(),
                    reason: "it is empty".into(),
                });
            }
            return Ok(Location::Local(PathBuf::from(input)));
        };
        let scheme_lc = scheme.to_ascii_lowercase();
        // Credentials in the authority (`user:secret@host`), checked for every scheme
        // before anything else so that no later message can echo them.
        let authority_end = rest.find('/').unwrap_or(rest.len());
        if rest[..authority_end].contains('@') {
            return Err(StorageError::SecretInUrl {
                masked: mask_url(input),
                what: "credentials before `@`",
            });
        }
        if rest.contains('?') || rest.contains('#') {
            let what = if looks_signed(rest) {
                "a signed query string (pre-signed or SAS URL)"
            } else {
                "a query string or fragment"
            };
            return Err(StorageError::SecretInUrl {
                masked: mask_url(input),
                what,
            });
        }
        let scheme = match scheme_lc.as_str() {
            "s3" | "s3a" => Scheme::S3,
            "gs" | "gcs" => Scheme::Gcs,
            "az" | "azure" => Scheme::Azure,
            "file" => return parse_file_url(input, rest),
            _ => {
                return Err(StorageError::InvalidLocation {
                    input: input.to_string(),
                    reason: format!("`{scheme}://` is not a storage pitr knows ({ACCEPTED})"),
                })
            }
        };
        let (bucket, key) = rest.split_at(authority_end);
        if bucket.is_empty() {
            return Err(StorageError::InvalidLocation {
                input: input.to_string(),
                reason: format!("the {} name is missing", scheme.bucket_word()),
            });
        }
        if let Some(bad) = bucket
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
        {
            return Err(StorageError::InvalidLocation {
                input: input.to_string(),
                reason: format!(
                    "the {} name `{bucket}` holds `{bad}`, which no {} name may",
                    scheme.bucket_word(),
                    scheme.bucket_word()
                ),
            });
        }
        // S3, GCS and Azure all want 3 to 63 characters (GCS up to 222 with dots);
        // checked here so that the message names the rule instead of a 400 from the store.
        let max = if scheme == Scheme::Gcs && bucket.contains('.') {
            222
        } else {
            63
        };
        if !(3..=max).contains(&bucket.len()) {
            return Err(StorageError::InvalidLocation {
                input: input.to_string(),
                reason: format!(
                    "a {} name has 3 to {max} characters; `{bucket}` has {}",
                    scheme.bucket_word(),
                    bucket.len()
                ),
            });
        }
        // A trailing `/` only says "a prefix"; doubled or inner empty segments are
        // refused rather than guessed at (stray slashes broke signatures in PBM).
        let key = key.trim_start_matches('/').trim_end_matches('/');
        if key.split('/').any(|seg| seg == "." || seg == "..")
            || (!key.is_empty() && key.split('/').any(str::is_empty))
            || rest[authority_end..].starts_with("//")
        {
            return Err(StorageError::InvalidLocation {
                input: input.to_string(),
                reason: "the key has an empty, `.` or `..` segment (a doubled `/`?)".into(),
            });
        }
        Ok(Location::Object {
            scheme,
            bucket: bucket.to_string(),
            key: key.to_string(),
        })
    }

    /// True for a local path (also one given as `file://`).
    pub fn is_local(&self) -> bool {
        matches!(self, Location::Local(_))
    }

    /// The local path, for a local location.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Object { .. } => None,
        }
    }

    /// The location of `name` under this one (`s3://b/dir` + `x.bson` = `s3://b/dir/x.bson`).
    /// `name` may hold `/` to go several levels down.
    pub fn join(&self, name: &str) -> Location {
        let name = name.trim_matches('/');
        match self {
            Location::Local(p) => Location::Local(p.join(name)),
            Location::Object {
                scheme,
                bucket,
                key,
            } => Location::Object {
                scheme: *scheme,
                bucket: bucket.clone(),
                key: if key.is_empty() {
                    name.to_string()
                } else {
                    format!("{key}/{name}")
                },
            },
        }
    }

    /// The path of `self` below `base`, `/`-separated (`s3://b/d/x/y` below `s3://b/d`
    /// is `x/y`); `None` when it is not below it, or is `base` itself.
    pub fn relative_to(&self, base: &Location) -> Option<String> {
        match (self, base) {
            (Location::Local(p), Location::Local(b)) => p
                .strip_prefix(b)
                .ok()
                .filter(|r| !r.as_os_str().is_empty())
                .map(|r| r.to_string_lossy().into_owned()),
            (
                Location::Object {
                    scheme,
                    bucket,
                    key,
                },
                Location::Object {
                    scheme: bs,
                    bucket: bb,
                    key: bk,
                },
            ) if scheme == bs && bucket == bb => {
                if bk.is_empty() {
                    (!key.is_empty()).then(|| key.clone())
                } else {
                    key.strip_prefix(bk.as_str())
                        .and_then(|r| r.strip_prefix('/'))
                        .filter(|r| !r.is_empty())
                        .map(str::to_string)
                }
            }
            _ => None,
        }
    }

    /// The location one level up (`s3://b/d/x` gives `s3://b/d`; a bucket's root and
    /// `/` give themselves; a relative file name gives `.`).
    pub fn parent(&self) -> Location {
        match self {
            Location::Local(p) => Location::Local(match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                Some(_) => PathBuf::from("."),
                None => p.clone(),
            }),
            Location::Object {
                scheme,
                bucket,
                key,
            } => Location::Object {
                scheme: *scheme,
                bucket: bucket.clone(),
                key: key.rsplit_once('/').map_or("", |(d, _)| d).to_string(),
            },
        }
    }

    /// The same place with `suffix` added to its last segment (`s3://b/out` gives
    /// `s3://b/out-destroyed`).
    pub fn with_name_suffix(&self, suffix: &str) -> Location {
        match self {
            Location::Local(p) => {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "dump".into());
                Location::Local(p.with_file_name(format!("{name}{suffix}")))
            }
            Location::Object {
                scheme,
                bucket,
                key,
            } => Location::Object {
                scheme: *scheme,
                bucket: bucket.clone(),
                key: format!("{key}{suffix}"),
            },
        }
    }

    /// A `PathBuf` that prints as this location: the path itself, or the URL. For the
    /// fields typed as paths (a backup's files, errors, reports): [`of_path`](Self::of_path)
    /// turns it back into this location, so it must be opened through that, never
    /// with `std::fs` (which would take `s3://b/k` for a relative path).
    pub fn display_path(&self) -> PathBuf {
        match self {
            Location::Local(p) => p.clone(),
            Location::Object { .. } => PathBuf::from(self.to_string()),
        }
    }

    /// What a path-typed value names: a URL given where a path was typed (a clap
    /// `PathBuf` flag holding `s3://b/k`, or a [`display_path`](Self::display_path))
    /// is parsed as one (refusing secrets, as [`parse`](Self::parse)); anything else
    /// is the local path as is, also when it is not UTF-8.
    pub fn of_path(p: &Path) -> Result<Location, StorageError> {
        match p.to_str() {
            Some(s) if split_scheme(s).is_some() => Location::parse(s),
            _ => Ok(Location::Local(p.to_path_buf())),
        }
    }

    /// The object-storage location a path-typed value names (`s3://b/k` typed
    /// where a path goes, or a [`display_path`](Self::display_path)); None for a
    /// local path or a `file://` URL. A value that does not parse as a URL (a
    /// secret in it) is None too: where it is read, [`of_path`](Self::of_path)
    /// refuses it.
    pub fn in_bucket(p: &Path) -> Option<Location> {
        Location::of_path(p).ok().filter(|l| !l.is_local())
    }

    /// The name a download of this location gets in the current directory (`aws s3
    /// cp --recursive URL NAME`): its last segment, or the bucket's name for a
    /// bucket's root (whose [`file_name`](Self::file_name) is empty).
    pub fn local_name(&self) -> String {
        let name = self.file_name();
        match self {
            Location::Object { bucket, .. } if name.is_empty() => bucket.clone(),
            _ => name,
        }
    }

    /// The last segment of the path or key (`""` for a bucket's root).
    pub fn file_name(&self) -> String {
        match self {
            Location::Local(p) => p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Location::Object { key, .. } => key.rsplit('/').next().unwrap_or("").to_string(),
        }
    }
}

impl FromStr for Location {
    type Err = StorageError;
    fn from_str(s: &str) -> Result<Location, StorageError> {
        Location::parse(s)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Object {
                scheme,
                bucket,
                key,
            } => {
                if key.is_empty() {
                    write!(f, "{}://{bucket}", scheme.as_str())
                } else {
                    write!(f, "{}://{bucket}/{key}", scheme.as_str())
                }
            }
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Same text as Display: a Location holds no secret, and `{:?}` in a log line
        // should read like what the user typed.
        write!(f, "Location({self})")
    }
}

/// `scheme://rest`, where the scheme is what RFC 3986 allows (a letter, then letters,
/// digits, `+`, `-`, `.`). Anything else (`./s3://x`, `C:/x`, `dir/a:b`) is a path.
fn split_scheme(input: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = input.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    if first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        Some((scheme, rest))
    } else {
        None
    }
}

fn parse_file_url(input: &str, rest: &str) -> Result<Location, StorageError> {
    // file:///abs/path or file://localhost/abs/path (RFC 8089); another host is a
    // network share pitr cannot reach through a file URL.
    let (host, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return Err(StorageError::InvalidLocation {
            input: input.to_string(),
            reason: format!(
                "a file URL names this machine (`file:///path`), not the host `{host}`"
            ),
        });
    }
    if path.is_empty() {
        return Err(StorageError::InvalidLocation {
            input: input.to_string(),
            reason: "the path is missing (write `file:///absolute/path`)".into(),
        });
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| StorageError::InvalidLocation {
            input: input.to_string(),
            reason: "its percent-escapes do not decode to UTF-8".into(),
        })?;
    Ok(Location::Local(PathBuf::from(decoded.into_owned())))
}

/// Query parameters that carry a credential in pre-signed S3, GCS and Azure SAS URLs.
fn looks_signed(rest: &str) -> bool {
    let lower = rest.to_ascii_lowercase();
    [
        "sig=",
        "signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-credential",
        "token",
        "key=",
        "secret",
    ]
    .iter()
    .any(|p| lower.contains(p))
}

/// `input` with any userinfo and any query string or fragment replaced by `***`, for
/// messages about a URL that cannot be parsed or is refused.
pub fn mask_url(input: &str) -> String {
    let Some((scheme, rest)) = input.split_once("://") else {
        return input.to_string();
    };
    let mut rest = rest.to_string();
    let authority_end = rest.find('/').unwrap_or(rest.len());
    if let Some(at) = rest[..authority_end].rfind('@') {
        rest.replace_range(..at, "***");
    }
    if let Some(q) = rest.find(['?', '#']) {
        rest.truncate(q + 1);
        rest.push_str("***");
    }
    format!("{scheme}://{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(scheme: Scheme, bucket: &str, key: &str) -> Location {
        Location::Object {
            scheme,
            bucket: bucket.into(),
            key: key.into(),
        }
    }

    #[test]
    fn parses_each_kind_of_location() {
        let cases: &[(&str, Location)] = &[
            ("s3://bkt/p/x.bson", obj(Scheme::S3, "bkt", "p/x.bson")),
            ("s3://bkt/prefix/", obj(Scheme::S3, "bkt", "prefix")),
            ("s3://bkt", obj(Scheme::S3, "bkt", "")),
            ("s3://bkt/", obj(Scheme::S3, "bkt", "")),
            ("S3://bkt/k", obj(Scheme::S3, "bkt", "k")),
            ("s3a://bkt/k", obj(Scheme::S3, "bkt", "k")),
            ("gs://my-bucket/a/b", obj(Scheme::Gcs, "my-bucket", "a/b")),
            ("az://container/a", obj(Scheme::Azure, "container", "a")),
            ("gs://a.b.c/k", obj(Scheme::Gcs, "a.b.c", "k")),
            ("azure://container/a", obj(Scheme::Azure, "container", "a")),
            // Keys are taken as typed, like `aws s3 ls` shows them.
            (
                "s3://bkt/dump 2024/%41.bson",
                obj(Scheme::S3, "bkt", "dump 2024/%41.bson"),
            ),
            ("file:///tmp/a%20b", Location::Local("/tmp/a b".into())),
            ("file://localhost/tmp/x", Location::Local("/tmp/x".into())),
            ("dump/oplog.bson", Location::Local("dump/oplog.bson".into())),
            ("/abs/path", Location::Local("/abs/path".into())),
            ("./s3://odd", Location::Local("./s3://odd".into())),
            ("dir/a:b", Location::Local("dir/a:b".into())),
        ];
        for (input, want) in cases {
            assert_eq!(&Location::parse(input).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_mean() {
        for input in [
            "",
            "http://host/x",
            "minio://b/x",
            "s3:///key",
            "s3://bkt//x",
            "s3://bkt/a//x",
            "s3://bkt/../x",
            "s3://bkt/./x",
            "s3://b/x",
            "az://a-container-name-that-is-much-too-long-for-any-store-to-take-really/x",
            "s3://bad bucket/x",
            "file://otherhost/x",
            "file://",
        ] {
            let e = Location::parse(input).unwrap_err();
            assert!(
                matches!(e, StorageError::InvalidLocation { .. }),
                "{input}: {e:?}"
            );
        }
    }

    #[test]
    fn a_url_with_a_secret_is_refused_and_the_secret_never_printed() {
        for (input, secret) in [
            ("s3://AKIAXXXX:wJalrSECRET@bucket/prefix", "wJalrSECRET"),
            ("s3://AKIAXXXX@bucket/prefix", "AKIAXXXX"),
            ("gs://user:pw-SECRET@bucket/x", "pw-SECRET"),
            ("az://cnt/x?sv=2024&sig=SASSECRET", "SASSECRET"),
            (
                "s3://bkt/k?X-Amz-Credential=AK&X-Amz-Signature=SIGSECRET",
                "SIGSECRET",
            ),
            ("file://u:FILESECRET@/tmp/x", "FILESECRET"),
            ("http://u:HTTPSECRET@host/x", "HTTPSECRET"),
        ] {
            let e = Location::parse(input).unwrap_err();
            assert!(
                matches!(e, StorageError::SecretInUrl { .. }),
                "{input}: {e:?}"
            );
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains(secret), "{input} leaked in {shown}");
            assert!(shown.contains("***"), "{shown}");
        }
    }

    #[test]
    fn display_and_debug_read_like_the_input() {
        let l = Location::parse("s3://bkt/p/").unwrap();
        assert_eq!(l.to_string(), "s3://bkt/p");
        assert_eq!(format!("{l:?}"), "Location(s3://bkt/p)");
        assert_eq!(l.join("x.bson").to_string(), "s3://bkt/p/x.bson");
        assert_eq!(
            Location::parse("gs://bkt").unwrap().join("/a/").to_string(),
            "gs://bkt/a"
        );
        assert_eq!(l.join("x.bson").file_name(), "x.bson");
    }

    #[test]
    fn a_download_is_named_by_the_last_segment_or_the_bucket() {
        let name = |u: &str| Location::parse(u).unwrap().local_name();
        assert_eq!(name("s3://bkt/restored/2026-11-21"), "2026-11-21");
        assert_eq!(name("s3://bkt/r.archive"), "r.archive");
        assert_eq!(name("s3://bkt"), "bkt");
        assert_eq!(name("gs://bkt/"), "bkt");
        assert_eq!(name("az://cont"), "cont");
    }

    #[test]
    fn of_path_reads_back_display_path() {
        for u in ["s3://bkt/d/x.bson", "az://cont/a", "gs://bkt"] {
            let l = Location::parse(u).unwrap();
            assert_eq!(Location::of_path(&l.display_path()).unwrap(), l);
            assert_eq!(
                Location::of_path(&l.display_path().join("y")).unwrap(),
                l.join("y")
            );
        }
        assert_eq!(
            Location::of_path(Path::new("dump/x")).unwrap(),
            Location::Local("dump/x".into())
        );
        assert_eq!(
            Location::of_path(Path::new("file:///tmp/d")).unwrap(),
            Location::Local("/tmp/d".into())
        );
        assert!(matches!(
            Location::of_path(Path::new("s3://k:s@bkt/x")),
            Err(StorageError::SecretInUrl { .. })
        ));
    }

    #[test]
    fn relative_parent_and_suffix() {
        let base = Location::parse("s3://bkt/d").unwrap();
        let x = Location::parse("s3://bkt/d/x/y.bson").unwrap();
        assert_eq!(x.relative_to(&base).as_deref(), Some("x/y.bson"));
        assert_eq!(base.relative_to(&base), None);
        assert_eq!(
            Location::parse("s3://bkt/dx/y").unwrap().relative_to(&base),
            None
        );
        let root = Location::parse("s3://bkt").unwrap();
        assert_eq!(x.relative_to(&root).as_deref(), Some("d/x/y.bson"));
        assert_eq!(x.parent().to_string(), "s3://bkt/d/x");
        assert_eq!(base.parent().to_string(), "s3://bkt");
        assert_eq!(root.parent().to_string(), "s3://bkt");
        assert_eq!(
            base.with_name_suffix("-destroyed").to_string(),
            "s3://bkt/d-destroyed"
        );
        let l = Location::parse("/a/b/c").unwrap();
        assert_eq!(
            Location::parse("/a/b/c/d")
                .unwrap()
                .relative_to(&l)
                .as_deref(),
            Some("d")
        );
        assert_eq!(l.parent(), Location::Local("/a/b".into()));
        assert_eq!(
            Location::parse("x").unwrap().parent(),
            Location::Local(".".into())
        );
    }

    #[test]
    fn mask_url_hides_userinfo_and_query() {
        assert_eq!(mask_url("s3://k:s@b/x"), "s3://***@b/x");
        assert_eq!(mask_url("az://c/x?sig=abc"), "az://c/x?***");
        assert_eq!(mask_url("http://e:1/x#frag"), "http://e:1/x#***");
        assert_eq!(mask_url("plain/path"), "plain/path");
    }
}
