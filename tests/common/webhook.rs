//! A webhook receiver for tests of the notices ebb posts.

use std::sync::Arc;

/// A webhook receiver on 127.0.0.1 that answers 200 to every post; its URL and the `text` of
/// each notice it received.
pub async fn receiver() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    receiver_of(|notice| notice["text"].as_str().unwrap().to_string()).await
}

/// [`receiver`], keeping each notice's whole JSON body.
pub async fn bodies() -> (String, Arc<std::sync::Mutex<Vec<serde_json::Value>>>) {
    receiver_of(|notice| notice).await
}

/// A receiver that keeps what `read` makes of each notice's JSON body.
async fn receiver_of<T: Send + 'static>(
    read: impl Fn(serde_json::Value) -> T + Send + 'static,
) -> (String, Arc<std::sync::Mutex<Vec<T>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let texts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = texts.clone();
    // Tests run side by side, and a port another test's server let go may be this one's: a
    // client of that test still trying its old address is answered 404 and not counted. Only
    // a whole `POST /hook` is a notice.
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            let mut notice = None;
            loop {
                let n = socket.read(&mut buf).await.unwrap_or(0);
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                let Some((head, body)) = text.split_once("\r\n\r\n") else {
                    match n {
                        0 => break,
                        _ => continue,
                    }
                };
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    if head.starts_with("POST /hook ") {
                        notice = Some(serde_json::from_str(&body[..length]).unwrap());
                    }
                    break;
                }
                if n == 0 {
                    break;
                }
            }
            let answer = match notice {
                Some(notice) => {
                    seen.lock().unwrap().push(read(notice));
                    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                }
                None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            };
            let _ = socket.write_all(answer.as_bytes()).await;
        }
    });
    (url, texts)
}
