//! mongod's structured log: one JSON object per line (`{"t":{"$date":...},"s":"I",
//! "c":"NETWORK","id":23016,"ctx":"listener","msg":"Waiting for connections",...}`),
//! to `--logpath` or stdout, like MongoDB 4.4+.

use crate::logline::{mongod_stamp, now_millis};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::Mutex;

pub struct Logger {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Logger {
    /// Log to a file (`append` keeps what is there) or to stdout.
    pub fn open(path: Option<&str>, append: bool) -> std::io::Result<Logger> {
        let out: Box<dyn Write + Send> = match path {
            Some(p) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(p)?,
            ),
            None => Box::new(std::io::stdout()),
        };
        Ok(Logger {
            out: Mutex::new(out),
        })
    }

    /// Write one line; `s` is the severity (`I`, `W`, `E`, `F`), `c` the component.
    pub fn log(&self, s: &str, c: &str, id: u32, ctx: &str, msg: &str, attr: Value) {
        let mut line = json!({
            "t": {"$date": mongod_stamp(now_millis())},
            "s": s,
            "c": c,
            "id": id,
            "ctx": ctx,
            "msg": msg,
        });
        if !attr.is_null() {
            line["attr"] = attr;
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    pub fn info(&self, c: &str, id: u32, ctx: &str, msg: &str, attr: Value) {
        self.log("I", c, id, ctx, msg, attr)
    }

    pub fn error(&self, c: &str, id: u32, ctx: &str, msg: &str, attr: Value) {
        self.log("E", c, id, ctx, msg, attr)
    }
}
