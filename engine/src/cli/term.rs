//! The terminal edge: whether stderr gets colour, the styles the CLI uses, and
//! the live progress line. The engine below writes no terminal codes.
//!
//! Colour follows anstream's detection, the convention of most Rust CLIs:
//! plain when the stream is not a terminal or `NO_COLOR` is set (non-empty),
//! coloured when `CLICOLOR_FORCE` is set (non-empty and not `0`), even into a
//! pipe. Text styled with [`anstyle`] and printed through
//! `anstream::eprintln!` is stripped to plain text whenever colour is off.

use std::time::Duration;

use anstream::ColorChoice;
use anstyle::{AnsiColor, Style};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The round's decision line.
pub const DECISION: Style = Style::new().bold();
/// Section headings of `show` (`gates:`, `full:`).
pub const HEADING: Style = Style::new().bold();
/// A passed gate, probe or rule.
pub const PASS: Style = AnsiColor::Green.on_default();
/// A failed gate, probe or rule.
pub const FAIL: Style = AnsiColor::Red.on_default().bold();
/// A diff's file-name lines.
pub const DIFF_FILE: Style = Style::new().bold();
/// A diff's added lines.
pub const DIFF_ADD: Style = AnsiColor::Green.on_default();
/// A diff's removed lines.
pub const DIFF_DEL: Style = AnsiColor::Red.on_default();
/// A diff's hunk headers.
pub const DIFF_HUNK: Style = AnsiColor::Cyan.on_default();

/// The CLI's own styles: their start and reset sequences are the only control
/// sequences [`print_stdout`] passes through.
const STYLES: [Style; 8] = [DECISION, HEADING, PASS, FAIL, DIFF_FILE, DIFF_ADD, DIFF_DEL, DIFF_HUNK];

/// `text` (rendered with the CLI's styles) with every other control character
/// escaped: a reason, note or model reply inside it cannot drive the terminal.
pub fn escape_styled(text: &str) -> String {
    let sequences: Vec<String> = STYLES.iter().flat_map(|s| [format!("{s}"), format!("{s:#}")]).collect();
    let keep: Vec<&str> = sequences.iter().map(String::as_str).collect();
    emend_core::sanitize::escape_controls_keeping(text, &keep)
}

/// Prints styled text on stdout: coloured only where anstream's detection
/// says so (a terminal, or `CLICOLOR_FORCE`), never with `no_color` (the
/// `--no-color` flag) or `NO_COLOR`. Control characters other than the CLI's
/// own styles are escaped ([`escape_styled`]).
pub fn print_stdout(text: &str, no_color: bool) {
    use std::io::Write;
    let text = escape_styled(text);
    let choice = if no_color { ColorChoice::Never } else { ColorChoice::Auto };
    let mut out = anstream::AutoStream::new(std::io::stdout().lock(), choice);
    // A closed pipe (`emend show | head`) is not an error worth a panic.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Writes `text` to `out`. A reader that went away (a broken pipe: `emend
/// evolve | head -1`) ends the output, not the process: the run is asked to
/// stop ([`emend_core::stop::Cause::OutputClosed`]), journals its round as
/// interrupted and exits 141. Other write errors are ignored as well; output
/// never decides a run.
pub fn write_or_stop(out: &mut dyn std::io::Write, text: &str) {
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush())
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        emend_core::stop::request(emend_core::stop::Cause::OutputClosed);
    }
}

/// Prints `text` on stdout through [`write_or_stop`].
pub fn out(text: &str) {
    write_or_stop(&mut std::io::stdout().lock(), text);
}

/// Whether text written to stderr gets colour (the tracing subscriber asks too).
pub fn stderr_colour() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != ColorChoice::Never
}

/// A live status line on stderr with the elapsed time, redrawn in place
/// (`⠋ 00:00:12 round 3: c2 full test`). It draws nothing when stderr is not a
/// terminal, so pipes and log files see only the lines printed through
/// [`Live::println`].
pub struct Live {
    bar: ProgressBar,
}

impl Live {
    /// Starts the line with `status`; `visible: false` (e.g. `--quiet`) never draws.
    pub fn start(status: &str, visible: bool) -> Live {
        let target = if visible { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {wide_msg}").expect("a valid progress template"),
        );
        bar.set_message(status.to_string());
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Live { bar }
    }

    /// Replaces the status text.
    pub fn status(&self, status: String) {
        self.bar.set_message(status);
    }

    /// Prints a line on stderr above the live line, styled when colour is on.
    /// A closed stderr asks the run to stop (see [`write_or_stop`]).
    pub fn println(&self, style: Style, line: &str) {
        self.bar.suspend(|| write_or_stop(&mut anstream::stderr(), &format!("{style}{line}{style:#}\n")));
    }

    /// Removes the live line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // An early return (an error) must not leave a spinner ticking over the error message.
        self.bar.finish_and_clear();
    }
}

/// A text table without borders: a header row (none when `header` is empty),
/// then the rows; `right[i]` right-aligns column `i` (numbers). Columns are two
/// spaces apart.
pub fn table(header: &[&str], rows: Vec<Vec<String>>, right: &[bool]) -> String {
    use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, presets};
    let mut t = Table::new();
    t.load_style(presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
    if !header.is_empty() {
        t.set_header(header.to_vec());
    }
    for row in rows {
        t.add_row(row);
    }
    for (i, column) in t.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        column.set_constraint(ColumnConstraint::ContentWidth);
        if right.get(i).copied().unwrap_or(false) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    // comfy-table pads every line to the full width; trailing spaces help no reader.
    t.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_two_spaces_apart() {
        let t = table(
            &["category", "n", "accuracy"],
            vec![vec!["single-hop".into(), "7".into(), "85.7%".into()], vec!["x".into(), "120".into(), "5.0%".into()]],
            &[false, true, true],
        );
        assert_eq!(t, "category      n  accuracy\nsingle-hop    7     85.7%\nx           120      5.0%\n");
    }

    #[test]
    fn tables_without_a_header() {
        let t = table(&[], vec![vec!["PASS".into(), "a".into()], vec!["FAIL".into(), "bb".into()]], &[]);
        assert_eq!(t, "PASS  a\nFAIL  bb\n");
    }

    #[test]
    fn own_styles_pass_and_other_control_sequences_are_escaped() {
        let text = format!("{HEADING}why:{HEADING:#} {FAIL}no{FAIL:#} \u{1b}]0;pwned\u{7}\u{1b}[2J\n");
        let out = escape_styled(&text);
        assert_eq!(out, format!("{HEADING}why:{HEADING:#} {FAIL}no{FAIL:#} \\u{{1b}}]0;pwned\\u{{7}}\\u{{1b}}[2J\n"));
    }

    #[test]
    fn styled_lines_are_plain_when_colour_is_off() {
        let mut out = anstream::AutoStream::new(Vec::<u8>::new(), ColorChoice::Never);
        std::io::Write::write_all(&mut out, format!("{DECISION}round 1{DECISION:#}").as_bytes()).unwrap();
        assert_eq!(out.into_inner(), b"round 1");
    }
}
