//! The gateway's transparent proxy rules: an nftables table that redirects the split-TCP
//! classes' connections from the LAN to the local listener, and `SO_ORIGINAL_DST` to learn
//! where each was going.
//!
//! The table is named after the TUN device, so a gateway that was killed leaves a table the
//! next start replaces before anything else ([`Redirect::install`]); a clean exit deletes it.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use braid_core::class::{ClassConfig, Protocol, Transport};

/// The nftables table of the gateway on `tun`.
pub fn table_name(tun: &str) -> String {
    format!("braid_split_{}", tun.replace(['-', '.'], "_"))
}

/// The listener ports the redirect sends to: one per address family (the IPv6 listener
/// is IPv6-only, so each connection's family is its listener's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub v4: u16,
    pub v6: Option<u16>,
}

/// The ruleset: in prerouting, TCP from anywhere but the tunnel towards the routed
/// prefixes (IPv4 and IPv6) is matched against the classes in order, as the engine
/// classifies a flow: the first class that matches decides, a split-TCP class sending the
/// connection to the listener of its family on this host and any other class leaving it
/// to the packet tunnel; TCP that no class matches is redirected when `tcp_transport` is
/// split-TCP. A class's ports are matched as destination ports, its DSCP values as the IP
/// header's DSCP.
pub fn ruleset(
    table: &str,
    tun: &str,
    routes: &[ipnet::IpNet],
    classes: &[ClassConfig],
    tcp_transport: Transport,
    ports: Ports,
) -> Result<String, String> {
    if routes.is_empty() {
        return Err("split-TCP needs at least one prefix in interface.routes".into());
    }
    let join = |v6: bool| {
        routes
            .iter()
            .filter(|r| matches!(r, ipnet::IpNet::V6(_)) == v6)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut families = vec![("ip", join(false), ports.v4)];
    let v6 = join(true);
    if !v6.is_empty() {
        let Some(p6) = ports.v6 else {
            return Err("interface.routes has IPv6 prefixes but this host has no IPv6 for the split-TCP listener".into());
        };
        families.push(("ip6", v6, p6));
    }
    families.retain(|(_, daddr, _)| !daddr.is_empty());
    let base = |family: &str, daddr: &str| {
        format!("    iifname != \"{tun}\" {family} daddr {{ {daddr} }} meta l4proto tcp")
    };
    let mut rules = String::new();
    for c in classes {
        let split = c.transport == Transport::SplitTcp;
        if c.matcher.protocol.is_some_and(|p| p != Protocol::Tcp) {
            if split {
                return Err(format!(
                    "class '{}': transport = \"split-tcp\" carries TCP only; set match.protocol = \"tcp\" or leave it out",
                    c.name
                ));
            }
            continue;
        }
        for (family, daddr, port) in &families {
            let mut rule = base(family, daddr);
            if !c.matcher.ports.is_empty() {
                let ports: Vec<String> = c
                    .matcher
                    .ports
                    .iter()
                    .map(|r| {
                        if r.low == r.high {
                            r.low.to_string()
                        } else {
                            format!("{}-{}", r.low, r.high)
                        }
                    })
                    .collect();
                rule += &format!(" tcp dport {{ {} }}", ports.join(", "));
            }
            if !c.matcher.dscp.is_empty() {
                let d: Vec<String> = c.matcher.dscp.iter().map(ToString::to_string).collect();
                rule += &format!(" {family} dscp {{ {} }}", d.join(", "));
            }
            if split {
                rules += &format!("{rule} counter redirect to :{port}\n");
            } else {
                rules += &format!("{rule} return\n");
            }
        }
    }
    if tcp_transport == Transport::SplitTcp {
        for (family, daddr, port) in &families {
            rules += &format!("{} counter redirect to :{port}\n", base(family, daddr));
        }
    }
    Ok(format!(
        "table inet {table} {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat; policy accept;\n{rules}  }}\n}}\n"
    ))
}

/// The installed table, deleted on drop.
#[derive(Debug)]
pub struct Redirect {
    table: String,
}

impl Redirect {
    /// Removes a table a crashed run left, then installs `ruleset`.
    pub fn install(table: &str, ruleset: &str) -> Result<Redirect, String> {
        remove(table);
        crate::system::nft(ruleset)?;
        Ok(Redirect {
            table: table.to_owned(),
        })
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        remove(&self.table);
    }
}

/// `delete`, not `destroy`: nft before 1.0.8 has no `destroy`; a missing table is fine.
fn remove(table: &str) {
    let _ = crate::system::nft(&format!("delete table inet {table}\n"));
}

/// Where a redirected connection was going: netfilter's `SO_ORIGINAL_DST` for an IPv4
/// socket, `IP6T_SO_ORIGINAL_DST` for an IPv6 one (the family is the listener's).
pub fn original_destination(s: &(impl AsRawFd + ?Sized), v6: bool) -> std::io::Result<SocketAddr> {
    /// linux/netfilter_ipv4.h and linux/netfilter_ipv6/ip6_tables.h: both 80.
    const SO_ORIGINAL_DST: libc::c_int = 80;
    if v6 {
        // SAFETY: sockaddr_in6 is plain old data; all-zero is a valid value.
        let mut addr: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        getsockopt(s, libc::SOL_IPV6, SO_ORIGINAL_DST, &mut addr)?;
        return Ok(SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(addr.sin6_addr.s6_addr),
            u16::from_be(addr.sin6_port),
            0,
            0,
        )));
    }
    // SAFETY: sockaddr_in is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    getsockopt(s, libc::SOL_IP, SO_ORIGINAL_DST, &mut addr)?;
    Ok(SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
        u16::from_be(addr.sin_port),
    )))
}

