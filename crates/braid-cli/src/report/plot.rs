//! The report's plots, drawn with plotters' SVG backend. Text is written as SVG `<text>`
//! (plotters without a font feature only estimates its size), so no fonts are needed here
//! and the browser draws it.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// An f64 axis whose ticks are the given values (categories, or the data's own x values),
/// labelled by the mesh's formatter.
struct Ticks {
    range: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticks {
    fn new(range: Range<f64>, ticks: Vec<f64>) -> Ticks {
        Ticks {
            range: range.into(),
            ticks,
        }
    }
}

impl Ranged for Ticks {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.range.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Thin the ticks when the hint asks for fewer.
        let step = self
            .ticks
            .len()
            .div_ceil(hint.max_num_points().max(1))
            .max(1);
        self.ticks.iter().copied().step_by(step).collect()
    }

    fn range(&self) -> Range<f64> {
        self.range.range()
    }
}

/// Width and height of every plot, pixels.
const SIZE: (u32, u32) = (720, 400);
/// Categories named on the x axis; more are numbered from 1.
pub const MAX_NAMED: usize = 6;
/// Bar charts have a few bars only.
const BAR_SIZE: (u32, u32) = (560, 320);

/// Series colours, in order (colour-blind safe: Okabe and Ito).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a plot: {e:?}")
}

/// A horizontal reference line across a plot (a goal, the paper's number).
pub struct Reference {
    pub label: String,
    pub value: f64,
}

/// Bars: one per (label, value), with dashed reference lines.
pub fn bars(
    title: &str,
    y_desc: &str,
    bars: &[(String, f64)],
    refs: &[Reference],
) -> anyhow::Result<String> {
    let bars: Vec<&(String, f64)> = bars.iter().filter(|(_, v)| v.is_finite()).collect();
    anyhow::ensure!(!bars.is_empty(), "no finite value to plot");
    let n = bars.len();
    let values = bars.iter().map(|b| b.1).chain(refs.iter().map(|r| r.value));
    let (lo, hi) = y_range(values, true);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, BAR_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let x = Ticks::new(-0.5..n as f64 - 0.5, (0..n).map(|i| i as f64).collect());
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x, lo..hi)
            .map_err(err)?;
        let label = |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                bars.get(i as usize)
                    .map(|b| b.0.clone())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&label)
            .y_label_formatter(&|v| trim_number(*v))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .y_desc(y_desc)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                let x = i as f64;
                Rectangle::new([(x - 0.3, 0f64.max(lo)), (x + 0.3, *v)], colour(i).filled())
            }))
            .map_err(err)?;
        draw_refs(&mut chart, refs, (-0.5, n as f64 - 0.5))?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// One series: a name and its (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Lines with points, one per series; `x_labels` names the x positions where the x axis is
/// categorical (point 0, 1, ...), else numbers are shown.
pub fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    x_labels: Option<&[String]>,
    refs: &[Reference],
) -> anyhow::Result<String> {
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
    };
    anyhow::ensure!(all().next().is_some(), "no finite point to plot");
    let (x_lo, x_hi) = x_range(all().map(|p| p.0));
    let (lo, hi) = y_range(
        all().map(|p| p.1).chain(refs.iter().map(|r| r.value)),
        false,
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        // Many categories are numbered from 1 (the caller names them beside the plot).
        let numbered = x_labels.is_some_and(|l| l.len() > MAX_NAMED);
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64);
        let label_of = |v: &f64| -> String {
            match x_labels {
                Some(names) => {
                    let i = v.round();
                    if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                        if numbered {
                            format!("{}", i as usize + 1)
                        } else {
                            names[i as usize].clone()
                        }
                    } else {
                        String::new()
                    }
                }
                None => trim_number(*v),
            }
        };
        // Ticks at the categories, or at the data's own x values (at most 12).
        let ticks: Vec<f64> = match x_labels {
            Some(names) => (0..names.len()).map(|i| i as f64).collect(),
            None => {
                let mut xs: Vec<f64> = all().map(|p| p.0).collect();
                xs.sort_by(f64::total_cmp);
                xs.dedup();
                let step = xs.len().div_ceil(12).max(1);
                xs.into_iter().step_by(step).collect()
            }
        };
        let mut chart = builder
            .build_cartesian_2d(Ticks::new(x_lo..x_hi, ticks), lo..hi)
            .map_err(err)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&label_of)
            .y_label_formatter(&|v| trim_number(*v))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14));
        if let Some(names) = x_labels {
            mesh.x_labels(names.len());
        }
        mesh.draw().map_err(err)?;
        for (i, s) in series.iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(err)?;
        }
        draw_refs(&mut chart, refs, (x_lo, x_hi))?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Dashed horizontal lines at each reference value, labelled at the right end.
fn draw_refs<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    refs: &[Reference],
    (x0, x1): (f64, f64),
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    for (i, r) in refs.iter().enumerate() {
        if !r.value.is_finite() {
            continue;
        }
        let c = if i == 0 {
            RGBColor(200, 0, 0)
        } else {
            RGBColor(90, 90, 90)
        };
        let steps = 60;
        let dx = (x1 - x0) / steps as f64;
        chart
            .draw_series((0..steps).step_by(2).map(|k| {
                let a = x0 + k as f64 * dx;
                PathElement::new(vec![(a, r.value), (a + dx, r.value)], c.stroke_width(2))
            }))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{} {}", r.label, trim_number(r.value)),
                (x0 + (x1 - x0) * 0.02, r.value),
                ("sans-serif", 14).into_font().color(&c),
            )))
            .map_err(err)?;
    }
    Ok(())
}

/// Numbers for labels: up to three significant decimals, no trailing zeros.
pub fn trim_number(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

fn x_range(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
        (l.min(x), h.max(x))
    });
    let pad = ((hi - lo) * 0.05).max(0.5);
    (lo - pad, hi + pad)
}

/// A y range holding every value with some headroom; from 0 for bars of positive values.
fn y_range(ys: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = ys
        .filter(|y| y.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), y| {
            (l.min(y), h.max(y))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero || (lo >= 0.0 && lo < 0.5 * hi) {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.08;
    (if lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}
