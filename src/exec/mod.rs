//! Running MongoDB's own tools: finding `mongod`, `mongorestore` and `mongodump`, and
//! supervising every child process pitr starts.
//!
//! Every child goes through [`child::Command`]: resolved binary, stdin null, its own
//! process group, stdout/stderr drained while waiting (into a log file, a progress
//! callback and a ring buffer of the last lines), a timeout, and on timeout or Ctrl-C
//! SIGTERM to the whole group, a grace period, then SIGKILL. Nothing else in pitr
//! spawns processes.
//!
//! - [`binaries`]: where the tools are and which versions they are.
//! - [`child`]: one supervised child; typed outcomes and errors.
//! - [`signals`]: the cancellation token fed by SIGINT/SIGTERM to pitr.
//! - [`spare`]: a throw-away standalone `mongod` on a loopback port.
//! - [`redact`]: command lines for messages, with secrets removed.
//! - [`output`] and [`pgroup`]: draining output, and signalling process groups.

pub mod binaries;
pub mod child;
pub mod output;
pub mod pgroup;
pub mod redact;
pub mod signals;
pub mod spare;

pub use binaries::{BinaryError, Tool, ToolBinary, ToolSearch};
pub use child::{ChildError, Command, Finished, Outcome, Running};
pub use signals::Cancel;
pub use spare::{SpareConnection, SpareError, SpareMongod, SpareOptions};
