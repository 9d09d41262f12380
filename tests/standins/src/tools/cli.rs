//! The mongo-tools command-line contract (go-flags style): `--name value`,
//! `--name=value`, `-x value`, `-xvalue`, `-vvv`; unknown flags and missing values are
//! errors printed as "error parsing command line options: ..." with exit 1, like
//! mongo-tools 100.x. Plus the stand-in's own rule: a password on argv (`--password`,
//! `-p`, or a URI with a password) is refused with exit 3, because pitr must pass
//! secrets through `--config`.

use std::collections::BTreeMap;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Flag,
    Value,
    /// A value is optional and must be attached with `=` (`--archive[=FILE]`).
    OptionalValue,
}

#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub long: &'static str,
    pub short: Option<char>,
    pub kind: Kind,
}

const fn flag(long: &'static str) -> Spec {
    Spec {
        long,
        short: None,
        kind: Kind::Flag,
    }
}
const fn value(long: &'static str) -> Spec {
    Spec {
        long,
        short: None,
        kind: Kind::Value,
    }
}
const fn short_value(long: &'static str, c: char) -> Spec {
    Spec {
        long,
        short: Some(c),
        kind: Kind::Value,
    }
}

/// Options every tool has (general, verbosity, connection, TLS, auth, URI, namespace).
pub const COMMON: &[Spec] = &[
    flag("help"),
    flag("version"),
    value("config"),
    flag("quiet"),
    short_value("host", 'h'),
    value("port"),
    flag("ssl"),
    flag("tls"),
    value("sslCAFile"),
    value("tlsCAFile"),
    value("sslPEMKeyFile"),
    value("tlsCertificateKeyFile"),
    flag("sslAllowInvalidCertificates"),
    flag("tlsInsecure"),
    short_value("username", 'u'),
    value("authenticationDatabase"),
    value("authenticationMechanism"),
    value("awsSessionToken"),
    value("gssapiServiceName"),
    value("gssapiHostName"),
    value("uri"),
    short_value("db", 'd'),
    short_value("collection", 'c'),
];

/// mongorestore's own options (mongorestore/options.go).
pub const MONGORESTORE: &[Spec] = &[
    flag("objcheck"),
    flag("oplogReplay"),
    value("oplogLimit"),
    value("oplogFile"),
    Spec {
        long: "archive",
        short: None,
        kind: Kind::OptionalValue,
    },
    flag("restoreDbUsersAndRoles"),
    value("dir"),
    flag("gzip"),
    flag("drop"),
    flag("dryRun"),
    value("writeConcern"),
    flag("noIndexRestore"),
    flag("convertLegacyIndexes"),
    flag("noOptionsRestore"),
    flag("keepIndexVersion"),
    flag("maintainInsertionOrder"),
    short_value("numParallelCollections", 'j'),
    value("numInsertionWorkersPerCollection"),
    flag("stopOnError"),
    flag("bypassDocumentValidation"),
    flag("preserveUUID"),
    value("tempUsersColl"),
    value("tempRolesColl"),
    value("batchSize"),
    flag("fixDottedHashIndex"),
    value("excludeCollection"),
    value("excludeCollectionsWithPrefix"),
    value("nsExclude"),
    value("nsInclude"),
    value("nsFrom"),
    value("nsTo"),
];

/// mongodump's own options (mongodump/options.go).
pub const MONGODUMP: &[Spec] = &[
    short_value("out", 'o'),
    flag("gzip"),
    flag("oplog"),
    short_value("query", 'q'),
    value("queryFile"),
    value("readPreference"),
    flag("forceTableScan"),
    Spec {
        long: "archive",
        short: None,
        kind: Kind::OptionalValue,
    },
    flag("dumpDbUsersAndRoles"),
    value("excludeCollection"),
    value("excludeCollectionsWithPrefix"),
    short_value("numParallelCollections", 'j'),
    flag("viewsAsCollections"),
];

#[derive(Debug, Default, Clone)]
pub struct Parsed {
    pub argv: Vec<String>,
    pub values: BTreeMap<String, Vec<String>>,
    pub flags: Vec<String>,
    pub verbosity: u32,
    pub positional: Vec<String>,
}

