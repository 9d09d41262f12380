//! Command lines for messages and logs, with secrets removed.
//!
//! pitr passes passwords through a 0600 config file, never argv; this is the second
//! line of defence for command lines that came from elsewhere (a user's `--uri`, a
//! test). Redaction errs on the side of hiding too much: the text is only shown, never
//! run.

use std::ffi::OsString;
use std::path::Path;

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Whether an option name (without leading dashes) carries a secret:
/// `--password`, `--sslPEMKeyPassword`, `--tlsCertificateKeyFilePassword`, ...
fn is_secret_option(name: &str) -> bool {
    name.to_ascii_lowercase().contains("password")
}

/// Replaces the password in a URI's userinfo: `mongodb://u:pw@h` → `mongodb://u:<redacted>@h`.
/// Uses the last `@` so that an unescaped `@` inside a password is still hidden.
fn redact_uri(arg: &str) -> Option<String> {
    let scheme_end = arg.find("://")? + 3;
    let rest = &arg[scheme_end..];
    let at = rest.rfind('@')?;
    let userinfo = &rest[..at];
    let colon = userinfo.find(':')?;
    Some(format!(
        "{}{}:{REDACTED}@{}",
        &arg[..scheme_end],
        &userinfo[..colon],
        &rest[at + 1..]
    ))
}

/// The arguments with secrets replaced by [`REDACTED`].
pub fn redact_args<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        let a = a.as_ref().to_string_lossy();
        if hide_next {
            hide_next = false;
            out.push(REDACTED.to_string());
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, _)) if is_secret_option(name) => {
                    out.push(format!("--{name}={REDACTED}"));
                    continue;
                }
                None if is_secret_option(long) => {
                    hide_next = true;
                    out.push(a.into_owned());
                    continue;
                }
                _ => {}
            }
        } else if a == "-p" {
            // The database tools' short form of --password.
            hide_next = true;
            out.push(a.into_owned());
            continue;
        } else if a.starts_with("-p") && a.len() > 2 {
            // `-pSECRET`, the attached short form go-flags also accepts.
            out.push(format!("-p{REDACTED}"));
            continue;
        }
        match redact_uri(&a) {
            Some(r) => out.push(r),
            None => out.push(a.into_owned()),
        }
    }
    out
}

/// Quotes an argument for display when a shell would split or expand it.
fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@,+%^".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `program arg arg ...`, secrets redacted, quoted where a shell would need it.
pub fn command_line(program: &Path, args: &[OsString]) -> String {
    let mut parts = vec![shell_quote(&program.to_string_lossy())];
    parts.extend(redact_args(args).iter().map(|a| shell_quote(a)));
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(args: &[&str]) -> Vec<String> {
        redact_args(args)
    }

    #[test]
    fn password_options() {
        assert_eq!(
            r(&["--username", "u", "--password", "hunter2", "--db", "x"]),
            ["--username", "u", "--password", REDACTED, "--db", "x"]
        );
        assert_eq!(
            r(&["--password=hunter2"]),
            [format!("--password={REDACTED}")]
        );
        assert_eq!(
            r(&["-p", "hunter2", "-u", "me"]),
            ["-p", REDACTED, "-u", "me"]
        );
        assert_eq!(r(&["-phunter2"]), [format!("-p{REDACTED}")]);
        assert_eq!(
            r(&[
                "--sslPEMKeyPassword",
                "k",
                "--tlsCertificateKeyFilePassword=k"
            ]),
            [
                "--sslPEMKeyPassword".to_string(),
                REDACTED.to_string(),
                format!("--tlsCertificateKeyFilePassword={REDACTED}")
            ]
        );
        // A trailing --password with nothing after it hides nothing and does not panic.
        assert_eq!(r(&["--password"]), ["--password"]);
        // Values that merely look like the option are left alone.
        assert_eq!(r(&["--port", "27017"]), ["--port", "27017"]);
    }

    #[test]
    fn uri_userinfo() {
        assert_eq!(
            r(&["mongodb://admin:s3cret@db1:27017/?authSource=admin"]),
            [format!(
                "mongodb://admin:{REDACTED}@db1:27017/?authSource=admin"
            )]
        );
        assert_eq!(
            r(&["--uri=mongodb+srv://u:p%40ss@cluster0.example.net/db"]),
            [format!(
                "--uri=mongodb+srv://u:{REDACTED}@cluster0.example.net/db"
            )]
        );
        // An unescaped `@` inside the password is still hidden.
        assert_eq!(
            r(&["mongodb://u:p@ss@h/"]),
            [format!("mongodb://u:{REDACTED}@h/")]
        );
        // No password: nothing to hide.
        assert_eq!(r(&["mongodb://u@h/"]), ["mongodb://u@h/"]);
        assert_eq!(r(&["mongodb://127.0.0.1:5/"]), ["mongodb://127.0.0.1:5/"]);
    }

    #[test]
    fn display_quotes_for_copy_paste() {
        let line = command_line(
            Path::new("/opt/mongo bin/mongorestore"),
            &[
                "--nsInclude".into(),
                "shop.*".into(),
                "--password".into(),
                "x".into(),
                "".into(),
            ],
        );
        assert_eq!(
            line,
            format!(
                "'/opt/mongo bin/mongorestore' --nsInclude 'shop.*' --password '{REDACTED}' ''"
            )
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
