//! The pictures: for each strategy, a panel of offered load, upstream load,
//! goodput and latency over time, drawn as SVG with plotters.

use crate::metrics::{quantile, Bucket};
use plotters::{
    chart::DualCoordChartContext,
    coord::{types::RangedCoordf64, Shift},
    prelude::*,
};
use std::{io, path::Path};

/// One panel: a strategy's run.
pub(crate) struct Panel<'a> {
    pub(crate) label: &'a str,
    pub(crate) buckets: &'a [Bucket],
}

/// The colours of the series, the same in every picture.
const OFFERED: RGBColor = RGBColor(31, 119, 180);
const LOAD: RGBColor = RGBColor(214, 39, 40);
const GOODPUT: RGBColor = RGBColor(44, 160, 44);
const TURNED_AWAY: RGBColor = RGBColor(148, 103, 189);
const LATENCY: RGBColor = RGBColor(60, 60, 60);
/// The shades of the faults, in turn.
const SHADES: [RGBColor; 2] = [RGBColor(214, 39, 40), RGBColor(255, 127, 14)];

/// A fault's time in the picture: from, until (seconds), and what.
pub(crate) type Fault<'a> = (f64, f64, &'a str);

/// Writes `panels` one above the other under `title` to `path`, `faults`
/// shaded, latency read at quantile `q` (0.99 for the 99th percentile),
/// each bucket `width_secs` wide.
pub(crate) fn write_svg(
    path: &Path,
    title: &str,
    panels: &[Panel<'_>],
    faults: &[Fault<'_>],
    q: f64,
    width_secs: f64,
) -> io::Result<()> {
    let height = 340 * panels.len() as u32 + 40;
    let root = SVGBackend::new(path, (960, height)).into_drawing_area();
    root.fill(&WHITE).map_err(io::Error::other)?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(io::Error::other)?;
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        draw_panel(area, panel, faults, q, width_secs).map_err(io::Error::other)?;
    }
    root.present().map_err(io::Error::other)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), DrawingAreaErrorKind<io::Error>>;

/// The rates of a panel: each series as `(seconds, per second)` points.
struct Rates {
    offered: Vec<(f64, f64)>,
    load: Vec<(f64, f64)>,
    goodput: Vec<(f64, f64)>,
    turned_away: Vec<(f64, f64)>,
    latency: Vec<(f64, f64)>,
}

impl Rates {
    fn of(buckets: &[Bucket], q: f64, width: f64) -> Self {
        let series = |f: fn(&Bucket) -> u32| -> Vec<(f64, f64)> {
            let at = |i: usize| i as f64 * width;
            buckets
                .iter()
                .enumerate()
                .map(|(i, b)| (at(i), f64::from(f(b)) / width))
                .collect()
        };
        let latency = buckets
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                let mut values = b.latencies_ms.clone();
                quantile(&mut values, q).map(|ms| (i as f64 * width, ms))
            })
            .collect();
        Self {
            offered: series(|b| b.offered),
            load: series(|b| b.arrivals),
            goodput: series(|b| b.good),
            turned_away: series(|b| b.turned_away),
            latency,
        }
    }

    fn max(points: &[(f64, f64)]) -> f64 {
        points.iter().map(|p| p.1).fold(0.0, f64::max)
    }
}

/// The chart of one panel: time across, rates on the left, latency on
/// the right.
type Chart<'a, 'b> = DualCoordChartContext<'a, SVGBackend<'b>, Axes, Axes>;
type Axes = Cartesian2d<RangedCoordf64, RangedCoordf64>;

fn draw_panel(
    area: &Area<'_>,
    panel: &Panel<'_>,
    faults: &[Fault<'_>],
    q: f64,
    width: f64,
) -> Drawn {
    let rates = Rates::of(panel.buckets, q, width);
    let x_max = (panel.buckets.len() as f64 * width).max(1.0);
    let highest = [
        &rates.offered,
        &rates.load,
        &rates.goodput,
        &rates.turned_away,
    ]
    .into_iter()
    .map(|s| Rates::max(s))
    .fold(1.0, f64::max);
    let (y_max, latency_max) = (highest * 1.1, Rates::max(&rates.latency).max(1.0) * 1.1);
    let mut chart = ChartBuilder::on(area)
        .caption(panel.label, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .right_y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?
        .set_secondary_coord(0.0..x_max, 0.0..latency_max);
    let latency_name = format!("p{} latency of calls (ms)", q * 100.0);
    draw_axes(&mut chart, &latency_name)?;
    draw_faults(&mut chart, faults, y_max)?;
    draw_series(&mut chart, rates, latency_name)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
}

fn draw_axes(chart: &mut Chart<'_, '_>, latency_name: &str) -> Drawn {
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("per second")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(WHITE)
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc(latency_name)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
}

/// A shaded band and a label for each fault, up to `y_max`.
fn draw_faults(chart: &mut Chart<'_, '_>, faults: &[Fault<'_>], y_max: f64) -> Drawn {
    for (&(from, until, what), shade) in faults.iter().zip(SHADES.iter().cycle()) {
        let band = Rectangle::new([(from, 0.0), (until, y_max)], shade.mix(0.1).filled());
        let at = (from + 0.5, y_max * 0.97);
        let label = Text::new(what.to_owned(), at, ("sans-serif", 12).into_font());
        chart.draw_series([band])?;
        chart.draw_series([label])?;
    }
    Ok(())
}

/// The rates as lines on the left axis, the latency on the right; the
/// calls turned away only when there were some.
fn draw_series(chart: &mut Chart<'_, '_>, rates: Rates, latency_name: String) -> Drawn {
    let legend = |colour: RGBColor, width: u32| {
        move |(x, y): (i32, i32)| {
            PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(width))
        }
    };
    for (points, colour, name) in [
        (rates.offered, OFFERED, "offered (calls/s)"),
        (rates.load, LOAD, "upstream load (attempts/s)"),
        (rates.goodput, GOODPUT, "goodput (good calls/s)"),
        (
            rates.turned_away,
            TURNED_AWAY,
            "turned away by the client (calls/s)",
        ),
    ] {
        if Rates::max(&points) == 0.0 && colour == TURNED_AWAY {
            continue;
        }
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(name)
            .legend(legend(colour, 2));
    }
    chart
        .draw_secondary_series(LineSeries::new(rates.latency, LATENCY.stroke_width(1)))?
        .label(latency_name)
        .legend(legend(LATENCY, 1));
    Ok(())
}
