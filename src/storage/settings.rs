//! The settings that say how to reach each store, taken from the environment, and the
//! clients built from them.
//!
//! Credentials only ever come from the environment and the platform (never argv, never a
//! URL): the standard `AWS_*`, `GOOGLE_*` and `AZURE_*` variables, then what each
//! provider's chain finds (web identity, ECS/EKS, instance metadata; GCS
//! application-default credentials; Azure managed identity). [`Settings`] is a snapshot
//! of those variables so that tests can pass their own without touching the process
//! environment, and so that what was set can be printed with every secret masked.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::{ClientOptions, ObjectStore, RetryConfig};

use super::error::StorageError;
use super::location::{mask_url, Scheme};

/// Environment variables read, by prefix. `IDENTITY_ENDPOINT` is Azure's managed-identity
/// endpoint on App Service and Arc; `SERVICE_ACCOUNT` is object_store's GCS key path.
const PREFIXES: &[&str] = &["AWS_", "AZURE_", "GOOGLE_"];
const EXTRA: &[&str] = &["IDENTITY_ENDPOINT", "SERVICE_ACCOUNT"];

/// Variables whose value is not a secret and may be printed as it is (an endpoint
/// still has any userinfo masked). Everything else is printed as `***`.
const PLAIN: &[&str] = &[
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ALLOW_HTTP",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
    "AWS_ACCESS_KEY_ID",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_METADATA_ENDPOINT",
    "AWS_PROFILE",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ENDPOINT",
    "AZURE_ENDPOINT",
    "AZURE_ALLOW_HTTP",
    "AZURE_STORAGE_USE_EMULATOR",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_FEDERATED_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_BASE_URL",
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_SERVICE_ACCOUNT_PATH",
];

/// A snapshot of the environment variables that configure object stores.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Settings {
    vars: BTreeMap<String, String>,
}

impl Settings {
    /// The variables set in this process's environment.
    pub fn from_env() -> Settings {
        Settings::from_pairs(std::env::vars())
    }

