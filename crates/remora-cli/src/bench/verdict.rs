//! Whether each row meets its target: the target text a row carries (`≤ 1.20 (raw shm
//! ping-pong)`, `≥ 0.80 (memcpy)`, `≤ 1 µs (…)`, `reported …`) is read here, the row's
//! ratio (or, for a target with a unit, its own figure) held against it, and every row kept
//! for the summary at the end and for `--json`.

use std::sync::Mutex;

/// One measured row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) ours: String,
    pub(crate) reference: String,
    pub(crate) ratio: f64,
    pub(crate) target: String,
    /// `Some(true)` met, `Some(false)` missed, `None` reported without a target.
    pub(crate) met: Option<bool>,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

/// A figure such as `357 ns`, `1.2 µs`, `25.08 GB/s` in base units (seconds, bytes/s).
pub(crate) fn figure(text: &str) -> Option<f64> {
    let mut parts = text.split_whitespace();
    let v: f64 = parts.next()?.parse().ok()?;
    let scale = match parts.next()? {
        "ns" => 1e-9,
        "µs" | "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "GB/s" => 1e9,
        "MB/s" => 1e6,
        _ => return None,
    };
    Some(v * scale)
}

/// Whether `ratio` (or `ours`, for a target with a unit) meets `target`; `None` when the
/// target sets no bound. A ratio is judged as the table prints it, to two decimals: a row
/// reading `1.00` against `≤ 1.00` is met (a difference below the last printed digit is
/// far inside the machine's noise, and a verdict the printed figures contradict misleads).
pub(crate) fn judge(target: &str, ours: &str, ratio: f64) -> Option<bool> {
    let t = target.trim();
    let (le, rest) = if let Some(r) = t.strip_prefix('≤') {
        (true, r)
    } else if let Some(r) = t.strip_prefix('≥') {
        (false, r)
    } else {
        return None;
    };
    let mut words = rest.split_whitespace();
    let bound: f64 = words.next()?.parse().ok()?;
    let value = match words.next() {
        Some(unit @ ("ns" | "µs" | "us" | "ms" | "s" | "GB/s" | "MB/s")) => {
            let limit = figure(&format!("{bound} {unit}"))?;
            return figure(ours).map(|v| if le { v <= limit } else { v >= limit });
        }
        _ => (ratio * 100.0).round() / 100.0,
    };
    if !value.is_finite() {
        return Some(false);
    }
    Some(if le { value <= bound } else { value >= bound })
}

/// Keep a row; returns its verdict word for the table.
pub(crate) fn record(name: &str, ours: &str, reference: &str, ratio: f64, target: &str) -> &'static str {
    let met = judge(target, ours, ratio);
    let row = Row {
        name: name.trim().to_string(),
        ours: ours.to_string(),
        reference: reference.to_string(),
        ratio,
        target: target.to_string(),
        met,
    };
    ROWS.lock().unwrap_or_else(|p| p.into_inner()).push(row);
    match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "-",
    }
}

/// Every row so far.
pub(crate) fn rows() -> Vec<Row> {
    ROWS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The summary table: every row with a target, and the count met.
pub(crate) fn summary() {
    let rows = rows();
    let judged: Vec<&Row> = rows.iter().filter(|r| r.met.is_some()).collect();
    if judged.is_empty() {
        return;
    }
    let met = judged.iter().filter(|r| r.met == Some(true)).count();
    println!();
    println!("summary: {met} of {} targets met", judged.len());
    for r in judged {
        let word = if r.met == Some(true) { "met   " } else { "MISSED" };
        println!("  {word}  {:<36} ratio {:>6.2}  target {}", r.name, r.ratio, r.target);
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Every row as a JSON array: name, ours, reference, ratio, target, verdict
/// (`"met"`, `"missed"` or `null`).
pub(crate) fn json() -> String {
    let items: Vec<String> = rows()
        .iter()
        .map(|r| {
            let ratio = if r.ratio.is_finite() { format!("{}", r.ratio) } else { "null".into() };
            let verdict = match r.met {
                Some(true) => "\"met\"",
                Some(false) => "\"missed\"",
                None => "null",
            };
            format!(
                "  {{\"name\": {}, \"ours\": {}, \"reference\": {}, \"ratio\": {ratio}, \"target\": {}, \"verdict\": {verdict}}}",
                json_string(&r.name),
                json_string(&r.ours),
                json_string(&r.reference),
                json_string(&r.target)
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_as_the_rows_write_them() {
        assert_eq!(judge("≤ 1.20 (raw shm ping-pong)", "52 ns", 1.06), Some(true));
        assert_eq!(judge("≤ 1.20 (raw shm ping-pong)", "52 ns", 1.32), Some(false));
        assert_eq!(judge("≥ 0.80 (memcpy)", "25 GB/s", 0.97), Some(true));
        assert_eq!(judge("≥ 0.80 (memcpy)", "25 GB/s", 0.30), Some(false));
        assert_eq!(judge("≤ 1 µs (raw spin-then-block)", "357 ns", 1.05), Some(true));
        assert_eq!(judge("≤ 1 µs (raw spin-then-block)", "1.2 µs", 0.5), Some(false));
        assert_eq!(judge("reported (memcpy 8 B)", "1 µs", 9.0), None);
        assert_eq!(judge("(SISCI sequence start+check)", "0.2 µs", 1.1), None);
        assert_eq!(judge("≤ 2 (rsm map store)", "x", f64::NAN), Some(false));
        // Judged as printed: 1.004 reads 1.00, 0.796 reads 0.80; 1.006 reads 1.01.
        assert_eq!(judge("≤ 1.00 (N unicast stores + flush)", "45 ns", 1.004), Some(true));
        assert_eq!(judge("≥ 0.80 (memcpy)", "9 GB/s", 0.796), Some(true));
        assert_eq!(judge("≤ 1.00 (N unicast stores + flush)", "45 ns", 1.006), Some(false));
        assert_eq!(judge("≥ 0.80 (memcpy)", "9 GB/s", 0.794), Some(false));
    }

    #[test]
    fn json_escapes_and_marks_verdicts() {
        record("a \"quoted\" row", "1 ns", "1 ns", 1.0, "≤ 1.20 (x)");
        let j = json();
        assert!(j.contains("\"name\": \"a \\\"quoted\\\" row\""), "{j}");
        assert!(j.contains("\"verdict\": \"met\""), "{j}");
    }
}
