//! What the machine decides about a config: key files, interfaces, addresses, ports.

use std::collections::HashMap;
use std::net::{IpAddr, UdpSocket};
use std::path::Path;

use super::{Binding, ConfigError, GatewayConfig, ServerConfig, Uplink, TUNNEL_OVERHEAD};

/// Bytes a relay adds to each of an uplink's datagrams (its lender envelope), which the
/// relay's own uplink must carry.
fn relayed(u: &Uplink) -> u32 {
    if u.relay.is_some() {
        braid_secure::lender::LENDER_OVERHEAD as u32
    } else {
        0
    }
}

/// What the system says about one network interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterfaceInfo {
    pub index: u32,
    /// Administratively up (`IFF_UP`) and with carrier (`IFF_RUNNING`).
    pub up: bool,
    pub mtu: u32,
    pub addresses: Vec<IpAddr>,
}

/// Every interface by name, from `getifaddrs` and sysfs.
pub fn interfaces() -> HashMap<String, InterfaceInfo> {
    let mut map: HashMap<String, InterfaceInfo> = HashMap::new();
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return map;
    };
    for a in addrs {
        let e = map.entry(a.interface_name.clone()).or_default();
        let flags = a.flags;
        e.up = flags.contains(nix::net::if_::InterfaceFlags::IFF_UP)
            && flags.contains(nix::net::if_::InterfaceFlags::IFF_RUNNING);
        if let Some(addr) = a.address {
            if let Some(v4) = addr.as_sockaddr_in() {
                e.addresses.push(IpAddr::V4(v4.ip()));
            } else if let Some(v6) = addr.as_sockaddr_in6() {
                e.addresses.push(IpAddr::V6(v6.ip()));
            }
        }
    }
    for (name, info) in map.iter_mut() {
        info.index = nix::net::if_::if_nametoindex(name.as_str()).unwrap_or(0);
        info.mtu = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1500);
    }
    map
}

/// Reads and parses a private key file.
pub fn load_private_key(file: &str, path: &Path) -> Result<braid_secure::PrivateKey, ConfigError> {
    check_key_file(file, path)?;
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: file.to_owned(),
        message: format!("private_key_file '{}' cannot be read: {e}", path.display()),
    })?;
    text.trim().parse().map_err(|e| ConfigError {
        file: file.to_owned(),
        message: format!("private_key_file '{}': {e}", path.display()),
    })
}

fn check_key_file(file: &str, path: &Path) -> Result<(), ConfigError> {
    let err = |message: String| ConfigError {
        file: file.to_owned(),
        message,
    };
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim().is_empty() => Err(err(format!(
            "private_key_file '{}' is empty: write a key into it with `braid genkey > {}`",
            path.display(),
            path.display()
        ))),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(err(format!(
            "private_key_file '{}' does not exist: create it with `braid genkey > {}` (and chmod 600 it)",
            path.display(),
            path.display()
        ))),
        Err(e) => Err(err(format!(
            "private_key_file '{}' cannot be read: {e}",
            path.display()
        ))),
    }
}

impl GatewayConfig {
    /// Checks what the machine decides: the key file is readable and every uplink's
    /// interface exists (or its source address is assigned here). Returns the inner MTU to
    /// use.
    pub fn check_system(&self) -> Result<u16, ConfigError> {
        if !self.plaintext {
            load_private_key(&self.file, &self.private_key_file)?;
        }
        let ifs = interfaces();
        let err = |message: String| ConfigError {
            file: self.file.clone(),
            message,
        };
        let mut min_mtu = u32::MAX;
        for u in &self.uplinks {
            match &u.binding {
                Binding::Interface(name) => {
                    let Some(info) = ifs.get(name) else {
                        let mut names: Vec<&str> = ifs
                            .keys()
                            .map(String::as_str)
                            .filter(|n| *n != "lo")
                            .collect();
                        names.sort_unstable();
                        return Err(err(format!(
                            "uplink '{}': interface '{name}' does not exist (interfaces here: {})",
                            u.name,
                            if names.is_empty() {
                                "none".to_owned()
                            } else {
                                names.join(", ")
                            }
                        )));
                    };
                    min_mtu = min_mtu.min(info.mtu.saturating_sub(relayed(u)));
                }
                Binding::Address(a) => {
                    let Some((_, info)) = ifs.iter().find(|(_, i)| i.addresses.contains(a)) else {
                        return Err(err(format!(
                            "uplink '{}': source address {a} is not assigned to any interface here (use interface = \"NAME\" to follow a link whose address changes)",
                            u.name
                        )));
                    };
                    min_mtu = min_mtu.min(info.mtu.saturating_sub(relayed(u)));
                }
            }
        }
        if let Some(m) = self.mtu {
            return Ok(m);
        }
        let derived = min_mtu.saturating_sub(TUNNEL_OVERHEAD as u32);
        u16::try_from(derived)
            .ok()
            .filter(|m| *m >= super::MIN_MTU)
            .ok_or_else(|| {
                err(format!(
                    "the smallest uplink MTU ({min_mtu}) leaves {derived} bytes for inner packets, below {}: set interface.mtu",
                    super::MIN_MTU
                ))
            })
    }
}

impl ServerConfig {
    /// Checks what the machine decides: the key file is readable, the listening port is
    /// free, the masquerade interface exists.
    pub fn check_system(&self) -> Result<(), ConfigError> {
        if !self.plaintext {
            load_private_key(&self.file, &self.private_key_file)?;
        }
        let err = |message: String| ConfigError {
            file: self.file.clone(),
            message,
        };
        if let Some(m) = &self.masquerade {
            if !interfaces().contains_key(m) {
                return Err(err(format!(
                    "interface.masquerade: interface '{m}' does not exist (name the interface that leads to the Internet, or remove the key to route only)"
                )));
            }
        }
        match UdpSocket::bind(self.listen) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(err(format!(
                "interface.listen: UDP port {} is already in use (is another braid server running? pick another port)",
                self.listen
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => Err(err(format!(
                "interface.listen: address {} is not assigned to any interface here (use 0.0.0.0 to listen on all)",
                self.listen.ip()
            ))),
            Err(e) => Err(err(format!(
                "interface.listen: cannot bind {}: {e}",
                self.listen
            ))),
        }
    }
}
