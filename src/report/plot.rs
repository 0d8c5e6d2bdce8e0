//! Plots of a run as PNG and SVG, drawn with plotters: line charts (fitness over generations),
//! scatter plots (predicted against actual, the Pareto front) and a confusion matrix. Text uses
//! DejaVu Sans, embedded (`assets/`), so plots look the same on every machine.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Plot size in pixels.
pub const SIZE: (u32, u32) = (800, 560);

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Makes the embedded font available to plotters (once).
pub fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font (a test draws text with it).
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Colours of successive series.
pub const PALETTE: [RGBColor; 5] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189)];

/// What to draw.
pub enum Figure {
    /// One chart.
    Chart(Chart),
    /// Charts stacked top to bottom.
    Stack(Vec<Chart>),
    /// A confusion matrix: title, `counts[true][predicted]`, class names.
    Confusion(String, Vec<Vec<u64>>, Vec<String>),
}

fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, fig: &Figure) -> Result<()>
where
    DB::ErrorType: 'static,
{
    match fig {
        Figure::Chart(c) => chart(area, c),
        Figure::Stack(cs) => {
            for (a, c) in area.split_evenly((cs.len().max(1), 1)).iter().zip(cs) {
                chart(a, c)?;
            }
            Ok(())
        }
        Figure::Confusion(t, counts, classes) => confusion(area, t, counts, classes),
    }
}

/// Draws `fig` into `stem.png` and `stem.svg`; returns both paths.
pub fn save(stem: &Path, fig: &Figure) -> Result<Vec<PathBuf>> {
    register_font();
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    let height = if let Figure::Stack(cs) = fig { SIZE.1 / 2 * cs.len().max(1) as u32 } else { SIZE.1 };
    {
        let root = BitMapBackend::new(&png, (SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root, fig)?;
        root.present().map_err(|e| anyhow!("cannot write {}: {e}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (SIZE.0, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root, fig)?;
        root.present().map_err(|e| anyhow!("cannot write {}: {e}", svg.display()))?;
    }
    Ok(vec![png, svg])
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e:?}")
}

/// One named series of points.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points (non-finite ones are skipped).
    pub points: Vec<(f64, f64)>,
    /// Draw points (true) or a line (false).
    pub dots: bool,
}

/// A chart: title, axis labels, series; `log_y` uses a log axis when every y is positive;
/// `diagonal` adds y = x (predicted against actual).
pub struct Chart {
    /// Title.
    pub title: String,
    /// x axis label.
    pub x: String,
    /// y axis label.
    pub y: String,
    /// The series.
    pub series: Vec<Series>,
    /// Log y axis where possible.
    pub log_y: bool,
    /// Draw the line y = x.
    pub diagonal: bool,
    /// Put the legend at the lower right (else the upper right).
    pub legend_low: bool,
}

/// An axis (`inner`: linear or log) whose ticks are chosen here ([`nice_ticks`],
/// [`log_ticks`]) instead of by plotters, with no light grid lines between them.
struct Ticked<R> {
    inner: R,
    ticks: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Ticked<R> {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() { Vec::new() } else { self.ticks.clone() }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// Most ticks on an axis.
const MOST_TICKS: usize = 8;

/// Ticks from `lo` to `hi` (inclusive) at the multiples of a 1-2-5 step (1, 2 or 5 times a
/// power of ten) that gives at most `most` of them; returns the ticks and the step.
pub fn nice_ticks(lo: f64, hi: f64, most: usize) -> (Vec<f64>, f64) {
    let span = hi - lo;
    if !(span > 0.0 && span.is_finite() && lo.is_finite()) {
        return (if lo.is_finite() { vec![lo] } else { Vec::new() }, 1.0);
    }
    let mag = 10f64.powf((span / most.max(1) as f64).log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= most as f64).unwrap_or(10.0 * mag);
    let (first, last) = ((lo / step).ceil() as i64, (hi / step).floor() as i64);
    ((first..=last).map(|k| k as f64 * step).collect(), step)
}

/// Ticks of a log axis from `lo` to `hi` (both positive): 1, 2 and 5 times the powers of ten
/// inside (only the powers when those are many); where fewer than two fall inside (a range
/// within a decade), [`nice_ticks`] and its step.
pub fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Option<f64>) {
    let decades = || (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32);
    let within = |mults: &[f64]| -> Vec<f64> {
        decades().flat_map(|k| mults.iter().map(move |m| m * 10f64.powi(k))).filter(|v| *v >= lo && *v <= hi).collect()
    };
    let mut ticks = within(&[1.0, 2.0, 5.0]);
    if ticks.len() > MOST_TICKS {
        ticks = within(&[1.0]);
    }
    if ticks.len() >= 2 {
        return (ticks, None);
    }
    let (ticks, step) = nice_ticks(lo, hi, MOST_TICKS - 2);
    (ticks, Some(step))
}

/// A tick's text, as short as its step allows: `0.4` (never `0.4000000000000001`), `12`,
/// `2.5e-6`, `3e7`. Without a step (a log axis' 1-2-5 ticks), the tick's own power of ten is
/// its step.
pub fn tick_label(v: f64, step: Option<f64>) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { format!("{v}") };
    }
    let step = step.unwrap_or_else(|| 10f64.powf(v.abs().log10().floor()));
    let place = step.log10().floor() as i32;
    if v.abs() >= 1e5 || place < -4 {
        // Scientific: as many digits of the mantissa as the step reaches.
        let digits = (v.abs().log10().floor() as i32 - place).max(0) as usize;
        let text = format!("{v:.digits$e}");
        // `2.50e-6` → `2.5e-6`.
        return match text.split_once('e') {
            Some((m, e)) if m.contains('.') => format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.')),
            _ => text,
        };
    }
    let decimals = (-place).max(0) as usize;
    let text = format!("{v:.decimals$}");
    // What rounds to zero is written `0`, as zero itself.
    if text.trim_start_matches(['-', '0', '.']).is_empty() { "0".into() } else { text }
}

