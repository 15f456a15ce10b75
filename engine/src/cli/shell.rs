//! Fitting into the shell and the tools around emend: the schema, completion
//! scripts, the man page, and the JSON error object every `--json` command
//! prints on stdout when it fails.

use std::io::Write;

use emend_core::exit;
use serde_json::json;

use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete emend for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The exit code's class as the error object names it.
pub fn kind_of(code: u8) -> &'static str {
    match code {
        exit::BAD_INPUT => "bad_input",
        exit::LOCKED => "locked",
        _ => "failed",
    }
}

/// The error object of a `--json` command, one line on stdout:
/// `{"error": {"message": ..., "exit_code": ..., "kind": ...}}`.
pub fn error_object(message: &str, code: u8) -> serde_json::Value {
    json!({"error": {"message": message, "exit_code": code, "kind": kind_of(code)}})
}

pub fn print_json_error(message: &str, code: u8) {
    let line = serde_json::to_string(&error_object(message, code)).expect("JSON renders");
    let mut out = std::io::stdout().lock();
    // stdout may be a closed pipe: the stderr line and the exit code still tell.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Whether the command that was parsed asked for `--json` (at any subcommand depth).
pub fn wants_json(matches: &clap::ArgMatches) -> bool {
    let mut m = matches;
    loop {
        if let Ok(Some(true)) = m.try_get_one::<bool>("json") {
            return true;
        }
        match m.subcommand() {
            Some((_, sub)) => m = sub,
            None => return false,
        }
    }
}

pub fn schema() -> CmdResult {
    write_stdout(emend_core::schema::BUILTIN_SCHEMA.as_bytes())?;
    Ok(exit::OK)
}

pub fn completions(args: &CompletionsArgs, cmd: &mut clap::Command) -> CmdResult {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, cmd, "emend", &mut buf);
    write_stdout(&buf)?;
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// The command whose page to print (emend-rollback(1) for `rollback`); without it, emend(1).
    #[arg(value_name = "COMMAND", conflicts_with = "dir", hide_possible_values = true,
          value_parser = clap::builder::PossibleValuesParser::new(GROUPS.iter().flat_map(|(_, names)| names.iter().copied())))]
    pub command: Option<String>,
    /// Write emend.1 and one page per subcommand (emend-evolve.1, ...) into this directory instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// The groups of `emend --help` and of emend(1)'s COMMANDS, by who uses the commands (as `git help`
/// groups git's): every subcommand is in exactly one (a test checks it).
pub const GROUPS: &[(&str, &[&str])] = &[
    ("Set up a project", &["init", "validate", "schema", "cache", "completions", "man"]),
    ("Run unattended (the scheduled job: cron or CI runs it and acts on the exit code)", &["evolve", "worker"]),
    (
        "See what changed and why (the reviewer)",
        &["status", "log", "show", "diff", "trials", "hypotheses", "report", "journal"],
    ),
    ("Weigh the evidence (the reviewer)", &["diagnose", "audit", "eval", "compare", "collision"]),
    (
        "Change what is served (the operator)",
        &[
            "pending",
            "approve",
            "reject",
            "propose",
            "rollback",
            "restore-best",
            "quarantine",
            "unquarantine",
            "escalations",
        ],
    ),
];

/// Every command's DESCRIPTION and EXAMPLES (its `--help` and its man page): a header comment, then
/// per command `@page NAME`, its description's paragraphs (lines joined, a blank line between two), and
/// each example as `@example CAPTION` followed by its command lines (`$ ...`) and what they print.
const PAGES: &str = include_str!("pages.txt");

/// One command's page from [`PAGES`].
pub struct Page {
    pub name: &'static str,
    /// Paragraphs separated by a blank line, each on one line.
    pub description: String,
    pub examples: Vec<Example>,
}

pub struct Example {
    pub caption: String,
    /// The commands and what they print, verbatim.
    pub lines: Vec<&'static str>,
}

