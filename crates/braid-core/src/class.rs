//! Traffic classes: a policy that maps inner flows (by protocol, port and DSCP) to a class,
//! and each class to its own scheduler and loss recovery, all in one session. For example
//! redundant scheduling for voice and games, delay-based striping with coding for
//! interactive web, weighted striping for bulk.
//!
//! Classes are tried in order; the first whose every given criterion matches wins; a flow
//! matching none is in the default class (the session's own scheduler). A flow is
//! classified once, on its first packet.
//!
//! ```toml
//! [[engine.class]]
//! name = "voice"
//! match = { protocol = "udp", ports = [5060, "10000-20000"], dscp = [46] }
//! scheduler = "redundant"
//! ```

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::flow::parse::{PROTO_TCP, PROTO_UDP};
use crate::flow::PacketInfo;
use crate::{LossRecoveryKind, SchedulerKind};

/// One traffic class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Label in stats.
    pub name: String,
    /// Which flows belong to it.
    #[serde(rename = "match", default)]
    pub matcher: FlowMatch,
    /// How its packets are spread over the paths.
    pub scheduler: SchedulerKind,
    /// How its losses are masked; the session's method when absent.
    #[serde(default)]
    pub loss_recovery: Option<LossRecoveryKind>,
    /// The rate it wants, Mbit/s, where metered paths are configured: the class's own
    /// budget on them, and added to the session's target
    /// ([`crate::metered::MeteringSection::class_utilities`]).
    #[serde(default)]
    pub target_mbps: Option<f64>,
    /// What its rate is worth (`log`, `threshold`, `linear`); without a target, `linear`
    /// takes all the metered paths give and anything else only what is cheap.
    #[serde(default)]
    pub utility: Option<crate::metered::UtilityKind>,
    /// How its TCP connections cross: inside the packet tunnel (the default) or split at
    /// the gateway and carried on the multipath stream (docs/architecture.md).
    #[serde(default)]
    pub transport: Transport,
}

/// How a class's traffic crosses the bond. A class's own default is the packet tunnel;
/// TCP in no class crosses as the session's `tcp_transport` says (split-TCP by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Packets through the tunnel; the end hosts' TCP runs end to end.
    #[default]
    Packet,
    /// Split-TCP: the gateway terminates the client's TCP connections, their bytes cross
    /// on the multipath reliable stream ([`crate::stream`]), and the server opens the
    /// connection to the destination. Matches TCP only.
    SplitTcp,
}

/// Criteria a flow must all meet; an empty criterion matches anything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowMatch {
    /// `tcp`, `udp` or `icmp`.
    pub protocol: Option<Protocol>,
    /// Ports (single numbers or `"low-high"` ranges) matched against either the source or
    /// the destination port.
    #[serde(default)]
    pub ports: Vec<PortRange>,
    /// DSCP values (0-63).
    #[serde(default)]
    pub dscp: Vec<u8>,
}

/// An IP protocol a class can match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Tcp,
    Udp,
    Icmp,
}

impl Protocol {
    fn numbers(self) -> &'static [u8] {
        match self {
            Protocol::Tcp => &[PROTO_TCP],
            Protocol::Udp => &[PROTO_UDP],
            // ICMP and ICMPv6.
            Protocol::Icmp => &[1, 58],
        }
    }
}

/// An inclusive port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub low: u16,
    pub high: u16,
}

impl PortRange {
    fn contains(&self, port: u16) -> bool {
        (self.low..=self.high).contains(&port)
    }
}

