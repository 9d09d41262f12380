//! The room's own tokio runtime, so that pitr's synchronous readers and writers can use
//! the asynchronous object_store clients.
//!
//! One runtime per process, started on first use, two worker threads (the HTTP
//! connections, part uploads and read-ahead run there). A synchronous caller waits for a
//! future through a std channel rather than `Runtime::block_on`, so that waiting works
//! from any thread, including a `spawn_blocking` thread of another runtime (pitr's
//! replay is async); it must not be called from an async task itself, which it would
//! block.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pitr-storage")
            .enable_all()
            .build()
            .expect("start the storage runtime")
    })
}

/// The runtime's handle, to spawn tasks that outlive one call (a reader's pump).
pub(crate) fn handle() -> &'static Handle {
    runtime().handle()
}

/// Runs `fut` on the storage runtime and waits for its result.
pub(crate) fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle().spawn(async move {
        let _ = tx.send(fut.await);
    });
    // The task only ends without sending if it panicked; pass the panic on.
    rx.recv()
        .expect("a storage task panicked (see the message above)")
}

/// rustls needs a process-wide crypto provider when none is compiled in by default
/// (reqwest's `rustls-no-provider`): ring, the one the MongoDB driver already uses.
pub(crate) fn install_crypto_provider() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // Err only means another part of the process installed one first: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
