//! Journal tests, compiled into one binary: the shared backend suite, property tests,
//! tamper, crash, lock and format tests.

mod binding;
mod common;
mod compact;
mod crash;
mod disk;
mod locks;
mod props;
mod suite;
mod view;