/// The pages of [`PAGES`], in its order.
pub fn pages() -> Vec<Page> {
    let mut out: Vec<Page> = Vec::new();
    let mut in_caption = false;
    for line in PAGES.lines() {
        if let Some(name) = line.strip_prefix("@page ") {
            out.push(Page { name: name.trim(), description: String::new(), examples: Vec::new() });
            continue;
        }
        let Some(page) = out.last_mut() else { continue };
        if let Some(caption) = line.strip_prefix("@example ") {
            page.examples.push(Example { caption: caption.trim().to_string(), lines: Vec::new() });
            in_caption = true;
        } else if let Some(example) = page.examples.last_mut() {
            in_caption &= !line.starts_with("$ ");
            if in_caption {
                example.caption = format!("{} {}", example.caption, line.trim());
            } else {
                example.lines.push(line);
            }
        } else {
            page.description = joined(&page.description, line);
        }
    }
    for page in &mut out {
        page.description = page.description.trim().to_string();
        for example in &mut page.examples {
            while example.lines.last().is_some_and(|l| l.trim().is_empty()) {
                example.lines.pop();
            }
        }
    }
    out
}

/// `text` with the description line `line` added: a blank line ends a paragraph, others join the last one.
fn joined(text: &str, line: &str) -> String {
    let line = line.trim();
    let fresh = text.is_empty() || text.ends_with("\n\n");
    match (line.is_empty(), fresh) {
        (true, true) => text.to_string(),
        (true, false) => format!("{text}\n\n"),
        (false, true) => format!("{text}{line}"),
        (false, false) => format!("{text} {line}"),
    }
}

/// `cmd` with its pages: each subcommand's description as its long about and its examples after its
/// `--help`; the top level's commands listed by [`GROUPS`] (its description is emend(1)'s only: see
/// [`man_page`]).
pub fn teach(cmd: clap::Command) -> clap::Command {
    let mut cmd = cmd;
    for page in pages().into_iter().filter(|p| p.name != "emend") {
        cmd = cmd.mut_subcommand(page.name, |sub| {
            let mut after = sub.get_after_help().map(|s| format!("{s}\n\n")).unwrap_or_default();
            after.push_str(&examples_text(&page.examples, sub.get_styles().get_header()));
            sub.long_about(page.description).after_long_help(after)
        });
    }
    let template = help_template(&cmd);
    cmd.help_template(template)
}

/// The examples as `--help` prints them, under an `Examples:` heading in `header`'s style.
fn examples_text(examples: &[Example], header: &anstyle::Style) -> String {
    let mut out = format!("{}Examples:{}\n", header.render(), header.render_reset());
    for (i, example) in examples.iter().enumerate() {
        let gap = if i == 0 { "" } else { "\n" };
        out.push_str(&format!("{gap}  {}\n", example.caption));
        for line in &example.lines {
            out.push_str(&if line.is_empty() { "\n".to_string() } else { format!("    {line}\n") });
        }
    }
    out.trim_end().to_string()
}

/// The top level's help: its about, usage, the commands by [`GROUPS`] (name and about, generated from
/// the commands), its options.
fn help_template(cmd: &clap::Command) -> String {
    let header = cmd.get_styles().get_header();
    let literal = cmd.get_styles().get_literal();
    let width = GROUPS.iter().flat_map(|(_, names)| names.iter()).map(|n| n.len()).max().unwrap_or(0);
    // The one-line about, not the long one (the man page's DESCRIPTION): the groups follow at once.
    let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
    let mut out = format!("{about}\n\n{{usage-heading}} {{usage}}\n");
    for (group, names) in GROUPS {
        out.push_str(&format!("\n{}{group}:{}\n", header.render(), header.render_reset()));
        for name in *names {
            let about = cmd.find_subcommand(name).and_then(|s| s.get_about()).map(|a| a.to_string());
            let pad = " ".repeat(width - name.len());
            out.push_str(&format!(
                "  {}{name}{}{pad}  {}\n",
                literal.render(),
                literal.render_reset(),
                about.unwrap_or_default()
            ));
        }
    }
    out.push_str(&format!("\n{}Options:{}\n{{options}}\n", header.render(), header.render_reset()));
    out.push_str(
        "\nEach command's description and examples: `emend help COMMAND` (or `emend COMMAND --help`); its man page: \
         `emend man COMMAND | man -l -`.",
    );
    out
}

