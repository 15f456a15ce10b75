//! The priced confirm test ([`crate::utility_test`], question unit) under
//! the weak null: the candidate is cheaper by `dt` tokens on every question
//! and less accurate by exactly what the saving is worth, so its mean
//! utility difference is exactly 0 while each question's difference d is
//! asymmetric about it (a small, steady gain against rare losses of a whole
//! point).
//!
//! Per question: the served strategy's tokens ~ N(1500, 300), clipped to at
//! least `dt + 101`; the candidate's are those minus `dt` plus U(-100, 100)
//! noise (so the mean saving is exactly `dt`); the two disagree with
//! probability q (the discordance rate), and a disagreement is a regression
//! with probability `(q + m) / 2q`, an improvement otherwise, where
//! `m = (P / 100) (dt / 1000)` is the saving's worth: `E d = 0`.
//!
//! Two tests on the same data: the sign-flip test of the studentized mean
//! (what `utility_test` runs; the sign flips of the plain sum of d give the
//! same p-value sign vector by sign vector, asserted in `utility.rs`, so
//! the unstudentized column would repeat this one), and the studentized
//! mean referred to the normal law (a paired z-test, for contrast).
//!
//! What holds: the exact non-inferiority test at a margin of the saving's
//! worth (a comparison column, tokens taken as known, exact trinomial sums)
//! keeps alpha everywhere (asserted). What does not: the sign-flip test's
//! size is above alpha + 2 Monte Carlo SE in the cells of [`OVER`], where
//! rare regressions meet a steady saving worth several points (q = 0.05: up
//! to 0.09 at 0.05 and 0.046 at 0.0152) or the saving is worth much less
//! than one question (P = 2, dt = 100: up to 0.080 at 0.05); the normal
//! law is as liberal in the first case. Tables: docs/price.md.
//!
//! Reproduce: `cargo test -p emend-stats --release sim_utility -- --nocapture`.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use statrs::distribution::{ContinuousCDF, Normal};

use super::noninferior::tests::{accept_rate, region};
use super::utility::{UtilityPair, utility_test};

/// 0.05 and LORD++'s first alpha with the project's defaults.
const ALPHAS: [f64; 2] = [0.05, 0.0152];
/// Confirm parts per size cell (power: [`POWER_REPS`]).
const REPS: usize = 2000;
const POWER_REPS: usize = 1000;

/// One scenario: confirm questions, price, token saving, discordance, and
/// the candidate's true mean utility difference.
#[derive(Debug, Clone, Copy)]
struct Cell {
    n: usize,
    price: f64,
    saving: f64,
    q: f64,
    utility: f64,
}

impl Cell {
    /// The saving's worth in accuracy: `(P / 100) (dt / 1000)`.
    fn worth(self) -> f64 {
        self.price / 100.0 * self.saving / 1000.0
    }
}

/// A standard normal from two uniforms (Box-Muller).
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u1, u2): (f64, f64) = (rng.random(), rng.random());
    (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// One confirm part of `cell`: the candidate's accuracy minus the served
/// one's is `utility - worth` in expectation.
fn draw(rng: &mut ChaCha8Rng, cell: Cell) -> Vec<UtilityPair<'static>> {
    let accuracy = cell.utility - cell.worth();
    let improve = (cell.q + accuracy) / 2.0;
    assert!(improve >= 0.0 && improve <= cell.q, "{cell:?}: discordance too small for the accuracy difference");
    (0..cell.n)
        .map(|_| {
            let right = rng.random_bool(0.6);
            let u: f64 = rng.random();
            let (base_correct, cand_correct) = if u < improve {
                (false, true)
            } else if u < cell.q {
                (true, false)
            } else {
                (right, right)
            };
            let base_tokens = (1500.0 + 300.0 * normal(rng)).max(cell.saving + 101.0);
            let cand_tokens = base_tokens - cell.saving + 200.0 * (rng.random::<f64>() - 0.5);
            UtilityPair { conversation: "c", base_correct, cand_correct, base_tokens, cand_tokens }
        })
        .collect()
}

