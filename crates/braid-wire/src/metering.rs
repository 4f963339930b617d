//! Hello options 4 and 5 (docs/wire.md, "Metering"): the gateway's metered paths and its
//! traffic classes' utilities, so that the server budgets what it sends on them
//! (downloads) with the same model as the gateway, class by class.

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
        let utility = UtilityOpt::read(&mut r)?;
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
        self.utility.write(&mut w)?;
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

impl UtilityOpt {
    /// Reads a utility: kind (u8), weight (f64), target bit/s (f64).
    fn read(r: &mut Reader<'_>) -> Result<UtilityOpt> {
        let kind = r.u8()?;
        let weight = number(r)?;
        let target_bps = number(r)?;
        Ok(match kind {
            0 => UtilityOpt::Log { weight },
            1 => UtilityOpt::Threshold { target_bps, weight },
            2 => UtilityOpt::Linear { weight },
            _ => return Err(Error::Malformed("metering option utility")),
        })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<()> {
        let (kind, weight, target) = match *self {
            UtilityOpt::Log { weight } => (0, weight, 0.0),
            UtilityOpt::Threshold { target_bps, weight } => (1, weight, target_bps),
            UtilityOpt::Linear { weight } => (2, weight, 0.0),
        };
        w.u8(kind)?;
        w.put(&f64::to_be_bytes(weight))?;
        w.put(&f64::to_be_bytes(target))
    }
}

/// Bytes of a class with no ports and no DSCP values: utility (17), protocol, port count,
/// DSCP count.
const CLASS_FIXED_LEN: usize = FIXED_LEN + 3;

/// Which flows a class takes (braid-core's `FlowMatch`); an empty criterion matches
/// anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassMatchOpt {
    /// 0 any, 1 TCP, 2 UDP, 3 ICMP (v4 or v6).
    pub protocol: u8,
    /// Inclusive ranges, matched against either port.
    pub ports: Vec<(u16, u16)>,
    pub dscp: Vec<u8>,
}

/// One traffic class: which flows, and what their throughput is worth.
#[derive(Clone, Debug, PartialEq)]
pub struct MeteredClassOpt {
    pub matcher: ClassMatchOpt,
    pub utility: UtilityOpt,
}

/// Hello option 5's value: the utility of the traffic no class matches, then the classes in
/// the order they are matched.
#[derive(Clone, Debug, PartialEq)]
pub struct MeteredClassesOpt {
    pub unmatched: UtilityOpt,
    pub classes: Vec<MeteredClassOpt>,
}

impl MeteredClassesOpt {
    /// Reads an option value; a truncated class, an unknown utility or protocol, or a
    /// number that is not finite and non-negative is an error.
    pub fn parse(v: &[u8]) -> Result<MeteredClassesOpt> {
        let mut r = Reader::new(v);
        let unmatched = UtilityOpt::read(&mut r)?;
        let mut classes = Vec::new();
        while !r.is_empty() {
            let utility = UtilityOpt::read(&mut r)?;
            let protocol = r.u8()?;
            if protocol > 3 {
                return Err(Error::Malformed("metered class protocol"));
            }
            let ports = (0..r.u8()?)
                .map(|_| {
                    let (low, high) = (r.u16()?, r.u16()?);
                    if low > high {
                        return Err(Error::Malformed("metered class port range"));
                    }
                    Ok((low, high))
                })
                .collect::<Result<Vec<_>>>()?;
            let n = usize::from(r.u8()?);
            let dscp = r.take(n)?.to_vec();
            if dscp.iter().any(|&d| d > 63) {
                return Err(Error::Malformed("metered class dscp"));
            }
            classes.push(MeteredClassOpt {
                matcher: ClassMatchOpt {
                    protocol,
                    ports,
                    dscp,
                },
                utility,
            });
        }
        Ok(MeteredClassesOpt { unmatched, classes })
    }

    /// The option's value length (an option holds at most 255).
    pub fn value_len(&self) -> usize {
        FIXED_LEN
            + (self.classes.iter())
                .map(|c| CLASS_FIXED_LEN + 4 * c.matcher.ports.len() + c.matcher.dscp.len())
                .sum::<usize>()
    }

    /// The option's value, as [`crate::Hello::metered_classes`] carries it; an error when
    /// it would not fit an option's 255 bytes (9 classes of one port range each) or a
    /// class has more than 255 port ranges or DSCP values.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        if self.value_len() > 255 {
            return Err(Error::Malformed("metered classes longer than 255 bytes"));
        }
        let mut v = vec![0; self.value_len()];
        let mut w = Writer::new(&mut v);
        self.unmatched.write(&mut w)?;
        for c in &self.classes {
            let count = |n: usize| {
                u8::try_from(n).map_err(|_| Error::Malformed("metered class with 256 entries"))
            };
            c.utility.write(&mut w)?;
            w.u8(c.matcher.protocol)?;
            w.u8(count(c.matcher.ports.len())?)?;
            for &(low, high) in &c.matcher.ports {
                w.u16(low)?;
                w.u16(high)?;
            }
            w.u8(count(c.matcher.dscp.len())?)?;
            w.put(&c.matcher.dscp)?;
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

    #[test]
    fn classes_read_back_and_refuse_what_is_not_whole() {
        let m = MeteredClassesOpt {
            unmatched: UtilityOpt::Linear { weight: 0.0 },
            classes: vec![
                MeteredClassOpt {
                    matcher: ClassMatchOpt {
                        protocol: 2,
                        ports: vec![(3478, 3479), (5004, 5004)],
                        dscp: vec![46],
                    },
                    utility: UtilityOpt::Threshold {
                        target_bps: 2e6,
                        weight: 1.0,
                    },
                },
                MeteredClassOpt {
                    matcher: ClassMatchOpt::default(),
                    utility: UtilityOpt::Log { weight: 3.0 },
                },
            ],
        };
        let v = m.to_bytes().unwrap();
        assert_eq!(v.len(), m.value_len());
        assert_eq!(MeteredClassesOpt::parse(&v).unwrap(), m);
        for cut in [1, 5, 26] {
            assert!(
                MeteredClassesOpt::parse(&v[..v.len() - cut]).is_err(),
                "{cut}"
            );
        }
        // Protocol 4, a range high below low, DSCP 64.
        for (at, byte) in [(34, 4), (38, 0), (45, 64)] {
            let mut bad = v.clone();
            bad[at] = byte;
            assert!(MeteredClassesOpt::parse(&bad).is_err(), "{at}");
        }
        let many = MeteredClassesOpt {
            classes: vec![m.classes[0].clone(); 12],
            ..m
        };
        assert!(many.to_bytes().is_err());
    }
}
