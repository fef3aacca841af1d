//! Against nginx: a static file (with the `ETag` and `Accept-Ranges` nginx
//! gives every static file) fetched through a loopback proxy of the test's own
//! that cuts the first connection after [`CUT`] bytes, since nginx itself never
//! fails part-way. The body must arrive whole through one ranged resume, which
//! nginx answers with `206`.
//!
//! nginx is a Debian package (`nginx`, or `nginx-light`); `.ci/run` installs
//! it when it is missing. Without it this test fails, naming the package.

use super::support::{get, guarded};
use super::{assert_same_bytes, pattern, read_to_end, stack, Limits};
use std::{
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tower::ServiceExt;

/// The size of the static file: a few MiB.
const LEN: usize = 3 * 1024 * 1024 + 123;

/// The bytes of the first response (head and body) the proxy lets through
/// before it closes the connection: about a third of the file.
const CUT: usize = 1024 * 1024 + 7;

/// Set (as `.ci/run` does), nginx's absence fails the test instead of
/// skipping it.
const NGINX_REQUIRED: &str = "HTTP_RESILIENCE_REQUIRE_NGINX";

/// How long nginx may take to start listening.
const STARTUP: Duration = Duration::from_secs(5);

#[tokio::test]
async fn nginx_answers_a_resume_with_206_and_the_body_arrives_whole() {
    if find_nginx().is_none() && std::env::var_os(NGINX_REQUIRED).is_none() {
        // NOTE: so that the README's test command holds on a machine with
        // nothing but cargo; CI sets the variable, installs nginx, and the
        // test runs there.
        eprintln!(
            "SKIPPED: nginx is not installed (`apt-get install -y nginx`); \
             set {NGINX_REQUIRED}=1 to make its absence a failure, as CI does"
        );
        return;
    }
    let file = pattern(LEN);
    let nginx = Nginx::start(&file).await;
    let proxy = CuttingProxy::start(nginx.addr, CUT).await;

    let uri = format!("http://{}/file.bin", proxy.addr).parse().unwrap();
    let response = guarded(stack(Limits::default()).oneshot(get(uri)))
        .await
        .unwrap_or_else(|err| panic!("{err:?}\nnginx's log: {}", nginx.log()));
    assert!(
        response.body().get_ref().is_resumable(),
        "nginx's static file is resumable: {:?}",
        response.headers()
    );
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    let (got, err) = guarded(read_to_end(response.into_body())).await;
    assert!(err.is_none(), "{err:?}\nnginx's log: {}", nginx.log());
    assert_same_bytes(&got, &file);

    let exchanges = proxy.exchanges();
    assert_eq!(exchanges.len(), 2, "one cut connection, one resume");
    let first_head = exchanges[0]
        .response_head()
        .expect("the first response head");
    let received = CUT - first_head.len();
    let ranged = exchanges[1].request.to_ascii_lowercase();
    assert!(
        ranged.contains(&format!("\r\nrange: bytes={received}-\r\n")),
        "{ranged}"
    );
    assert!(
        ranged.contains(&format!("\r\nif-range: {etag}\r\n")),
        "{ranged}"
    );
    let answer = exchanges[1]
        .response_head()
        .expect("the second response head");
    assert!(answer.starts_with("HTTP/1.1 206 "), "{answer}");
    let content_range = format!("\r\ncontent-range: bytes {received}-{}/{LEN}\r\n", LEN - 1);
    assert!(
        answer.to_ascii_lowercase().contains(&content_range),
        "{answer}"
    );
}

/// nginx, started as a child process on `127.0.0.1` and a free port, serving
/// one generated static file from a temporary directory; stopped (by its
/// process handle) and the directory removed on drop.
struct Nginx {
    addr: SocketAddr,
    dir: PathBuf,
    child: Child,
}

impl Nginx {
    async fn start(file: &[u8]) -> Self {
        let binary = find_nginx().unwrap_or_else(|| {
            panic!(
                "nginx is not installed: this test needs it. Install the Debian package \
                 `nginx` (or `nginx-light`): `apt-get install -y nginx`; .ci/run installs \
                 it when it is missing"
            )
        });
        let addr = http_resilience_mock::vacant_addr().expect("a vacant loopback port");
        let dir = std::env::temp_dir().join(format!(
            "http-resilience-nginx-{}-{}",
            std::process::id(),
            addr.port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("www")).unwrap();
        std::fs::write(dir.join("www/file.bin"), file).unwrap();
        std::fs::write(dir.join("nginx.conf"), config(&dir, addr)).unwrap();
        let child = Command::new(&binary)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", binary.display()));
        let mut nginx = Self { addr, dir, child };
        nginx.wait_until_listening().await;
        nginx
    }

    /// Waits until nginx accepts connections; fails with its log if it exits.
    async fn wait_until_listening(&mut self) {
        let started = tokio::time::Instant::now();
        while TcpStream::connect(self.addr).await.is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                panic!("nginx exited ({status}): {stderr}{}", self.log());
            }
            assert!(started.elapsed() < STARTUP, "nginx did not listen in time");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// nginx's error log, for a failure message.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The nginx binary: on `PATH`, or where Debian puts it.
fn find_nginx() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file())
}

/// A minimal configuration: one process in the foreground, every file it
/// writes in `dir`, the static files of `dir/www` on `addr`.
fn config(dir: &Path, addr: SocketAddr) -> String {
    let dir = dir.display();
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections 64;
}}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    default_type application/octet-stream;
    server {{
        listen {addr};
        root {dir}/www;
    }}
}}
"
    )
}

