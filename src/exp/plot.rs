//! Line charts with plotters, each written as PNG and SVG, with a CSV of
//! exactly what is plotted beside them.
//!
//! A figure is a grid of panels with lines of notes under it; a panel is
//! x/y labels and named series (one colour per series, the same across
//! panels so an AQM keeps its colour), points with optional error bars, and
//! a legend in a strip of its own beside the plot. Ticks sit at a sweep's
//! values or at round steps, and whole numbers print without decimals.
//! Text needs a TrueType font: the first of [`FONT_CANDIDATES`] found is
//! registered as `sans-serif` (Debian package `fonts-dejavu-core`). plotters
//! measures every label with it, for the SVG too (checked: without a font
//! the SVG fails with `FontUnavailable`), so without one no figure is
//! written and [`Figure::write`] says why; the results stay complete.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

/// Fonts tried for PNG text, in order.
pub const FONT_CANDIDATES: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers a font once; whether one was found.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        for path in FONT_CANDIDATES {
            if let Ok(bytes) = std::fs::read(path) {
                // Registered fonts live for the process: leak the bytes once.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// One plotted point: `y` at `x`, with an error bar from `lo` to `hi`
/// when the figure has one, and how many repeats it rests on.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// X.
    pub x: f64,
    /// Y.
    pub y: f64,
    /// Bottom of the error bar.
    pub lo: Option<f64>,
    /// Top of the error bar.
    pub hi: Option<f64>,
    /// Repeats the point rests on.
    pub n: Option<usize>,
    /// Repeats asked for.
    pub asked: Option<usize>,
}

impl Point {
    /// A bare point (time series, CDFs).
    pub fn at(x: f64, y: f64) -> Self {
        Point {
            x,
            y,
            lo: None,
            hi: None,
            n: None,
            asked: None,
        }
    }
}

/// One named line.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points in x order.
    pub points: Vec<Point>,
}

/// One chart of a figure.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Caption.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Lines.
    pub series: Vec<Series>,
    /// Draw point markers (sweep plots) or only lines (time series).
    pub markers: bool,
    /// Ticks at exactly these x values (a sweep's values); else even steps.
    pub x_ticks: Option<Vec<f64>>,
}

/// Panels in a grid, with lines of notes under them.
#[derive(Clone, Debug)]
pub struct Figure {
    /// Panels, row by row.
    pub panels: Vec<Panel>,
    /// Panels per row.
    pub columns: usize,
    /// What the points and bars are, which points rest on fewer repeats.
    pub notes: Vec<String>,
}

/// What [`Figure::write`] wrote.
#[derive(Debug, Default)]
pub struct Written {
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Why a format was skipped.
    pub notes: Vec<String>,
}

const PANEL_W: u32 = 560;
const PANEL_H: u32 = 400;
/// Height of one line of notes under the panels.
const NOTE_H: u32 = 18;
/// Legend text size, and the width a character takes at it (DejaVu Sans
/// averages ~0.55 em).
const LEGEND_FONT: u32 = 13;
const LEGEND_CHAR_W: u32 = 7;

/// A colour per series index.
pub fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    C[i % C.len()]
}

/// One row of a figure's CSV: exactly what is plotted.
#[derive(Serialize)]
struct CsvRow<'a> {
    panel: &'a str,
    series: &'a str,
    x: f64,
    y: f64,
    y_lo: Option<f64>,
    y_hi: Option<f64>,
    repeats: Option<usize>,
    repeats_asked: Option<usize>,
}

impl Figure {
    /// A figure of one panel.
    pub fn single(panel: Panel) -> Self {
        Figure {
            panels: vec![panel],
            columns: 1,
            notes: Vec::new(),
        }
    }

    /// Width of the legend strip beside every panel: the longest name.
    fn legend_w(&self) -> u32 {
        let chars = self
            .panels
            .iter()
            .flat_map(|p| p.series.iter().map(|s| s.name.chars().count()))
            .max()
            .unwrap_or(0) as u32;
        if chars == 0 {
            0
        } else {
            (chars * LEGEND_CHAR_W + 40).min(360)
        }
    }

    fn grid(&self) -> (usize, usize) {
        let cols = self.columns.clamp(1, self.panels.len().max(1));
        (self.panels.len().div_ceil(cols).max(1), cols)
    }

