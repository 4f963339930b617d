//! Ephemeral ports for the connections a host opens.

/// First and last ephemeral port (RFC 6335 dynamic range).
const EPHEMERAL: (u16, u16) = (49152, 65535);

/// Hands out the next free ephemeral port after the last one handed out, so a port is
/// reused only after all others have been.
#[derive(Debug)]
pub struct EphemeralPorts {
    in_use: Vec<u64>,
    next: u16,
}

impl Default for EphemeralPorts {
    fn default() -> Self {
        EphemeralPorts {
            in_use: vec![0; 1024],
            next: EPHEMERAL.0,
        }
    }
}

impl EphemeralPorts {
    /// A free port, or `None` when every one is taken.
    pub fn allocate(&mut self) -> Option<u16> {
        let span = u32::from(EPHEMERAL.1 - EPHEMERAL.0) + 1;
        for _ in 0..span {
            let port = self.next;
            self.next = if port == EPHEMERAL.1 {
                EPHEMERAL.0
            } else {
                port + 1
            };
            let (word, bit) = (usize::from(port) / 64, port % 64);
            if self.in_use[word] & (1 << bit) == 0 {
                self.in_use[word] |= 1 << bit;
                return Some(port);
            }
        }
        None
    }

    pub fn free(&mut self, port: u16) {
        self.in_use[usize::from(port) / 64] &= !(1 << (port % 64));
    }
}
