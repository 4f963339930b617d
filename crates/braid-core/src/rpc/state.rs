//! RPC's state machine (PRISM Figure 5, §6.2.1). NORMAL: hold and release ACKs (§5.2.2).
//! LOSSDETECT: send the loss information, update the link states, go to LOSS. LOSS: pass
//! every ACK (duplicates included, so the sender counts what left the network). OUTOFLOSS
//! on an ACK that advances: back to NORMAL on a full ACK (every lost segment repaired),
//! else back to LOSS. LOSSDETECT and OUTOFLOSS last one input; [`Step`] shows them.

/// The states of Figure 5.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RpcState {
    #[default]
    Normal,
    LossDetect,
    Loss,
    OutOfLoss,
}

/// What one ACK means to the state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Loss detection (§5.2.3) found a lost segment.
    LossDetected,
    /// The ACK does not advance the cumulative ACK.
    DuplicateAck,
    /// The ACK advances it; `full` when it covers every segment lost so far.
    AdvancingAck { full: bool },
}

/// One transition: the transient state passed through, if any, and where it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub via: Option<RpcState>,
    pub to: RpcState,
}

impl RpcState {
    /// The transition on `input`. The transient states are never a resting state, so
    /// they behave as the state they lead to.
    pub fn on(self, input: Input) -> Step {
        use Input::*;
        use RpcState::*;
        let resting = match self {
            LossDetect => Loss,
            OutOfLoss => Normal,
            s => s,
        };
        match (resting, input) {
            (_, LossDetected) => Step {
                via: Some(LossDetect),
                to: Loss,
            },
            (Loss, AdvancingAck { full }) => Step {
                via: Some(OutOfLoss),
                to: if full { Normal } else { Loss },
            },
            (s, _) => Step { via: None, to: s },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Input::*;
    use super::RpcState::*;
    use super::*;

    fn step(via: Option<RpcState>, to: RpcState) -> Step {
        Step { via, to }
    }

    #[test]
    fn transitions_one_by_one() {
        assert_eq!(Normal.on(DuplicateAck), step(None, Normal));
        assert_eq!(Normal.on(AdvancingAck { full: true }), step(None, Normal));
        assert_eq!(Normal.on(AdvancingAck { full: false }), step(None, Normal));
        assert_eq!(Normal.on(LossDetected), step(Some(LossDetect), Loss));
        assert_eq!(Loss.on(DuplicateAck), step(None, Loss));
        assert_eq!(Loss.on(LossDetected), step(Some(LossDetect), Loss));
        assert_eq!(
            Loss.on(AdvancingAck { full: false }),
            step(Some(OutOfLoss), Loss)
        );
        assert_eq!(
            Loss.on(AdvancingAck { full: true }),
            step(Some(OutOfLoss), Normal)
        );
        assert_eq!(LossDetect.on(DuplicateAck), step(None, Loss));
        assert_eq!(OutOfLoss.on(DuplicateAck), step(None, Normal));
    }
}
