//! Regenerates the embedded default dataset:
//! `cargo run -p emend-harness --example gen_synthetic [OUT] [SEED]`
//! (default: harness/data/synthetic-locomo.json, the committed seed).

mod synthetic;

fn main() {
    let mut args = std::env::args().skip(1);
    let out =
        args.next().unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/data/synthetic-locomo.json").to_string());
    let seed = args.next().map(|s| s.parse().expect("SEED is an integer")).unwrap_or(synthetic::SEED);
    let json = synthetic::generate(seed);
    std::fs::write(&out, &json).unwrap_or_else(|e| panic!("cannot write {out}: {e}"));
    let d = emend_harness::load_str("synthetic", &json).expect("the generated dataset loads");
    eprintln!("wrote {out}: {} conversations, {} questions", d.samples().len(), d.questions().count());
}
