//! A real Jupyter Server for the tests of the idle rule's jupyter signal: `jupyter server` from
//! pip (scripts/lib.sh's `need_jupyter`), on a free port of 127.0.0.1 with a token, its
//! runtime, data and config directories its own, stopped when dropped. Code runs in its kernels
//! through `jupyter_client` on the kernel's connection file, as a notebook's would; the server
//! sees it on the kernel's iopub channel.

use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running Jupyter Server.
pub struct Server {
    /// Its base URL.
    pub url: String,
    token: String,
    child: Child,
    dir: tempfile::TempDir,
}

/// Runs `argv[2]` in the kernel of connection file `argv[1]`; waits for it to finish unless
/// `argv[3]` is `leave`.
const RUN: &str = r#"
import sys, jupyter_client, jupyter_client.channels
# A kernel that misses one heartbeat in a second is taken for dead by a client without its
# manager; on a loaded machine a kernel starting up does. Thirty seconds, as for a reply.
jupyter_client.channels.HBChannel.time_to_dead = 30.0
kc = jupyter_client.BlockingKernelClient(connection_file=sys.argv[1])
kc.load_connection_file()
kc.start_channels()
kc.wait_for_ready(timeout=60)
msg_id = kc.execute(sys.argv[2])
if sys.argv[3] != "leave":
    while True:
        reply = kc.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
kc.stop_channels()
"#;

impl Server {
    /// A server that accepts `token`.
    pub async fn start(token: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = Command::new("jupyter")
            .args(["server", "--no-browser", "--allow-root", "--ip=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg("--port-retries=0")
            .arg(format!("--IdentityProvider.token={token}"))
            .arg(format!("--ServerApp.root_dir={}", dir.path().display()))
            .envs(Self::dirs(&dir))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("jupyter is not installed ({e}): run scripts/test, or pip install jupyter_server")
            });
        let server = Server {
            url: format!("http://127.0.0.1:{port}"),
            token: token.to_string(),
            child,
            dir,
        };
        let ready = super::eventually(
            Duration::from_secs(60),
            Duration::from_millis(100),
            async || server.get("api/status").await.ok(),
        );
        if ready.await.is_none() {
            panic!(
                "Jupyter Server did not start; its log:\n{}",
                std::fs::read_to_string(server.dir.path().join("log")).unwrap_or_default()
            );
        }
        server
    }

    fn dirs(dir: &tempfile::TempDir) -> Vec<(&'static str, std::path::PathBuf)> {
        [
            "JUPYTER_RUNTIME_DIR",
            "JUPYTER_DATA_DIR",
            "JUPYTER_CONFIG_DIR",
        ]
        .into_iter()
        .map(|name| (name, dir.path().join(name.to_lowercase())))
        .collect()
    }

    /// `GET url/path` with the token, as JSON.
    async fn get(&self, path: &str) -> Result<Value, String> {
        let answer = reqwest::Client::new()
            .get(format!("{}/{path}", self.url))
            .header("Authorization", format!("token {}", self.token))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !answer.status().is_success() {
            return Err(answer.status().to_string());
        }
        answer.json().await.map_err(|e| e.to_string())
    }

    /// A new Python kernel's id.
    pub async fn kernel(&self) -> String {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/api/kernels", self.url))
            .header("Authorization", format!("token {}", self.token))
            .json(&serde_json::json!({"name": "python3"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["id"].as_str().unwrap().to_string()
    }

    /// Runs `code` in kernel `id`: to its end, or, with `leave`, leaving it running.
    pub fn run(&self, id: &str, code: &str, leave: bool) {
        let runtime = self.dir.path().join("jupyter_runtime_dir");
        let connection = runtime.join(format!("kernel-{id}.json"));
        let out = Command::new("python3")
            .args(["-c", RUN])
            .arg(&connection)
            .arg(code)
            .arg(if leave { "leave" } else { "wait" })
            .envs(Self::dirs(&self.dir))
            .output()
            .unwrap();
        assert!(out.status.success(), "running {code:?}: {out:?}");
    }

    /// The server's kernels, as `/api/kernels` gives them.
    pub async fn kernels(&self) -> Vec<Value> {
        let kernels = self.get("api/kernels").await.unwrap();
        kernels.as_array().unwrap().clone()
    }

    /// Waits until kernel `id`'s execution state is `state`, and gives its last activity.
    pub async fn kernel_in(&self, id: &str, state: &str) -> chrono::DateTime<chrono::Utc> {
        let found = super::eventually(
            Duration::from_secs(60),
            Duration::from_millis(50),
            async || {
                let kernels = self.kernels().await;
                let k = kernels.iter().find(|k| k["id"] == id)?;
                (k["execution_state"] == state).then(|| {
                    let at = k["last_activity"].as_str().unwrap();
                    chrono::DateTime::parse_from_rfc3339(at).unwrap().to_utc()
                })
            },
        );
        found
            .await
            .unwrap_or_else(|| panic!("kernel {id} never became {state}: {:?}", "timeout"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
