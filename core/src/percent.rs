//! Fractions as people read them, in one place: an accuracy is printed as a
//! percent ([`percent`]) and a difference of accuracies as signed percentage
//! points ([`points`]). The caller picks the decimals: one in summaries, the
//! report and the tables; two in `emend compare`'s statistical report. Token
//! counts are whole numbers with thousands separators ([`tokens_from_to`]).

/// A fraction as a percent: `0.1234` is `12.3%` with one decimal.
pub fn percent(fraction: f64, decimals: usize) -> String {
    format!("{:.*}%", decimals, fraction * 100.0)
}

/// A difference of fractions in percentage points, signed and without a
/// unit: `-0.0125` is `-1.2` with one decimal (`-1.25` with two).
pub fn points(difference: f64, decimals: usize) -> String {
    format!("{:+.*}", decimals, difference * 100.0)
}

/// `tokens 1,573 -> 610 (-61%)`; a rise of 2x or more as `(6.07x)`.
pub fn tokens_from_to(b: f64, c: f64) -> String {
    let change = match c / b {
        _ if b <= 0.0 => String::new(),
        r if r >= 2.0 => format!(" ({r:.2}x)"),
        r => format!(" ({:+.0}%)", (r - 1.0) * 100.0),
    };
    format!("tokens {} -> {}{change}", grouped(b), grouped(c))
}

/// `1573` as `1,573` (rounded to a whole token).
fn grouped(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if x < -0.5 { format!("-{out}") } else { out }
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
