//! The server's `[[relay]]` sections: the relays a session's owner authorized to lend it
//! their uplinks (BaPu §2, PRISM §3.3), each by its own key (braid-secure `lender`).

use serde::Deserialize;

/// One `[[relay]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RelaySection {
    name: String,
    public_key: String,
    /// The `[[gateway]]` (by name) whose sessions the relay may carry.
    gateway: String,
    #[serde(default)]
    revoked: bool,
}

/// A relay the server accepts datagrams from, for one gateway's sessions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizedRelay {
    pub name: String,
    pub public_key: braid_secure::PublicKey,
    /// The name of the `[[gateway]]` that authorized it.
    pub gateway: String,
    /// Refused (and counted) from the start: the owner withdrew it.
    pub revoked: bool,
}

/// Checks the `[[relay]]` sections against the gateways `peers` (name, public key).
pub(super) fn check(
    raw: Vec<RelaySection>,
    peers: &[super::Peer],
) -> Result<Vec<AuthorizedRelay>, String> {
    let mut out: Vec<AuthorizedRelay> = Vec::with_capacity(raw.len());
    for r in raw {
        let public_key = super::parse_public_key(&r.public_key)
            .map_err(|e| format!("relay '{}': public_key: {e}", r.name))?;
        if out.iter().any(|o| o.name == r.name) {
            return Err(format!(
                "two [[relay]] are named '{}': give each a distinct name",
                r.name
            ));
        }
        if out.iter().any(|o| o.public_key == public_key) {
            return Err(format!(
                "relay '{}' has the same public_key as another: one [[relay]] per relay key",
                r.name
            ));
        }
        if !peers.iter().any(|p| p.name == r.gateway) {
            return Err(format!(
                "relay '{}': gateway = '{}' names no [[gateway]] (the relay lends to that gateway's sessions)",
                r.name, r.gateway
            ));
        }
        out.push(AuthorizedRelay {
            name: r.name,
            public_key,
            gateway: r.gateway,
            revoked: r.revoked,
        });
    }
    Ok(out)
}