    fn size(&self) -> (u32, u32) {
        let (rows, cols) = self.grid();
        (
            (PANEL_W + self.legend_w()) * cols as u32,
            PANEL_H * rows as u32 + NOTE_H * self.notes.len() as u32 + 8,
        )
    }

    /// Writes `<stem>.csv` (what is plotted) and, when a font is available,
    /// `<stem>.png` and `<stem>.svg`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<Written, String> {
        let mut w = Written::default();
        let csv_path = dir.join(format!("{stem}.csv"));
        self.write_csv(&csv_path)
            .map_err(|e| format!("{}: {e}", csv_path.display()))?;
        w.files.push(csv_path);
        let size = self.size();
        if !font_ready() {
            w.notes.push(format!(
                "{stem}.png/.svg skipped: no TrueType font for the labels (install fonts-dejavu-core)"
            ));
            return Ok(w);
        }
        let png = dir.join(format!("{stem}.png"));
        {
            let root = BitMapBackend::new(&png, size).into_drawing_area();
            self.draw(&root)
                .map_err(|e| format!("{}: {e}", png.display()))?;
            root.present()
                .map_err(|e| format!("{}: {e}", png.display()))?;
        }
        w.files.push(png);
        let svg = dir.join(format!("{stem}.svg"));
        {
            let root = SVGBackend::new(&svg, size).into_drawing_area();
            self.draw(&root)
                .map_err(|e| format!("{}: {e}", svg.display()))?;
            root.present()
                .map_err(|e| format!("{}: {e}", svg.display()))?;
        }
        w.files.push(svg);
        Ok(w)
    }

    fn write_csv(&self, path: &Path) -> Result<(), csv::Error> {
        let mut wr = csv::Writer::from_path(path)?;
        let mut any = false;
        for p in &self.panels {
            for s in &p.series {
                for pt in &s.points {
                    any = true;
                    wr.serialize(CsvRow {
                        panel: &p.title,
                        series: &s.name,
                        x: pt.x,
                        y: pt.y,
                        y_lo: pt.lo,
                        y_hi: pt.hi,
                        repeats: pt.n,
                        repeats_asked: pt.asked,
                    })?;
                }
            }
        }
        if !any {
            wr.write_record([
                "panel",
                "series",
                "x",
                "y",
                "y_lo",
                "y_hi",
                "repeats",
                "repeats_asked",
            ])?;
        }
        wr.flush()?;
        Ok(())
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (rows, cols) = self.grid();
        let (grid, notes) = root.split_vertically(PANEL_H * rows as u32);
        let areas = grid.split_evenly((rows, cols));
        let legend_w = self.legend_w();
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            draw_panel(panel, area, legend_w)
                .map_err(|e| format!("panel `{}`: {e}", panel.title))?;
        }
        for (i, line) in self.notes.iter().enumerate() {
            notes
                .draw_text(
                    line,
                    &("sans-serif", 13).into_font().color(&BLACK),
                    (10, i as i32 * NOTE_H as i32 + 2),
                )
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Axis range with a margin; a degenerate range is widened.
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-9 {
        // One value: put it in the middle (or on the floor at zero).
        let d = lo.abs().max(1.0) * 0.1;
        if !(from_zero && lo >= 0.0 && lo < d) {
            lo -= d;
        }
        hi += d;
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad)
}

/// A linear f64 axis whose ticks are exactly the ones given (plotters'
/// own f64 axis picks its own, and its key-point wrapper cannot take a
/// label formatter).
#[derive(Clone)]
struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Axis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        if self.hi == self.lo {
            return (limit.0 + limit.1) / 2;
        }
        let f = (v - self.lo) / (self.hi - self.lo);
        limit.0 + ((limit.1 - limit.0) as f64 * f + 1e-3).floor() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }
}

/// A round step (1, 2 or 5 × 10^k) giving about `count` ticks over `span`.
fn nice_step(span: f64, count: f64) -> f64 {
    let raw = (span / count).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    }
}

