//! Probes the `modules.parquet` of a work directory with the default `[probe]` settings and
//! prints the yield: `cargo run -p ksmith-probe --example probe_workdir -- WORKDIR`.

use ksmith_core::context::StageContext;
use ksmith_core::progress::ProgressMode;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{ProbeRow, ProbeStatus};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workdir = std::env::args()
        .nth(1)
        .ok_or("usage: probe_workdir WORKDIR")?;
    let mut ctx = StageContext::new(&workdir, 0, ProgressMode::Silent);
    ctx.force = true;
    let report = ksmith_probe::run(&ksmith_probe::ProbeConfig::default(), &ctx)?;
    println!("{}", report.summary());
    let rows: Vec<ProbeRow> = read_table(&ProbeRow::path_in(workdir.as_ref()))?;
    let ok = rows.iter().filter(|r| r.status == ProbeStatus::Ok).count();
    let repaired = rows
        .iter()
        .filter(|r| r.status == ProbeStatus::Ok && !r.repair_steps.is_empty())
        .count();
    println!(
        "yield: {ok}/{} = {:.1}% ({repaired} after repair)",
        rows.len(),
        100.0 * ok as f64 / rows.len().max(1) as f64
    );
    for r in rows.iter().filter(|r| r.status != ProbeStatus::Ok) {
        println!(
            "  {} {} {:?} {}: {}",
            r.repo,
            r.class_name,
            r.status,
            r.error_class.as_deref().unwrap_or(""),
            r.error_message.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