fn range(v: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = v.filter(|x| x.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    if lo > hi {
        return None;
    }
    let pad = if hi > lo { (hi - lo) * 0.05 } else { lo.abs().max(1.0) * 0.05 };
    Some((lo - pad, hi + pad))
}

/// Draws a chart into an area.
pub fn chart<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, c: &Chart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let pts = || c.series.iter().flat_map(|s| s.points.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite());
    let (x0, x1) = range(pts().map(|p| p.0)).unwrap_or((0.0, 1.0));
    let (mut y0, mut y1) = range(pts().map(|p| p.1)).unwrap_or((0.0, 1.0));
    if c.diagonal {
        y0 = y0.min(x0);
        y1 = y1.max(x1);
    }
    let positive = pts().all(|p| p.1 > 0.0) && pts().next().is_some();
    let mut b = ChartBuilder::on(area);
    b.caption(&c.title, ("sans-serif", 22)).margin(12).x_label_area_size(40).y_label_area_size(70);
    let (x_ticks, x_step) = nice_ticks(x0, x1, MOST_TICKS);
    let x_label = |v: &f64| tick_label(*v, Some(x_step));
    macro_rules! body {
        ($chart:expr, $y_label:expr) => {{
            let mut ch = $chart;
            ch.configure_mesh()
                .x_desc(&c.x)
                .y_desc(&c.y)
                .x_label_formatter(&x_label)
                .y_label_formatter(&$y_label)
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(err)?;
            if c.diagonal {
                ch.draw_series(LineSeries::new([(x0, x0), (x1, x1)], BLACK.mix(0.4))).map_err(err)?;
            }
            for (k, s) in c.series.iter().enumerate() {
                let col = PALETTE[k % PALETTE.len()];
                let p: Vec<(f64, f64)> = s.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite() && (!positive || !c.log_y || *y > 0.0)).collect();
                let drawn = if s.dots {
                    ch.draw_series(p.iter().map(|&q| Circle::new(q, 3, col.mix(0.7).filled()))).map_err(err)?
                } else {
                    ch.draw_series(LineSeries::new(p, col.stroke_width(2))).map_err(err)?
                };
                drawn.label(s.name.clone()).legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 14, y + 4)], col.filled()));
            }
            if c.series.len() > 1 {
                ch.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.3))
                    .label_font(("sans-serif", 14))
                    .position(if c.legend_low { SeriesLabelPosition::LowerRight } else { SeriesLabelPosition::UpperRight })
                    .draw()
                    .map_err(err)?;
            }
        }};
    }
    let x_axis = Ticked { inner: RangedCoordf64::from(x0..x1), ticks: x_ticks };
    if c.log_y && positive {
        let (lo, hi) = range(pts().map(|p| p.1.ln())).unwrap_or((0.0, 1.0));
        let (lo, hi) = (lo.exp(), hi.exp());
        let (ticks, step) = log_ticks(lo, hi);
        let y_label = |v: &f64| tick_label(*v, step);
        let y_axis = Ticked { inner: LogCoord::from((lo..hi).log_scale()), ticks };
        body!(b.build_cartesian_2d(x_axis, y_axis).map_err(err)?, y_label);
    } else {
        let (ticks, step) = nice_ticks(y0, y1, MOST_TICKS);
        let y_label = |v: &f64| tick_label(*v, Some(step));
        let y_axis = Ticked { inner: RangedCoordf64::from(y0..y1), ticks };
        body!(b.build_cartesian_2d(x_axis, y_axis).map_err(err)?, y_label);
    }
    Ok(())
}