    /// The given variables (those pitr does not read are dropped).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Settings {
        let vars = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(k, _)| {
                PREFIXES.iter().any(|p| k.starts_with(p)) || EXTRA.contains(&k.as_str())
            })
            .collect();
        Settings { vars }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn is_true(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
    }

    /// The S3 endpoint set for an S3-compatible store, if any: `AWS_ENDPOINT_URL_S3`,
    /// `AWS_ENDPOINT_URL` (the AWS SDKs' name) or `AWS_ENDPOINT` (wal-g's).
    pub fn s3_endpoint(&self) -> Option<&str> {
        self.get("AWS_ENDPOINT_URL_S3")
            .or_else(|| self.get("AWS_ENDPOINT_URL"))
            .or_else(|| self.get("AWS_ENDPOINT"))
    }

    /// The value as it may be printed.
    fn shown(&self, name: &str, value: &str) -> String {
        if PLAIN.contains(&name) {
            mask_url(value)
        } else {
            "***".to_string()
        }
    }

    /// `NAME=value` for each variable set, secrets as `***`: what pitr will use.
    pub fn describe(&self) -> Vec<String> {
        self.vars
            .iter()
            .map(|(k, v)| format!("{k}={}", self.shown(k, v)))
            .collect()
    }

    /// The AWS CLI profile a user may expect pitr to use, which it does not read
    /// (object_store reads no `~/.aws` file): `AWS_PROFILE`, or `default` when the
    /// shared credentials or config file exists (`AWS_SHARED_CREDENTIALS_FILE`,
    /// `AWS_CONFIG_FILE`, else under `$HOME/.aws/`). For the no-credentials hint:
    /// `aws s3 ls` works and pitr finds nothing is a trap at 3 a.m.
    pub fn aws_cli_profile(&self) -> Option<String> {
        if let Some(p) = self.get("AWS_PROFILE") {
            return Some(p.to_string());
        }
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let file = |var: &str, name: &str| {
            self.get(var)
                .map(std::path::PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
        };
        [
            file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            file("AWS_CONFIG_FILE", "config"),
        ]
        .iter()
        .flatten()
        .any(|f| f.is_file())
        .then(|| "default".to_string())
    }

    /// Which credential source the AWS chain will use, as object_store picks it
    /// (`aws/builder.rs`, `AmazonS3Builder::build`), in words for a hint.
    pub fn aws_credential_source(&self) -> String {
        if self.get("AWS_ACCESS_KEY_ID").is_some() || self.get("AWS_SECRET_ACCESS_KEY").is_some() {
            "the keys in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY".into()
        } else if self.get("AWS_WEB_IDENTITY_TOKEN_FILE").is_some()
            && self.get("AWS_ROLE_ARN").is_some()
        {
            "web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN)".into()
        } else if self.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some() {
            "the ECS task role (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)".into()
        } else if self.get("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some() {
            "EKS pod identity (AWS_CONTAINER_CREDENTIALS_FULL_URI)".into()
        } else {
            format!(
                "the instance metadata service at {} (none of AWS_ACCESS_KEY_ID, \
                 AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, \
                 AWS_CONTAINER_CREDENTIALS_FULL_URI is set)",
                self.get("AWS_METADATA_ENDPOINT")
                    .map(mask_url)
                    .unwrap_or_else(|| "http://169.254.169.254".into())
            )
        }
    }

    /// The same for Azure (`azure/builder.rs`, `resolve_credential_auto`).
    pub fn azure_credential_source(&self) -> String {
        let has = |k: &str| self.get(k).is_some();
        if has("AZURE_STORAGE_TOKEN") {
            "the bearer token in AZURE_STORAGE_TOKEN".into()
        } else if has("AZURE_STORAGE_ACCOUNT_KEY") || has("AZURE_STORAGE_ACCESS_KEY") {
            "the account key in AZURE_STORAGE_ACCOUNT_KEY".into()
        } else if has("AZURE_CLIENT_ID")
            && has("AZURE_TENANT_ID")
            && has("AZURE_FEDERATED_TOKEN_FILE")
        {
            "workload identity (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE)"
                .into()
        } else if has("AZURE_CLIENT_ID") && has("AZURE_CLIENT_SECRET") && has("AZURE_TENANT_ID") {
            "a service principal (AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID)".into()
        } else if has("AZURE_STORAGE_SAS_TOKEN") || has("AZURE_STORAGE_SAS_KEY") {
            "the SAS token in AZURE_STORAGE_SAS_TOKEN".into()
        } else {
            "managed identity (none of AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_TOKEN, \
             AZURE_STORAGE_SAS_TOKEN, a service principal or workload identity is set)"
                .into()
        }
    }

    /// The same for GCS (`gcp/builder.rs`, `GoogleCloudStorageBuilder::build`).
    pub fn gcs_credential_source(&self) -> String {
        if let Some(p) = self
            .get("GOOGLE_SERVICE_ACCOUNT")
            .or_else(|| self.get("GOOGLE_SERVICE_ACCOUNT_PATH"))
            .or_else(|| self.get("SERVICE_ACCOUNT"))
        {
            format!("the service-account key file {p}")
        } else if self.get("GOOGLE_SERVICE_ACCOUNT_KEY").is_some() {
            "the service-account key in GOOGLE_SERVICE_ACCOUNT_KEY".into()
        } else if let Some(p) = self.get("GOOGLE_APPLICATION_CREDENTIALS") {
            format!("application-default credentials from {p}")
        } else {
            "application-default credentials (~/.config/gcloud/application_default_credentials.json), \
             then the instance metadata server (GOOGLE_APPLICATION_CREDENTIALS is not set)"
                .into()
        }
    }

    pub fn credential_source(&self, scheme: Scheme) -> String {
        match scheme {
            Scheme::S3 => self.aws_credential_source(),
            Scheme::Gcs => self.gcs_credential_source(),
            Scheme::Azure => self.azure_credential_source(),
        }
    }

    /// Where requests for `scheme` go, for "endpoint unreachable" messages.
    pub fn endpoint(&self, scheme: Scheme) -> String {
        let shown = match scheme {
            Scheme::S3 => self.s3_endpoint().map(mask_url).unwrap_or_else(|| {
                format!(
                    "the AWS endpoint for region {}",
                    self.get("AWS_REGION")
                        .or_else(|| self.get("AWS_DEFAULT_REGION"))
                        .unwrap_or("us-east-1")
                )
            }),
            Scheme::Gcs => self
                .get("GOOGLE_BASE_URL")
                .map(mask_url)
                .unwrap_or_else(|| "https://storage.googleapis.com".into()),
            Scheme::Azure => self
                .get("AZURE_STORAGE_ENDPOINT")
                .or_else(|| self.get("AZURE_ENDPOINT"))
                .map(mask_url)
                .unwrap_or_else(|| {
                    format!(
                        "https://{}.blob.core.windows.net",
                        self.get("AZURE_STORAGE_ACCOUNT_NAME")
                            .unwrap_or("<account>")
                    )
                }),
        };
        shown
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.describe()).finish()
    }
}

