//! What can go wrong with a store, in words that lead somewhere.
//!
//! Every error names the location (masked: a `Location` holds no secret) and, through
//! [`Hint`], what to check. object_store reports HTTP failures as a few broad variants
//! with the server's response body in the text (its `RetryError`, which holds the status
//! and body, is crate-private), so [`classify`] reads the variant, the transport error
//! kind and the store's error code from that text (S3's `NoSuchBucket`,
//! `RequestTimeTooSkewed`, ...; Azure's `ContainerNotFound`, `AuthenticationFailed`).
//! The cause kept under each error is that text with any query string masked, since
//! a SAS token or a pre-signed URL could otherwise reach the terminal.

use std::error::Error as StdError;
use std::fmt;

use object_store::client::{HttpError, HttpErrorKind};

use super::location::Scheme;
use super::settings::Settings;
use crate::error::Hint;

/// The cause of a storage error: the underlying chain flattened to one line, query
/// strings masked.
#[derive(Debug)]
pub struct Cause(String);

impl Cause {
    pub fn of(e: &(dyn StdError + 'static)) -> Cause {
        let mut parts: Vec<String> = Vec::new();
        let mut next = Some(e);
        while let Some(e) = next {
            let s = e.to_string();
            // Many links repeat their source's text in their own.
            if !parts.iter().any(|p| p.contains(&s)) {
                parts.push(s);
            }
            next = e.source();
        }
        Cause(mask_queries(&parts.join(": ")))
    }

    pub fn text(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for Cause {}

/// Replaces the query string of every URL in `text` with `***`.
fn mask_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '>' || c == '<')
            .unwrap_or(tail.len());
        let url = &tail[..end];
        match url.find('?') {
            Some(q) => {
                out.push_str(&url[..=q]);
                out.push_str("***");
            }
            None => out.push_str(url),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// An operation on a store, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Head,
    List,
    Write,
    /// A server-side copy into the location (it reads the copy's source too).
    Copy,
    Delete,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Head => "look up",
            Op::List => "list",
            Op::Write => "write",
            Op::Copy => "copy into",
            Op::Delete => "delete",
        }
    }

    /// The permission a bucket policy must grant for it.
    fn permission(self, scheme: Scheme) -> &'static str {
        match (scheme, self) {
            (Scheme::S3, Op::Read | Op::Head) => "s3:GetObject",
            (Scheme::S3, Op::List) => "s3:ListBucket",
            (Scheme::S3, Op::Write) => "s3:PutObject (and s3:AbortMultipartUpload)",
            (Scheme::S3, Op::Copy) => "s3:PutObject, and s3:GetObject on the copy's source,",
            (Scheme::S3, Op::Delete) => "s3:DeleteObject",
            (Scheme::Gcs, Op::Read | Op::Head) => "storage.objects.get",
            (Scheme::Gcs, Op::List) => "storage.objects.list",
            (Scheme::Gcs, Op::Write) => "storage.objects.create",
            (Scheme::Gcs, Op::Copy) => {
                "storage.objects.create, and storage.objects.get on the copy's source,"
            }
            (Scheme::Gcs, Op::Delete) => "storage.objects.delete",
            (Scheme::Azure, Op::Read | Op::Head | Op::List) => "the Storage Blob Data Reader role",
            (Scheme::Azure, Op::Write | Op::Copy | Op::Delete) => {
                "the Storage Blob Data Contributor role"
            }
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.verb())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("`{input}` is not a location pitr can use: {reason}")]
    InvalidLocation { input: String, reason: String },

    #[error("`{masked}` carries {what}; pitr takes no credentials in a URL")]
    SecretInUrl { masked: String, what: &'static str },

    #[error("cannot set up the client for `{store}`: {reason}")]
    Config {
        store: String,
        reason: String,
        #[source]
        source: object_store::Error,
    },

    #[error("cannot {op} `{url}`: no credentials were found (tried {tried})")]
    NoCredentials {
        url: String,
        op: Op,
        scheme: Scheme,
        tried: String,
        /// An AWS CLI profile there is, which pitr does not read
        /// ([`super::Settings::aws_cli_profile`]).
        aws_profile: Option<String>,
        #[source]
        source: Cause,
    },

    #[error("cannot {op} `{url}`: the store rejected the credentials from {tried}")]
    BadCredentials {
        url: String,
        op: Op,
        scheme: Scheme,
        tried: String,
        #[source]
        source: Cause,
    },

    #[error("cannot {op} `{url}`: access denied")]
    AccessDenied {
        url: String,
        op: Op,
        scheme: Scheme,
        #[source]
        source: Cause,
    },

    #[error("cannot {op} `{url}`: the {word} `{bucket}` does not exist")]
    NoSuchBucket {
        url: String,
        op: Op,
        word: &'static str,
        bucket: String,
        #[source]
        source: Cause,
    },

    #[error("`{url}` does not exist")]
    NotFound {
        url: String,
        #[source]
        source: Option<Cause>,
    },

    #[error("cannot {op} `{url}`: the endpoint {endpoint} cannot be reached")]
    Unreachable {
        url: String,
        op: Op,
        endpoint: String,
        #[source]
        source: Cause,
    },

    #[error("cannot {op} `{url}`: the store says this machine's clock is wrong")]
    ClockSkew {
        url: String,
        op: Op,
        #[source]
        source: Cause,
    },

    #[error("`{url}` already exists: another writer created it first")]
    AlreadyExists {
        url: String,
        #[source]
        source: Option<Cause>,
    },

    #[error("`{url}` was changed by another writer since pitr read it")]
    ChangedByAnotherWriter {
        url: String,
        #[source]
        source: Option<Cause>,
    },

    #[error("`{url}` changed while it was being read (at byte {at} of {size}): {detail}")]
    ChangedWhileReading {
        url: String,
        at: u64,
        size: u64,
        detail: String,
    },

    #[error(
        "reading `{url}` broke at byte {at} of {size} and could not be resumed ({attempts} tries)"
    )]
    ReadBroken {
        url: String,
        at: u64,
        size: u64,
        attempts: u32,
        #[source]
        source: Cause,
    },

    #[error("`{url}` is {size} bytes, more than the {limit} bytes pitr reads whole")]
    TooLarge { url: String, size: u64, limit: u64 },

    #[error(
        "`{url}` would need more than 10,000 parts ({written} bytes written, parts now {part_size} bytes)"
    )]
    TooManyParts {
        url: String,
        written: u64,
        part_size: usize,
    },

    #[error("cannot {op} `{url}`")]
    Io {
        url: String,
        op: Op,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot {op} `{url}`")]
    Other {
        url: String,
        op: Op,
        #[source]
        source: Cause,
    },
}

