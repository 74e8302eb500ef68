//! A real Prometheus server for the tests that read GPU utilisation from it: Debian's
//! `prometheus` package (scripts/lib.sh's `need_prometheus` installs it), its history written
//! by `promtool tsdb create-blocks-from openmetrics` into the data directory before the server
//! starts, listening on a free port of 127.0.0.1, and stopped when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running Prometheus server.
pub struct Server {
    /// Its base URL.
    pub url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

fn tool(name: &str) -> &str {
    if Command::new(name).arg("--version").output().is_err() {
        panic!("{name} is not installed: run scripts/test, or apt-get install prometheus");
    }
    name
}

impl Server {
    /// A server whose database holds `history` (OpenMetrics text, ending with `# EOF`).
    pub async fn with_history(history: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let input = dir.path().join("history.om");
        std::fs::write(&input, history).unwrap();
        let made = Command::new(tool("promtool"))
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&input)
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "promtool: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, "global: {}\nscrape_configs: []\n").unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = Command::new(tool("prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // The history is of fixed dates: kept whatever today's date.
            .arg("--storage.tsdb.retention.time=100y")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let server = Server {
            url: format!("http://127.0.0.1:{port}"),
            child,
            _dir: dir,
        };
        server.ready(&server._dir.path().join("log")).await;
        server
    }

    /// Waits until the server answers ready (it loads the blocks first).
    async fn ready(&self, log: &Path) {
        let client = reqwest::Client::new();
        let ready = super::eventually(
            Duration::from_secs(30),
            Duration::from_millis(100),
            async || {
                let answer = client.get(format!("{}/-/ready", self.url)).send().await;
                answer.is_ok_and(|a| a.status().is_success()).then_some(())
            },
        );
        if ready.await.is_none() {
            panic!(
                "Prometheus did not get ready; its log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// OpenMetrics text of gauge `DCGM_FI_DEV_GPU_UTIL`: for each (labels, percent), a sample every
/// minute from `from` to `to` (Unix seconds).
pub fn dcgm_history(series: &[(&str, f64)], from: i64, to: i64) -> String {
    let mut text = String::from(
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
    );
    for (labels, percent) in series {
        let mut at = from;
        while at <= to {
            text.push_str(&format!(
                "DCGM_FI_DEV_GPU_UTIL{{{labels}}} {percent} {at}\n"
            ));
            at += 60;
        }
    }
    text.push_str("# EOF\n");
    text
}
