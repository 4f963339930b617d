//! The split-TCP redirect for IPv4 and IPv6 destinations: a client namespace connects
//! across a veth to addresses routed through a gateway namespace, whose table (made by
//! `redirect::ruleset`, installed by `Redirect`) sends the connections to the listener of
//! their family; `original_destination` gives back where each was going
//! (`SO_ORIGINAL_DST`, `IP6T_SO_ORIGINAL_DST`). Needs root, `ip` and `nft`; skipped with
//! the reason otherwise.

use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use braid_core::class::{ClassConfig, FlowMatch, PortRange, Protocol, Transport};
use braid_net::split_tcp::redirect::{original_destination, ruleset, Ports, Redirect};
use braid_net::testbed::{run, unavailable, Netns};

/// Runs `f` on a thread inside namespace `ns` (sockets and the commands it starts).
fn inside<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path).expect("the namespace's file");
        // SAFETY: a valid namespace fd; setns moves only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
}

#[test]
fn ipv4_and_ipv6_connections_are_redirected_with_their_destinations() {
    if let Some(why) = unavailable(&["nft"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let id = std::process::id();
    let (cn, gn) = (format!("bst-c-{id}"), format!("bst-g-{id}"));
    let client = Netns::new(&cn).unwrap();
    let gateway = Netns::new(&gn).unwrap();
    let (vc, vg) = (
        format!("bstc{}", id % 100_000),
        format!("bstg{}", id % 100_000),
    );
    run(
        "ip",
        &[
            "link", "add", &vc, "netns", &cn, "type", "veth", "peer", "name", &vg, "netns", &gn,
        ],
    )
    .unwrap();
    for (ns, dev, v4, v6) in [
        (&client, &vc, "10.8.0.1/24", "fd00:8::1/64"),
        (&gateway, &vg, "10.8.0.2/24", "fd00:8::2/64"),
    ] {
        ns.ip(&["addr", "add", v4, "dev", dev]).unwrap();
        ns.ip(&["-6", "addr", "add", v6, "dev", dev, "nodad"])
            .unwrap();
        ns.ip(&["link", "set", dev, "up"]).unwrap();
    }
    client
        .ip(&["route", "add", "10.9.0.0/24", "via", "10.8.0.2"])
        .unwrap();
    client
        .ip(&["-6", "route", "add", "2001:db8:9::/64", "via", "fd00:8::2"])
        .unwrap();

    let class = ClassConfig {
        name: "bulk".into(),
        matcher: FlowMatch {
            protocol: Some(Protocol::Tcp),
            ports: vec![PortRange {
                low: 443,
                high: 443,
            }],
            dscp: vec![],
        },
        scheduler: Default::default(),
        loss_recovery: None,
        target_mbps: None,
        utility: None,
        transport: Transport::SplitTcp,
    };
    // The gateway: listeners of both families, the table, then one accept on each.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let gw = inside(&gn, move || {
        let l4 = TcpListener::bind("0.0.0.0:0").unwrap();
        let l6 = TcpListener::bind("[::]:0").unwrap();
        let ports = Ports {
            v4: l4.local_addr().unwrap().port(),
            v6: Some(l6.local_addr().unwrap().port()),
        };
        let routes = [
            "10.9.0.0/24".parse().unwrap(),
            "2001:db8:9::/64".parse().unwrap(),
        ];
        let rules = ruleset(
            "braid_split_bst",
            "braid-none",
            &routes,
            &[class],
            Transport::Packet,
            ports,
        )
        .unwrap();
        let redirect = Redirect::install("braid_split_bst", &rules).unwrap();
        ready_tx.send(()).unwrap();
        let (a4, _) = l4.accept().unwrap();
        let (a6, _) = l6.accept().unwrap();
        let got = (
            original_destination(&a4, false).unwrap(),
            original_destination(&a6, true).unwrap(),
        );
        drop(redirect);
        got
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the gateway's table");
    let to4: SocketAddr = "10.9.0.7:443".parse().unwrap();
    let to6: SocketAddr = "[2001:db8:9::7]:443".parse().unwrap();
    let cl = inside(&cn, move || {
        let c4 = TcpStream::connect_timeout(&to4, Duration::from_secs(5)).unwrap();
        let c6 = TcpStream::connect_timeout(&to6, Duration::from_secs(5)).unwrap();
        (c4, c6)
    });
    let (got4, got6) = gw.join().unwrap();
    drop(cl.join().unwrap());
    assert_eq!(got4, to4);
    assert_eq!(got6, to6);
    assert!(
        gateway
            .exec("nft", &["list", "table", "inet", "braid_split_bst"])
            .is_err(),
        "the table is gone once the redirect is dropped"
    );
}