impl Hint for StorageError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            StorageError::InvalidLocation { .. } => {
                "write `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`, \
                 `file:///path`, or a plain path"
                    .into()
            }
            StorageError::SecretInUrl { .. } => {
                "remove them from the URL and give them through the environment instead: \
                 AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or a role), \
                 GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN"
                    .into()
            }
            StorageError::Config { .. } => {
                "check the AWS_*, GOOGLE_* or AZURE_* variables in the environment".into()
            }
            StorageError::NoCredentials {
                scheme: Scheme::S3,
                aws_profile: Some(profile),
                ..
            } => format!(
                "pitr does not read the AWS CLI's profiles (~/.aws): export the credentials of \
                 profile `{profile}` into the environment first, `eval \"$(aws configure \
                 export-credentials --profile {profile} --format env)\"` (AWS CLI v2), or set \
                 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for \
                 temporary keys), or run where a role is attached"
            ),
            StorageError::NoCredentials { scheme, .. } => match scheme {
                Scheme::S3 => "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN \
                     for temporary keys), or run where a role is attached (web identity, ECS/EKS, \
                     an EC2 instance profile)"
                    .into(),
                Scheme::Gcs => "run `gcloud auth application-default login`, or set \
                     GOOGLE_APPLICATION_CREDENTIALS to a service-account key file"
                    .into(),
                Scheme::Azure => "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY \
                     (or AZURE_STORAGE_SAS_TOKEN), or run where a managed identity is assigned; \
                     signed in with `az login`, set AZURE_USE_AZURE_CLI=true to use that"
                    .into(),
            },
            StorageError::BadCredentials { scheme, .. } => match scheme {
                Scheme::S3 => "check that AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY belong together \
                     and are still valid (temporary keys also need AWS_SESSION_TOKEN), and that \
                     AWS_ENDPOINT_URL points at the store they belong to"
                    .into(),
                Scheme::Gcs => "the credentials are invalid or expired: refresh them \
                     (`gcloud auth application-default login`)"
                    .into(),
                Scheme::Azure => "check AZURE_STORAGE_ACCOUNT_NAME and its key or SAS token \
                     (a SAS token may have expired)"
                    .into(),
            },
            StorageError::AccessDenied { op, scheme, .. } => {
                let why = match op {
                    Op::Read | Op::Head | Op::Copy => {
                        "; if only some objects fail, they may be encrypted with a KMS key the \
                         role cannot use, or owned by another account"
                    }
                    _ => "",
                };
                let doing = match op {
                    Op::Copy => "copy objects".to_string(),
                    op => op.to_string(),
                };
                format!(
                    "the credentials are valid but not allowed to {doing} here: the bucket \
                     policy or role needs {} on this prefix{why}",
                    op.permission(*scheme)
                )
            }
            StorageError::NoSuchBucket { word, .. } => format!(
                "check the {word} name and, for S3, AWS_REGION and AWS_ENDPOINT_URL (a {word} \
                 is looked up in one region or endpoint)"
            ),
            StorageError::NotFound { url, .. } if url.contains("://") => {
                let parent = url.rsplit_once('/').map_or(url.as_str(), |(p, _)| p);
                let ls = if url.starts_with("gs://") {
                    format!("gsutil ls {parent}/")
                } else if url.starts_with("az://") {
                    "az storage blob list --prefix ...".to_string()
                } else {
                    format!("aws s3 ls {parent}/")
                };
                format!("check the key (case-sensitive, taken as typed); see what is there with `{ls}`")
            }
            StorageError::NotFound { url, .. } => {
                super::local::not_found_hint(std::path::Path::new(url), "check the path")
            }
            StorageError::Unreachable { .. } => {
                "check the network and the endpoint (AWS_ENDPOINT_URL, AZURE_STORAGE_ENDPOINT, \
                 GOOGLE_BASE_URL); for a store over plain http also set AWS_ALLOW_HTTP=true"
                    .into()
            }
            StorageError::ClockSkew { .. } => {
                "signed requests are refused when the clock is more than a few minutes off: \
                 sync it (`timedatectl`, `chronyc makestep`) and retry"
                    .into()
            }
            StorageError::AlreadyExists { .. } | StorageError::ChangedByAnotherWriter { .. } => {
                "another pitr (a second archiver?) is writing to the same prefix; stop one of \
                 them, or give each its own prefix"
                    .into()
            }
            StorageError::ChangedWhileReading { .. } => {
                "something rewrote or deleted the object during the read; make sure nothing \
                 else writes to it (a lifecycle rule, another job) and run again"
                    .into()
            }
            StorageError::ReadBroken { .. } => {
                "the connection kept failing; check the network or the store's status and \
                 run again (reads start over; nothing was written)"
                    .into()
            }
            StorageError::TooLarge { .. } => {
                "this is not a manifest; check the location".into()
            }
            StorageError::TooManyParts { .. } => {
                "pass the expected size when creating the writer so the part size is chosen \
                 for it"
                    .into()
            }
            StorageError::Io { source, url, .. } => match source.kind() {
                std::io::ErrorKind::PermissionDenied => {
                    "check the file's permissions and the user pitr runs as".into()
                }
                std::io::ErrorKind::NotFound if !url.contains("://") => {
                    super::local::not_found_hint(std::path::Path::new(url), "check the path")
                }
                std::io::ErrorKind::NotFound => "check the path".into(),
                _ => return None,
            },
            StorageError::Other { .. } => return None,
        })
    }
}