/// The sections every page ends with: exit status, environment, files.
const MAN_TAIL: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
The command did what it was asked (an evolve run that accepted nothing still succeeded).
.TP
\fB1\fR
The run failed: an evaluation of the served strategy, the journal, or I/O.
.TP
\fB2\fR
Bad input or usage: malformed YAML, a strategy that breaks the schema, a bad dataset, a bad flag,
a hand\-edited served file, a setting this binary is built without.
.TP
\fB3\fR
Another process holds the journal (the message names its pid, host and start time);
rollback, restore\-best and approve take \-\-wait or \-\-preempt instead.
.TP
\fB4\fR
evolve stopped because an operator's \-\-preempt asked for the journal (the round journaled as interrupted).
.TP
\fB5\fR
evolve ran, but every candidate errored (stopped: errored, the first error named): the harness
or a model role is broken; the served strategy itself was evaluated.
.TP
\fB130\fR, \fB141\fR, \fB143\fR
evolve stopped by SIGINT, a closed output or SIGTERM, cleanly (the round journaled as interrupted).
.SH ENVIRONMENT
.TP
\fBEMEND_ACTOR\fR
Who acts, as the caller declares it (as \-\-by): journaled as by, beside the OS account (who, uid).
.TP
\fBEMEND_MINILM_DIR\fR
The all\-MiniLM\-L6\-v2 model directory (wins over harness.minilm_dir; needs the minilm feature).
.TP
\fBNO_COLOR\fR, \fBCLICOLOR_FORCE\fR
Colour off, or on even when stdout is not a terminal.
.TP
\fBRUST_LOG\fR
Log filter for stderr (default warn).
.TP
\fBRAY_ADDRESS\fR
The Ray cluster address for harness.executor: ray when harness.ray.address is not set.
.TP
API keys
Each model role reads its key from the variable its roles.<role>.api_key_env names.
Hooks receive EMEND_PROJECT, EMEND_SERVED_FILE, EMEND_SERVED_VERSION, EMEND_SERVED_HASH,
EMEND_PREVIOUS_VERSION, EMEND_CHANGE and, for on_pending, EMEND_PENDING_VERSION,
EMEND_PENDING_HASH, EMEND_PENDING_PARENT and EMEND_PENDING_SUPERSEDES.
.SH FILES
.TP
\fBemend.yaml\fR
The project configuration (found in the current directory or the nearest parent, or \-\-project).
.TP
\fBstrategies/served.yaml\fR
The served strategy, rewritten from the journal on every change.
.TP
\fB.emend/\fR
The journal (sled store and its read view), the lock, a stop request (journal/STOP) and the caches.
"#;

type Section = fn(&clap_mangen::Man, &mut dyn Write) -> std::io::Result<()>;

/// One page: clap's sections (the top level's commands by [`GROUPS`]), [`MAN_TAIL`], the command's
/// notes (its `-h` epilogue) and its examples.
fn man_page(cmd: &clap::Command, top: bool) -> Result<Vec<u8>, Failure> {
    let page = pages().into_iter().find(|p| p.name == cmd.get_name());
    let mut cmd = cmd.clone();
    if let Some(page) = page.as_ref().filter(|_| top) {
        // emend --help stays a list of commands; emend(1) says what emend is first.
        cmd = cmd.long_about(page.description.clone());
    }
    // Every page's footer names emend and its version (a subcommand has no version of its own).
    let man = clap_mangen::Man::new(cmd.clone()).source(format!("emend {}", env!("CARGO_PKG_VERSION")));
    let mut sections: Vec<Section> = vec![
        clap_mangen::Man::render_title,
        clap_mangen::Man::render_name_section,
        clap_mangen::Man::render_synopsis_section,
        clap_mangen::Man::render_description_section,
    ];
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        sections.push(clap_mangen::Man::render_options_section);
    }
    if !top && cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        sections.push(clap_mangen::Man::render_subcommands_section);
    }
    let mut out = String::new();
    // Every rendering starts with the roff crate's preamble (it defines the apostrophe string Aq): the
    // title's is kept, the others' dropped.
    let mut preamble: Option<String> = None;
    for section in sections {
        let mut buf = Vec::new();
        section(&man, &mut buf).map_err(Failure::failed)?;
        let text = String::from_utf8(buf).map_err(Failure::failed)?;
        match &preamble {
            None => {
                preamble = Some(text[..text.find(".TH").unwrap_or(0)].to_string());
                out.push_str(&text);
            }
            Some(preamble) => out.push_str(text.strip_prefix(preamble.as_str()).unwrap_or(&text)),
        }
    }
    if top {
        out.push_str(&roff_commands(&cmd));
    }
    out.push_str(MAN_TAIL);
    if let Some(notes) = cmd.get_after_help() {
        out.push_str(&roff_notes(&notes.to_string()));
    }
    if let Some(page) = page {
        out.push_str(&roff_examples(&page.examples));
    }
    Ok(out.into_bytes())
}

