//! Connecting a stand-in tool to its server with the official driver, from the
//! mongo-tools connection options (`--host`, `--port`, `--uri`, `--username`,
//! `--authenticationDatabase`, and the password from `--config`).

use super::cli::{ConfigFile, Parsed};
use bson::{doc, Document};
use mongodb::options::{ClientOptions, Credential};
use mongodb::Client;
use std::time::Duration;

/// A driver error as mongo-tools prints it: `(CodeName) message` for server errors.
pub fn describe(e: &mongodb::error::Error) -> String {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => format!("({}) {}", c.code_name, c.message),
        _ => e.to_string(),
    }
}

/// The connection string the options describe.
pub fn connection_string(p: &Parsed, cfg: &ConfigFile) -> Result<String, String> {
    let uri = p
        .value("uri")
        .map(String::from)
        .or_else(|| cfg.uri.clone())
        .or_else(|| {
            p.positional
                .iter()
                .find(|a| a.starts_with("mongodb://") || a.starts_with("mongodb+srv://"))
                .cloned()
        });
    if let Some(uri) = uri {
        if p.value("host").is_some() {
            return Err("illegal argument combination: cannot specify --host and --uri".into());
        }
        if p.value("port").is_some() {
            return Err("illegal argument combination: cannot specify --port and --uri".into());
        }
        return Ok(uri);
    }
    let host = p.value("host").unwrap_or("localhost");
    let (set, hosts) = match host.split_once('/') {
        Some((s, h)) => (Some(s), h),
        None => (None, host),
    };
    let port = p.value("port");
    if let Some(port) = port {
        port.parse::<u16>()
            .map_err(|_| format!("error parsing --port: invalid port `{port}`"))?;
    }
    let hosts: Vec<String> = hosts
        .split(',')
        .map(|h| {
            if h.contains(':') {
                h.to_string()
            } else {
                format!("{h}:{}", port.unwrap_or("27017"))
            }
        })
        .collect();
    let mut uri = format!("mongodb://{}/", hosts.join(","));
    match set {
        Some(s) => uri.push_str(&format!("?replicaSet={s}")),
        None if hosts.len() == 1 => uri.push_str("?directConnection=true"),
        None => {}
    }
    Ok(uri)
}

/// Build a client and check that the server answers (`hello`), like mongo-tools'
/// session provider does before anything else.
pub async fn connect(
    tool: &str,
    p: &Parsed,
    cfg: &ConfigFile,
) -> Result<(Client, Document), String> {
    let uri = connection_string(p, cfg)?;
    let mut opts = ClientOptions::parse(&uri)
        .await
        .map_err(|e| format!("error parsing connection string: {}", describe(&e)))?;
    opts.app_name = Some(tool.to_string());
    if opts.server_selection_timeout.is_none() {
        opts.server_selection_timeout = Some(Duration::from_secs(5));
    }
    if opts.connect_timeout.is_none() {
        opts.connect_timeout = Some(Duration::from_secs(5));
    }
    if let Some(user) = p.value("username") {
        let mut c = Credential::default();
        c.username = Some(user.to_string());
        c.password = cfg.password.clone();
        c.source = Some(
            p.value("authenticationDatabase")
                .unwrap_or("admin")
                .to_string(),
        );
        opts.credential = Some(c);
    } else if let (Some(c), Some(pw)) = (opts.credential.as_mut(), cfg.password.clone()) {
        c.password = Some(pw);
    }
    let client = Client::with_options(opts)
        .map_err(|e| format!("error connecting to host: {}", describe(&e)))?;
    let hello = client
        .database("admin")
        .run_command(doc! {"hello": 1})
        .await
        .map_err(|e| {
            format!(
                "error connecting to host: could not connect to server: {}",
                describe(&e)
            )
        })?;
    Ok((client, hello))
}
