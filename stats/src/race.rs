//! Racing: stop evaluating a challenger as soon as the questions evaluated so
//! far show, at a stated confidence, that it is worse than the incumbent
//! (the F-race idea of irace, with the paired exact test of this crate in
//! place of Friedman's).
//!
//! A challenger and the incumbent are scored on the same questions in the
//! same seeded order. After each batch, with `improved` questions the
//! challenger answers and the incumbent does not and `regressed` the other
//! way round, the challenger is dropped when the one-sided exact test of
//! "the incumbent is better" rejects at `level`:
//! `P(X >= regressed) <= level`, X ~ Bin(improved + regressed, 1/2).
//!
//! What this guarantees, exactly: at each look separately, a challenger that
//! is truly at least as good as the incumbent (on each discordant question,
//! regression no likelier than improvement) is dropped with probability at
//! most `level`. With several looks the chance that one of them drops it is
//! larger (at most `level` times the number of looks, by the union bound).
//!
//! Where that does not hold: when the incumbent is itself the winner of
//! earlier races on the same questions, its answers there are biased
//! upward, and a challenger that is truly as good is dropped far more
//! often (39-51% over a whole race in the simulation
//! `sim::a_global_search_with_racing_selects_on_the_search_part_and_the_confirm_test_keeps_its_level`,
//! against 8-9% for the first challenger, raced against the served
//! strategy). That costs the search power, not the confirm test its level.
//!
//! Racing decides only where evaluations are spent; no acceptance rests on
//! it: the candidate a search proposes still passes the confirm test on the
//! confirm part, which the search never reads. The simulation
//! `sim::a_global_search_with_racing_selects_on_the_search_part_and_the_confirm_test_keeps_its_level`
//! shows that this confirm test keeps its level with racing on (60 and 150
//! raced null candidates, the winner tested once at 0.05 and at 0.0152).

use super::onesided::better_p_value;

/// True when a challenger with `improved` and `regressed` questions against
/// the incumbent, on the questions evaluated so far, is significantly worse
/// at `level` (one-sided exact test, see the module doc).
///
/// # Panics
/// If `level` is not in (0, 1).
pub fn race_drops(improved: u64, regressed: u64, level: f64) -> bool {
    assert!(level > 0.0 && level < 1.0, "a racing level must be in (0, 1), got {level}");
    better_p_value(regressed, improved) <= level
}

/// The prefix sizes at which a race looks: `first`, then doubling, the last
/// one the whole part (`n`).
///
/// # Panics
/// If `first` is 0.
pub fn race_looks(n: usize, first: usize) -> Vec<usize> {
    assert!(first > 0, "a race's first look needs at least one question");
    let mut looks = Vec::new();
    let mut k = first;
    while k < n {
        looks.push(k);
        k = k.saturating_mul(2);
    }
    looks.push(n);
    looks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clearly_worse_challenger_is_dropped_and_an_equal_one_is_not() {
        // 0 improved, 5 regressed: P(X >= 5 | 5) = 1/32 = 0.031.
        assert!(race_drops(0, 5, 0.05));
        assert!(!race_drops(0, 4, 0.05), "1/16 = 0.0625 is above 0.05");
        assert!(!race_drops(10, 10, 0.05));
        assert!(!race_drops(12, 3, 0.05), "a better challenger is never dropped");
        assert!(!race_drops(0, 0, 0.05));
    }

    #[test]
    fn looks_double_up_to_the_whole_part() {
        assert_eq!(race_looks(193, 24), vec![24, 48, 96, 192, 193]);
        assert_eq!(race_looks(20, 24), vec![20]);
        assert_eq!(race_looks(48, 24), vec![24, 48]);
    }

    /// At one look, an equal challenger is dropped at most `level` of the time
    /// (the exact test is conservative: discrete), and a 10 pp worse one
    /// (discordance 20%) is dropped most of the time by the whole part.
    #[test]
    fn per_look_false_drops_stay_within_the_level() {
        use rand::rngs::ChaCha8Rng;
        use rand::{RngExt, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (reps, n, q, level) = (4000, 96, 0.2, 0.05);
        let draw = |rng: &mut ChaCha8Rng, shift: f64| {
            let (mut i, mut r) = (0u64, 0u64);
            for _ in 0..n {
                let u: f64 = rng.random();
                if u < (q + shift) / 2.0 {
                    i += 1;
                } else if u < q {
                    r += 1;
                }
            }
            (i, r)
        };
        let mut false_drops = 0;
        let mut true_drops = 0;
        for _ in 0..reps {
            let (i, r) = draw(&mut rng, 0.0);
            false_drops += usize::from(race_drops(i, r, level));
            let (i, r) = draw(&mut rng, -0.1);
            true_drops += usize::from(race_drops(i, r, level));
        }
        let rate = false_drops as f64 / reps as f64;
        assert!(rate <= level + 3.0 * (level * (1.0 - level) / reps as f64).sqrt(), "false drops {rate}");
        assert!(true_drops as f64 / reps as f64 > 0.5, "a 10 pp worse challenger is dropped {true_drops}/{reps}");
    }
}
