//! Every benchmark, by name.

use crate::{Bench, BenchError};

static ALL: &[&dyn Bench] = &[
    &crate::sim_speed::SimSpeed,
    &crate::pluribus_fig15::PluribusFig15,
    &crate::pluribus_fig17::PluribusFig17,
    &crate::osctp_fig2::OsctpFig2,
    &crate::osctp_fig9::OsctpFig9,
    &crate::osctp_fig6::OsctpFig6,
    &crate::osctp_fig7::OsctpFig7,
    &crate::osctp_fig9_stream::OsctpFig9Stream,
    &crate::osctp_fig11::OsctpFig11,
    &crate::osctp_fig13::OsctpFig13,
    &crate::osctp_fig14::OsctpFig14,
    &crate::osctp_table1::OsctpTable1,
    &crate::osctp_fig15::OsctpFig15,
    &crate::osctp_fig16::OsctpFig16,
    &crate::cap_month::CapMonth,
    &crate::prism::PrismFig7,
    &crate::prism::PrismFig8,
    &crate::prism_fig9::PrismFig9,
    &crate::prism_rpc::PrismFig6a,
    &crate::prism_rpc::PrismFig6b,
    &crate::prism_members::PrismFig6c,
    &crate::prism_rpc::PrismFig11,
    &crate::prism_rpc::PrismFig12,
    &crate::udp_aggregation::UdpAggregation,
    &crate::bapu::Fig7,
    &crate::bapu::Fig10,
    &crate::bapu::Fig12a,
    &crate::bapu::Fig12b,
    &crate::bapu::Fig13,
    &crate::bapu_home::BapuFig14,
    &crate::bapu_home::BapuFig15,
    &crate::never_worse::NeverWorse,
    &crate::trace_bench::TraceBulk,
    &crate::trace_bench::TraceWeb,
    &crate::trace_bench::TracePairs,
    &crate::trace_stream::TraceStream,
    &crate::pluribus_bus::Fig8,
    &crate::pluribus_bus::Fig9,
    &crate::pluribus_bus::Fig14,
    &crate::fec_codec::FecCodec,
    &crate::secure_transport::SecureTransport,
    &crate::replay_window::ReplayWindowBench,
    &crate::pluribus_coding::Fig10,
    &crate::pluribus_coding::Fig12,
    &crate::pluribus_coding::Fig13,
    &crate::lab_emulator::LabEmulator,
    &crate::lab_bulk::LabBulk,
    &crate::lab_split_tcp::LabSplitTcp,
    &crate::lab_prism::LabPrism,
    &crate::lab_relay::LabRelay,
    &crate::lab_bus::LabBus,
    &crate::lab_traces::LabTraces,
    &crate::lab_failover::LabFailover,
    &crate::sim_vs_lab::SimVsLab,
    &crate::tunnel_throughput::TunnelThroughput,
    &crate::htppr::micro::Htppr51,
    &crate::htppr::micro::HtpprFig3,
    &crate::htppr::micro::HtpprFig4,
    &crate::htppr::links::HtpprFig5,
    &crate::htppr::links::HtpprFig6,
    &crate::htppr::links::HtpprFig8,
    &crate::htppr::links::HtpprZiptx,
    &crate::htppr::links::HtpprFig9,
    &crate::htppr::neighbours::Htppr55,
];

/// All benchmarks, in the order `braid bench --list` shows them.
pub fn list() -> &'static [&'static dyn Bench] {
    ALL
}

/// The benchmark called `name`.
pub fn find(name: &str) -> Result<&'static dyn Bench, BenchError> {
    ALL.iter()
        .copied()
        .find(|b| b.name() == name)
        .ok_or_else(|| BenchError::Unknown(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_findable() {
        for (i, b) in list().iter().enumerate() {
            assert!(list()[..i].iter().all(|o| o.name() != b.name()));
            assert_eq!(find(b.name()).unwrap().name(), b.name());
        }
        assert!(matches!(find("nope"), Err(BenchError::Unknown(_))));
        // `braid bench all` runs them all; no benchmark may take that name.
        assert!(find("all").is_err());
    }

    #[test]
    fn the_lab_benchmarks_say_they_need_root() {
        for b in list() {
            assert_eq!(
                b.needs_root(),
                b.summary().ends_with("(root)"),
                "{}: needs_root() and its summary disagree",
                b.name()
            );
        }
        assert!(list().iter().filter(|b| b.needs_root()).count() >= 7);
    }
}
