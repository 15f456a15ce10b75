//! The accuracy-cost chart: every strategy the searches scored on the whole
//! search part, its accuracy against its mean context tokens, with the front
//! ([`crate::views::TrialsView::front`]) drawn as a step line and the served
//! and pending versions marked. A reviewer reads off what the same accuracy
//! would have cost, and what half the cost would have given up.

use std::collections::BTreeMap;

use maud::{Markup, html};

use super::{Frame, axes, f1, legend_row, nice_step, y_grid};
use crate::report::ReportData;
use crate::views::TrialRow;
use emend_core::percent::percent;

/// The section: heading, caption and SVG; nothing when no strategy was scored with its tokens.
pub(in crate::report) fn front(d: &ReportData) -> Markup {
    let points = d.search.costed();
    if points.is_empty() {
        return html! {};
    }
    let ys: Vec<f64> = points.values().filter_map(|t| t.score).collect();
    let x1 = points.values().filter_map(|t| t.tokens).fold(1.0_f64, f64::max) * 1.05;
    let f = Frame::fit((1040.0, 360.0), (70.0, 24.0, 40.0, 50.0), (0.0, x1), &ys);
    let Frame { w, ht, ml, mt, pw, ph, .. } = f;
    html! {
        h3 #front { "Accuracy against cost" }
        p.sub {
            "Every strategy the searches scored on the whole search part: its accuracy there against the mean \
             context tokens its answerer read a question (the latest score of each). The line joins the front: \
             the strategies no other matches in accuracy for fewer tokens. Ringed: the served version (blue) and \
             versions waiting for approval (orange)."
        }
        svg id="front-chart" class="chart" role="img" width=(w) height=(ht) viewBox={ "0 0 " (w) " " (ht) }
            aria-label="Search-part accuracy against mean context tokens" {
            rect x=(ml) y=(mt) width=(pw) height=(ph) fill="#fbfcfe" stroke="#c9d0dc" {}
            (y_grid(&f))
            (token_ticks(&f))
            (axes(&f, "mean context tokens a question", "search-part accuracy"))
            (front_line(d, &f))
            (markers(d, &points, &f))
            (legend(ml))
        }
    }
}

/// Vertical ticks at round token counts.
fn token_ticks(f: &Frame) -> Markup {
    let Frame { mt, ph, x0, x1, .. } = *f;
    let steps = [10.0, 20.0, 50.0, 100.0, 200.0, 250.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0, 50000.0];
    let step = nice_step(x1 - x0, 12.0, &steps);
    let ticks: Vec<f64> = (0..).map(|i| i as f64 * step).take_while(|x| *x <= x1 + 1e-9).collect();
    html! {
        @for x in ticks {
            @let xx = f1(f.px(x));
            line x1=(xx) y1=(mt) x2=(xx) y2=(f1(mt + ph)) stroke="#eef1f5" {}
            line x1=(xx) y1=(f1(mt + ph)) x2=(xx) y2=(f1(mt + ph + 5.0)) stroke="#3b4456" {}
            text x=(xx) y=(f1(mt + ph + 19.0)) font-size="12" text-anchor="middle" fill="#3b4456" { (x as i64) }
        }
    }
}

/// The front as a step line: from each front point, level to the next one's tokens, then up.
fn front_line(d: &ReportData, f: &Frame) -> Markup {
    let front = d.search.front();
    let mut pts = Vec::new();
    for (i, t) in front.iter().enumerate() {
        let (x, y) = (t.tokens.unwrap_or(0.0), t.score.unwrap_or(0.0));
        if i > 0 {
            pts.push(format!("{},{}", f1(f.px(x)), f1(f.py(front[i - 1].score.unwrap_or(0.0)))));
        }
        pts.push(format!("{},{}", f1(f.px(x)), f1(f.py(y))));
    }
    html! {
        @if !pts.is_empty() {
            polyline.front points=(pts.join(" ")) fill="none" stroke="#7b61c4" stroke-width="2" {}
        }
    }
}

/// One dot per strategy (filled when on the front), the served and pending versions ringed and named.
fn markers(d: &ReportData, points: &BTreeMap<&str, &TrialRow>, f: &Frame) -> Markup {
    let on_front: Vec<usize> = d.search.front().iter().map(|t| t.number).collect();
    let served = d.served.as_ref().map(|s| (s.version, s.hash.as_str()));
    let pending: Vec<(u64, &str)> = d.pending.iter().map(|(v, h)| (*v, h.as_str())).collect();
    html! {
        @for (hash, t) in points {
            @let (score, tokens) = (t.score.unwrap_or(0.0), t.tokens.unwrap_or(0.0));
            @let (cx, cy) = (f.px(tokens), f.py(score));
            @let front = on_front.contains(&t.number);
            g class={ "front-point" @if front { " on-front" } } {
                title {
                    "#" (t.number) ", round " (t.round) ": " (percent(score, 1)) " on " (t.evaluated.unwrap_or(0))
                    " questions, " (f1(tokens)) " context tokens, " (hash[..12.min(hash.len())])
                    @if front { ", on the front" }
                }
                circle cx=(f1(cx)) cy=(f1(cy)) r="3.5" fill=(if front { "#7b61c4" } else { "#b8c0cc" }) {}
            }
            @for (v, class, colour) in version_marks(served, &pending, hash) {
                g class={ "front-point " (class) } {
                    title { "v" (v) " (" (class) "): " (percent(score, 1)) ", " (f1(tokens)) " context tokens" }
                    circle cx=(f1(cx)) cy=(f1(cy)) r="7.5" fill="none" stroke=(colour) stroke-width="2.2" {}
                    text x=(f1(cx)) y=(f1(cy - 11.0)) font-size="11" text-anchor="middle" fill="#1d2330" { "v" (v) }
                }
            }
        }
    }
}

/// The served and pending versions whose strategy is `hash`: (version, class, colour).
fn version_marks(
    served: Option<(u64, &str)>,
    pending: &[(u64, &str)],
    hash: &str,
) -> Vec<(u64, &'static str, &'static str)> {
    let mut out = Vec::new();
    if let Some((v, _)) = served.filter(|(_, h)| *h == hash) {
        out.push((v, "served", "#2f6fb5"));
    }
    out.extend(pending.iter().filter(|(_, h)| *h == hash).map(|(v, _)| (*v, "pending", "#f0a020")));
    out
}

fn legend(ml: f64) -> Markup {
    let items = vec![
        ("on the front", html! { circle cx="11" cy="0" r="3.5" fill="#7b61c4" {} }),
        ("beaten", html! { circle cx="11" cy="0" r="3.5" fill="#b8c0cc" {} }),
        ("front", html! { line x1="0" y1="0" x2="22" y2="0" stroke="#7b61c4" stroke-width="2" {} }),
        ("served", html! { circle cx="11" cy="0" r="6.5" fill="none" stroke="#2f6fb5" stroke-width="2.2" {} }),
        ("pending", html! { circle cx="11" cy="0" r="6.5" fill="none" stroke="#f0a020" stroke-width="2.2" {} }),
    ];
    legend_row(ml, items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_and_pending_versions_are_marked_on_their_strategy() {
        let served = Some((3, "h3"));
        let pending = [(4, "h4"), (5, "h3")];
        assert_eq!(version_marks(served, &pending, "h3"), [(3, "served", "#2f6fb5"), (5, "pending", "#f0a020")]);
        assert_eq!(version_marks(served, &pending, "h4"), [(4, "pending", "#f0a020")]);
        assert!(version_marks(served, &pending, "h9").is_empty());
    }
}
