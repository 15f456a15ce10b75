//! Fractions as people read them, in one place: an accuracy is printed as a
//! percent ([`percent`]) and a difference of accuracies as signed percentage
//! points ([`points`]). The caller picks the decimals: one in summaries, the
//! report and the tables; two in `emend compare`'s statistical report.

/// A fraction as a percent: `0.1234` is `12.3%` with one decimal.
pub fn percent(fraction: f64, decimals: usize) -> String {
    format!("{:.*}%", decimals, fraction * 100.0)
}

/// A difference of fractions in percentage points, signed and without a
/// unit: `-0.0125` is `-1.2` with one decimal (`-1.25` with two).
pub fn points(difference: f64, decimals: usize) -> String {
    format!("{:+.*}", decimals, difference * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percents_and_points_round_to_the_decimals_asked() {
        assert_eq!(percent(0.1234, 1), "12.3%");
        assert_eq!(percent(0.1234, 2), "12.34%");
        assert_eq!(percent(1.0, 0), "100%");
        assert_eq!(points(-0.0125, 2), "-1.25");
        assert_eq!(points(0.031, 1), "+3.1");
        assert_eq!(points(0.0, 1), "+0.0");
    }
}
