//! The benchmark report and the daemons' web dashboards, opened in headless Chromium
//! (Debian's `chromium`, which `./dev setup` installs): each page is rendered and
//! screenshotted, and the test fails on any console message (the pages log nothing, so a
//! message is an error) or an empty chart. The dashboards run against a gateway and a
//! server in the lab's network namespaces with traffic flowing. Skipped, with the reason
//! printed, where Chromium, root or namespaces are missing. Screenshots go to
//! `$BRAID_SCREENSHOTS` when set (for the README), else to a temporary folder removed
//! when the test passes.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers: a failed step ends the test with its message"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use braid_net::testbed::{self, Bed, Netns, INTERNET_HOST, SERVER_ADDR};
use braid_testkit::Scratch;

const BRAID: &str = env!("CARGO_BIN_EXE_braid");
/// Real `braid bench all --quick --json --skip-lab` lines (two benchmarks, one skipped).
const SAVED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/report/testdata/bench-all-quick.jsonl"
);

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Where the screenshots go: `$BRAID_SCREENSHOTS/name` (kept), or a scratch folder.
enum OutDir {
    Kept(PathBuf),
    Scratch(Scratch),
}

impl std::ops::Deref for OutDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        match self {
            OutDir::Kept(p) => p,
            OutDir::Scratch(s) => s,
        }
    }
}

fn out_dir(name: &str) -> OutDir {
    match std::env::var_os("BRAID_SCREENSHOTS") {
        Some(d) => {
            let d = PathBuf::from(d).join(name);
            std::fs::create_dir_all(&d).unwrap();
            OutDir::Kept(d)
        }
        None => OutDir::Scratch(Scratch::new(&format!("browser-{name}"))),
    }
}

/// What Chromium made of a page: its DOM once loaded (after `budget_ms` of virtual time
/// where given), and every console message.
struct Rendered {
    dom: String,
    console: Vec<String>,
}

