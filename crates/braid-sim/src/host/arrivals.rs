//! When the flows of a web workload arrive and how large they are (PluriBus §6.1: Poisson
//! arrivals, SURGE or fixed sizes), as a stream of `(arrival, size)` pairs.
//!
//! The simulated client host draws its flows from this stream, and the lab's real client
//! (crates/braid-lab) draws the very same flows from it, so a seed names the same
//! workload in both.

use braid_core::Instant;

use crate::Rng;

use super::surge::SurgeSizes;
use super::workload::{Shape, SizeModel, Spec, WebConfig, WorkloadConfig, WorkloadError};

/// The arrival process of one web workload.
#[derive(Clone, Debug)]
pub struct WebArrivals {
    rng: Rng,
    sizes: Option<SurgeSizes>,
    fixed: u64,
    mean_us: f64,
    next: Option<Instant>,
    stop: Instant,
    max_flows: u64,
    drawn: u64,
}

impl WebArrivals {
    /// The arrivals of web workload `index` (its position among a scenario's workloads)
    /// with `cfg`, for a run seeded with `seed` that ends at `end`.
    pub fn new(
        cfg: &WebConfig,
        index: usize,
        seed: u64,
        end: Instant,
    ) -> Result<WebArrivals, WorkloadError> {
        // The MTU only matters to UDP workloads; any valid one will do here.
        let spec = WorkloadConfig::Web(cfg.clone()).to_spec(index, end, 1500)?;
        Ok(WebArrivals::from_spec(&spec, seed).unwrap_or_else(|| WebArrivals::empty(end)))
    }

    /// The arrivals of a checked web workload; `None` for any other kind.
    pub(crate) fn from_spec(spec: &Spec, seed: u64) -> Option<WebArrivals> {
        let Shape::Web {
            mean_interarrival_us,
            size,
            max_flows,
            ..
        } = spec.shape
        else {
            return None;
        };
        let mut rng = Rng::child(seed, &format!("workload/{}/arrivals", spec.index));
        let first = spec.start.as_micros() as f64 + rng.exp(mean_interarrival_us);
        let (sizes, fixed) = match size {
            SizeModel::Fixed(n) => (None, n),
            SizeModel::Surge { cap_bytes } => (Some(SurgeSizes::new(cap_bytes)), 0),
        };
        Some(WebArrivals {
            rng,
            sizes,
            fixed,
            mean_us: mean_interarrival_us,
            next: Some(Instant::from_micros(first.round() as u64)),
            stop: spec.stop,
            max_flows,
            drawn: 0,
        })
    }

    fn empty(end: Instant) -> WebArrivals {
        WebArrivals {
            rng: Rng::new(0),
            sizes: None,
            fixed: 0,
            mean_us: 1.0,
            next: None,
            stop: end,
            max_flows: 0,
            drawn: 0,
        }
    }

    /// When the next flow arrives; `None` once the workload has stopped.
    pub fn peek(&self) -> Option<Instant> {
        self.next
    }

    /// The next flow's arrival time and size in bytes, and draws the one after it.
    pub fn pop(&mut self) -> Option<(Instant, u64)> {
        let at = self.next?;
        let size = match &self.sizes {
            Some(s) => s.sample(&mut self.rng),
            None => self.fixed,
        };
        self.drawn += 1;
        let after = at.as_micros() as f64 + self.rng.exp(self.mean_us);
        let after = Instant::from_micros(after.round() as u64);
        self.next = (after < self.stop && self.drawn < self.max_flows).then_some(after);
        Some((at, size))
    }
}

impl Iterator for WebArrivals {
    type Item = (Instant, u64);

    fn next(&mut self) -> Option<(Instant, u64)> {
        self.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_seeded_ordered_and_stop_in_time() {
        let cfg = WebConfig {
            scale: 4.0,
            ..WebConfig::default()
        };
        let end = Instant::from_millis(600_000);
        let a: Vec<_> = WebArrivals::new(&cfg, 0, 7, end).unwrap().collect();
        let b: Vec<_> = WebArrivals::new(&cfg, 0, 7, end).unwrap().collect();
        assert_eq!(a, b);
        let c: Vec<_> = WebArrivals::new(&cfg, 0, 8, end).unwrap().collect();
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(a.iter().all(|&(t, size)| t < end && size >= 1));
        // Mean inter-arrival 2.6 s / 4 over 600 s: about 923 flows.
        assert!((800..1050).contains(&a.len()), "{}", a.len());
    }

    #[test]
    fn max_flows_and_fixed_sizes_are_honoured() {
        let cfg = WebConfig {
            size_bytes: Some(10_000),
            max_flows: Some(5),
            ..WebConfig::default()
        };
        let a: Vec<_> = WebArrivals::new(&cfg, 1, 1, Instant::from_millis(10_000_000))
            .unwrap()
            .collect();
        assert_eq!(a.len(), 5);
        assert!(a.iter().all(|&(_, s)| s == 10_000));
    }
}
