//! The stand-in database tools, `mongorestore` and `mongodump`, and what they share:
//! the mongo-tools command-line contract and connecting through the driver.

pub mod cli;
pub mod connect;
pub mod mongodump;
pub mod mongorestore;
pub mod replay;

/// The `fail-midway` and `crash` knobs of the tools: what to do halfway through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Midway {
    Fail,
    Crash,
}

impl Midway {
    pub fn from_faults(f: &crate::faults::Faults) -> Option<Midway> {
        if f.has(&crate::faults::Fault::Crash) {
            Some(Midway::Crash)
        } else if f.has(&crate::faults::Fault::FailMidway) {
            Some(Midway::Fail)
        } else {
            None
        }
    }

    /// Abort the process (`crash`) or return the injected error (`fail-midway`).
    pub fn act(self) -> Result<(), String> {
        match self {
            Midway::Crash => {
                eprintln!("pitr stand-in: PITR_STANDIN_FAULT=crash: aborting");
                std::process::abort()
            }
            Midway::Fail => Err("connection(127.0.0.1) incomplete read of message header: read tcp: connection reset by peer (injected by PITR_STANDIN_FAULT=fail-midway)".into()),
        }
    }
}
