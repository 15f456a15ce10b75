//! The `emend` binary: parses arguments, runs one command, prints the error
//! chain and returns a documented exit code (see `emend_core::exit`).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    // Output piped into `head` or `less` ends quietly when the reader closes,
    // as for any Unix tool, instead of panicking on a broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::main()
}
