//! The trajectory chart: an inline SVG of the served accuracy per round, the
//! best-ever step line, rejected candidates and rollbacks, as a maud template.

use maud::{Markup, html};

mod front;
pub(super) use front::front;

use super::{PointKind, ReportData};
use crate::views::TrialState;
use emend_core::percent::percent;

/// Coordinates in the SVG, with one decimal like the rest of the chart.
fn f1(x: f64) -> String {
    format!("{x:.1}")
}

/// A "nice" tick step giving at most `max_ticks` intervals over `span`.
pub(super) fn nice_step(span: f64, max_ticks: f64, steps: &[f64]) -> f64 {
    steps.iter().copied().find(|s| span / s <= max_ticks).unwrap_or(*steps.last().expect("steps"))
}

/// The trajectory chart's plot area and scales.
struct Frame {
    w: f64,
    ht: f64,
    ml: f64,
    mt: f64,
    pw: f64,
    ph: f64,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    ystep: f64,
}

impl Frame {
    fn new(d: &ReportData) -> Frame {
        let xs = d.points.iter().map(|p| p.x).chain(d.best_line.iter().map(|b| b.0));
        let x0 = xs.clone().fold(f64::INFINITY, f64::min);
        let x1 = xs.fold(f64::NEG_INFINITY, f64::max);
        let ys: Vec<f64> = d
            .points
            .iter()
            .map(|p| p.accuracy)
            .chain(d.best_line.iter().map(|b| b.1))
            .chain(d.rejected.iter().map(|r| r.accuracy))
            .collect();
        Frame::fit((1040.0, 420.0), (70.0, 24.0, 44.0, 56.0), (x0, x1), &ys)
    }

    /// A plot of `size` (width, height) with margins (left, right, top,
    /// bottom) over `x0..x1` and accuracies `ys`, on nice grid steps.
    fn fit(size: (f64, f64), margins: (f64, f64, f64, f64), (x0, x1): (f64, f64), ys: &[f64]) -> Frame {
        let (w, ht) = size;
        let (ml, mr, mt, mb) = margins;
        let (pw, ph) = (w - ml - mr, ht - mt - mb);
        let x1 = if x1 <= x0 { x0 + 1.0 } else { x1 };
        let (ymin_raw, ymax_raw) =
            ys.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| (lo.min(*y), hi.max(*y)));
        let ystep = nice_step((ymax_raw - ymin_raw).max(0.01), 8.0, &[0.005, 0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25]);
        let mut y0 = ((ymin_raw / ystep) - 1e-9).floor() * ystep;
        let mut y1 = ((ymax_raw / ystep) + 1e-9).ceil() * ystep;
        if y1 - y0 < ystep {
            y1 = y0 + ystep;
        }
        y0 = y0.max(0.0);
        y1 = y1.min(1.0).max(y0 + ystep.min(1.0 - y0).max(1e-6));
        Frame { w, ht, ml, mt, pw, ph, x0, x1, y0, y1, ystep }
    }

    fn px(&self, x: f64) -> f64 {
        self.ml + (x - self.x0) / (self.x1 - self.x0) * self.pw
    }

    fn py(&self, y: f64) -> f64 {
        self.mt + (1.0 - (y - self.y0) / (self.y1 - self.y0)) * self.ph
    }
}

/// The chart section: heading, caption and SVG (a note when no round finished).
pub(super) fn trajectory(d: &ReportData) -> Markup {
    html! {
        h2 #trajectory { "Accuracy over rounds" }
        @if d.points.is_empty() {
            p.muted { "No round has finished yet: run " code { "emend evolve" } "." }
        } @else {
            p.sub {
                "The served strategy's and the best-ever's measured accuracy on the whole task set after each round \
                 (each from that version's recorded evaluation); crosses: candidates the confirm test did not \
                 accept, at their accuracy on the confirm part only (hover for the served strategy's on the same \
                 part). Hover a marker for details."
            }
            (svg(d))
        }
    }
}

fn svg(d: &ReportData) -> Markup {
    let f = Frame::new(d);
    let Frame { w, ht, ml, mt, pw, ph, .. } = f;
    html! {
        svg id="trajectory-chart" class="chart" role="img" width=(w) height=(ht) viewBox={ "0 0 " (w) " " (ht) }
            aria-label="Served accuracy per round" {
            rect x=(ml) y=(mt) width=(pw) height=(ph) fill="#fbfcfe" stroke="#c9d0dc" {}
            (y_grid(&f))
            (x_ticks(&f))
            (axes(&f, "round", "accuracy (full task set)"))
            (lines(d, &f))
            (rejected_markers(d, &f))
            (served_markers(d, &f))
            (legend(ml))
        }
    }
}

