//! An 802.11g-like hare for HTPPR (Badam et al., MobiHoc '11): a shared medium with DCF
//! contention ([`medium`]), bit errors from an SNR that rise about tenfold per rate step
//! ([`phy`]), a tortoise beside it, and the stations that run over it ([`flows`]): HTPPR
//! itself, UDP, TCP Cubic with SampleRate, Hop and a ZipTx-like block recovery.

pub mod flows;
pub mod medium;
pub mod phy;
pub mod samplerate;

pub use medium::{
    run, Errors, Frame, Member, Station, StationStats, TortoiseLink, TxOutcome, WorldReport,
};

#[cfg(test)]
mod tests;