impl Parsed {
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }
    /// The last value given (go-flags keeps the last for single-valued options).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }
    pub fn all(&self, name: &str) -> &[String] {
        self.values.get(name).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// Why a command line was refused, and with which exit code.
#[derive(Debug)]
pub struct Refusal {
    pub code: i32,
    pub lines: Vec<String>,
}

/// A password on the command line (the stand-in's exit-3 rule), including one inside
/// a connection string.
pub fn password_on_argv(argv: &[String]) -> Option<String> {
    for a in argv {
        if a == "--password" || a.starts_with("--password=") {
            return Some("--password".into());
        }
        if a.starts_with("-p") && !a.starts_with("--") {
            return Some("-p".into());
        }
        if a.contains("mongodb://") || a.contains("mongodb+srv://") {
            let rest = a.split("://").nth(1).unwrap_or_default();
            let auth = rest.split('/').next().unwrap_or_default();
            if let Some((userinfo, _)) = auth.rsplit_once('@') {
                if userinfo.contains(':') {
                    return Some("a connection string with a password".into());
                }
            }
        }
    }
    None
}

fn find<'a>(specs: &[&'a [Spec]], pred: impl Fn(&Spec) -> bool) -> Option<&'a Spec> {
    specs.iter().flat_map(|s| s.iter()).find(|s| pred(s))
}

/// Parse argv (without the program name).
pub fn parse(argv: &[String], specs: &[&[Spec]]) -> Result<Parsed, String> {
    let mut out = Parsed {
        argv: argv.to_vec(),
        ..Default::default()
    };
    let mut i = 0;
    let mut only_positional = false;
    while i < argv.len() {
        let arg = argv[i].clone();
        i += 1;
        if only_positional || arg == "-" || !arg.starts_with('-') {
            out.positional.push(arg);
            continue;
        }
        if arg == "--" {
            only_positional = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            if name == "verbose" {
                match inline {
                    Some(v) => {
                        out.verbosity += v.parse::<u32>().map_err(|_| {
                            format!("invalid argument for flag `--verbose' (expected int): {v}")
                        })?
                    }
                    None => out.verbosity += 1,
                }
                continue;
            }
            let Some(spec) = find(specs, |s| s.long == name) else {
                return Err(format!("unknown flag `{name}'"));
            };
            take(&mut out, spec, inline, argv, &mut i, &format!("--{name}"))?;
        } else {
            let body = &arg[1..];
            for (pos, c) in body.char_indices() {
                if c == 'v' {
                    out.verbosity += 1;
                    continue;
                }
                let Some(spec) = find(specs, |s| s.short == Some(c)) else {
                    return Err(format!("unknown shorthand flag `{c}' in `{arg}'"));
                };
                let rest = &body[pos + c.len_utf8()..];
                if spec.kind == Kind::Flag {
                    take(&mut out, spec, None, argv, &mut i, &format!("-{c}"))?;
                } else {
                    let inline = if rest.is_empty() {
                        None
                    } else {
                        Some(rest.trim_start_matches('=').to_string())
                    };
                    take(&mut out, spec, inline, argv, &mut i, &format!("-{c}"))?;
                    break;
                }
            }
        }
    }
    Ok(out)
}

fn take(
    out: &mut Parsed,
    spec: &Spec,
    inline: Option<String>,
    argv: &[String],
    i: &mut usize,
    shown: &str,
) -> Result<(), String> {
    match spec.kind {
        Kind::Flag => {
            if inline.is_some() {
                return Err(format!("bool flag `{shown}' cannot have an argument"));
            }
            out.flags.push(spec.long.to_string());
        }
        Kind::OptionalValue => {
            out.values
                .entry(spec.long.to_string())
                .or_default()
                .push(inline.unwrap_or_else(|| "-".into()));
        }
        Kind::Value => {
            let v = match inline {
                Some(v) => v,
                None => {
                    if *i < argv.len() && !(argv[*i].starts_with('-') && argv[*i].len() > 1) {
                        *i += 1;
                        argv[*i - 1].clone()
                    } else {
                        return Err(format!("expected argument for flag `{shown}'"));
                    }
                }
            };
            out.values.entry(spec.long.to_string()).or_default().push(v);
        }
    }
    Ok(())
}

/// What `--config FILE` held (mongo-tools reads `password`, `uri`, `sslPEMKeyPassword`).
#[derive(Debug, Default, Clone)]
pub struct ConfigFile {
    pub password: Option<String>,
    pub uri: Option<String>,
    pub ssl_pem_key_password: Option<String>,
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')))
    {
        let inner = &v[1..v.len() - 1];
        if v.starts_with('"') {
            return inner.replace("\\\"", "\"").replace("\\\\", "\\");
        }
        return inner.replace("''", "'");
    }
    v.to_string()
}