/// Horizontal grid lines with the accuracy labels.
fn y_grid(f: &Frame) -> Markup {
    let Frame { ml, pw, y0, y1, ystep, .. } = *f;
    let ny = ((y1 - y0) / ystep).round() as i64;
    let label = |y: f64| percent(y, if ystep < 0.01 { 1 } else { 0 });
    html! {
        @for i in 0..=ny {
            @let y = y0 + i as f64 * ystep;
            @let yy = f.py(y);
            line x1=(ml) y1=(f1(yy)) x2=(f1(ml + pw)) y2=(f1(yy)) stroke="#e3e7ee" {}
            text x=(f1(ml - 8.0)) y=(f1(yy + 4.0)) font-size="12" text-anchor="end" fill="#3b4456" { (label(y)) }
        }
    }
}

/// Vertical ticks at whole rounds.
fn x_ticks(f: &Frame) -> Markup {
    let Frame { mt, ph, x0, x1, .. } = *f;
    let xstep = nice_step(x1 - x0, 14.0, &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]);
    let mut ticks = Vec::new();
    let mut x = (x0 / xstep).ceil() * xstep;
    while x <= x1 + 1e-9 {
        ticks.push(x);
        x += xstep;
    }
    html! {
        @for x in ticks {
            @let xx = f1(f.px(x));
            line x1=(xx) y1=(mt) x2=(xx) y2=(f1(mt + ph)) stroke="#eef1f5" {}
            line x1=(xx) y1=(f1(mt + ph)) x2=(xx) y2=(f1(mt + ph + 5.0)) stroke="#3b4456" {}
            text x=(xx) y=(f1(mt + ph + 19.0)) font-size="12" text-anchor="middle" fill="#3b4456" { (x as i64) }
        }
    }
}

/// The axes and their titles.
fn axes(f: &Frame, x_title: &str, y_title: &str) -> Markup {
    let Frame { ht, ml, mt, pw, ph, .. } = *f;
    let mid = f1(mt + ph / 2.0);
    html! {
        line x1=(ml) y1=(mt) x2=(ml) y2=(f1(mt + ph)) stroke="#3b4456" {}
        line x1=(ml) y1=(f1(mt + ph)) x2=(f1(ml + pw)) y2=(f1(mt + ph)) stroke="#3b4456" {}
        text x=(f1(ml + pw / 2.0)) y=(f1(ht - 12.0)) font-size="13" text-anchor="middle" fill="#1d2330" { (x_title) }
        text x="18" y=(mid) font-size="13" text-anchor="middle" fill="#1d2330" transform={ "rotate(-90 18 " (mid) ")" } {
            (y_title)
        }
    }
}

/// The best-ever step line (dashed) and the served line.
fn lines(d: &ReportData, f: &Frame) -> Markup {
    let pt = |x: f64, y: f64| format!("{},{}", f1(f.px(x)), f1(f.py(y)));
    let mut best = Vec::new();
    for (i, (bx, by)) in d.best_line.iter().enumerate() {
        if i > 0 {
            best.push(pt(*bx, d.best_line[i - 1].1));
        }
        best.push(pt(*bx, *by));
    }
    let served: Vec<String> = d.points.iter().map(|p| pt(p.x, p.accuracy)).collect();
    html! {
        @if !best.is_empty() {
            polyline.best points=(best.join(" ")) fill="none" stroke="#7b61c4" stroke-width="1.5"
                stroke-dasharray="6 4" {}
        }
        polyline.served points=(served.join(" ")) fill="none" stroke="#2f6fb5" stroke-width="2.5"
            stroke-linejoin="round" {}
    }
}

/// Fully tested candidates that were not accepted, as crosses.
fn rejected_markers(d: &ReportData, f: &Frame) -> Markup {
    html! {
        @for r in &d.rejected {
            @let (cx, cy) = (f.px(r.round as f64), f.py(r.accuracy));
            g.rejected {
                title { (r.label) }
                path d={ "M" (f1(cx - 3.5)) " " (f1(cy - 3.5)) " l7 7 M" (f1(cx + 3.5)) " " (f1(cy - 3.5)) " l-7 7" }
                    stroke="#d9534f" stroke-width="1.8" {}
            }
        }
    }
}