/// Ticks at multiples of a round step inside `lo..=hi`.
fn even_ticks(lo: f64, hi: f64, count: f64) -> Vec<f64> {
    let step = nice_step(hi - lo, count);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Decimals that tell the ticks apart: none when every tick is a whole
/// number (fan-in `50`, QCT `4000`), else as many as the smallest gap needs.
pub fn tick_decimals(ticks: &[f64]) -> usize {
    if ticks.iter().all(|t| (t - t.round()).abs() < 1e-9) {
        return 0;
    }
    let gap = ticks
        .windows(2)
        .map(|w| (w[1] - w[0]).abs())
        .filter(|g| *g > 1e-12)
        .fold(f64::INFINITY, f64::min);
    let gap = if gap.is_finite() { gap } else { 1.0 };
    let mut d = (-gap.log10()).ceil().max(0.0) as usize;
    // Enough to show every tick as written (0.25 needs 2 where 0.05 gaps need 2).
    while d < 6
        && ticks
            .iter()
            .any(|t| (t * 10f64.powi(d as i32) - (t * 10f64.powi(d as i32)).round()).abs() > 1e-6)
    {
        d += 1;
    }
    d
}

/// `v` with `decimals` decimals.
pub fn tick_label(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    // "-0" reads oddly on an axis.
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_owned()
    } else {
        s
    }
}

fn draw_panel<DB: DrawingBackend>(
    p: &Panel,
    area: &DrawingArea<DB, Shift>,
    legend_w: u32,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let (plot_area, legend_area) = area.split_horizontally(PANEL_W);
    let pts = || p.series.iter().flat_map(|s| s.points.iter());
    let given = p.x_ticks.iter().flatten().copied();
    let xs = range(pts().map(|q| q.x).chain(given), false);
    let ys = range(
        pts().flat_map(|q| [Some(q.y), q.lo, q.hi].into_iter().flatten()),
        true,
    );
    let x_ticks = match &p.x_ticks {
        // Ticks outside the axis would be drawn outside the panel.
        Some(t) => t
            .iter()
            .copied()
            .filter(|v| (xs.0..=xs.1).contains(v))
            .collect(),
        None => even_ticks(xs.0, xs.1, 8.0),
    };
    let y_ticks = even_ticks(ys.0, ys.1, 8.0);
    let (xd, yd) = (tick_decimals(&x_ticks), tick_decimals(&y_ticks));
    let x_fmt = move |v: &f64| tick_label(*v, xd);
    let y_fmt = move |v: &f64| tick_label(*v, yd);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(&p.title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            Axis {
                lo: xs.0,
                hi: xs.1,
                ticks: x_ticks,
            },
            Axis {
                lo: ys.0,
                hi: ys.1,
                ticks: y_ticks,
            },
        )?;
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", 13))
        .draw()?;
    // Series with bars at the same x are set a little apart, so that one's
    // bar does not hide another's.
    let k = p.series.len() as f64;
    let dodge = (xs.1 - xs.0) * 0.008;
    for (i, s) in p.series.iter().enumerate() {
        let c = colour(i);
        let dx = if s.points.iter().any(|q| q.lo.is_some()) {
            (i as f64 - (k - 1.0) / 2.0) * dodge
        } else {
            0.0
        };
        chart.draw_series(LineSeries::new(
            s.points.iter().map(|q| (q.x + dx, q.y)),
            c.stroke_width(2),
        ))?;
        if p.markers {
            chart.draw_series(
                s.points
                    .iter()
                    .map(|q| Circle::new((q.x + dx, q.y), 3, c.filled())),
            )?;
        }
        draw_error_bars(&mut chart, &s.points, dx, dodge, c)?;
    }
    draw_legend(p, &legend_area, legend_w)?;
    Ok(())
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Axis, Axis>>;

fn draw_error_bars<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    points: &[Point],
    dx: f64,
    cap: f64,
    c: RGBColor,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    for q in points {
        let (Some(lo), Some(hi)) = (q.lo, q.hi) else {
            continue;
        };
        let x = q.x + dx;
        for seg in [
            vec![(x, lo), (x, hi)],
            vec![(x - cap, lo), (x + cap, lo)],
            vec![(x - cap, hi), (x + cap, hi)],
        ] {
            chart.draw_series(std::iter::once(PathElement::new(seg, c.stroke_width(1))))?;
        }
    }
    Ok(())
}