/// `line` as roff text: backslashes, hyphens, apostrophes and anything beyond ASCII escaped, a leading
/// period kept from starting a request.
fn roff_escape(line: &str) -> String {
    let mut out = String::new();
    for c in line.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            '\'' => out.push_str("\\*(Aq"),
            c if c.is_ascii() => out.push(c),
            c => out.push_str(&format!("\\[u{:04X}]", u32::from(c))),
        }
    }
    if out.starts_with('.') { format!("\\&{out}") } else { out }
}

/// emend(1)'s COMMANDS: each group of [`GROUPS`] with its commands' pages and abouts.
fn roff_commands(cmd: &clap::Command) -> String {
    let mut out = String::from(".SH COMMANDS\n");
    for (group, names) in GROUPS {
        out.push_str(&format!(".SS \"{}\"\n", roff_escape(group)));
        for name in *names {
            let about = cmd.find_subcommand(name).and_then(|s| s.get_about()).map(|a| a.to_string());
            out.push_str(&format!(".TP\n\\fBemend\\-{}\\fR(1)\n", roff_escape(name)));
            out.push_str(&format!("{}\n", roff_escape(&about.unwrap_or_default())));
        }
    }
    out
}

/// A command's `-h` epilogue as NOTES: a blank line ends a paragraph; an indented line `  word  text` is
/// a tagged paragraph (evolve's table of why a run stops).
fn roff_notes(notes: &str) -> String {
    let mut out = String::from(".SH NOTES\n");
    let mut started = false;
    let mut in_paragraph = false;
    for line in notes.lines() {
        if line.trim().is_empty() {
            in_paragraph = false;
            continue;
        }
        match line.strip_prefix("  ").and_then(|l| l.trim_start().split_once(' ')) {
            Some((tag, text)) => {
                out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff_escape(tag), roff_escape(text.trim())));
                in_paragraph = false;
            }
            None => {
                if started && !in_paragraph {
                    out.push_str(".PP\n");
                }
                out.push_str(&format!("{}\n", roff_escape(line)));
                in_paragraph = true;
            }
        }
        started = true;
    }
    out
}

/// EXAMPLES: each caption, then its commands and output unfilled and indented.
fn roff_examples(examples: &[Example]) -> String {
    let mut out = String::from(".SH EXAMPLES\n");
    for example in examples {
        out.push_str(&format!(".PP\n{}\n.PP\n.RS 4\n.nf\n", roff_escape(&example.caption)));
        for line in &example.lines {
            out.push_str(&format!("{}\n", roff_escape(line)));
        }
        out.push_str(".fi\n.RE\n");
    }
    out
}

pub fn man(args: &ManArgs, cmd: clap::Command) -> CmdResult {
    let mut cmd = cmd;
    cmd.build();
    let page_of = |name: &str| cmd.find_subcommand(name).map(|sub| sub.clone().display_name(format!("emend-{name}")));
    let Some(dir) = &args.dir else {
        let page = match args.command.as_deref().and_then(page_of) {
            Some(sub) => man_page(&sub, false)?,
            None => man_page(&cmd, true)?,
        };
        write_stdout(&page)?;
        return Ok(exit::OK);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::bad_input(anyhow::anyhow!("--dir {}: cannot create: {e}", dir.display())))?;
    let mut pages = vec![("emend.1".to_string(), man_page(&cmd, true)?)];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("emend-{}", sub.get_name());
        pages.push((format!("{name}.1"), man_page(&sub.clone().display_name(name), false)?));
    }
    for (file, page) in &pages {
        let path = dir.join(file);
        emend_core::artifact::write_atomic(&path, page)
            .map_err(|e| Failure::failed(anyhow::anyhow!("{}: cannot write: {e}", path.display())))?;
    }
    println!("wrote {} man pages to {}", pages.len(), dir.display());
    Ok(exit::OK)
}

/// Writes all of `bytes` to stdout; a closed pipe (`emend man | head`) is no failure.
fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::failed(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_object_names_the_exit_class() {
        let v = error_object("emend.yaml: line 3: bad", exit::BAD_INPUT);
        assert_eq!(v["error"]["kind"], "bad_input");
        assert_eq!(v["error"]["exit_code"], 2);
        assert_eq!(error_object("x", exit::LOCKED)["error"]["kind"], "locked");
        assert_eq!(error_object("x", exit::FAILED)["error"]["kind"], "failed");
    }
}
