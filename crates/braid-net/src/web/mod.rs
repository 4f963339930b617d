//! The daemon's HTTP server (`[control] web` and `metrics`): the live dashboard page,
//! Prometheus `/metrics`, the status snapshot as JSON and a server-sent-event stream of
//! per-uplink samples and session events (docs/daemon.md).
//!
//! It runs on its own thread with a single-threaded tokio runtime and only reads the
//! shared snapshot, so the event loop never waits on it. Every connection is its own
//! task: a client that sends nothing or reads slowly holds only its own task, cut after
//! [`HEADER_TIMEOUT`] when it never completes a request. Connections are capped at
//! [`MAX_CONNECTIONS`]; those over the cap are closed at once and counted.

mod auth;
pub mod sample;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::{self, Stream, StreamExt};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Serialize;
use tokio::sync::{broadcast, Semaphore};

use crate::status::{Shared, Status};
use sample::{Event, Sample, Sampler};

/// Open connections at most (dashboards, SSE streams, scrapes).
pub const MAX_CONNECTIONS: usize = 256;
/// A connection that has not sent a whole request head by then is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the sampler looks at the snapshot (the event loops refresh it every 500 ms).
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Messages an SSE client may fall behind by before it skips ahead.
const STREAM_BACKLOG: usize = 64;

/// The page: one file, its chart code inline, nothing fetched from elsewhere.
const PAGE: &str = include_str!("page.html");

/// The running server.
pub struct WebServer {
    /// The addresses it listens on (the configured ones, with ports resolved).
    pub addrs: Vec<SocketAddr>,
    /// Connections closed at once because [`MAX_CONNECTIONS`] were open.
    pub refused: Arc<AtomicU64>,
}

struct App {
    shared: Shared,
    token: Option<String>,
    sampler: Mutex<Sampler>,
    stream: broadcast::Sender<Arc<(&'static str, String)>>,
}

/// Binds every address in `listen` (duplicates once) and serves them from a thread.
/// Binding happens here, so a taken port is an error at start.
pub fn serve(
    listen: &[SocketAddr],
    token: Option<String>,
    shared: Shared,
) -> Result<WebServer, String> {
    let mut unique: Vec<SocketAddr> = Vec::new();
    for a in listen {
        if !unique.contains(a) {
            unique.push(*a);
        }
    }
    let mut listeners = Vec::new();
    let mut addrs = Vec::new();
    for a in &unique {
        let l = std::net::TcpListener::bind(a).map_err(|e| {
            format!(
                "[control] web/metrics address {a}: cannot listen there: {e} (pick a free port)"
            )
        })?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        addrs.push(l.local_addr().map_err(|e| e.to_string())?);
        listeners.push(l);
    }
    let app = Arc::new(App {
        shared,
        token,
        sampler: Mutex::new(Sampler::default()),
        stream: broadcast::channel(STREAM_BACKLOG).0,
    });
    let refused = Arc::new(AtomicU64::new(0));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the web server: {e}"))?;
    let counter = refused.clone();
    std::thread::Builder::new()
        .name("braid-web".to_owned())
        .spawn(move || runtime.block_on(run(listeners, app, counter)))
        .map_err(|e| e.to_string())?;
    Ok(WebServer { addrs, refused })
}

async fn run(listeners: Vec<std::net::TcpListener>, app: Arc<App>, refused: Arc<AtomicU64>) {
    let router = router(app.clone());
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    for l in listeners {
        let Ok(l) = tokio::net::TcpListener::from_std(l) else {
            tracing::error!("web server: cannot watch a listening socket");
            continue;
        };
        tokio::spawn(accept(l, router.clone(), permits.clone(), refused.clone()));
    }
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let snapshot = app.shared.lock().map(|s| s.clone()).unwrap_or_default();
        let Ok(mut sampler) = app.sampler.lock() else {
            return;
        };
        // Sent while the sampler is held, so a stream that subscribes under the same lock
        // sees each sample either in its history or live, never twice or not at all.
        if let Some((s, events)) = sampler.update(&snapshot) {
            for e in &events {
                if let Ok(json) = serde_json::to_string(e) {
                    let _ = app.stream.send(Arc::new(("event", json)));
                }
            }
            if let Ok(json) = serde_json::to_string(&s) {
                let _ = app.stream.send(Arc::new(("sample", json)));
            }
        }
    }
}

async fn accept(
    listener: tokio::net::TcpListener,
    router: Router,
    permits: Arc<Semaphore>,
    refused: Arc<AtomicU64>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors and the like: wait rather than spin.
                tracing::warn!(error = %e, "web server: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refused.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = conn.await;
        });
    }
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/api/status", get(status))
        .route("/api/events", get(events))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), authorize))
        .with_state(app)
}

async fn authorize(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if auth::authorized(app.token.as_deref(), req.headers(), req.uri()) {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer realm=\"braid\"")],
        "braid: this dashboard needs the token set as [control] web_token: \
         open /?token=TOKEN or send Authorization: Bearer TOKEN\n",
    )
        .into_response()
}

fn snapshot(app: &App) -> Status {
    app.shared.lock().map(|s| s.clone()).unwrap_or_default()
}

async fn page(State(app): State<Arc<App>>) -> Response {
    // "</" would end the script element early; "<\/" is the same JSON string.
    let history = app.sampler.lock().map(|s| history(&s)).unwrap_or_default();
    let history = history.replace("</", "<\\/");
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE.replacen("/*HISTORY*/", &history, 1),
    )
        .into_response()
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(&snapshot(&app)),
    )
        .into_response()
}

async fn status(State(app): State<Arc<App>>) -> Response {
    axum::Json(snapshot(&app)).into_response()
}

/// What a stream starts with: the recent samples and events.
#[derive(Serialize)]
struct History<'a> {
    samples: Vec<&'a Sample>,
    events: Vec<&'a Event>,
}

/// The recent samples and events as JSON.
fn history(s: &Sampler) -> String {
    serde_json::to_string(&History {
        samples: s.samples.iter().collect(),
        events: s.events.iter().collect(),
    })
    .unwrap_or_default()
}

async fn events(
    State(app): State<Arc<App>>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    // Both under the sampler's lock, so that no sample falls between them.
    let (history, rx) = match app.sampler.lock() {
        Ok(s) => (history(&s), app.stream.subscribe()),
        Err(_) => (String::new(), app.stream.subscribe()),
    };
    let first = stream::once(async move { Ok(SseEvent::default().event("history").data(history)) });
    let live = stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(m) => return Some((Ok(SseEvent::default().event(m.0).data(&m.1)), rx)),
                // A slow reader skips what it missed; the next sample is whole.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(first.chain(live)).keep_alive(KeepAlive::default())
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "braid serves / (dashboard), /metrics, /api/status and /api/events\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests;
