//! `remora bench --plot DIR`: for every family of rows measured at several message sizes
//! (`SCIMemCpy 64 KiB`, `SCIMemCpy 256 KiB`, …), an SVG of Remora's figure and its
//! reference against the size, one file per family.

use super::verdict::Row;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The message size a row's name carries (`64 KiB`, `16 MiB`, `8 B`), and the name with the
/// size taken out (the family).
fn size_of(name: &str) -> Option<(u64, String)> {
    let words: Vec<&str> = name.split_whitespace().collect();
    for i in 0..words.len().saturating_sub(1) {
        let unit = words[i + 1].trim_end_matches(',');
        let scale = match unit {
            "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => continue,
        };
        if let Ok(n) = words[i].parse::<u64>() {
            let mut family: Vec<&str> = words.clone();
            family.drain(i..=i + 1);
            return Some((n * scale, family.join(" ")));
        }
    }
    None
}

/// A figure's value and its kind (`GB/s` or `µs`).
fn value(text: &str) -> Option<(f64, &'static str)> {
    let mut w = text.split_whitespace();
    let v: f64 = w.next()?.parse().ok()?;
    match w.next()? {
        "GB/s" => Some((v, "GB/s")),
        "MB/s" => Some((v / 1e3, "GB/s")),
        "ns" => Some((v / 1e3, "µs")),
        "µs" | "us" => Some((v, "µs")),
        "ms" => Some((v * 1e3, "µs")),
        _ => None,
    }
}

fn slug(s: &str) -> String {
    let s: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-")
}

type Points = Vec<(u64, f64, f64)>;

/// Draw every family of `rows` with two sizes or more into `dir`; the files written.
pub(crate) fn plots(rows: &[Row], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut families: BTreeMap<String, (&'static str, Points)> = BTreeMap::new();
    for r in rows {
        let (Some((size, family)), Some((ours, unit)), Some((theirs, unit2))) =
            (size_of(&r.name), value(&r.ours), value(&r.reference))
        else {
            continue;
        };
        if unit != unit2 {
            continue;
        }
        families.entry(family).or_insert((unit, Vec::new())).1.push((size, ours, theirs));
    }
    let mut written = Vec::new();
    for (family, (unit, mut pts)) in families {
        if pts.len() < 2 {
            continue;
        }
        pts.sort_by_key(|p| p.0);
        let path = dir.join(format!("{}.svg", slug(&family)));
        draw(&path, &family, unit, &pts).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn draw(path: &Path, title: &str, unit: &str, pts: &Points) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let (x0, x1) = (pts[0].0 as f64, pts[pts.len() - 1].0 as f64);
    let ymax = pts.iter().map(|p| p.1.max(p.2)).fold(0.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title} (remora beside its reference)"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x0..x1).log_scale(), 0.0..ymax.max(f64::MIN_POSITIVE))?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc(if unit == "GB/s" { "bandwidth (GB/s)" } else { "latency (µs)" })
        .draw()?;
    let ours: Vec<(f64, f64)> = pts.iter().map(|p| (p.0 as f64, p.1)).collect();
    let theirs: Vec<(f64, f64)> = pts.iter().map(|p| (p.0 as f64, p.2)).collect();
    chart
        .draw_series(LineSeries::new(ours, RED.stroke_width(2)))?
        .label("remora")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .draw_series(LineSeries::new(theirs, BLUE.stroke_width(2)))?
        .label("reference")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, ours: &str, reference: &str) -> Row {
        Row {
            name: name.into(),
            ours: ours.into(),
            reference: reference.into(),
            ratio: 1.0,
            target: String::new(),
            met: None,
        }
    }

    #[test]
    fn families_by_size_become_one_svg_each() {
        assert_eq!(size_of("SCIMemCpy 64 KiB"), Some((64 << 10, "SCIMemCpy".into())));
        assert_eq!(size_of("DMA 4096 KiB, 1 per post"), Some((4 << 20, "DMA 1 per post".into())));
        assert_eq!(size_of("pio one-way latency"), None);
        let rows = vec![
            row("SCIMemCpy 64 KiB", "118.8 GB/s", "120.9 GB/s"),
            row("SCIMemCpy 1024 KiB", "54.8 GB/s", "55.1 GB/s"),
            row("SCIMemCpy 16384 KiB", "29.2 GB/s", "31.6 GB/s"),
            row("connect + map", "32.2 µs", "1.6 µs"),
        ];
        let dir = tempfile::tempdir().unwrap();
        let files = plots(&rows, dir.path()).unwrap();
        assert_eq!(files.len(), 1);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("remora") && svg.contains("reference"), "{svg}");
    }
}
