//! Hello option 4 (docs/wire.md, "Metering"): the gateway's metered paths, so that the
//! server budgets what it sends on them (downloads) with the same model as the gateway.

use crate::cursor::{Reader, Writer};
use crate::{Error, Result};

/// Bytes before the paths: utility kind (u8), weight (f64), target bit/s (f64).
const FIXED_LEN: usize = 17;
/// Bytes of one path: id (u8), price per byte (f64), cap bytes left (u64, `u64::MAX`: no
/// cap), cap seconds left (u32).
pub const METERED_PATH_LEN: usize = 21;
/// Most paths one option holds (its length is a u8).
pub const MAX_METERED_PATHS: usize = (255 - FIXED_LEN) / METERED_PATH_LEN;

/// What the traffic's throughput is worth (braid-core's `Utility`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UtilityOpt {
    Log { weight: f64 },
    Threshold { target_bps: f64, weight: f64 },
    Linear { weight: f64 },
}

/// One metered path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeteredPathOpt {
    pub path: u8,
    /// Price per byte (any currency).
    pub per_byte: f64,
    /// The cap's bytes left and seconds left, when it has one.
    pub cap: Option<(u64, u32)>,
}

/// The metering option's value.
#[derive(Clone, Debug, PartialEq)]
pub struct MeteringOpt {
    pub utility: UtilityOpt,
    pub paths: Vec<MeteredPathOpt>,
}

impl MeteringOpt {
    /// Reads an option value; a length that is not whole paths, an unknown utility or a
    /// number that is not finite and non-negative is an error.
    pub fn parse(v: &[u8]) -> Result<MeteringOpt> {
        if v.len() < FIXED_LEN || !(v.len() - FIXED_LEN).is_multiple_of(METERED_PATH_LEN) {
            return Err(Error::Malformed("metering option length"));
        }
        let mut r = Reader::new(v);
        let kind = r.u8()?;
        let weight = number(&mut r)?;
        let target_bps = number(&mut r)?;
        let utility = match kind {
            0 => UtilityOpt::Log { weight },
            1 => UtilityOpt::Threshold { target_bps, weight },
            2 => UtilityOpt::Linear { weight },
            _ => return Err(Error::Malformed("metering option utility")),
        };
        let mut paths = Vec::with_capacity(r.remaining() / METERED_PATH_LEN);
        while !r.is_empty() {
            let path = r.u8()?;
            let per_byte = number(&mut r)?;
            let left = u64::from_be_bytes(fixed(r.take(8)?)?);
            let secs = r.u32()?;
            paths.push(MeteredPathOpt {
                path,
                per_byte,
                cap: (left != u64::MAX).then_some((left, secs)),
            });
        }
        Ok(MeteringOpt { utility, paths })
    }

    /// The option's value length; at most 255 when `paths` holds at most
    /// [`MAX_METERED_PATHS`].
    pub fn value_len(&self) -> usize {
        FIXED_LEN + METERED_PATH_LEN * self.paths.len()
    }

    /// The option's value, as [`crate::Hello::metering`] carries it.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        if self.paths.len() > MAX_METERED_PATHS {
            return Err(Error::Malformed("metering option with too many paths"));
        }
        let mut v = vec![0; self.value_len()];
        let mut w = Writer::new(&mut v);
        let (kind, weight, target) = match self.utility {
            UtilityOpt::Log { weight } => (0, weight, 0.0),
            UtilityOpt::Threshold { target_bps, weight } => (1, weight, target_bps),
            UtilityOpt::Linear { weight } => (2, weight, 0.0),
        };
        w.u8(kind)?;
        w.put(&f64::to_be_bytes(weight))?;
        w.put(&f64::to_be_bytes(target))?;
        for p in &self.paths {
            w.u8(p.path)?;
            w.put(&f64::to_be_bytes(p.per_byte))?;
            let (left, secs) = p.cap.unwrap_or((u64::MAX, 0));
            w.put(&left.to_be_bytes())?;
            w.u32(secs)?;
        }
        Ok(v)
    }
}

fn fixed(v: &[u8]) -> Result<[u8; 8]> {
    v.try_into()
        .map_err(|_| Error::Malformed("metering option"))
}

fn number(r: &mut Reader<'_>) -> Result<f64> {
    let v = f64::from_be_bytes(fixed(r.take(8)?)?);
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(Error::Malformed("metering option number"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_and_refuses_what_is_not_whole() {
        let m = MeteringOpt {
            utility: UtilityOpt::Threshold {
                target_bps: 2e6,
                weight: 1.0,
            },
            paths: vec![
                MeteredPathOpt {
                    path: 1,
                    per_byte: 8e-9,
                    cap: Some((10_000_000_000, 86_400)),
                },
                MeteredPathOpt {
                    path: 3,
                    per_byte: 0.0,
                    cap: None,
                },
            ],
        };
        let v = m.to_bytes().unwrap();
        assert_eq!(v.len(), m.value_len());
        assert_eq!(MeteringOpt::parse(&v).unwrap(), m);
        assert!(MeteringOpt::parse(&v[..v.len() - 1]).is_err());
        let mut bad = v.clone();
        bad[0] = 9;
        assert!(MeteringOpt::parse(&bad).is_err());
        // A negative price.
        let mut bad = v;
        bad[18] = 0xbf;
        assert!(MeteringOpt::parse(&bad).is_err());
        let full = MeteringOpt {
            paths: vec![m.paths[0]; MAX_METERED_PATHS + 1],
            ..m
        };
        assert!(full.to_bytes().is_err());
    }
}