/// The legend in its own strip right of the plot: it never covers data.
fn draw_legend<DB: DrawingBackend>(
    p: &Panel,
    area: &DrawingArea<DB, Shift>,
    width: u32,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    if width == 0 {
        return Ok(());
    }
    let font = ("sans-serif", LEGEND_FONT).into_font().color(&BLACK);
    for (i, s) in p.series.iter().enumerate() {
        let y = 40 + i as i32 * (LEGEND_FONT as i32 + 7);
        let c = colour(i);
        area.draw(&PathElement::new(vec![(4, y), (24, y)], c.stroke_width(2)))?;
        area.draw_text(&s.name, &font, (30, y - LEGEND_FONT as i32 / 2 - 1))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(x: f64, y: f64, lo: f64, hi: f64) -> Point {
        Point {
            lo: Some(lo),
            hi: Some(hi),
            n: Some(3),
            asked: Some(5),
            ..Point::at(x, y)
        }
    }

    fn panel(t: &str) -> Panel {
        Panel {
            title: t.into(),
            x_label: "fan-in".into(),
            y_label: "QCT (us)".into(),
            series: vec![
                Series {
                    name: "dctcp".into(),
                    points: vec![
                        bar(2.0, 1000.0, 900.0, 1100.0),
                        bar(50.0, 4000.0, 3500.0, 4400.0),
                    ],
                },
                Series {
                    name: "tcn (3 of 5 repeats faithful at 50)".into(),
                    points: vec![Point::at(2.0, 800.0), Point::at(50.0, 3000.0)],
                },
            ],
            markers: true,
            x_ticks: Some(vec![2.0, 50.0]),
        }
    }

    #[test]
    fn integer_ticks_print_as_integers() {
        assert_eq!(tick_decimals(&[2.0, 4.0, 8.0, 16.0, 50.0]), 0);
        assert_eq!(tick_decimals(&[0.0, 1000.0, 2000.0, 4000.0]), 0);
        assert_eq!(tick_decimals(&[0.3, 0.5, 0.7]), 1);
        assert_eq!(tick_decimals(&[0.25, 0.5, 0.75]), 2);
        assert_eq!(tick_decimals(&[0.0, 0.05, 0.1]), 2);
        assert_eq!(tick_label(50.0, 0), "50");
        assert_eq!(tick_label(-0.0, 1), "0.0");
        assert_eq!(
            even_ticks(0.0, 4100.0, 8.0),
            vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0, 3500.0, 4000.0]
        );
    }

    #[test]
    fn writes_csv_png_and_svg() {
        let dir = std::env::temp_dir().join(format!("ss-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fig = Figure {
            panels: vec![panel("a"), panel("b"), panel("c")],
            columns: 2,
            notes: vec!["points: median of the faithful repeats; bars: min–max".into()],
        };
        let w = fig.write(&dir, "fig").unwrap();
        // The CSV is written with or without a font: exactly the points.
        let csv = std::fs::read_to_string(dir.join("fig.csv")).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "panel,series,x,y,y_lo,y_hi,repeats,repeats_asked");
        assert_eq!(lines[1], "a,dctcp,2.0,1000.0,900.0,1100.0,3,5");
        assert_eq!(
            lines[3],
            "a,tcn (3 of 5 repeats faithful at 50),2.0,800.0,,,,"
        );
        assert_eq!(lines.len(), 1 + 3 * 4);
        if !font_ready() {
            eprintln!(
                "no TrueType font here (install fonts-dejavu-core): only the skip is checked"
            );
            assert!(w.files.len() == 1 && w.notes[0].contains("fonts-dejavu-core"));
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        assert_eq!(w.files.len(), 3);
        for f in &w.files[1..] {
            assert!(
                std::fs::metadata(f).unwrap().len() > 1000,
                "{} too small",
                f.display()
            );
        }
        let png = std::fs::read(dir.join("fig.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let svg = std::fs::read_to_string(dir.join("fig.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("dctcp"));
        let texts: Vec<&str> = svg.lines().map(str::trim).collect();
        assert!(
            texts.contains(&"50") && texts.contains(&"4000"),
            "integer ticks"
        );
        assert!(
            !texts.iter().any(|t| t.ends_with(".0")),
            "no `50.0`, `4000.0`"
        );
        assert!(
            svg.contains("median of the faithful repeats"),
            "notes drawn"
        );
        // The legend has a strip of its own: wider than the panels alone.
        let (w_px, _) = fig.size();
        assert_eq!(w_px, 2 * (PANEL_W + fig.legend_w()));
        assert!(fig.legend_w() > 200);
        // An empty panel (no data yet) still draws.
        Figure::single(Panel {
            series: vec![],
            x_ticks: None,
            ..panel("empty")
        })
        .write(&dir, "empty")
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
