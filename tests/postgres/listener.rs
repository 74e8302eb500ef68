//! `ebb serve`'s listener under connections that never finish their headers, through the
//! binary (a real Postgres, the simulated fleet): they are closed at the configured header
//! timeout while `/readyz` keeps answering. The timing of the closing itself is shown on tokio's
//! paused clock by `serve::listener`'s unit tests; here the bound only fails a listener that
//! never closes them (as `axum::serve` without a timer did).

use crate::common;

use ebb::store::Store;
use sqlx::PgPool;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections held open by the test.
const STALLED: usize = 200;

/// Far longer than the 1 s header timeout the test configures.
const BOUND: Duration = Duration::from_secs(30);

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The status line of `GET path` on a new connection to `addr`, if it answers.
async fn status_line(addr: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: ebb\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.ok()?;
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().map(str::to_string)
}

#[sqlx::test(migrations = false)]
async fn connections_that_never_finish_their_headers_are_closed_while_readyz_answers(pool: PgPool) {
    Store::from_pool(pool.clone()).migrate().await.unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args([
                "serve",
                "--http-header-timeout",
                "1s",
                "--http-idle-timeout",
                "2s",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("DATABASE_URL", common::database_url(&pool))
            .env("EBB_CLOUD", "sim:tests/fixtures/fleet.yaml")
            .env("EBB_POLICIES", "policies")
            .env("EBB_LISTEN", &addr)
            .env("EBB_API_PUBLIC_READS", "true")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ready = common::eventually(BOUND, Duration::from_millis(100), async || {
        status_line(&addr, "/readyz")
            .await
            .filter(|l| l.starts_with("HTTP/1.1 200"))
    })
    .await;
    assert!(ready.is_some(), "ebb serve never became ready");

    let mut stalled = Vec::with_capacity(STALLED);
    for _ in 0..STALLED {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: ebb\r\nX-Slow: ")
            .await
            .unwrap();
        stalled.push(stream);
    }
    // Held open, they do not keep anyone else out.
    let answer = status_line(&addr, "/readyz").await;
    assert_eq!(answer.as_deref(), Some("HTTP/1.1 200 OK"));

    let all_closed = async {
        for stream in &mut stalled {
            let mut rest = [0u8; 256];
            while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {}
        }
    };
    tokio::time::timeout(BOUND, all_closed)
        .await
        .expect("the stalled connections were never closed");
    let answer = status_line(&addr, "/readyz").await;
    assert_eq!(answer.as_deref(), Some("HTTP/1.1 200 OK"));
    println!("{STALLED} connections that never finished their headers closed; /readyz answered 200 meanwhile");
}
