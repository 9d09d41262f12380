//! mongod's command line, parsed the way the real one (boost::program_options) does:
//! `--name value` or `--name=value`, unknown options and missing values are errors
//! (exit 2, "Error parsing command line: ..."), single-valued options may not repeat.

use std::collections::BTreeMap;

/// Options that take a value. Only the ones pitr could plausibly pass are given
/// meaning; the others are accepted and recorded so the contract stays realistic.
const VALUE_OPTIONS: &[&str] = &[
    "port",
    "bind_ip",
    "dbpath",
    "logpath",
    "setParameter",
    "replSet",
    "keyFile",
    "oplogSize",
    "wiredTigerCacheSizeGB",
    "storageEngine",
    "pidfilepath",
    "maxConns",
    "timeStampFormat",
    "unixSocketPrefix",
    "config",
    "clusterAuthMode",
    "tlsMode",
    "sslMode",
    "tlsCertificateKeyFile",
    "tlsCAFile",
    "slowms",
    "profile",
    "wiredTigerCollectionBlockCompressor",
    "wiredTigerJournalCompressor",
    "syncdelay",
    "enableMajorityReadConcern",
    "filePermissions",
];

/// Options without a value.
const FLAG_OPTIONS: &[&str] = &[
    "bind_ip_all",
    "ipv6",
    "logappend",
    "nounixsocket",
    "quiet",
    "fork",
    "auth",
    "noauth",
    "directoryperdb",
    "shardsvr",
    "configsvr",
    "version",
    "help",
    "sysinfo",
    "verbose",
    "transitionToAuth",
    "noscripting",
    "notablescan",
    "syslog",
    "outputConfig",
    // stand-in only: allow a non-loopback --bind_ip (default: refused, exit 2)
    "standin-allow-any-bind",
];

/// Repeatable options.
const MULTI_OPTIONS: &[&str] = &["setParameter"];

/// A parsed mongod command line.
#[derive(Debug, Default, Clone)]
pub struct MongodArgs {
    /// Every argument after the program name, as received.
    pub argv: Vec<String>,
    pub values: BTreeMap<String, String>,
    pub set_parameters: Vec<(String, String)>,
    pub flags: Vec<String>,
    pub verbosity: u32,
}

impl MongodArgs {
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }
}

/// Parse; `Err` holds the text after "Error parsing command line: ".
pub fn parse(argv: &[String]) -> Result<MongodArgs, String> {
    let mut out = MongodArgs {
        argv: argv.to_vec(),
        ..Default::default()
    };
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        let (name, inline) = if let Some(long) = arg.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (long.to_string(), None),
            }
        } else if let Some(short) = arg.strip_prefix('-') {
            // -v, -vv, ... ; -f FILE (config); -h (help)
            if !short.is_empty() && short.chars().all(|c| c == 'v') {
                out.verbosity += short.len() as u32;
                continue;
            }
            match short {
                "f" => ("config".to_string(), None),
                "h" => ("help".to_string(), None),
                _ => return Err(format!("unrecognised option '{arg}'")),
            }
        } else {
            return Err(
                "too many positional options have been specified on the command line".into(),
            );
        };
        if VALUE_OPTIONS.contains(&name.as_str()) {
            let value = match inline {
                Some(v) => v,
                None => {
                    if i < argv.len() {
                        i += 1;
                        argv[i - 1].clone()
                    } else {
                        return Err(format!(
                            "the required argument for option '--{name}' is missing"
                        ));
                    }
                }
            };
            if name == "setParameter" {
                let Some((k, v)) = value.split_once('=') else {
                    return Err(format!("Illegal --setParameter parameter: \"{value}\""));
                };
                out.set_parameters.push((k.to_string(), v.to_string()));
            } else if out.values.contains_key(&name) && !MULTI_OPTIONS.contains(&name.as_str()) {
                return Err(format!(
                    "option '--{name}' cannot be specified more than once"
                ));
            } else {
                if name == "port" {
                    match value.parse::<u32>() {
                        Ok(p) if (1..=65535).contains(&p) => {}
                        _ => {
                            return Err(format!(
                                "the argument ('{value}') for option '--port' is invalid"
                            ))
                        }
                    }
                }
                out.values.insert(name, value);
            }
        } else if FLAG_OPTIONS.contains(&name.as_str()) {
            if inline.is_some() && name != "verbose" {
                return Err(format!("option '--{name}' does not take any arguments"));
            }
            if name == "verbose" {
                out.verbosity += 1;
            }
            out.flags.push(name);
        } else {
            return Err(format!("unrecognised option '{arg}'"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<MongodArgs, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn contract() {
        let a = p(&[
            "--port",
            "27018",
            "--bind_ip=127.0.0.1",
            "--setParameter",
            "ttlMonitorEnabled=false",
            "--quiet",
            "-vv",
        ])
        .unwrap();
        assert_eq!(a.value("port"), Some("27018"));
        assert_eq!(a.value("bind_ip"), Some("127.0.0.1"));
        assert_eq!(
            a.set_parameters,
            vec![("ttlMonitorEnabled".into(), "false".into())]
        );
        assert!(a.flag("quiet"));
        assert_eq!(a.verbosity, 2);
        assert_eq!(
            p(&["--frobnicate"]).unwrap_err(),
            "unrecognised option '--frobnicate'"
        );
        assert!(p(&["--port"]).unwrap_err().contains("required argument"));
        assert!(p(&["--port", "x"]).unwrap_err().contains("is invalid"));
        assert!(p(&["--port", "1", "--port", "2"]).is_err());
        assert!(p(&["--setParameter", "novalue"]).is_err());
        assert!(p(&["positional"]).is_err());
        // removed in 6.1, so a 7.0 mongod refuses it
        assert!(p(&["--journal"]).is_err());
    }
}
