//! No loss masking: every path loss reaches the inner transport, which recovers on its own
//! (the "no protection" line of PluriBus Fig 10).

use super::LossRecovery;
use crate::path::Path;
use crate::Instant;

/// Does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRecovery;

impl LossRecovery for NoRecovery {
    /// Never repairs anything.
    fn quiet_until(&self, _now: Instant, _paths: &[Path]) -> Instant {
        Instant::MAX
    }

    fn name(&self) -> &'static str {
        "none"
    }
}