impl StorageError {
    /// Nothing at `url` (no object, no prefix, no file).
    pub fn not_found(url: impl ToString) -> StorageError {
        StorageError::NotFound {
            url: url.to_string(),
            source: None,
        }
    }

    /// The location the error is about, as printed (masked); none for a client that
    /// could not be set up.
    pub fn url(&self) -> &str {
        match self {
            StorageError::InvalidLocation { input, .. } => input,
            StorageError::SecretInUrl { masked, .. } => masked,
            StorageError::Config { store, .. } => store,
            StorageError::NoCredentials { url, .. }
            | StorageError::BadCredentials { url, .. }
            | StorageError::AccessDenied { url, .. }
            | StorageError::NoSuchBucket { url, .. }
            | StorageError::NotFound { url, .. }
            | StorageError::Unreachable { url, .. }
            | StorageError::ClockSkew { url, .. }
            | StorageError::AlreadyExists { url, .. }
            | StorageError::ChangedByAnotherWriter { url, .. }
            | StorageError::ChangedWhileReading { url, .. }
            | StorageError::ReadBroken { url, .. }
            | StorageError::TooLarge { url, .. }
            | StorageError::TooManyParts { url, .. }
            | StorageError::Io { url, .. }
            | StorageError::Other { url, .. } => url,
        }
    }

    /// True when the object (or the bucket) is not there.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            StorageError::NotFound { .. } | StorageError::NoSuchBucket { .. }
        )
    }
}

