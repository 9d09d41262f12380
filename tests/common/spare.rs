//! A plain stand-in (or real) `mongod` to restore a dump into and look at: a
//! standalone on a free loopback port with its own temporary dbpath, killed on drop.
//! The tests that check what the real mongorestore makes of pitr's dumps use it
//! (engine_e2e, engine_destroyed, replay_cluster).

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Mongod {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Mongod {
    /// Starts `bin` and waits until it listens.
    pub fn start(bin: &Path) -> Mongod {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("db")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind_ip",
                "127.0.0.1",
                "--dbpath",
            ])
            .arg(dir.path().join("db"))
            .arg("--logpath")
            .arg(dir.path().join("mongod.log"))
            .env_remove("PITR_STANDIN_FAULT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the stand-in mongod");
        let mongod = Mongod {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "mongod did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        mongod
    }

    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/", self.port)
    }

    /// `mongorestore --host 127.0.0.1 --port P ARGS`, which must succeed.
    pub fn restore(&self, mongorestore: &Path, args: &[&str]) -> Output {
        let o = Command::new(mongorestore)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run mongorestore");
        assert!(
            o.status.success(),
            "mongorestore {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// `f` with a driver client of this server, on a runtime of its own.
    fn with_client<T>(&self, f: impl AsyncFnOnce(mongodb::Client) -> T) -> T {
        let uri = self.uri();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move { f(mongodb::Client::with_uri_str(&uri).await.unwrap()).await })
    }

    pub fn count(&self, db: &str, coll: &str) -> u64 {
        self.with_client(async |c| {
            c.database(db)
                .collection::<bson::Document>(coll)
                .count_documents(bson::doc! {})
                .await
                .unwrap()
        })
    }

    /// The server's `dbHash` of `db.coll`, and its count.
    pub fn hash_and_count(&self, db: &str, coll: &str) -> (String, u64) {
        let h = self.with_client(async |c| {
            let reply = c
                .database(db)
                .run_command(bson::doc! { "dbHash": 1, "collections": [coll] })
                .await
                .unwrap();
            reply
                .get_document("collections")
                .unwrap()
                .get_str(coll)
                .unwrap()
                .to_string()
        });
        (h, self.count(db, coll))
    }

    /// Deletes one document of `db.coll` matching `filter` (to break a restore).
    pub fn delete_one(&self, db: &str, coll: &str, filter: bson::Document) {
        let deleted = self.with_client(async |c| {
            c.database(db)
                .collection::<bson::Document>(coll)
                .delete_one(filter)
                .await
                .unwrap()
                .deleted_count
        });
        assert_eq!(deleted, 1);
    }
}

impl Drop for Mongod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
