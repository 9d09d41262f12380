//! Accepting connections and running each one: read a request, run the command
//! under the state lock, write the reply.

use super::commands::{dispatch, Conn, Outcome};
use super::state::State;
use super::wire::{self, Request};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedSender;

pub struct Shared {
    pub state: Mutex<State>,
    pub logger: Arc<super::log::Logger>,
    /// Told when a client ran `shutdown`.
    pub shutdown: UnboundedSender<()>,
}

pub async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    handle(stream, peer.to_string(), shared).await;
                });
            }
            Err(e) => {
                shared.logger.error(
                    "NETWORK",
                    22841,
                    "listener",
                    "Error accepting new connection",
                    json!({"error": e.to_string()}),
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// One "Slow query" line per command (with `-v` or `--slowms -1`): the command as
/// received and the reply's `ok`, `code`, `errmsg` and `writeErrors`.
fn log_command(shared: &Shared, ctx: &str, db: &str, body: &bson::Document, o: &Outcome) {
    let mut attr = json!({
        "type": "command",
        "ns": format!("{db}.$cmd"),
        "command": bson::Bson::Document(body.clone()).into_relaxed_extjson(),
    });
    if let Outcome::Reply(r) = o {
        attr["ok"] = json!(r.get("ok").and_then(|v| v.as_f64()).unwrap_or(0.0));
        for k in ["code", "errmsg", "writeErrors", "n"] {
            if let Some(v) = r.get(k) {
                attr[k] = v.clone().into_relaxed_extjson();
            }
        }
        // As a real server's slow query line: the documents a cursor command returned.
        if let Ok(c) = r.get_document("cursor") {
            let batch = c
                .get_array("firstBatch")
                .or_else(|_| c.get_array("nextBatch"));
            if let Ok(b) = batch {
                attr["nreturned"] = json!(b.len());
            }
        }
    }
    shared
        .logger
        .info("COMMAND", 51803, ctx, "Slow query", attr);
}

pub(crate) fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

async fn handle(mut stream: TcpStream, peer: String, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let id = {
        let mut st = lock(&shared);
        st.next_conn_id += 1;
        st.next_conn_id - 1
    };
    shared.logger.info(
        "NETWORK",
        22943,
        "listener",
        "Connection accepted",
        json!({"remote": peer, "connectionId": id}),
    );
    let conn = Conn {
        id,
        peer: peer.clone(),
    };
    let ctx = format!("conn{id}");
    loop {
        let req = match wire::read_request(&mut stream).await {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                shared.logger.info(
                    "NETWORK",
                    22988,
                    &ctx,
                    "Error receiving request from client. Ending connection from remote",
                    json!({"error": e.to_string(), "remote": peer}),
                );
                break;
            }
        };
        match req {
            Request::Msg {
                request_id,
                flags,
                body,
            } => {
                let db = body.get_str("$db").unwrap_or("admin").to_string();
                let wait_ms = match body.get("maxTimeMS") {
                    Some(bson::Bson::Int32(i)) => *i as u64,
                    Some(bson::Bson::Int64(i)) => *i as u64,
                    Some(bson::Bson::Double(d)) => *d as u64,
                    _ => 1000,
                };
                let deadline = Instant::now() + Duration::from_millis(wait_ms);
                let mut expired = false;
                loop {
                    let outcome = {
                        let mut st = lock(&shared);
                        let o = dispatch(&mut st, &conn, &db, &body, expired);
                        if st.log_commands {
                            log_command(&shared, &ctx, &db, &body, &o);
                        }
                        o
                    };
                    match outcome {
                        Outcome::Reply(doc) => {
                            if flags & wire::MORE_TO_COME == 0 {
                                let bytes = wire::encode_msg(request_id, &doc);
                                if stream.write_all(&bytes).await.is_err() {
                                    return;
                                }
                            }
                            break;
                        }
                        Outcome::Wait => {
                            if Instant::now() >= deadline {
                                expired = true;
                            } else {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                        Outcome::Close => {
                            let _ = stream.shutdown().await;
                            return;
                        }
                        Outcome::Shutdown => {
                            shared.logger.info(
                                "COMMAND",
                                20499,
                                &ctx,
                                "Received shutdown command",
                                json!({"remote": peer}),
                            );
                            let _ = shared.shutdown.send(());
                            return;
                        }
                    }
                }
            }
            Request::Query {
                request_id,
                collection,
                query,
            } => {
                let name = query.keys().next().cloned().unwrap_or_default();
                let doc = if collection.ends_with(".$cmd")
                    && matches!(name.as_str(), "isMaster" | "ismaster" | "hello")
                {
                    let mut st = lock(&shared);
                    let o = dispatch(&mut st, &conn, "admin", &query, true);
                    if st.log_commands {
                        log_command(&shared, &format!("{ctx} OP_QUERY"), "admin", &query, &o);
                    }
                    match o {
                        Outcome::Reply(d) => d,
                        _ => bson::doc! {"ok": 0.0},
                    }
                } else {
                    bson::doc! {
                        "ok": 0.0,
                        "errmsg": format!("Unsupported OP_QUERY command: {name}. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal"),
                        "code": 352,
                        "codeName": "UnsupportedOpQueryCommand",
                    }
                };
                if stream
                    .write_all(&wire::encode_reply(request_id, &doc))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Request::Unreadable { request_id, error } => {
                let doc = bson::doc! {
                    "ok": 0.0,
                    "errmsg": format!("pitr stand-in mongod: cannot keep this request's documents byte for byte ({error}); a real server would store them as sent (not implemented by the stand-in)"),
                    "code": 2,
                    "codeName": "BadValue",
                };
                shared.logger.info(
                    "NETWORK",
                    22988,
                    &ctx,
                    "Stand-in: unreadable request",
                    json!({"error": error}),
                );
                if stream
                    .write_all(&wire::encode_msg(request_id, &doc))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Request::Unsupported { op_code } => {
                shared.logger.info(
                    "NETWORK",
                    22988,
                    &ctx,
                    "Unsupported opcode; ending connection",
                    json!({"opCode": op_code}),
                );
                break;
            }
        }
    }
    shared.logger.info(
        "NETWORK",
        22944,
        &ctx,
        "Connection ended",
        json!({"remote": peer, "connectionId": id}),
    );
}
