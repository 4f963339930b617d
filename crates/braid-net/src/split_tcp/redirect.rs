//! The gateway's transparent proxy rules: an nftables table that redirects the split-TCP
//! classes' connections from the LAN to the local listener, and `SO_ORIGINAL_DST` to learn
//! where each was going.
//!
//! The table is named after the TUN device, so a gateway that was killed leaves a table the
//! next start replaces before anything else ([`Redirect::install`]); a clean exit deletes it.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;

use braid_core::class::{ClassConfig, Protocol};

/// The nftables table of the gateway on `tun`.
pub fn table_name(tun: &str) -> String {
    format!("braid_split_{}", tun.replace(['-', '.'], "_"))
}

/// The ruleset: in prerouting, TCP from anywhere but the tunnel towards the routed IPv4
/// prefixes, matching a split-TCP class, goes to `port` on this host. A class's ports are
/// matched as destination ports, its DSCP values as IPv4 DSCP.
pub fn ruleset(
    table: &str,
    tun: &str,
    routes: &[ipnet::Ipv4Net],
    classes: &[&ClassConfig],
    port: u16,
) -> Result<String, String> {
    if routes.is_empty() {
        return Err("split-TCP needs at least one IPv4 prefix in interface.routes".into());
    }
    let daddr = routes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let mut rules = String::new();
    for c in classes {
        if c.matcher.protocol.is_some_and(|p| p != Protocol::Tcp) {
            return Err(format!(
                "class '{}': transport = \"split-tcp\" carries TCP only; set match.protocol = \"tcp\" or leave it out",
                c.name
            ));
        }
        let mut rule = format!("    iifname != \"{tun}\" ip daddr {{ {daddr} }} meta l4proto tcp");
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
            rule += &format!(" ip dscp {{ {} }}", d.join(", "));
        }
        rules += &format!("{rule} counter redirect to :{port}\n");
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

/// Where a redirected connection was going (netfilter's `SO_ORIGINAL_DST`).
pub fn original_destination(s: &impl AsRawFd) -> std::io::Result<SocketAddrV4> {
    /// linux/netfilter_ipv4.h.
    const SO_ORIGINAL_DST: libc::c_int = 80;
    // SAFETY: sockaddr_in is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: the fd is a live socket owned by `s`; `addr` and `len` point to a
    // sockaddr_in and its size, which the kernel writes at most.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_IP,
            SO_ORIGINAL_DST,
            (&mut addr as *mut libc::sockaddr_in).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
        u16::from_be(addr.sin_port),
    ))
}

#[cfg(test)]
mod tests {
    use braid_core::class::{FlowMatch, PortRange, Transport};
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
        let r = ruleset(
            "braid_split_braid0",
            "braid0",
            &["10.1.0.0/24".parse().unwrap()],
            &[&c],
            4321,
        )
        .unwrap();
        assert!(r.starts_with("table inet braid_split_braid0 {"), "{r}");
        assert!(
            r.contains("iifname != \"braid0\" ip daddr { 10.1.0.0/24 } meta l4proto tcp tcp dport { 80, 5200-5210 } counter redirect to :4321"),
            "{r}"
        );
    }

    #[test]
    fn udp_classes_and_missing_routes_are_refused() {
        let udp = class(Some(Protocol::Udp), vec![]);
        let e = ruleset("t", "braid0", &["10.0.0.0/8".parse().unwrap()], &[&udp], 1).unwrap_err();
        assert!(e.contains("TCP only"), "{e}");
        let tcp = class(None, vec![]);
        assert!(ruleset("t", "braid0", &[], &[&tcp], 1).is_err());
    }
}
