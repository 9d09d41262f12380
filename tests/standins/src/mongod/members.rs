//! (stand-in) Two (or more) members of one replica set, played by separate stand-in
//! processes, and a failover between them.
//!
//! `PITR_STANDIN_MEMBERS=HOST:PORT,HOST:PORT[,...]` (the same list, in the same order,
//! for every member; each finds itself by its own `--bind_ip`:`--port`) makes
//! `hello` list them all as `hosts`. The first one starts as the primary, the others
//! as secondaries naming it as `primary`. A secondary checks every 200 ms whether
//! the primary still accepts connections; when it does not (the test stopped it), the
//! first remaining member in the list makes itself primary: the term goes up, so
//! `electionId` grows as the driver expects of a new primary, and entries the
//! writer adds from then on carry the new term. Given the same
//! `PITR_STANDIN_OPLOG_WRITER`, the members hold the same history (the writer depends
//! only on the clock), so the new primary has every entry the old one had: a failover
//! without a rollback. A member that comes back claims nothing: it stays what the
//! list makes it at start (the first is primary), so tests restart only secondaries.

use std::time::Duration;

/// This process's view of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Members {
    pub hosts: Vec<String>,
    /// Index of the member this process believes is primary.
    pub primary: usize,
    /// This process's index.
    pub me: usize,
}

impl Members {
    pub fn parse(v: &str, me: &str) -> Result<Members, String> {
        let hosts: Vec<String> = v
            .split(',')
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .collect();
        let Some(idx) = hosts.iter().position(|h| h == me) else {
            return Err(format!(
                "this member `{me}` is not in the list `{v}` (give HOST:PORT exactly as --bind_ip and --port)"
            ));
        };
        Ok(Members {
            hosts,
            primary: 0,
            me: idx,
        })
    }

    pub fn is_primary(&self) -> bool {
        self.primary == self.me
    }

    pub fn primary_host(&self) -> &str {
        &self.hosts[self.primary]
    }
}

/// Whether `host:port` accepts a TCP connection within a short wait.
fn reachable(host: &str) -> bool {
    use std::net::ToSocketAddrs;
    let Ok(mut addrs) = host.to_socket_addrs() else {
        return false;
    };
    addrs.any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok())
}

/// Watches the primary from a secondary and holds the election when it is gone.
pub async fn watch(shared: std::sync::Arc<super::server::Shared>) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (primary_host, me_primary) = {
            let st = super::server::lock(&shared);
            match &st.members {
                Some(m) => (m.primary_host().to_string(), m.is_primary()),
                None => return,
            }
        };
        if me_primary {
            continue;
        }
        let host = primary_host.clone();
        let up = tokio::task::spawn_blocking(move || reachable(&host))
            .await
            .unwrap_or(true);
        if up {
            continue;
        }
        let mut st = super::server::lock(&shared);
        // Write what is due under the old term before taking over.
        super::oplog_writer::tick(&mut st);
        let Some(m) = st.members.as_mut() else { return };
        // The first member after the lost primary (wrapping) takes over; if that is
        // not this one, it follows it.
        let next = (m.primary + 1) % m.hosts.len();
        m.primary = next;
        let became = m.is_primary();
        let host = m.primary_host().to_string();
        if became {
            st.term += 1;
        }
        let term = st.term;
        st.logger.info(
            "REPL",
            21358,
            "ReplCoord",
            if became {
                "Stand-in: the primary is unreachable; this member is now primary"
            } else {
                "Stand-in: the primary is unreachable; following the next member"
            },
            serde_json::json!({"lostPrimary": primary_host, "newPrimary": host, "term": term}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_itself() {
        let m = Members::parse("127.0.0.1:1, 127.0.0.1:2", "127.0.0.1:2").unwrap();
        assert_eq!((m.me, m.primary, m.is_primary()), (1, 0, false));
        assert_eq!(m.primary_host(), "127.0.0.1:1");
        assert!(Members::parse("127.0.0.1:1", "127.0.0.1:3").is_err());
    }
}