/// `getsockopt` of a plain-old-data `T`.
fn getsockopt<T>(
    s: &(impl AsRawFd + ?Sized),
    level: libc::c_int,
    name: libc::c_int,
    out: &mut T,
) -> std::io::Result<()> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the fd is a live socket owned by `s`; `out` and `len` point to a T and its
    // size, which the kernel writes at most.
    let r =
        unsafe { libc::getsockopt(s.as_raw_fd(), level, name, (out as *mut T).cast(), &mut len) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use braid_core::class::{FlowMatch, PortRange};
    use braid_core::SchedulerKind;

    use super::*;

    fn class(protocol: Option<Protocol>, ports: Vec<PortRange>) -> ClassConfig {
        ClassConfig {
            name: "bulk".into(),
            matcher: FlowMatch {
                protocol,
                ports,
                dscp: vec![],
            },
            scheduler: SchedulerKind::default(),
            loss_recovery: None,
            target_mbps: None,
            utility: None,
            transport: Transport::SplitTcp,
        }
    }

    #[test]
    fn rules_name_the_routes_ports_and_listener() {
        let c = class(
            Some(Protocol::Tcp),
            vec![
                PortRange { low: 80, high: 80 },
                PortRange {
                    low: 5200,
                    high: 5210,
                },
            ],
        );
        let ports = Ports {
            v4: 4321,
            v6: Some(4322),
        };
        let r = ruleset(
            "braid_split_braid0",
            "braid0",
            &["10.1.0.0/24".parse().unwrap()],
            std::slice::from_ref(&c),
            Transport::Packet,
            ports,
        )
        .unwrap();
        assert!(r.starts_with("table inet braid_split_braid0 {"), "{r}");
        assert!(
            r.contains("iifname != \"braid0\" ip daddr { 10.1.0.0/24 } meta l4proto tcp tcp dport { 80, 5200-5210 } counter redirect to :4321"),
            "{r}"
        );
        assert!(!r.contains("ip6"), "no IPv6 prefix, no IPv6 rule: {r}");
        let mut dscp = c.clone();
        dscp.matcher.dscp = vec![46];
        let routes = [
            "10.1.0.0/24".parse().unwrap(),
            "2001:db8:1::/64".parse().unwrap(),
        ];
        let r = ruleset(
            "t",
            "braid0",
            &routes,
            &[dscp.clone()],
            Transport::Packet,
            ports,
        )
        .unwrap();
        assert!(
            r.contains("iifname != \"braid0\" ip6 daddr { 2001:db8:1::/64 } meta l4proto tcp tcp dport { 80, 5200-5210 } ip6 dscp { 46 } counter redirect to :4322"),
            "{r}"
        );
        assert!(r.contains("ip daddr { 10.1.0.0/24 }"), "{r}");
        let no_v6 = Ports { v4: 1, v6: None };
        assert!(ruleset("t", "braid0", &routes, &[dscp], Transport::Packet, no_v6).is_err());
    }

    #[test]
    fn the_first_matching_class_decides_and_unclassified_tcp_follows_the_session() {
        let mut ssh = class(Some(Protocol::Tcp), vec![PortRange { low: 22, high: 22 }]);
        ssh.transport = Transport::Packet;
        let bulk = class(
            None,
            vec![PortRange {
                low: 5001,
                high: 5001,
            }],
        );
        let p = Ports { v4: 4321, v6: None };
        let routes = ["10.1.0.0/24".parse().unwrap()];
        let r = ruleset(
            "t",
            "braid0",
            &routes,
            &[ssh.clone(), bulk],
            Transport::SplitTcp,
            p,
        )
        .unwrap();
        let lines: Vec<&str> = r.lines().filter(|l| l.contains("daddr")).collect();
        assert_eq!(lines.len(), 3, "{r}");
        assert!(lines[0].ends_with("tcp dport { 22 } return"), "{r}");
        assert!(
            lines[1].ends_with("tcp dport { 5001 } counter redirect to :4321"),
            "{r}"
        );
        assert!(
            lines[2].ends_with("meta l4proto tcp counter redirect to :4321"),
            "{r}"
        );
        // With the packet tunnel for unclassified TCP, only the classes' rules.
        let r = ruleset("t", "braid0", &routes, &[ssh], Transport::Packet, p).unwrap();
        assert!(!r.contains("redirect"), "{r}");
    }

    #[test]
    fn udp_classes_and_missing_routes_are_refused() {
        let udp = class(Some(Protocol::Udp), vec![]);
        let p = Ports { v4: 1, v6: None };
        let routes = ["10.0.0.0/8".parse().unwrap()];
        let e = ruleset(
            "t",
            "braid0",
            &routes,
            std::slice::from_ref(&udp),
            Transport::Packet,
            p,
        )
        .unwrap_err();
        assert!(e.contains("TCP only"), "{e}");
        let tcp = class(None, vec![]);
        assert!(ruleset("t", "braid0", &[], &[tcp], Transport::Packet, p).is_err());
        // A UDP class of the packet tunnel is no error: it never sees TCP.
        let mut voice = udp;
        voice.transport = Transport::Packet;
        assert!(ruleset("t", "braid0", &routes, &[voice], Transport::SplitTcp, p).is_ok());
    }
}
