//! Plots of a run as PNG and SVG, drawn with plotters: line charts (fitness over generations),
//! scatter plots (predicted against actual, the Pareto front) and a confusion matrix. Text uses
//! DejaVu Sans, embedded (`assets/`), so plots look the same on every machine.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
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

/// Tick text: whole numbers without a fraction, others as plotters would.
fn tick(v: &f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{v:.0}") } else { format!("{v}") }
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
    macro_rules! body {
        ($chart:expr) => {{
            let mut ch = $chart;
            ch.configure_mesh().x_desc(&c.x).y_desc(&c.y).x_label_formatter(&tick).label_style(("sans-serif", 14)).draw().map_err(err)?;
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
    if c.log_y && positive {
        let (lo, hi) = range(pts().map(|p| p.1.ln())).unwrap_or((0.0, 1.0));
        body!(b.build_cartesian_2d(x0..x1, (lo.exp()..hi.exp()).log_scale()).map_err(err)?);
    } else {
        body!(b.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?);
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
