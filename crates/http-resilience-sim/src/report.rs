//! A scenario's result as a person reads it: a table beside the published
//! figures, and a picture.

use crate::{
    metrics::Bucket,
    plot::{self, Panel},
};
use std::{
    fmt, io,
    path::{Path, PathBuf},
    time::Duration,
};

/// What one scenario printed and drew: a table of its figures beside the
/// published ones, notes on where and why they differ, and the time series
/// of each strategy for its picture.
#[derive(Debug, Clone)]
pub struct Report {
    pub(crate) name: &'static str,
    pub(crate) title: String,
    pub(crate) source: &'static str,
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
    pub(crate) notes: Vec<String>,
    pub(crate) runs: Vec<(String, Vec<Bucket>)>,
    pub(crate) quantile: f64,
    /// The width of the record's buckets.
    pub(crate) bucket: Duration,
    /// The record's buckets drawn as one point of the picture: a percentile
    /// of a second's calls is noisy where a few seconds' is not.
    pub(crate) merge: usize,
    /// When the callers stopped: the picture ends there.
    pub(crate) until: Duration,
    /// The faults, shaded in the picture: from, until, and what.
    pub(crate) faults: Vec<(Duration, Duration, &'static str)>,
}

// ===== impl Report =====

impl Report {
    /// The scenario's name, as the command line has it (`outage`); also the
    /// stem of its picture's file name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The table of figures, as Markdown.
    pub fn table(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut out = String::new();
        out.push_str(&line(&self.header));
        out.push_str(&line(&vec!["---".to_owned(); self.header.len()]));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    /// Writes the picture, `<name>.svg` in `dir` (made if missing), and
    /// returns its path.
    ///
    /// # Errors
    ///
    /// The error of making the directory or of writing the file.
    pub fn write_svg(&self, dir: &Path) -> io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{}.svg", self.name));
        let merge = self.merge.max(1);
        let shown = (self.until.as_nanos() / self.bucket.as_nanos().max(1)) as usize;
        let merged: Vec<Vec<Bucket>> = self
            .runs
            .iter()
            .map(|(_, buckets)| {
                let shown = &buckets[..shown.min(buckets.len())];
                shown.chunks(merge).map(Bucket::merged).collect()
            })
            .collect();
        let panels: Vec<Panel<'_>> = self
            .runs
            .iter()
            .zip(&merged)
            .map(|((label, _), buckets)| Panel { label, buckets })
            .collect();
        let faults: Vec<(f64, f64, &str)> = self
            .faults
            .iter()
            .map(|&(from, until, what)| (from.as_secs_f64(), until.as_secs_f64(), what))
            .collect();
        let width = self.bucket.as_secs_f64() * merge as f64;
        plot::write_svg(&path, &self.title, &panels, &faults, self.quantile, width)?;
        Ok(path)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "## {}\n", self.title)?;
        writeln!(f, "Published: {}\n", self.source)?;
        write!(f, "{}", self.table())?;
        for note in &self.notes {
            writeln!(f, "\n- {note}")?;
        }
        Ok(())
    }
}

/// A ratio as a multiple, `64.0x`.
pub(crate) fn times(value: f64) -> String {
    format!("{value:.2}x")
}

/// A share as a percentage, `12.5 %`.
pub(crate) fn percent(value: f64) -> String {
    format!("{:.1} %", value * 100.0)
}

/// Milliseconds, `74 ms`.
pub(crate) fn millis(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ms| format!("{ms:.0} ms"))
}