/// What went through one proxied connection: the request bytes, and the
/// first bytes of the response.
#[derive(Debug, Clone, Default)]
struct Exchange {
    request: String,
    response: Vec<u8>,
}

impl Exchange {
    /// The response head, up to and with its blank line.
    fn response_head(&self) -> Option<String> {
        let end = self.response.windows(4).position(|w| w == b"\r\n\r\n")?;
        Some(String::from_utf8_lossy(&self.response[..end + 4]).into_owned())
    }
}

/// The first bytes of a response the proxy keeps: enough for any head.
const KEPT: usize = 16 * 1024;

/// A loopback TCP proxy to `upstream` that closes its first connection after
/// `cut` bytes of the response, and records what went through every one.
struct CuttingProxy {
    addr: SocketAddr,
    exchanges: Arc<Mutex<Vec<Arc<Mutex<Exchange>>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl CuttingProxy {
    async fn start(upstream: SocketAddr, cut: usize) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let all = Arc::clone(&exchanges);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let exchange = Arc::new(Mutex::new(Exchange::default()));
                let mut all = all.lock().unwrap();
                let limit = all.is_empty().then_some(cut);
                all.push(Arc::clone(&exchange));
                tokio::spawn(relay(client, upstream, limit, exchange));
            }
        });
        Self {
            addr,
            exchanges,
            accept,
        }
    }

    fn exchanges(&self) -> Vec<Exchange> {
        let all = self.exchanges.lock().unwrap();
        all.iter().map(|one| one.lock().unwrap().clone()).collect()
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Relays one connection; with a `cut`, closes it (FIN, every byte before it
/// delivered) once that many response bytes went through.
async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    cut: Option<usize>,
    exchange: Arc<Mutex<Exchange>>,
) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let requests = {
        let exchange = Arc::clone(&exchange);
        tokio::spawn(async move {
            let mut buf = vec![0; 8 * 1024];
            while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                exchange.lock().unwrap().request.push_str(&text);
                if to_server.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        })
    };
    let mut left = cut.unwrap_or(usize::MAX);
    let mut buf = vec![0; 64 * 1024];
    while left > 0 {
        let Ok(n @ 1..) = from_server.read(&mut buf).await else {
            break;
        };
        let n = n.min(left);
        {
            let mut exchange = exchange.lock().unwrap();
            let keep = n.min(KEPT.saturating_sub(exchange.response.len()));
            exchange.response.extend_from_slice(&buf[..keep]);
        }
        if to_client.write_all(&buf[..n]).await.is_err() {
            break;
        }
        left -= n;
    }
    let _ = to_client.shutdown().await;
    requests.abort();
}