/// Rejection rates `[test][alpha]` over `reps` confirm parts: the sign-flip
/// test, the studentized mean against the normal law.
fn rates(cell: Cell, reps: usize, seed: u64) -> [[f64; 2]; 2] {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let z = Normal::new(0.0, 1.0).expect("standard normal");
    let mut hits = [[0usize; 2]; 2];
    for _ in 0..reps {
        let pairs = draw(&mut rng, cell);
        let t = utility_test(&pairs, cell.price, ALPHAS[0], false);
        let d: Vec<f64> = pairs
            .iter()
            .map(|p| {
                f64::from(i8::from(p.cand_correct) - i8::from(p.base_correct))
                    - cell.price / 1e5 * (p.cand_tokens - p.base_tokens)
            })
            .collect();
        let n = d.len() as f64;
        let sd = (d.iter().map(|x| (x - t.delta) * (x - t.delta)).sum::<f64>() / (n - 1.0)).sqrt();
        let normal_p = if sd > 0.0 { z.sf(t.delta / sd * n.sqrt()) } else { 1.0 };
        for (a, &alpha) in ALPHAS.iter().enumerate() {
            hits[0][a] += usize::from(t.p_value <= alpha && t.delta > 0.0);
            hits[1][a] += usize::from(normal_p <= alpha);
        }
    }
    hits.map(|h| h.map(|x| x as f64 / reps as f64))
}

fn se(rate: f64, reps: usize) -> f64 {
    (rate * (1.0 - rate) / reps as f64).sqrt()
}

/// The size bound asserted: alpha plus 2 Monte Carlo standard errors.
fn bound(alpha: f64) -> f64 {
    alpha + 2.0 * se(alpha, REPS)
}

/// The cells (n, P, dt, q, alpha) where the sign-flip test's size exceeds
/// [`bound`] with these seeds (see the module's doc and docs/price.md). The
/// tests assert that no other cell does, and that the worst of these (a
/// 5 pp saving against regressions at discordance 0.05) still does.
const OVER: [(usize, f64, f64, f64, f64); 21] = [
    (193, 2.0, 100.0, 0.05, 0.05),
    (193, 2.0, 100.0, 0.05, 0.0152),
    (193, 2.0, 100.0, 0.15, 0.05),
    (193, 2.0, 100.0, 0.15, 0.0152),
    (193, 2.0, 100.0, 0.3, 0.05),
    (193, 2.0, 100.0, 0.3, 0.0152),
    (193, 5.0, 500.0, 0.05, 0.05),
    (193, 5.0, 500.0, 0.05, 0.0152),
    (193, 5.0, 500.0, 0.15, 0.0152),
    (193, 5.0, 500.0, 0.3, 0.05),
    (193, 5.0, 1000.0, 0.05, 0.05),
    (193, 5.0, 1000.0, 0.05, 0.0152),
    (317, 2.0, 100.0, 0.05, 0.05),
    (317, 2.0, 100.0, 0.05, 0.0152),
    (317, 2.0, 100.0, 0.15, 0.0152),
    (317, 2.0, 1000.0, 0.05, 0.05),
    (317, 2.0, 1000.0, 0.05, 0.0152),
    (317, 2.0, 1000.0, 0.15, 0.05),
    (317, 5.0, 500.0, 0.05, 0.0152),
    (317, 5.0, 1000.0, 0.05, 0.05),
    (317, 5.0, 1000.0, 0.05, 0.0152),
];

/// The weak-null cells at `n`: P in {2, 5}, dt in {500, 1000}, q in {0.05,
/// 0.15, 0.3}, and a small saving (P = 2, dt = 100: worth 0.2 pp).
fn cells(n: usize, utility: f64) -> Vec<Cell> {
    let mut cells = Vec::new();
    for (price, saving) in [(2.0, 100.0), (2.0, 500.0), (2.0, 1000.0), (5.0, 500.0), (5.0, 1000.0)] {
        for q in [0.05, 0.15, 0.3] {
            cells.push(Cell { n, price, saving, q, utility });
        }
    }
    cells
}

/// The exact chance that the exact non-inferiority test at a margin of the
/// saving's worth (the tokens taken as known) accepts, `[alpha]`:
/// "accuracy above `-worth`" is "utility above 0".
fn exact_noninferiority(cell: Cell) -> [f64; 2] {
    let (n, m) = (cell.n as u64, cell.worth());
    let accuracy = cell.utility - m;
    let (p12, p21) = ((cell.q + accuracy) / 2.0, (cell.q - accuracy) / 2.0);
    ALPHAS.map(|alpha| accept_rate(&region(n, m, alpha), n, p12, p21))
}