/// The served points, each marked by what happened.
fn served_markers(d: &ReportData, f: &Frame) -> Markup {
    html! {
        @for p in &d.points {
            @let (cx, cy) = (f.px(p.x), f.py(p.accuracy));
            @let class = match p.kind {
                PointKind::Start => "start",
                PointKind::Accepted => "accepted",
                PointKind::Unchanged => "unchanged",
                PointKind::AutoRestored => "auto-restored",
                PointKind::Rollback => "rollback",
            };
            g class={ "point " (class) } {
                title { (p.label) }
                @match p.kind {
                    PointKind::Start => {
                        rect x=(f1(cx - 5.0)) y=(f1(cy - 5.0)) width="10" height="10" fill="#2f6fb5" {}
                    }
                    PointKind::Accepted => {
                        circle cx=(f1(cx)) cy=(f1(cy)) r="6.5" fill="#3a9d5d" stroke="#1f5f37" stroke-width="1.2" {}
                    }
                    PointKind::Unchanged => {
                        circle cx=(f1(cx)) cy=(f1(cy)) r="4.5" fill="#ffffff" stroke="#2f6fb5" stroke-width="2" {}
                    }
                    PointKind::AutoRestored | PointKind::Rollback => {
                        path d={ "M" (f1(cx)) " " (f1(cy - 8.0)) " L" (f1(cx + 8.0)) " " (f1(cy)) " L" (f1(cx)) " "
                            (f1(cy + 8.0)) " L" (f1(cx - 8.0)) " " (f1(cy)) " Z" }
                            fill="#f0a020" stroke="#8a5a00" stroke-width="1.2" {}
                    }
                }
            }
            @if p.kind != PointKind::Unchanged {
                text x=(f1(cx)) y=(f1(cy - 11.0)) font-size="11" text-anchor="middle" fill="#1d2330" {
                    "v" (p.version)
                }
            }
        }
    }
}

/// The legend, above the plot, from `ml`.
fn legend(ml: f64) -> Markup {
    let symbol = |name: &str| match name {
        "served" => html! { line x1="0" y1="0" x2="22" y2="0" stroke="#2f6fb5" stroke-width="2.5" {} },
        "best-ever" => {
            html! { line x1="0" y1="0" x2="22" y2="0" stroke="#7b61c4" stroke-width="1.5" stroke-dasharray="6 4" {} }
        }
        "accepted" => html! { circle cx="11" cy="0" r="6" fill="#3a9d5d" stroke="#1f5f37" {} },
        "nothing accepted" => {
            html! { circle cx="11" cy="0" r="4.5" fill="#ffffff" stroke="#2f6fb5" stroke-width="2" {} }
        }
        "rejected candidate" => {
            html! { path d="M7.5 -3.5 l7 7 M14.5 -3.5 l-7 7" stroke="#d9534f" stroke-width="1.8" {} }
        }
        _ => html! { path d="M11 -7 L18 0 L11 7 L4 0 Z" fill="#f0a020" stroke="#8a5a00" {} },
    };
    let names = ["served", "best-ever", "accepted", "nothing accepted", "rejected candidate", "rollback / restore"];
    legend_row(ml, names.iter().map(|n| (*n, symbol(n))).collect())
}

/// Legend entries side by side, above the plot, from `ml`.
fn legend_row(ml: f64, items: Vec<(&str, Markup)>) -> Markup {
    let mut lx = ml;
    let placed: Vec<(f64, &str, Markup)> = items
        .into_iter()
        .map(|(name, symbol)| {
            let at = lx;
            lx += 40.0 + name.len() as f64 * 6.6;
            (at, name, symbol)
        })
        .collect();
    html! {
        @for (x, name, symbol) in placed {
            g.legend transform={ "translate(" (f1(x)) " 18)" } {
                (symbol)
                text x="28" y="4" font-size="12" fill="#1d2330" { (name) }
            }
        }
    }
}