/// Timeouts and retries for the clients; the defaults are for production, tests
/// shorten them.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// Connecting to the endpoint.
    pub connect_timeout: Duration,
    /// A read that stalls this long breaks the connection (then the read resumes).
    pub read_stall_timeout: Duration,
    /// One request other than a streaming GET (a part upload, a list page, a put).
    pub request_timeout: Duration,
    /// object_store's own retries of one request (with backoff).
    pub retries: usize,
    /// How long object_store keeps retrying one request.
    pub retry_timeout: Duration,
    /// How many times a broken read is resumed without making progress before giving up.
    pub read_resumes: u32,
    /// The first wait before resuming a broken read; doubled each time, up to 10 s.
    pub resume_backoff: Duration,
    /// Part size for multipart uploads (grown for very large objects, see `write.rs`).
    pub part_size: usize,
    /// Parts uploading at once.
    pub parts_in_flight: usize,
    /// Ranged GETs in flight for one object read (1: the object is one GET, streamed).
    pub read_ranges: usize,
    /// The length of each ranged GET.
    pub read_range_size: u64,
    /// The bytes each range in flight may hold ahead of the reader (plus one HTTP
    /// chunk): a read takes at most `read_ranges` times this, whatever the object's size.
    pub read_ahead_bytes: usize,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            connect_timeout: Duration::from_secs(5),
            read_stall_timeout: Duration::from_secs(60),
            // A 16 MiB part at 30 KB/s still gets through.
            request_timeout: Duration::from_secs(600),
            retries: 10,
            retry_timeout: Duration::from_secs(180),
            read_resumes: 10,
            resume_backoff: Duration::from_millis(500),
            part_size: 8 * 1024 * 1024,
            parts_in_flight: 3,
            read_ranges: 4,
            read_range_size: 8 * 1024 * 1024,
            read_ahead_bytes: 8 * 1024 * 1024,
        }
    }
}

impl Tuning {
    /// The defaults, with the test switches `PITR_STORAGE_RETRIES` (object_store's
    /// retries of one request), `PITR_STORAGE_RETRY_SECS` (how long it retries),
    /// `PITR_STORAGE_RESUMES` and `PITR_STORAGE_RESUME_MS` (resuming a broken read),
    /// `PITR_STORAGE_PART_MIB` (multipart part size): the CLI tests use them so that
    /// an unreachable endpoint fails in seconds rather than minutes, and small
    /// objects take the multipart path. `PITR_STORAGE_READ_RANGES` and
    /// `PITR_STORAGE_READ_RANGE_MIB` (ranged GETs in flight per read, and their
    /// length and read-ahead) are for benchmarks (`scripts/bench-storage.sh`).
    /// docs/testing.md lists them.
    pub fn from_env() -> Tuning {
        let num = |name: &str| -> Option<u64> {
            std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
        };
        let mut t = Tuning::default();
        if let Some(n) = num("PITR_STORAGE_RETRIES") {
            t.retries = n as usize;
        }
        if let Some(n) = num("PITR_STORAGE_RETRY_SECS") {
            t.retry_timeout = Duration::from_secs(n);
        }
        if let Some(n) = num("PITR_STORAGE_RESUMES") {
            t.read_resumes = n as u32;
        }
        if let Some(n) = num("PITR_STORAGE_RESUME_MS") {
            t.resume_backoff = Duration::from_millis(n);
        }
        if let Some(n) = num("PITR_STORAGE_READ_RANGES") {
            t.read_ranges = (n as usize).max(1);
        }
        if let Some(n) = num("PITR_STORAGE_READ_RANGE_MIB") {
            t.read_range_size = n.max(1) << 20;
            t.read_ahead_bytes = (n.max(1) as usize) << 20;
        }
        if let Some(n) = num("PITR_STORAGE_PART_MIB") {
            // S3 refuses parts under 5 MiB (but the last).
            t.part_size = (n.max(5) as usize) << 20;
        }
        t
    }
}