impl Serialize for PortRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.low == self.high {
            s.serialize_u16(self.low)
        } else {
            s.serialize_str(&format!("{}-{}", self.low, self.high))
        }
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = PortRange;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a port (0-65535) or a range \"low-high\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PortRange, E> {
                let p = u16::try_from(v)
                    .map_err(|_| E::custom(format!("port {v} is not in 0-65535")))?;
                Ok(PortRange { low: p, high: p })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PortRange, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PortRange, E> {
                let bad = || E::custom(format!("port range \"{v}\": expected \"low-high\""));
                let (a, b) = v.split_once('-').ok_or_else(bad)?;
                let low: u16 = a.trim().parse().map_err(|_| bad())?;
                let high: u16 = b.trim().parse().map_err(|_| bad())?;
                if low > high {
                    return Err(E::custom(format!(
                        "port range \"{v}\": low end above high end"
                    )));
                }
                Ok(PortRange { low, high })
            }
        }
        d.deserialize_any(V)
    }
}

impl FlowMatch {
    /// Whether a packet's flow meets every criterion.
    pub fn matches(&self, info: &PacketInfo) -> bool {
        if let Some(p) = self.protocol {
            if !p.numbers().contains(&info.key.protocol) {
                return false;
            }
        }
        if !self.ports.is_empty()
            && !self
                .ports
                .iter()
                .any(|r| r.contains(info.key.src_port) || r.contains(info.key.dst_port))
        {
            return false;
        }
        if !self.dscp.is_empty() && !self.dscp.contains(&info.dscp) {
            return false;
        }
        true
    }

    /// The criteria as the Hello's metered-classes option carries them.
    pub fn to_wire(&self) -> braid_wire::ClassMatchOpt {
        braid_wire::ClassMatchOpt {
            protocol: match self.protocol {
                None => 0,
                Some(Protocol::Tcp) => 1,
                Some(Protocol::Udp) => 2,
                Some(Protocol::Icmp) => 3,
            },
            ports: self.ports.iter().map(|r| (r.low, r.high)).collect(),
            dscp: self.dscp.clone(),
        }
    }

    /// The criteria of a metered-classes option's class (already checked when parsed).
    pub fn from_wire(m: &braid_wire::ClassMatchOpt) -> FlowMatch {
        FlowMatch {
            protocol: match m.protocol {
                1 => Some(Protocol::Tcp),
                2 => Some(Protocol::Udp),
                3 => Some(Protocol::Icmp),
                _ => None,
            },
            ports: (m.ports.iter())
                .map(|&(low, high)| PortRange { low, high })
                .collect(),
            dscp: m.dscp.clone(),
        }
    }
}

/// The index of the first of `matches` a flow meets, plus one; 0 when none.
pub fn first_match(matches: &[FlowMatch], info: &PacketInfo) -> usize {
    matches
        .iter()
        .position(|m| m.matches(info))
        .map_or(0, |i| i + 1)
}

/// The class index of a flow: 0 for the default class, `i + 1` for `classes[i]`.
pub fn classify(classes: &[ClassConfig], info: &PacketInfo) -> usize {
    classes
        .iter()
        .position(|c| c.matcher.matches(info))
        .map_or(0, |i| i + 1)
}

/// Whether a flow crosses as split-TCP: TCP whose first matching class asks for it, or
/// TCP in no class when `tcp_transport` (the session's choice for unclassified TCP) does.
pub fn splits(classes: &[ClassConfig], tcp_transport: Transport, info: &PacketInfo) -> bool {
    if info.key.protocol != PROTO_TCP {
        return false;
    }
    let transport = match classify(classes, info) {
        0 => tcp_transport,
        i => classes[i - 1].transport,
    };
    transport == Transport::SplitTcp
}

/// How TCP in no class crosses when the configuration does not say: split-TCP, metered
/// paths included (the stream keeps to their budgets through the tunnel's session,
/// `Session::note_foreign_traffic`).
pub fn default_tcp_transport() -> Transport {
    Transport::SplitTcp
}