/// Turns an object_store error for `op` on `url` into the error a user can act on.
pub(crate) fn classify(
    e: object_store::Error,
    op: Op,
    url: &str,
    scheme: Scheme,
    bucket: &str,
    settings: &Settings,
) -> StorageError {
    let cause = Cause::of(&e);
    let text = cause.text().to_string();
    let has = |codes: &[&str]| codes.iter().any(|c| text.contains(c));
    let url = url.to_string();
    let transport = transport_kind(&e);

    // The store's own error codes come first: they are the most precise.
    if has(&[
        "NoSuchBucket",
        "ContainerNotFound",
        "The specified bucket does not exist",
    ]) {
        return StorageError::NoSuchBucket {
            url,
            op,
            word: scheme.bucket_word(),
            bucket: bucket.to_string(),
            source: cause,
        };
    }
    if has(&[
        "RequestTimeTooSkewed",
        "Request date header too old",
        "RequestExpired",
    ]) {
        return StorageError::ClockSkew {
            url,
            op,
            source: cause,
        };
    }
    if has(&[
        "InvalidAccessKeyId",
        // S3's answer for a key of an account without S3 (and s3s's for an unknown key).
        "NotSignedUp",
        "SignatureDoesNotMatch",
        "AuthenticationFailed",
        "InvalidToken",
        "ExpiredToken",
        "InvalidAuthenticationInfo",
        // Azure's message for a bad Shared Key signature (azurite says it under the
        // code AuthorizationFailure).
        "Server failed to authenticate the request",
    ]) || matches!(e, object_store::Error::Unauthenticated { .. })
    {
        return StorageError::BadCredentials {
            url,
            op,
            scheme,
            tried: settings.credential_source(scheme),
            source: cause,
        };
    }
    // A failure fetching credentials (instance metadata, STS, a token endpoint)
    // rather than from the store itself.
    if matches!(e, object_store::Error::Generic { .. })
        && has(&[
            "/latest/api/token",
            "/latest/meta-data",
            "169.254.",
            "metadata.google.internal",
            "/metadata/identity/oauth2/token",
            "token request",
            "AssumeRoleWithWebIdentity",
            "credential",
            "Credential",
            "application default credentials",
        ])
    {
        return StorageError::NoCredentials {
            url,
            op,
            scheme,
            tried: settings.credential_source(scheme),
            aws_profile: match scheme {
                Scheme::S3 => settings.aws_cli_profile(),
                _ => None,
            },
            source: cause,
        };
    }
    match e {
        object_store::Error::NotFound { .. } => StorageError::NotFound {
            url,
            source: Some(cause),
        },
        object_store::Error::PermissionDenied { .. } => StorageError::AccessDenied {
            url,
            op,
            scheme,
            source: cause,
        },
        object_store::Error::AlreadyExists { .. } => StorageError::AlreadyExists {
            url,
            source: Some(cause),
        },
        object_store::Error::Precondition { .. } => StorageError::ChangedByAnotherWriter {
            url,
            source: Some(cause),
        },
        _ if matches!(transport, Some(HttpErrorKind::Connect))
            || has(&["Connection refused", "dns error", "error trying to connect"]) =>
        {
            StorageError::Unreachable {
                url,
                op,
                endpoint: settings.endpoint(scheme),
                source: cause,
            }
        }
        _ => StorageError::Other {
            url,
            op,
            source: cause,
        },
    }
}

/// The transport failure under an object_store error, if there is one.
pub(crate) fn transport_kind(e: &(dyn StdError + 'static)) -> Option<HttpErrorKind> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(h) = e.downcast_ref::<HttpError>() {
            return Some(h.kind());
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_masked_in_causes() {
        assert_eq!(
            mask_queries("GET https://a.blob.core.windows.net/c/x?sv=1&sig=SECRET failed"),
            "GET https://a.blob.core.windows.net/c/x?*** failed"
        );
        assert_eq!(mask_queries("no url here"), "no url here");
        let io = std::io::Error::other("PUT http://h/k?X-Amz-Signature=S3SECRET: refused");
        let c = Cause::of(&io);
        assert!(!c.text().contains("S3SECRET"), "{c}");
    }

    #[test]
    fn every_error_has_a_hint_naming_something_to_do() {
        let e = StorageError::AccessDenied {
            url: "s3://b/k".into(),
            op: Op::List,
            scheme: Scheme::S3,
            source: Cause("403".into()),
        };
        assert!(e.hint().unwrap().contains("s3:ListBucket"));
        assert_eq!(e.to_string(), "cannot list `s3://b/k`: access denied");
    }
}