/// The two clients for one bucket: `stream` for GETs whose body may take hours (no
/// whole-request timeout: object_store's default of 30 s would cut every large read,
/// only a stall timeout), `request` for everything else.
#[derive(Clone, Debug)]
pub(crate) struct Clients {
    pub stream: Arc<dyn ObjectStore>,
    pub request: Arc<dyn ObjectStore>,
}

/// Builds the clients for `bucket` of `scheme` from `settings`.
pub(crate) fn build_clients(
    scheme: Scheme,
    bucket: &str,
    settings: &Settings,
    tuning: &Tuning,
) -> Result<Clients, StorageError> {
    super::runtime::install_crypto_provider();
    let retry = RetryConfig {
        max_retries: tuning.retries,
        retry_timeout: tuning.retry_timeout,
        ..RetryConfig::default()
    };
    let base = ClientOptions::new().with_connect_timeout(tuning.connect_timeout);
    let stream_opts = base
        .clone()
        .with_timeout_disabled()
        .with_read_timeout(tuning.read_stall_timeout);
    let request_opts = base.with_timeout(tuning.request_timeout);
    let one = |opts: ClientOptions| -> Result<Arc<dyn ObjectStore>, StorageError> {
        let built: object_store::Result<Arc<dyn ObjectStore>> = match scheme {
            Scheme::S3 => s3_builder(bucket, settings, opts)
                .with_retry(retry.clone())
                .build()
                .map(|s| Arc::new(s) as _),
            Scheme::Gcs => gcs_builder(bucket, settings, opts)
                .with_retry(retry.clone())
                .build()
                .map(|s| Arc::new(s) as _),
            Scheme::Azure => azure_builder(bucket, settings, opts)
                .with_retry(retry.clone())
                .build()
                .map(|s| Arc::new(s) as _),
        };
        built.map_err(|e| StorageError::Config {
            store: format!("{}://{bucket}", scheme.as_str()),
            reason: config_reason(scheme, &e, settings),
            source: e,
        })
    };
    Ok(Clients {
        stream: one(stream_opts)?,
        request: one(request_opts)?,
    })
}

fn config_reason(scheme: Scheme, e: &object_store::Error, settings: &Settings) -> String {
    let text = e.to_string();
    match scheme {
        Scheme::Azure if settings.get("AZURE_STORAGE_ACCOUNT_NAME").is_none() => {
            "the storage account is not set: set AZURE_STORAGE_ACCOUNT_NAME".into()
        }
        _ if text.contains("Missing") || text.contains("missing") => {
            format!("a setting is missing ({text})")
        }
        _ => "the settings could not be used".into(),
    }
}

// Each builder takes the client options first: `with_client_options` replaces them
// whole, so a later call would drop `*_ALLOW_HTTP` set from the variables.
fn s3_builder(bucket: &str, settings: &Settings, opts: ClientOptions) -> AmazonS3Builder {
    let mut b = AmazonS3Builder::new().with_client_options(opts);
    for (k, v) in &settings.vars {
        if k.starts_with("AWS_") && !v.is_empty() {
            if let Ok(key) = k.to_ascii_lowercase().parse() {
                b = b.with_config(key, v);
            }
        }
    }
    b = b.with_bucket_name(bucket);
    // Region: AWS_REGION wins over AWS_DEFAULT_REGION, as in the AWS SDKs.
    if let Some(r) = settings
        .get("AWS_REGION")
        .or_else(|| settings.get("AWS_DEFAULT_REGION"))
    {
        b = b.with_region(r);
    }
    // An S3-compatible store (MinIO, Ceph, s3s) is addressed path-style
    // (`endpoint/bucket/key`): many have no wildcard DNS for `bucket.endpoint`.
    // Real AWS gets virtual-hosted style, which it recommends (path style is
    // deprecated, https://aws.amazon.com/blogs/aws/amazon-s3-path-deprecation-plan-the-rest-of-the-story/),
    // except for bucket names with dots, which break its TLS certificates.
    // AWS_VIRTUAL_HOSTED_STYLE_REQUEST, if set, decides.
    if settings.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST").is_none() {
        let virtual_hosted = settings.s3_endpoint().is_none() && !bucket.contains('.');
        b = b.with_virtual_hosted_style_request(virtual_hosted);
    }
    if let Some(e) = settings.s3_endpoint() {
        b = b.with_endpoint(e);
    }
    if settings.is_true("AWS_ALLOW_HTTP") {
        b = b.with_allow_http(true);
    }
    b
}

