//! `pitr completions SHELL` and `pitr man`: shell completions and man pages generated
//! from the clap definitions themselves (`clap_complete`, `clap_mangen`), so that a
//! person holding only the binary has its documentation, and it cannot drift from the
//! flags it describes.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::error::{exit, Failure};

use super::Cli;

/// Print a shell completion script on stdout
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Examples:
  pitr completions bash > ~/.local/share/bash-completion/completions/pitr
  pitr completions zsh > ~/.zfunc/_pitr          # with fpath+=~/.zfunc before compinit
  pitr completions fish > ~/.config/fish/completions/pitr.fish")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print the man page (or write one page per command into a directory)
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
Without --dir, pitr(1) goes to stdout. With --dir, pitr.1 and one page per command \
(pitr-find-drop.1, pitr-replay.1, ...) are written there.

Examples:
  pitr man | man -l -
  pitr man --dir ~/.local/share/man/man1 && man pitr-replay")]
pub struct ManArgs {
    /// Write pitr.1 and pitr-<command>.1 into this directory (created if missing)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs) -> Result<u8, Failure> {
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a write error (`| head` closing
    // the pipe), which pitr treats as no error at all.
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "pitr", &mut buf);
    let mut out = io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(exit::OK)
}

pub fn man(a: ManArgs) -> Result<u8, Failure> {
    let cmd = Cli::command();
    let dir = super::local_only::local_only_opt(
        "--dir",
        a.dir,
        "write the man pages to a local directory",
    )?;
    let Some(dir) = dir else {
        let mut out = io::stdout().lock();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        out.flush()?;
        return Ok(exit::OK);
    };
    std::fs::create_dir_all(&dir).map_err(|e| {
        Failure::new(format!("cannot create `{}`", dir.display()))
            .with_hint("check the path and its permissions")
            .with_cause(e)
    })?;
    let mut pages = vec![("pitr".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands() {
        let name = format!("pitr-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, c) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut buf = Vec::new();
        clap_mangen::Man::new(c).render(&mut buf)?;
        // Written whole under a temporary name, then renamed.
        let tmp = tempfile::NamedTempFile::new_in(&dir)?;
        std::fs::write(tmp.path(), &buf)?;
        tmp.persist(&path).map_err(|e| {
            Failure::new(format!("cannot write `{}`", path.display())).with_cause(e.error)
        })?;
        eprintln!("wrote {}", path.display());
    }
    Ok(exit::OK)
}
