use std::io::{Read, Write};
use std::net::TcpStream;

use super::*;
use crate::status::{PathStatus, SessionStatus};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
/// Only guards against a hang: a healthy server answers in milliseconds.
const HANG: Duration = Duration::from_secs(60);

fn status(t: f64, tx_bytes: u64) -> Status {
    Status {
        role: "gateway".into(),
        uptime_s: t,
        sessions: vec![SessionStatus {
            session_id: 9,
            peer: "192.0.2.1:51820".into(),
            established: true,
            paths: vec![PathStatus {
                name: "lte".into(),
                state: "up".into(),
                tx_bytes,
                tx_bps: 2e6,
                rtt_ms: Some(30.0),
                ..PathStatus::default()
            }],
            ..SessionStatus::default()
        }],
        ..Status::default()
    }
}

fn start(token: Option<&str>) -> (WebServer, Shared) {
    let shared: Shared = Arc::new(Mutex::new(status(1.0, 42)));
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let w = serve(&[addr], token.map(str::to_owned), shared.clone()).unwrap();
    (w, shared)
}

/// One request with `Connection: close`; the whole answer.
fn get(addr: SocketAddr, path: &str, auth: Option<&str>) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(HANG)).unwrap();
    let auth = auth.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn metrics_status_and_page_are_served() {
    let (w, _) = start(None);
    let m = get(w.addrs[0], "/metrics", None);
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");
    assert!(m.contains("text/plain; version=0.0.4"), "{m}");
    assert!(
        m.contains(
            "braid_path_tx_bytes_total{peer=\"192.0.2.1:51820\",path=\"lte\",path_id=\"0\"} 42"
        ),
        "{m}"
    );
    let s = get(w.addrs[0], "/api/status", None);
    let body = s.split("\r\n\r\n").nth(1).unwrap();
    let back: Status = serde_json::from_str(body).unwrap();
    assert_eq!(back, status(1.0, 42));
    let p = get(w.addrs[0], "/", None);
    assert!(
        p.starts_with("HTTP/1.1 200") && p.contains("new EventSource"),
        "{p}"
    );
    assert!(get(w.addrs[0], "/nope", None).starts_with("HTTP/1.1 404"));
}

#[test]
fn the_page_loads_nothing_from_elsewhere() {
    for needle in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "@import",
        "fetch(\"http",
    ] {
        assert!(
            !PAGE.contains(needle),
            "the page must work offline: {needle}"
        );
    }
}

#[test]
fn the_token_is_refused_or_accepted() {
    let (w, _) = start(Some(TOKEN));
    for path in ["/", "/metrics", "/api/status", "/api/events"] {
        let r = get(w.addrs[0], path, None);
        assert!(r.starts_with("HTTP/1.1 401"), "{path}: {r}");
        assert!(r.contains("web_token"), "{r}");
        let r = get(w.addrs[0], path, Some("0123456789abcdef0123456789abcdeF"));
        assert!(r.starts_with("HTTP/1.1 401"), "{path}: {r}");
    }
    assert!(get(w.addrs[0], "/metrics", Some(TOKEN)).starts_with("HTTP/1.1 200"));
    let r = get(w.addrs[0], &format!("/api/status?token={TOKEN}"), None);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

#[test]
fn slow_clients_do_not_stall_metrics() {
    let (w, _) = start(None);
    let a = w.addrs[0];
    let mut slow = Vec::new();
    for i in 0..100 {
        let mut c = TcpStream::connect(a).unwrap();
        match i % 4 {
            // Connects and sends nothing.
            0 => {}
            // Sends half a request head and stops.
            1 => c.write_all(b"GET /metrics HTTP/1.1\r\nHost:").unwrap(),
            // Asks for the event stream and never reads it.
            2 => c
                .write_all(b"GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap(),
            // Asks for metrics, keeps the connection and never reads.
            _ => c
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap(),
        }
        slow.push(c);
    }
    for _ in 0..3 {
        let m = get(a, "/metrics", None);
        assert!(
            m.starts_with("HTTP/1.1 200") && m.contains("braid_uptime_seconds"),
            "{m}"
        );
    }
    // The slow clients were served beside, not closed to make room: the silent ones'
    // connections are still open.
    for c in slow.iter_mut().step_by(4) {
        c.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let e = c.read(&mut b).expect_err("still open, nothing sent");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
    assert_eq!(w.refused.load(Ordering::Relaxed), 0);
}

#[test]
fn the_stream_starts_with_history_then_live_samples() {
    let (w, shared) = start(None);
    let mut c = TcpStream::connect(w.addrs[0]).unwrap();
    c.set_read_timeout(Some(HANG)).unwrap();
    c.write_all(b"GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut bumped = false;
    while !seen.contains("event: sample") || !bumped {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        if seen.contains("event: history") && !bumped {
            *shared.lock().unwrap() = status(1.5, 1000);
            bumped = true;
        }
    }
    assert!(seen.contains("text/event-stream"), "{seen}");
    assert!(seen.contains("\"name\":\"lte\""), "{seen}");
    assert!(seen.contains("\"tx_bps\":2000000.0"), "{seen}");
}

#[test]
fn the_page_arrives_with_the_history_inlined_and_escaped() {
    let (w, shared) = start(None);
    shared.lock().unwrap().sessions[0].peer = "</script><b>".into();
    let mut page = String::new();
    let mut tries = 0;
    while !page.contains("\"samples\":[{") {
        tries += 1;
        assert!(tries < 1200, "never sampled (a minute of tries)");
        std::thread::sleep(Duration::from_millis(50));
        page = get(w.addrs[0], "/", None);
    }
    assert!(page.contains("\"peer\":\"<\\/script><b>\""), "{page}");
    assert_eq!(
        page.matches("</script>").count(),
        2,
        "only the two script elements end"
    );
}