/// Draws a confusion matrix (`counts[true][predicted]`), each cell shaded by its share of the
/// row, with its count.
pub fn confusion<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, counts: &[Vec<u64>], classes: &[String]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let k = counts.len().max(1);
    let mut ch = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(110)
        .build_cartesian_2d((0..k.saturating_sub(1)).into_segmented(), (0..k.saturating_sub(1)).into_segmented())
        .map_err(err)?;
    let name = |v: &SegmentValue<usize>, flip: bool| match v {
        SegmentValue::CenterOf(i) if *i < k => {
            let i = if flip { k - 1 - i } else { *i };
            classes.get(i).cloned().unwrap_or_else(|| i.to_string())
        }
        _ => String::new(),
    };
    ch.configure_mesh()
        .disable_mesh()
        .x_desc("predicted")
        .y_desc("true")
        .x_labels(k)
        .y_labels(k)
        .x_label_formatter(&|v| name(v, false))
        .y_label_formatter(&|v| name(v, true))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    for (t, row) in counts.iter().enumerate() {
        let total: u64 = row.iter().sum::<u64>().max(1);
        for (p, &n) in row.iter().enumerate() {
            let share = n as f64 / total as f64;
            let y = k - 1 - t;
            let shade = RGBColor((255.0 - share * 224.0) as u8, (255.0 - share * 136.0) as u8, (255.0 - share * 75.0) as u8);
            let (x0, x1, y0, y1) = (SegmentValue::Exact(p), SegmentValue::Exact(p + 1), SegmentValue::Exact(y), SegmentValue::Exact(y + 1));
            ch.draw_series([Rectangle::new([(x0, y0), (x1.clone(), y1.clone())], shade.filled())]).map_err(err)?;
            let colour = if share > 0.6 { WHITE } else { BLACK };
            let c = ch.backend_coord(&(SegmentValue::CenterOf(p), SegmentValue::CenterOf(y)));
            let text = n.to_string();
            let at = (c.0 - 5 * text.len() as i32, c.1 - 9);
            area.draw(&Text::new(text, at, ("sans-serif", 18).into_font().color(&colour))).map_err(err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tick_tests {
    use super::*;

    // Labels such as `0.4600000000000001` overlapped; the fitness plot's log axis over less than
    // a decade had no tick labels at all.
    #[test]
    fn ticks_are_rounded_steps_with_short_labels() {
        let (ticks, step) = nice_ticks(0.0, 1.0, 8);
        assert_eq!(step, 0.2);
        let labels: Vec<String> = ticks.iter().map(|&v| tick_label(v, Some(step))).collect();
        assert_eq!(labels, ["0", "0.2", "0.4", "0.6", "0.8", "1.0"]);
        let (ticks, step) = nice_ticks(0.4312, 0.4987, 8);
        let labels: Vec<String> = ticks.iter().map(|&v| tick_label(v, Some(step))).collect();
        assert_eq!(labels, ["0.44", "0.45", "0.46", "0.47", "0.48", "0.49"]);
        let (ticks, step) = nice_ticks(-3.0, 117.0, 8);
        assert_eq!((ticks.len(), step), (6, 20.0));
        assert_eq!(tick_label(ticks[0], Some(step)), "0");
        assert_eq!(tick_label(-0.0000001, Some(0.2)), "0");
        assert_eq!(tick_label(2.5e-6, Some(5e-7)), "2.5e-6");
        assert_eq!(tick_label(3e7, Some(1e7)), "3e7");
        // A flat or broken range gives what it can, never a panic.
        assert_eq!(nice_ticks(5.0, 5.0, 8).0, [5.0]);
        assert!(nice_ticks(f64::NAN, 1.0, 8).0.is_empty());
    }

    #[test]
    fn a_log_axis_is_labelled_whatever_its_span() {
        let (ticks, step) = log_ticks(1e-3, 20.0);
        assert_eq!(step, None);
        let labels: Vec<String> = ticks.iter().map(|&v| tick_label(v, step)).collect();
        assert_eq!(labels, ["0.001", "0.01", "0.1", "1", "10"]);
        let (ticks, step) = log_ticks(0.13, 0.22);
        let labels: Vec<String> = ticks.iter().map(|&v| tick_label(v, step)).collect();
        assert_eq!(labels, ["0.14", "0.16", "0.18", "0.20", "0.22"]);
        let (ticks, step) = log_ticks(0.3, 3.0);
        assert_eq!(ticks.iter().map(|&v| tick_label(v, step)).collect::<Vec<_>>(), ["0.5", "1", "2"]);
    }

    #[test]
    fn a_chart_draws_its_tick_labels() {
        register_font();
        let mut svg = String::new();
        {
            let area = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            let points = (0..=20).map(|g| (g as f64, 0.2 - 0.003 * g as f64)).collect();
            let c = Chart {
                title: "fitness".into(),
                x: "generation".into(),
                y: "error".into(),
                series: vec![Series { name: "best".into(), points, dots: false }],
                log_y: true,
                diagonal: false,
                legend_low: false,
            };
            chart(&area, &c).unwrap();
            area.present().unwrap();
        }
        for label in [">0.14<", ">0.16<", ">0.20<", ">0<", ">20<"] {
            assert!(svg.replace(char::is_whitespace, "").contains(label), "no tick {label} in the SVG");
        }
        assert!(!svg.contains("00000000"), "a long label: {svg}");
    }
}