/// The search history: every scored strategy's search-part accuracy in
/// journal order, with the best so far among those not raced out (like
/// Optuna's optimization history). Nothing when no search is journaled.
pub(super) fn search_history(d: &ReportData) -> Markup {
    let rows = &d.search.trials;
    if rows.is_empty() {
        return html! {};
    }
    let ys: Vec<f64> = rows.iter().map(|t| t.accuracy()).collect();
    let x1 = rows.last().map_or(1.0, |t| t.number as f64);
    let f = Frame::fit((1040.0, 320.0), (70.0, 24.0, 40.0, 50.0), (0.0, x1), &ys);
    let Frame { w, ht, ml, mt, pw, ph, .. } = f;
    html! {
        svg id="search-chart" class="chart" role="img" width=(w) height=(ht) viewBox={ "0 0 " (w) " " (ht) }
            aria-label="Search-part accuracy of every strategy scored" {
            rect x=(ml) y=(mt) width=(pw) height=(ph) fill="#fbfcfe" stroke="#c9d0dc" {}
            (y_grid(&f))
            (x_ticks(&f))
            (axes(&f, "strategy scored (journal order)", "search-part accuracy"))
            (best_so_far(d, &f))
            (trial_markers(d, &f))
            (search_legend(ml))
        }
    }
}

/// The best score so far among strategies not raced out, as a step line.
fn best_so_far(d: &ReportData, f: &Frame) -> Markup {
    let mut best: Option<f64> = None;
    let mut pts = Vec::new();
    for t in d.search.trials.iter().filter(|t| t.state != Some(TrialState::RacedOut)) {
        let x = t.number as f64;
        if let Some(b) = best {
            pts.push(format!("{},{}", f1(f.px(x)), f1(f.py(b))));
        }
        let b = best.map_or(t.accuracy(), |b| b.max(t.accuracy()));
        best = Some(b);
        pts.push(format!("{},{}", f1(f.px(x)), f1(f.py(b))));
    }
    if let (Some(b), Some(last)) = (best, d.search.trials.last()) {
        pts.push(format!("{},{}", f1(f.px(last.number as f64)), f1(f.py(b))));
    }
    html! {
        @if pts.len() > 1 {
            polyline.best points=(pts.join(" ")) fill="none" stroke="#7b61c4" stroke-width="1.5" {}
        }
    }
}

/// One marker per scored strategy: filled when it saw the whole search part,
/// hollow when raced out, a square for a prune test, a diamond for the served
/// baseline, ringed when proposed.
fn trial_markers(d: &ReportData, f: &Frame) -> Markup {
    html! {
        @for t in &d.search.trials {
            @let y = t.accuracy();
            @let (cx, cy) = (f1(f.px(t.number as f64)), f1(f.py(y)));
            @let class = match (t.stage.as_str(), t.state) {
                ("prune", _) => "prune",
                ("served", _) => "served",
                (_, Some(TrialState::RacedOut)) => "raced",
                _ => "complete",
            };
            g class={ "trial " (class) } {
                title {
                    "#" (t.number) ", search " (t.search) ", round " (t.round) ": " (t.stage) ", " (percent(y, 1))
                    @if let Some(q) = t.evaluated { " on " (q) " questions" }
                    @if t.state == Some(TrialState::RacedOut) { " (raced out)" }
                    @if t.score.is_none() && t.evaluated.is_none() { " (estimated)" }
                    @if let Some(h) = &t.hash { ", " (h[..12.min(h.len())]) }
                    @if let Some(n) = t.changed { ", " (n) " field" (if n == 1 { "" } else { "s" }) " changed" }
                    @if t.proposed { ", proposed" }
                }
                @match class {
                    "prune" => { rect x=(f1(f.px(t.number as f64) - 3.0)) y=(f1(f.py(y) - 3.0)) width="6" height="6"
                        fill="#f0a020" stroke="#8a5a00" stroke-width="0.8" {} }
                    "served" => { path d={ "M" (cx) " " (f1(f.py(y) - 5.5)) " l5.5 5.5 l-5.5 5.5 l-5.5 -5.5 Z" }
                        fill="#3b4456" {} }
                    "raced" => { circle cx=(cx) cy=(cy) r="3" fill="#ffffff" stroke="#9aa3b2" stroke-width="1.2" {} }
                    _ => { circle cx=(cx) cy=(cy) r="3.5" fill="#2f6fb5" {} }
                }
                @if t.proposed {
                    circle cx=(cx) cy=(cy) r="7.5" fill="none" stroke="#3a9d5d" stroke-width="2" {}
                }
            }
        }
    }
}