/// Read the YAML config file (a flat `key: value` subset of YAML, strict about keys
/// like the real `yaml.UnmarshalStrict`).
pub fn read_config(path: &str) -> Result<ConfigFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            "no such file or directory".to_string()
        } else {
            e.to_string()
        };
        format!("error opening file with --config: open {path}: {why}")
    })?;
    let mut cfg = ConfigFile::default();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t == "---" {
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            return Err(format!(
                "error parsing config file {path}: yaml: line {}: could not find expected ':'",
                n + 1
            ));
        };
        let val = unquote(v);
        match k.trim() {
            "password" => cfg.password = Some(val),
            "uri" => cfg.uri = Some(val),
            "sslPEMKeyPassword" => cfg.ssl_pem_key_password = Some(val),
            other => {
                return Err(format!(
                    "error parsing config file {path}: yaml: unmarshal errors:\n  line {}: field {other} not found in type struct {{ Password string \"yaml:\\\"password\\\"\"; ConnectionString string \"yaml:\\\"uri\\\"\"; SSLPEMKeyPassword string \"yaml:\\\"sslPEMKeyPassword\\\"\" }}",
                    n + 1
                ))
            }
        }
    }
    Ok(cfg)
}

/// `--version` output of a database tool.
pub fn print_version(tool: &str) {
    println!("{tool} version: {}", crate::versions::TOOLS);
    println!("git version: 8fa3cfc8263b9cead37912d7b0447766143c3e3a");
    println!("Go version: go1.21.8");
    println!("   os: linux");
    println!("   arch: amd64");
    println!("   compiler: gc");
    // After the real layout: read by pitr's binary lookup (see mongod's print_version).
    println!("(pitr stand-in {tool}: a test double, not MongoDB Database Tools)");
}

/// Parse a tool command line, handling the refusals every tool shares. `Err` is
/// the exit code after the message was printed; `Ok(None)` means `--help`/`--version`
/// was handled.
pub fn parse_tool(
    tool: &str,
    argv: &[String],
    own: &[Spec],
) -> Result<Option<(Parsed, ConfigFile)>, Refusal> {
    if let Some(what) = password_on_argv(argv) {
        return Err(Refusal {
            code: 3,
            lines: vec![format!(
                "pitr stand-in {tool}: refusing {what} on the command line: it would be visible in `ps`; pitr must pass secrets via --config FILE (a YAML file with `password: ...`)"
            )],
        });
    }
    let p = parse(argv, &[COMMON, own]).map_err(|e| Refusal {
        code: 1,
        lines: vec![
            crate::logline::tools_stamp(crate::logline::now_millis())
                + "\terror parsing command line options: "
                + &e,
            crate::logline::tools_stamp(crate::logline::now_millis())
                + &format!("\ttry '{tool} --help' for more information"),
        ],
    })?;
    if p.flag("help") {
        println!("Usage:\n  {tool} <options> <connection-string>\n\n(pitr stand-in {tool}; see tests/standins/README.md)");
        return Ok(None);
    }
    if p.flag("version") {
        print_version(tool);
        return Ok(None);
    }
    let cfg = match p.value("config") {
        Some(path) => read_config(path).map_err(|e| Refusal {
            code: 1,
            lines: vec![
                crate::logline::tools_stamp(crate::logline::now_millis())
                    + "\terror parsing command line options: "
                    + &e,
            ],
        })?,
        None => ConfigFile::default(),
    };
    Ok(Some((p, cfg)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn go_flags_shapes() {
        let p = parse(
            &a(&[
                "-h",
                "127.0.0.1",
                "--port=27018",
                "-vvv",
                "--oplogReplay",
                "--oplogLimit",
                "5:1",
                "-j4",
                "dump",
            ]),
            &[COMMON, MONGORESTORE],
        )
        .unwrap();
        assert_eq!(p.value("host"), Some("127.0.0.1"));
        assert_eq!(p.value("port"), Some("27018"));
        assert_eq!(p.verbosity, 3);
        assert!(p.flag("oplogReplay"));
        assert_eq!(p.value("oplogLimit"), Some("5:1"));
        assert_eq!(p.value("numParallelCollections"), Some("4"));
        assert_eq!(p.positional, vec!["dump"]);
        assert_eq!(
            parse(&a(&["--bogus"]), &[COMMON]).unwrap_err(),
            "unknown flag `bogus'"
        );
        assert!(parse(&a(&["--port"]), &[COMMON])
            .unwrap_err()
            .contains("expected argument"));
        assert!(parse(&a(&["--drop=1"]), &[COMMON, MONGORESTORE]).is_err());
    }

    #[test]
    fn passwords_on_argv_are_spotted() {
        assert!(password_on_argv(&a(&["--password", "x"])).is_some());
        assert!(password_on_argv(&a(&["--password=x"])).is_some());
        assert!(password_on_argv(&a(&["-psecret"])).is_some());
        assert!(password_on_argv(&a(&["--uri", "mongodb://u:pw@h/"])).is_some());
        assert!(password_on_argv(&a(&["--uri", "mongodb://u@h/", "--port", "1"])).is_none());
    }
}
