//! Line charts with plotters, each written as PNG and SVG.
//!
//! A figure is a grid of panels; a panel is x/y labels and named series
//! (one colour per series, the same across panels so an AQM keeps its colour).
//! Text needs a TrueType font: the first of [`FONT_CANDIDATES`] found is
//! registered as `sans-serif` (Debian package `fonts-dejavu-core`). plotters
//! measures every label with it, for the SVG too (checked: without a font
//! the SVG fails with `FontUnavailable`), so without one no figure is
//! written and [`Figure::write`] says why; the results stay complete.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

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

/// One named line.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
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
}

/// Panels in a grid.
#[derive(Clone, Debug)]
pub struct Figure {
    /// Panels, row by row.
    pub panels: Vec<Panel>,
    /// Panels per row.
    pub columns: usize,
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

impl Figure {
    /// A figure of one panel.
    pub fn single(panel: Panel) -> Self {
        Figure {
            panels: vec![panel],
            columns: 1,
        }
    }

    fn size(&self) -> (u32, u32) {
        let cols = self.columns.clamp(1, self.panels.len().max(1));
        let rows = self.panels.len().div_ceil(cols).max(1);
        (PANEL_W * cols as u32, PANEL_H * rows as u32)
    }

    /// Writes `<stem>.png` (when a font is available) and `<stem>.svg`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<Written, String> {
        let mut w = Written::default();
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

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let cols = self.columns.clamp(1, self.panels.len().max(1));
        let rows = self.panels.len().div_ceil(cols).max(1);
        let areas = root.split_evenly((rows, cols));
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            draw_panel(panel, area).map_err(|e| format!("panel `{}`: {e}", panel.title))?;
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
        hi = lo + lo.abs().max(1.0) * 0.1;
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad)
}

fn draw_panel<DB: DrawingBackend>(
    p: &Panel,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let xs = range(
        p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0)),
        false,
    );
    let ys = range(
        p.series.iter().flat_map(|s| s.points.iter().map(|q| q.1)),
        true,
    );
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(xs.0..xs.1, ys.0..ys.1)?;
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .label_style(("sans-serif", 13))
        .draw()?;
    for (i, s) in p.series.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        if p.markers {
            chart.draw_series(s.points.iter().map(|&pt| Circle::new(pt, 3, c.filled())))?;
        }
    }
    if !p.series.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_png_and_svg() {
        let dir = std::env::temp_dir().join(format!("ss-plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let panel = |t: &str| Panel {
            title: t.into(),
            x_label: "load".into(),
            y_label: "FCT (normalised)".into(),
            series: vec![
                Series {
                    name: "dctcp".into(),
                    points: vec![(0.3, 1.0), (0.5, 1.0)],
                },
                Series {
                    name: "tcn".into(),
                    points: vec![(0.3, 0.8), (0.5, 0.9)],
                },
            ],
            markers: true,
        };
        let fig = Figure {
            panels: vec![panel("a"), panel("b"), panel("c")],
            columns: 2,
        };
        let w = fig.write(&dir, "fig").unwrap();
        if !font_ready() {
            eprintln!(
                "no TrueType font here (install fonts-dejavu-core): only the skip is checked"
            );
            assert!(w.files.is_empty() && w.notes[0].contains("fonts-dejavu-core"));
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        assert_eq!(w.files.len(), 2);
        for f in &w.files {
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
        // An empty panel (no data yet) still draws.
        Figure::single(Panel {
            series: vec![],
            ..panel("empty")
        })
        .write(&dir, "empty")
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
