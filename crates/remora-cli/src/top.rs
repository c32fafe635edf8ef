//! `remora top`: a live view of this host's nodes, refreshed once a second — each node with
//! its sessions, segments, connections, maps and DMA rate; every segment with its size,
//! state and importers; every link to a node of another host with its state, round trip and
//! traffic rates. `q` or Ctrl-C leaves. `--once` prints one frame as text (for scripts).

use ratatui::backend::{Backend, TestBackend};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Row, Table};
use ratatui::{Frame, Terminal};
use remora_client::{Config, Session};
use remora_proto::{paths, NodeStatus, Reply, Request, Role};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One look at every node of this host, with the previous one for rates.
struct View {
    now: Vec<NodeStatus>,
    rates: HashMap<(u32, u32), (f64, f64)>,
    dma_rates: HashMap<u32, f64>,
}

fn look(cfg: &Config) -> Vec<NodeStatus> {
    let mut all = Vec::new();
    for node in paths::nodes_in(&cfg.runtime_dir) {
        if let Ok((Reply::Status(st), _)) =
            Session::open_control(&cfg.with_node(node)).and_then(|s| s.request(Request::Status, &[]))
        {
            all.push(*st);
        }
    }
    all
}

impl View {
    fn new(now: Vec<NodeStatus>, before: Option<(&[NodeStatus], Duration)>) -> View {
        let mut rates = HashMap::new();
        let mut dma_rates = HashMap::new();
        if let Some((old, dt)) = before {
            let secs = dt.as_secs_f64().max(1e-3);
            for st in &now {
                let Some(prev) = old.iter().find(|o| o.node == st.node && o.pid == st.pid) else { continue };
                dma_rates.insert(st.node, st.dma_bytes.saturating_sub(prev.dma_bytes) as f64 / secs);
                for p in &st.peers {
                    if let Some(q) = prev.peers.iter().find(|q| q.node == p.node) {
                        let rx = p.bytes_in.saturating_sub(q.bytes_in) as f64 / secs;
                        let tx = p.bytes_out.saturating_sub(q.bytes_out) as f64 / secs;
                        rates.insert((st.node, p.node), (rx, tx));
                    }
                }
            }
        }
        View { now, rates, dma_rates }
    }
}

fn human(bytes_per_s: f64) -> String {
    match bytes_per_s {
        b if b >= 1e9 => format!("{:.1} GB/s", b / 1e9),
        b if b >= 1e6 => format!("{:.1} MB/s", b / 1e6),
        b if b >= 1e3 => format!("{:.1} kB/s", b / 1e3),
        b => format!("{b:.0} B/s"),
    }
}

fn draw(f: &mut Frame, v: &View, dir: &str) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let areas = Layout::vertical([
        Constraint::Percentage(30),
        Constraint::Percentage(40),
        Constraint::Percentage(30),
    ])
    .split(f.area());
    let nodes: Vec<Row> = v
        .now
        .iter()
        .map(|st| {
            let sessions = st.sessions.iter().filter(|s| s.role != Role::Control).count();
            Row::new(vec![
                st.node.to_string(),
                st.pid.to_string(),
                format!("{}s", st.uptime_s),
                sessions.to_string(),
                st.segments.len().to_string(),
                st.connections.len().to_string(),
                st.maps.len().to_string(),
                v.dma_rates.get(&st.node).map_or("-".into(), |r| human(*r)),
                st.peers.len().to_string(),
            ])
        })
        .collect();
    let widths = [Constraint::Length(6); 9];
    let t = Table::new(nodes, widths)
        .header(Row::new(["node", "pid", "up", "sess", "segs", "conns", "maps", "DMA", "peers"]).style(bold))
        .block(
            Block::default().borders(Borders::ALL).title(format!(" remora top: nodes in {dir} (q quits) ")),
        );
    f.render_widget(t, areas[0]);
    let segs: Vec<Row> = v
        .now
        .iter()
        .flat_map(|st| {
            st.segments.iter().map(move |s| {
                Row::new(vec![
                    st.node.to_string(),
                    s.id.map_or("private".into(), |i| format!("{i:#x}")),
                    s.size.to_string(),
                    s.state.clone(),
                    s.importers.to_string(),
                    format!("#{}", s.owner),
                ])
            })
        })
        .collect();
    let widths = [
        Constraint::Length(6),
        Constraint::Length(12),
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Min(8),
    ];
    let t = Table::new(segs, widths)
        .header(Row::new(["node", "id", "bytes", "state", "importers", "owner"]).style(bold))
        .block(Block::default().borders(Borders::ALL).title(" segments "));
    f.render_widget(t, areas[1]);
    let peers: Vec<Row> = v
        .now
        .iter()
        .flat_map(|st| {
            st.peers.iter().map(move |p| {
                let (rx, tx) = v.rates.get(&(st.node, p.node)).copied().unwrap_or((0.0, 0.0));
                Row::new(vec![
                    format!("{} -> {}", st.node, p.node),
                    p.addr.clone(),
                    p.state.clone(),
                    format!("{} µs", p.rtt_us),
                    human(rx),
                    human(tx),
                ])
            })
        })
        .collect();
    let widths = [
        Constraint::Length(12),
        Constraint::Length(22),
        Constraint::Length(16),
        Constraint::Length(10),
        Constraint::Length(12),
        Constraint::Length(12),
    ];
    let t = Table::new(peers, widths)
        .header(Row::new(["link", "address", "state", "rtt", "in", "out"]).style(bold))
        .block(Block::default().borders(Borders::ALL).title(" links to other hosts "));
    f.render_widget(t, areas[2]);
}

/// One frame as text, `width` × `height` characters.
fn frame_text(v: &View, dir: &str, width: u16, height: u16) -> Result<String, String> {
    let mut term = Terminal::new(TestBackend::new(width, height)).map_err(|e| e.to_string())?;
    term.draw(|f| draw(f, v, dir)).map_err(|e| e.to_string())?;
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_string()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    Ok(out)
}

/// `remora top [--once]`.
pub fn top(once: bool) -> Result<(), String> {
    let cfg = Config::from_env().map_err(|e| e.to_string())?;
    let dir = cfg.runtime_dir.display().to_string();
    if once {
        let first = look(&cfg);
        let t = Instant::now();
        std::thread::sleep(Duration::from_millis(200));
        let v = View::new(look(&cfg), Some((&first, t.elapsed())));
        print!("{}", frame_text(&v, &dir, 100, 30)?);
        return Ok(());
    }
    let mut term = ratatui::init();
    let result = (|| -> Result<(), String> {
        let mut before: Option<(Vec<NodeStatus>, Instant)> = None;
        loop {
            let now = look(&cfg);
            let v = View::new(now.clone(), before.as_ref().map(|(o, t)| (o.as_slice(), t.elapsed())));
            term.draw(|f| draw(f, &v, &dir)).map_err(|e| e.to_string())?;
            before = Some((now, Instant::now()));
            if crossterm::event::poll(Duration::from_secs(1)).map_err(|e| e.to_string())? {
                if let crossterm::event::Event::Key(k) =
                    crossterm::event::read().map_err(|e| e.to_string())?
                {
                    let ctrl_c = k.modifiers.contains(crossterm::event::KeyModifiers::CONTROL)
                        && k.code == crossterm::event::KeyCode::Char('c');
                    if k.code == crossterm::event::KeyCode::Char('q') || ctrl_c {
                        return Ok(());
                    }
                }
            }
            let _ = term.backend().size();
        }
    })();
    ratatui::restore();
    result
}