/// Opens `url` (in `ns` when given) twice: once to dump the DOM, once for a screenshot.
fn render(ns: Option<&Netns>, url: &str, budget_ms: Option<u32>, shot: &Path) -> Rendered {
    let browser = chromium().unwrap();
    let run = |extra: &[String]| {
        let profile = Scratch::new("chromium-profile");
        let mut args: Vec<String> = [
            "--headless",
            // Root in a container: Chromium's sandbox needs user namespaces it may not have.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        if let Some(b) = budget_ms {
            args.push(format!("--virtual-time-budget={b}"));
        }
        args.extend_from_slice(extra);
        args.push(url.to_owned());
        // A page that never settles must not hang the test.
        let mut cmd = match ns {
            Some(n) => n.command("timeout"),
            None => Command::new("timeout"),
        };
        let o = cmd.arg("60").arg(browser).args(&args).output().unwrap();
        assert!(
            o.status.success(),
            "{browser} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    };
    let dump = run(&["--dump-dom".into()]);
    let stderr = String::from_utf8_lossy(&dump.stderr);
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    run(&[format!("--screenshot={}", shot.display())]);
    let size = std::fs::metadata(shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 1000, "no screenshot at {}", shot.display());
    Rendered {
        dom: String::from_utf8_lossy(&dump.stdout).into_owned(),
        console,
    }
}

/// The `<svg>...</svg>` blocks of a page.
fn svgs(page: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find("<svg") {
        let Some(len) = rest[i..].find("</svg>") else {
            break;
        };
        let end = i + len + "</svg>".len();
        out.push(&rest[i..end]);
        rest = &rest[end..];
    }
    out
}

#[test]
fn the_report_renders_without_console_messages_and_every_plot_has_marks() {
    if chromium().is_none() {
        braid_testkit::skip("no chromium (./dev setup installs it as root)");
        return;
    }
    let d = out_dir("report");
    let o = Command::new(BRAID)
        .args(["report", "--from", SAVED, "--out", d.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(d.join("index.html")).unwrap();
    let url = format!("file://{}", d.join("index.html").display());
    let r = render(None, &url, Some(1000), &d.join("report.png"));
    assert!(r.console.is_empty(), "console: {:#?}", r.console);
    let want = svgs(&html).len();
    assert!(want >= 4, "{want} plots in the saved report");
    let got = svgs(&r.dom);
    assert_eq!(got.len(), want, "plots in the rendered page");
    for svg in got {
        // Every plot draws lines or bars besides its background.
        let marks = svg.matches("<polyline").count() + svg.matches("<rect").count();
        assert!(marks >= 2, "an empty plot: {}", &svg[..svg.len().min(400)]);
    }
}

/// The value of attribute `attr` of the canvas whose `data-chart` is `chart`, per session.
fn canvas_attr(dom: &str, chart: &str, attr: &str) -> Vec<f64> {
    dom.split("<canvas")
        .skip(1)
        .filter_map(|c| c.split('>').next())
        .filter(|tag| tag.contains(&format!("data-chart=\"{chart}\"")))
        .filter_map(|tag| {
            let (_, rest) = tag.split_once(&format!("{attr}=\""))?;
            rest.split('"').next()?.parse().ok()
        })
        .collect()
}

fn keypair(d: &Path, name: &str) -> String {
    let key = testbed::run(BRAID, &["genkey"]).unwrap();
    let file = d.join(format!("{name}.key"));
    std::fs::write(&file, &key).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{BRAID} pubkey < {}", file.display()))
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn the_dashboards_show_live_rates_with_traffic_in_the_lab() {
    if chromium().is_none() {
        braid_testkit::skip("no chromium (./dev setup installs it as root)");
        return;
    }
    if let Some(why) = testbed::unavailable(&["iperf3"]) {
        braid_testkit::skip(why);
        return;
    }
    let d = Scratch::new("chromium-lab");
    let shots = out_dir("dashboard");
    let server_key = keypair(&d, "server");
    let gateway_key = keypair(&d, "gateway");
    let bed = Bed::new(&format!("brdweb{}", std::process::id() % 100_000)).expect("test bed");
    let (gw, srv, net) = (&bed.gateway, &bed.server, &bed.internet);
    let server_toml = d.join("server.toml");
    std::fs::write(
        &server_toml,
        format!(
            r#"[interface]
private_key_file = "{d}/server.key"
address = "10.77.0.1/24"
masquerade = "c1"

[[gateway]]
name = "bus-17"
public_key = "{gateway_key}"

[control]
socket = "{d}/server.sock"
web = "127.0.0.1:9580"
"#,
            d = d.display()
        ),
    )
    .unwrap();
    let gateway_toml = d.join("gateway.toml");
    std::fs::write(
        &gateway_toml,
        format!(
            r#"[interface]
private_key_file = "{d}/gateway.key"
routes = ["10.202.0.0/24"]
meter_state = "{d}/gateway.meter.json"

[server]
endpoint = "{SERVER_ADDR}:51820"
public_key = "{server_key}"

[[uplink]]
name = "wan-a"
interface = "a0"

[[uplink]]
name = "wan-b"
interface = "b0"
metered = true

[control]
socket = "{d}/gateway.sock"
web = "127.0.0.1:9580"
"#,
            d = d.display()
        ),
    )
    .unwrap();
    let _server = srv
        .spawn(
            BRAID,
            &["server", "--config", server_toml.to_str().unwrap()],
            &d.join("server.log"),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _gateway = gw
        .spawn(
            BRAID,
            &["gateway", "--config", gateway_toml.to_str().unwrap()],
            &d.join("gateway.log"),
        )
        .unwrap();
    let logs = || {
        format!(
            "gateway log:\n{}\nserver log:\n{}",
            std::fs::read_to_string(d.join("gateway.log")).unwrap_or_default(),
            std::fs::read_to_string(d.join("server.log")).unwrap_or_default()
        )
    };
    let sock = d.join("gateway.sock");
    let up = testbed::wait_for(Duration::from_secs(10), || {
        gw.exec(
            BRAID,
            &["status", "--json", "--socket", sock.to_str().unwrap()],
        )
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .is_some_and(|s| s["sessions"][0]["established"] == true)
    });
    assert!(up, "tunnel not up\n{}", logs());
    // Traffic through the tunnel for the whole time the pages are open.
    let _sink = net
        .spawn(
            "iperf3",
            &["-s", "-1", "-B", INTERNET_HOST],
            &d.join("iperf-s.log"),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _flow = gw
        .spawn(
            "iperf3",
            &["-c", INTERNET_HOST, "-u", "-b", "8M", "-t", "60"],
            &d.join("iperf-c.log"),
        )
        .unwrap();
    // The gateway sends the flow (rate up), the server receives it (rate down). The page
    // arrives with the recent samples inlined and draws them as it loads (the live
    // stream's updates are tested in braid-net's web tests); a page opened within 5 s of
    // the flow's start shows it.
    let flowing = testbed::wait_for(Duration::from_secs(5), || {
        gw.exec(
            BRAID,
            &["status", "--json", "--socket", sock.to_str().unwrap()],
        )
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .is_some_and(|s| {
            s["sessions"][0]["paths"][0]["tx_bps"].as_f64() > Some(1e5)
                || s["sessions"][0]["paths"][1]["tx_bps"].as_f64() > Some(1e5)
        })
    });
    assert!(flowing, "no traffic through the tunnel\n{}", logs());
    for (ns, who, chart) in [(gw, "gateway", "tx_bps"), (srv, "server", "rx_bps")] {
        let r = render(
            Some(ns),
            "http://127.0.0.1:9580/",
            None,
            &shots.join(format!("{who}.png")),
        );
        assert!(r.console.is_empty(), "{who} console: {:#?}", r.console);
        let points = canvas_attr(&r.dom, chart, "data-points");
        let max = canvas_attr(&r.dom, chart, "data-max");
        assert_eq!(
            max.len(),
            1,
            "{who}: one session's {chart} chart\n{}",
            r.dom
        );
        assert!(points[0] > 0.0, "{who}: {chart} chart is empty");
        assert!(max[0] > 0.0, "{who}: {chart} shows no traffic\n{}", logs());
        for chart in ["rx_bps", "rtt_ms", "loss", "queue_ms"] {
            assert!(
                canvas_attr(&r.dom, chart, "data-points")
                    .first()
                    .is_some_and(|p| *p > 0.0),
                "{who}: {chart} chart is empty"
            );
        }
        assert!(r.dom.contains("wan-a") || r.dom.contains("path 0"), "{who}");
    }
}