/// Prints one row per cell of `cells`: the sign-flip test's and the
/// normal law's rejection rates (SE), and the exact non-inferiority test's;
/// returns the sign-flip rates `[alpha]`.
fn table(cells: &[Cell], reps: usize, seed: u64) -> Vec<[f64; 2]> {
    eprintln!(
        "| n | P | dt | worth | accuracy | q | sign flip @0.05 | normal @0.05 | NI exact @0.05 \
         | sign flip @0.0152 | normal @0.0152 | NI exact @0.0152 |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let c = |x: f64| format!("{x:.4} ({:.4})", se(x, reps));
    cells
        .iter()
        .enumerate()
        .map(|(k, &cell)| {
            let r = rates(cell, reps, seed + k as u64);
            let ni = exact_noninferiority(cell);
            eprintln!(
                "| {} | {} | {} | {:.1} pp | {:+.1} pp | {} | {} | {} | {:.4} | {} | {} | {:.4} |",
                cell.n,
                cell.price,
                cell.saving,
                100.0 * cell.worth(),
                100.0 * (cell.utility - cell.worth()),
                cell.q,
                c(r[0][0]),
                c(r[1][0]),
                ni[0],
                c(r[0][1]),
                c(r[1][1]),
                ni[1]
            );
            for (a, &alpha) in ALPHAS.iter().enumerate() {
                assert!(cell.utility > 0.0 || ni[a] <= alpha * (1.0 + 1e-6), "{cell:?}: NI exact {}", ni[a]);
            }
            r[0]
        })
        .collect()
}

/// The cells over [`bound`] among the size rows of `n`, printed.
fn size_at(n: usize, seed: u64) -> Vec<(usize, f64, f64, f64, f64)> {
    let cells = cells(n, 0.0);
    let rates = table(&cells, REPS, seed);
    let mut over = Vec::new();
    for (cell, r) in cells.iter().zip(&rates) {
        for (a, &alpha) in ALPHAS.iter().enumerate() {
            if r[a] > bound(alpha) {
                eprintln!(
                    "over alpha + 2 SE: n {n}, P {}, dt {}, q {}, alpha {alpha}: {:.4} > {:.4}",
                    cell.price,
                    cell.saving,
                    cell.q,
                    r[a],
                    bound(alpha)
                );
                over.push((n, cell.price, cell.saving, cell.q, alpha));
            }
        }
    }
    over
}

/// Every cell over [`bound`] at `n` is one of [`OVER`], and the worst
/// documented one (P = 5, dt = 1000, q = 0.05) is over at both alphas.
fn assert_only_the_known_cells_are_over(n: usize, seed: u64) {
    let over = size_at(n, seed);
    let unknown: Vec<_> = over.iter().filter(|c| !OVER.contains(c)).collect();
    assert!(unknown.is_empty(), "size over alpha + 2 SE in cells not in OVER: {unknown:?}");
    for alpha in ALPHAS {
        assert!(over.contains(&(n, 5.0, 1000.0, 0.05, alpha)), "the worst cell at {alpha} is no longer over: {over:?}");
    }
}

#[test]
fn size_at_the_weak_null_with_193_questions() {
    assert_only_the_known_cells_are_over(193, 81_000);
}

#[test]
fn size_at_the_weak_null_with_317_questions() {
    assert_only_the_known_cells_are_over(317, 82_000);
}

/// Power for a candidate whose mean utility is 2 pp above the served
/// strategy's (its accuracy `2 pp - worth` above it), 317 questions.
#[test]
fn power_for_two_points_of_utility() {
    let cells = cells(317, 0.02);
    let rates = table(&cells, POWER_REPS, 83_000);
    // Fewer disagreements, less noise: +2 pp is seen more often at q = 0.05 than at 0.15, and at 0.15 than at 0.3.
    for (k, r) in rates.chunks(3).enumerate() {
        assert!(r[0][0] > r[1][0] && r[1][0] > r[2][0], "saving #{k}: {r:?}");
    }
}