fn gcs_builder(
    bucket: &str,
    settings: &Settings,
    opts: ClientOptions,
) -> GoogleCloudStorageBuilder {
    let mut b = GoogleCloudStorageBuilder::new().with_client_options(opts);
    if let Some(p) = settings.get("SERVICE_ACCOUNT") {
        b = b.with_service_account_path(p);
    }
    for (k, v) in &settings.vars {
        if k.starts_with("GOOGLE_") && !v.is_empty() {
            if let Ok(key) = k.to_ascii_lowercase().parse() {
                b = b.with_config(key, v);
            }
        }
    }
    b.with_bucket_name(bucket)
}

fn azure_builder(
    container: &str,
    settings: &Settings,
    opts: ClientOptions,
) -> MicrosoftAzureBuilder {
    let mut b = MicrosoftAzureBuilder::new().with_client_options(opts);
    for (k, v) in &settings.vars {
        if k.starts_with("AZURE_") && !v.is_empty() {
            if let Ok(key) = k.to_ascii_lowercase().parse() {
                b = b.with_config(key, v);
            }
        }
    }
    if let Some(e) = settings.get("IDENTITY_ENDPOINT") {
        b = b.with_msi_endpoint(e);
    }
    b.with_container_name(container)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_storage_variables_are_kept_and_secrets_are_masked() {
        let s = Settings::from_pairs([
            ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-SECRET"),
            ("AWS_SESSION_TOKEN", "FwoGZX-TOKEN"),
            ("AWS_ENDPOINT_URL", "http://user:EPSECRET@127.0.0.1:9000"),
            ("AZURE_STORAGE_ACCOUNT_KEY", "AZKEY-SECRET"),
            ("AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=SAS-SECRET"),
            (
                "GOOGLE_SERVICE_ACCOUNT_KEY",
                "{\"private_key\":\"GKEY-SECRET\"}",
            ),
            ("HOME", "/root"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(s.get("HOME"), None);
        let shown = format!("{s:?} {}", s.describe().join(" "));
        for secret in [
            "wJalrXUtnFEMI-SECRET",
            "FwoGZX-TOKEN",
            "EPSECRET",
            "AZKEY-SECRET",
            "SAS-SECRET",
            "GKEY-SECRET",
        ] {
            assert!(!shown.contains(secret), "{secret} shown in {shown}");
        }
        assert!(shown.contains("AWS_ACCESS_KEY_ID=AKIAEXAMPLE"), "{shown}");
        assert!(
            shown.contains("AWS_ENDPOINT_URL=http://***@127.0.0.1:9000"),
            "{shown}"
        );
        assert!(shown.contains("AWS_SECRET_ACCESS_KEY=***"), "{shown}");
    }

    #[test]
    fn endpoint_names_follow_the_sdks_and_wal_g() {
        let s = Settings::from_pairs([("AWS_ENDPOINT", "http://a")]);
        assert_eq!(s.s3_endpoint(), Some("http://a"));
        let s = Settings::from_pairs([
            ("AWS_ENDPOINT", "http://a"),
            ("AWS_ENDPOINT_URL", "http://b"),
        ]);
        assert_eq!(s.s3_endpoint(), Some("http://b"));
    }

    #[test]
    fn the_credential_chain_in_words() {
        let s = Settings::default();
        assert!(s.aws_credential_source().contains("instance metadata"));
        let s = Settings::from_pairs([
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
            ("AWS_ROLE_ARN", "arn:x"),
        ]);
        assert!(s.aws_credential_source().contains("web identity"));
        assert!(Settings::default()
            .azure_credential_source()
            .contains("managed identity"));
        assert!(Settings::default()
            .gcs_credential_source()
            .contains("application-default"));
    }
}
