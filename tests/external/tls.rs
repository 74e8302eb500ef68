//! TLS to Postgres, with the built binary: a Postgres server of the test's own with `ssl=on`, a
//! certificate signed by a CA made in the test (the `openssl` command), and a `pg_hba.conf` that
//! accepts TLS connections only. ebb connects with `sslmode=verify-full` and that CA; it refuses
//! a certificate another CA signed, or one that does not name the host it connected to.
//!
//! The server is started as `scripts/lib.sh` starts the tests' one (`initdb`, `pg_ctl`, as the
//! `postgres` user when run as root), from `/usr/lib/postgresql/*/bin`; the test is skipped only
//! when those binaries are missing (`scripts/test` installs them).

use crate::common::ebb_on;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The newest `/usr/lib/postgresql/VERSION/bin` that has `initdb`.
fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn run(command: &mut Command) -> Output {
    let o = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        o.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn running_as_root() -> bool {
    String::from_utf8(run(Command::new("id").arg("-u")).stdout)
        .unwrap()
        .trim()
        == "0"
}

/// A file or directory handed to the `postgres` user, who runs the cluster when this runs as
/// root (initdb refuses root).
fn give_to_postgres(path: &Path) {
    if running_as_root() {
        run(Command::new("chown").arg("postgres:").arg(path));
    }
}

/// `program` of the Postgres binaries, run as the cluster's user.
fn cluster_command(bin: &Path, program: &str) -> Command {
    if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

/// `openssl ARGS` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let mut c = Command::new("openssl");
    c.args(args).current_dir(dir);
    match c.output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("the openssl command is missing: apt-get install openssl")
        }
        _ => {
            run(&mut c);
        }
    }
}

/// A CA: `NAME.key` and the self-signed `NAME.crt` in `dir`.
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// The server's key and certificate for 127.0.0.1 (and no host name), signed by the CA `ca`.
fn make_server_certificate(dir: &Path, ca: &str) {
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n\
         keyUsage = critical,digitalSignature\nextendedKeyUsage = serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
}

/// A Postgres cluster of the test's own on 127.0.0.1, TLS only; stopped and removed on drop.
struct TlsPostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    /// Holds the cluster, the certificates and the log.
    dir: tempfile::TempDir,
}

impl TlsPostgres {
    fn start(bin: PathBuf) -> TlsPostgres {
        let dir = tempfile::tempdir().unwrap();
        give_to_postgres(dir.path());
        let data = dir.path().join("data");
        run(cluster_command(&bin, "initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
        ]));
        let certs = dir.path().join("certs");
        std::fs::create_dir(&certs).unwrap();
        make_ca(&certs, "ca");
        make_ca(&certs, "other-ca");
        make_server_certificate(&certs, "ca");
        for file in ["server.crt", "server.key"] {
            let to = data.join(file);
            std::fs::copy(certs.join(file), &to).unwrap();
            give_to_postgres(&to);
            run(Command::new("chmod").arg("600").arg(&to));
        }
        // TLS connections only, so that a connection that works is one over TLS.
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let options = format!(
            "-h 127.0.0.1 -p {port} -k {} -c ssl=on -c ssl_cert_file=server.crt \
             -c ssl_key_file=server.key -c fsync=off",
            dir.path().display()
        );
        run(cluster_command(&bin, "pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.path().join("log"))
            .args(["-w", "start", "-o", &options]));
        TlsPostgres {
            bin,
            data,
            port,
            dir,
        }
    }

    /// A CA certificate made by the test: `ca` (which signed the server's) or `other-ca`.
    fn ca(&self, name: &str) -> PathBuf {
        self.dir.path().join("certs").join(format!("{name}.crt"))
    }

    /// The URL of the `postgres` database on `host` with `params`.
    fn url(&self, host: &str, params: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{params}", self.port)
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let _ = cluster_command(&self.bin, "pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

#[test]
fn ebb_verifies_the_servers_certificate_with_sslmode_verify_full() {
    let Some(bin) = postgres_bin() else {
        eprintln!("skipped: no Postgres server binaries in /usr/lib/postgresql/*/bin");
        return;
    };
    let pg = TlsPostgres::start(bin);
    let ca = pg.ca("ca");
    let verified = format!("sslmode=verify-full&sslrootcert={}", ca.display());

    let o = ebb_on(&pg.url("127.0.0.1", &verified), &["migrate"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = ebb_on(&pg.url("127.0.0.1", &verified), &["audit", "verify"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("ok: 0 audit rows"));

    // The server takes no connection without TLS: the ones above were over TLS.
    let o = ebb_on(&pg.url("127.0.0.1", "sslmode=disable"), &["audit"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no encryption"), "{err}");

    let tls_failed = format!(
        "error: the TLS connection to the database at 127.0.0.1:{}/postgres failed",
        pg.port
    );
    // A certificate another CA signed: someone in the middle.
    let other = format!(
        "sslmode=verify-full&sslrootcert={}",
        pg.ca("other-ca").display()
    );
    let o = ebb_on(&pg.url("127.0.0.1", &other), &["audit"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&tls_failed) && err.contains("sslrootcert"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // The right CA, but a host the certificate does not name (it names 127.0.0.1 only).
    let o = ebb_on(&pg.url("localhost", &verified), &["audit"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "error: the TLS connection to the database at localhost:{}/postgres failed",
            pg.port
        )) && err.contains("not valid for name"),
        "{err}"
    );
    // verify-ca checks the CA alone, not the name.
    let ca_only = format!("sslmode=verify-ca&sslrootcert={}", ca.display());
    let o = ebb_on(&pg.url("localhost", &ca_only), &["audit"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
