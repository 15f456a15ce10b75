//! Text from outside emend, made safe to show.
//!
//! A reason typed on the command line, a strategy note, a model's reply: any
//! of them can hold terminal control sequences (an escape that clears the
//! screen, retitles the window or hides the rest of a line). [`escape_controls`]
//! writes every control character as a visible `\u{..}` escape, in text for a
//! terminal and in the HTML report alike (HTML escaping does not touch them).

use std::borrow::Cow;

/// Whether `c` is shown escaped: C0 controls but newline and tab, DEL, C1
/// controls, and the bidirectional overrides and isolates that reorder what a
/// line shows.
fn is_hazard(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character (but newline and tab) written as
/// `\u{1b}`; borrowed when there is none.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hazard) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_hazard(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`escape_controls`], except the exact style sequences in `keep` (the CLI's
/// own colours, added after the text was rendered), which pass unchanged.
pub fn escape_controls_keeping(text: &str, keep: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}'
            && let Some(k) = keep.iter().find(|k| !k.is_empty() && rest.starts_with(**k))
        {
            out.push_str(k);
            rest = &rest[k.len()..];
            continue;
        }
        out.push_str(&escape_controls(&rest[..c.len_utf8()]));
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_borrowed() {
        assert!(matches!(escape_controls("plain\ttext\nline two é"), Cow::Borrowed(_)));
        assert_eq!(escape_controls("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape_controls("\u{1b}]0;title\u{7}"), "\\u{1b}]0;title\\u{7}");
        assert_eq!(escape_controls("x\ry\u{7f}\u{9b}z\u{0}"), "x\\u{d}y\\u{7f}\\u{9b}z\\u{0}");
        assert_eq!(escape_controls("ab\u{202e}cd"), "ab\\u{202e}cd");
        let bold = "\u{1b}[1m";
        let reset = "\u{1b}[0m";
        let styled = format!("{bold}gates:{reset} why\u{1b}[2J\n");
        assert_eq!(escape_controls_keeping(&styled, &[bold, reset]), format!("{bold}gates:{reset} why\\u{{1b}}[2J\n"));
    }
}