fn search_legend(ml: f64) -> Markup {
    let items = vec![
        ("served (baseline)", html! { path d="M11 -5.5 l5.5 5.5 l-5.5 5.5 l-5.5 -5.5 Z" fill="#3b4456" {} }),
        ("whole search part", html! { circle cx="11" cy="0" r="3.5" fill="#2f6fb5" {} }),
        ("raced out", html! { circle cx="11" cy="0" r="3" fill="#ffffff" stroke="#9aa3b2" stroke-width="1.2" {} }),
        ("prune test", html! { rect x="8" y="-3" width="6" height="6" fill="#f0a020" stroke="#8a5a00" {} }),
        ("proposed", html! { circle cx="11" cy="0" r="6.5" fill="none" stroke="#3a9d5d" stroke-width="2" {} }),
        ("best so far", html! { line x1="0" y1="0" x2="22" y2="0" stroke="#7b61c4" stroke-width="1.5" {} }),
    ];
    legend_row(ml, items)
}

/// Under longitudinal replay: the served strategy's accuracy (left axis) and
/// mean context tokens (right axis) by checkpoint. Nothing otherwise.
pub(super) fn checkpoints(d: &ReportData) -> Markup {
    let cps = &d.checkpoints;
    if cps.is_empty() {
        return html! {};
    }
    let (w, ht, ml, mr, mt, mb) = (1040.0_f64, 300.0_f64, 70.0, 70.0, 30.0, 46.0);
    let (pw, ph) = (w - ml - mr, ht - mt - mb);
    let n = cps.len().max(2) as f64 - 1.0;
    let tmax = cps.iter().map(|c| c.mean_context_tokens).fold(1.0_f64, f64::max);
    let px = |i: usize| ml + i as f64 / n * pw;
    let acc: Vec<String> =
        cps.iter().enumerate().map(|(i, c)| format!("{},{}", f1(px(i)), f1(mt + (1.0 - c.accuracy) * ph))).collect();
    let tok: Vec<String> = cps
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{},{}", f1(px(i)), f1(mt + (1.0 - c.mean_context_tokens / tmax) * ph)))
        .collect();
    html! {
        h2 #checkpoints { "Replay: accuracy and context tokens by checkpoint" }
        p.sub {
            "The served strategy under longitudinal replay: accuracy over the probes eligible at each checkpoint \
             (solid, left axis, 0 to 100%) and their mean context tokens (dashed, right axis, 0 to " (f1(tmax)) ")."
        }
        svg id="checkpoint-chart" class="chart" role="img" width=(w) height=(ht) viewBox={ "0 0 " (w) " " (ht) }
            aria-label="Accuracy and context tokens by checkpoint" {
            rect x=(ml) y=(mt) width=(pw) height=(ph) fill="#fbfcfe" stroke="#c9d0dc" {}
            polyline points=(acc.join(" ")) fill="none" stroke="#2456a6" stroke-width="2" {}
            polyline points=(tok.join(" ")) fill="none" stroke="#b3541e" stroke-width="2" stroke-dasharray="6 4" {}
            @for (i, c) in cps.iter().enumerate() {
                circle cx=(f1(px(i))) cy=(f1(mt + (1.0 - c.accuracy) * ph)) r="3" fill="#2456a6" {
                    title { "checkpoint " (c.checkpoint) ": " (c.correct) "/" (c.probes) " probes correct, "
                        (f1(c.mean_context_tokens)) " context tokens" }
                }
            }
            text x=(f1(ml - 8.0)) y=(f1(mt + 4.0)) text-anchor="end" font-size="12" { "100%" }
            text x=(f1(ml - 8.0)) y=(f1(mt + ph + 4.0)) text-anchor="end" font-size="12" { "0%" }
            text x=(f1(ml + pw + 8.0)) y=(f1(mt + 4.0)) font-size="12" { (f1(tmax)) }
            text x=(f1(ml + pw + 8.0)) y=(f1(mt + ph + 4.0)) font-size="12" { "0" }
            text x=(f1(ml)) y=(f1(ht - 14.0)) font-size="12" { "checkpoint 1" }
            text x=(f1(ml + pw)) y=(f1(ht - 14.0)) text-anchor="end" font-size="12" { "checkpoint " (cps.len()) }
        }
    }
}