/// Whether any TCP connection can cross as split-TCP under these settings.
pub fn any_split(classes: &[ClassConfig], tcp_transport: Transport) -> bool {
    tcp_transport == Transport::SplitTcp
        || classes.iter().any(|c| c.transport == Transport::SplitTcp)
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::flow::FlowKey;

    fn info(protocol: u8, sport: u16, dport: u16, dscp: u8) -> PacketInfo {
        let a: IpAddr = [10, 0, 0, 2].into();
        PacketInfo {
            key: FlowKey {
                protocol,
                src: a,
                dst: a,
                src_port: sport,
                dst_port: dport,
            },
            dscp,
            tcp: None,
        }
    }

    fn parse(text: &str) -> Result<Vec<ClassConfig>, String> {
        #[derive(Deserialize)]
        struct W {
            class: Vec<ClassConfig>,
        }
        toml::from_str::<W>(text)
            .map(|w| w.class)
            .map_err(|e| e.to_string())
    }

    fn classes(text: &str) -> Vec<ClassConfig> {
        parse(text).unwrap()
    }

    #[test]
    fn first_matching_class_wins() {
        let c = classes(
            r#"
            [[class]]
            name = "voice"
            match = { protocol = "udp", ports = [5060, "10000-20000"] }
            scheduler = "redundant"
            [[class]]
            name = "marked"
            match = { dscp = [46] }
            scheduler = "smallest-rtt"
            [[class]]
            name = "web"
            match = { protocol = "tcp", ports = [80, 443] }
            scheduler = "delay-based"
            "#,
        );
        assert_eq!(classify(&c, &info(PROTO_UDP, 40000, 5060, 0)), 1);
        assert_eq!(classify(&c, &info(PROTO_UDP, 15000, 9, 0)), 1);
        assert_eq!(classify(&c, &info(PROTO_UDP, 9, 9, 46)), 2);
        assert_eq!(classify(&c, &info(PROTO_TCP, 50000, 443, 0)), 3);
        assert_eq!(classify(&c, &info(PROTO_TCP, 50000, 22, 0)), 0);
        assert_eq!(c[0].scheduler, SchedulerKind::Redundant);
    }

    #[test]
    fn unclassified_tcp_crosses_as_the_session_says_and_a_class_as_it_says() {
        let c = classes(
            r#"
            [[class]]
            name = "ssh"
            match = { protocol = "tcp", ports = [22] }
            scheduler = "redundant"
            [[class]]
            name = "bulk"
            match = { ports = [5001] }
            scheduler = "delay-based"
            transport = "split-tcp"
            "#,
        );
        let split = Transport::SplitTcp;
        assert!(splits(&c, split, &info(PROTO_TCP, 50000, 443, 0)));
        assert!(!splits(
            &c,
            Transport::Packet,
            &info(PROTO_TCP, 50000, 443, 0)
        ));
        // A class is the packet tunnel's unless it asks for split-TCP.
        assert!(!splits(&c, split, &info(PROTO_TCP, 50000, 22, 0)));
        assert!(splits(
            &c,
            Transport::Packet,
            &info(PROTO_TCP, 50000, 5001, 0)
        ));
        // Only TCP is ever split.
        assert!(!splits(&c, split, &info(PROTO_UDP, 50000, 5001, 0)));
        assert!(!splits(&[], split, &info(PROTO_UDP, 50000, 443, 0)));
        assert!(any_split(&[], split));
        assert!(!any_split(&c[..1], Transport::Packet));
        assert!(any_split(&c, Transport::Packet));
    }

    #[test]
    fn bad_policies_are_named() {
        let e =
            parse("[[class]]\nname = \"x\"\nmatch = { ports = [\"9-1\"] }\nscheduler = \"lazy\"\n")
                .unwrap_err();
        assert!(e.contains("9-1"), "{e}");
        let e = parse("[[class]]\nname = \"x\"\nmatch = { port = [1] }\nscheduler = \"lazy\"\n")
            .unwrap_err();
        assert!(e.contains("port"), "{e}");
        let e = parse("[[class]]\nname = \"x\"\nscheduler = \"fast\"\n").unwrap_err();
        assert!(e.contains("fast") && e.contains("delay-based"), "{e}");
    }
}
