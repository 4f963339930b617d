//! No loss masking: every path loss reaches the inner transport, which recovers on its own
//! (the "no protection" line of PluriBus Fig 10).

use super::LossRecovery;

/// Does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRecovery;

impl LossRecovery for NoRecovery {
    fn name(&self) -> &'static str {
        "none"
    }
}
