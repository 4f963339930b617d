//! The lossy link's share of the bandwidth that RPC ships with its loss information
//! (PRISM §6.2.1): `p = 1 − Σ_{j≠i} B_j / Σ_j B_j = B_i / Σ_j B_j`. TCP-PRISM cuts its
//! window by `p` only (§6.2.2); ADAS halves the link's weight (§4.2.3).
//!
//! `B_j` is the bandwidth the caller sets for a link (braid's capacity estimate) or else
//! the rate RPC saw delivered on it, bytes decayed with a time constant of [`DECAY`].

use std::time::Duration;

use crate::time::Instant;
use crate::PathId;

/// Time constant of the delivered-rate estimate: a few RTTs of the paper's links.
pub const DECAY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, Default)]
struct Link {
    /// Set by the caller, bits per second.
    bandwidth: Option<f64>,
    /// Delivered bytes, decayed to `at`.
    delivered: f64,
    at: Instant,
    /// Smoothed round trip of segments sent on the link, from send to the ACK reporting
    /// them (PRISM's hRTT, Figure 5's NORMAL state).
    srtt: Option<Duration>,
    /// The quickest of those round trips.
    min_rtt: Option<Duration>,
}

/// Per-link bandwidth for the loss information.
#[derive(Clone, Debug, Default)]
pub struct LinkShare {
    links: Vec<Link>,
}

impl LinkShare {
    fn link(&mut self, link: PathId) -> &mut Link {
        let i = usize::from(link);
        if self.links.len() <= i {
            self.links.resize_with(i + 1, Link::default);
        }
        &mut self.links[i]
    }

    /// Sets (or with `None` clears) a link's bandwidth in bits per second.
    pub fn set_bandwidth(&mut self, link: PathId, bps: Option<f64>) {
        self.link(link).bandwidth = bps.filter(|b| b.is_finite() && *b > 0.0);
    }

    /// Counts `bytes` delivered on `link`.
    pub fn on_delivered(&mut self, now: Instant, link: PathId, bytes: u64) {
        let l = self.link(link);
        l.delivered = decayed(l, now) + bytes as f64;
        l.at = now.max(l.at);
    }

    /// A round-trip sample of a segment first sent on `link` (RFC 6298's 1/8 gain).
    pub fn on_rtt(&mut self, link: PathId, sample: Duration) {
        let l = self.link(link);
        l.min_rtt = Some(l.min_rtt.map_or(sample, |m| m.min(sample)));
        l.srtt = Some(match l.srtt {
            Some(s) => (s * 7 + sample) / 8,
            None => sample,
        });
    }

    /// The quickest round trip seen on `link`.
    pub fn min_rtt(&self, link: PathId) -> Option<Duration> {
        self.links.get(usize::from(link)).and_then(|l| l.min_rtt)
    }

    /// Each link's smoothed round trip, by link id.
    pub fn srtts(&self, out: &mut Vec<Option<Duration>>) {
        out.clear();
        out.extend(self.links.iter().map(|l| l.srtt));
    }

    /// How much longer the slowest link's round trip is than the fastest one's: how long
    /// data sent together on both can arrive apart, so how long a duplicate ACK that
    /// striping caused may wait for the hole below it to fill.
    pub fn delay_gap(&self) -> Option<Duration> {
        let rtts = self.links.iter().filter_map(|l| l.srtt);
        let (lo, hi) = rtts.fold(
            (None, None),
            |(lo, hi): (Option<Duration>, Option<Duration>), r| {
                (
                    Some(lo.map_or(r, |l| l.min(r))),
                    Some(hi.map_or(r, |h| h.max(r))),
                )
            },
        );
        Some(hi? - lo?)
    }

    /// The links' aggregate rate in bits per second, for pacing released ACKs: each
    /// link's set bandwidth or, where delivery ran faster, its delivered rate. `None`
    /// unless some bandwidth is set (the delivered rate alone starts from nothing).
    pub fn aggregate_bps(&self, now: Instant) -> Option<f64> {
        if !self.links.iter().any(|l| l.bandwidth.is_some()) {
            return None;
        }
        let tau = DECAY.as_secs_f64();
        let total = (self.links.iter())
            .map(|l| l.bandwidth.unwrap_or(0.0).max(decayed(l, now) * 8.0 / tau))
            .sum::<f64>();
        (total > 0.0).then_some(total)
    }

    /// `link`'s share of all links' bandwidth in `[0, 1]`; with nothing known, an equal
    /// share of the links seen.
    pub fn share(&self, now: Instant, link: PathId) -> f64 {
        let configured = self.links.iter().any(|l| l.bandwidth.is_some());
        let b = |l: &Link| {
            if configured {
                l.bandwidth.unwrap_or(0.0)
            } else {
                decayed(l, now)
            }
        };
        let total: f64 = self.links.iter().map(b).sum();
        let mine = self.links.get(usize::from(link)).map_or(0.0, b);
        if total > 0.0 {
            (mine / total).clamp(0.0, 1.0)
        } else {
            1.0 / self.links.len().max(usize::from(link) + 1) as f64
        }
    }
}

fn decayed(l: &Link, now: Instant) -> f64 {
    let dt = (now - l.at).as_secs_f64();
    l.delivered * (-dt / DECAY.as_secs_f64()).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_follows_configured_bandwidth_then_delivery() {
        let mut s = LinkShare::default();
        assert_eq!(s.share(Instant::ZERO, 1), 0.5);
        let t = Instant::from_millis(100);
        s.on_delivered(t, 0, 3000);
        s.on_delivered(t, 1, 1000);
        assert!((s.share(t, 1) - 0.25).abs() < 1e-9);
        s.set_bandwidth(0, Some(1.8e6));
        s.set_bandwidth(1, Some(0.6e6));
        assert!((s.share(t, 0) - 0.75).abs() < 1e-9);
        s.set_bandwidth(2, Some(0.6e6));
        assert!((s.share(t, 2) - 0.2).abs() < 1e-9);
    }
}
