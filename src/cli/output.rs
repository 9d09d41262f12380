//! Writing command results to stdout.

use std::io::{self, Write};

use serde::Serialize;

/// The `--json` form of every command: pretty JSON followed by a newline.
pub fn write_json(out: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(io::Error::from)?;
    writeln!(out)
}

pub use crate::table::counted;
