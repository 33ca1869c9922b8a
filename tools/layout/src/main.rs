//! `switchyard-layout [--edges] [--allow FILE,FILE...]... CRATE_DIR...`: prints the circles of
//! imports between each crate's files and exits 1 if any is not allowed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut show_edges = false;
    let mut allowed: Vec<BTreeSet<PathBuf>> = Vec::new();
    let mut dirs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--edges" => show_edges = true,
            "--allow" => match args.next() {
                Some(list) => allowed.push(list.split(',').map(PathBuf::from).collect()),
                None => {
                    eprintln!("--allow needs a comma-separated list of files");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!(
                    "usage: switchyard-layout [--edges] [--allow FILE,FILE...]... CRATE_DIR...\n\
                     Lists the circles of imports between the files of each crate (paths relative\n\
                     to the crate); --allow accepts a circle of exactly those files."
                );
                return ExitCode::SUCCESS;
            }
            _ => dirs.push(PathBuf::from(arg)),
        }
    }
    let mut failed = false;
    for dir in dirs {
        let graph = match switchyard_layout::graph(&dir) {
            Ok(graph) => graph,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        };
        let circles = switchyard_layout::circles(&graph);
        println!(
            "{}: {} files, {} imports, {} circles",
            dir.display(),
            graph.files.len(),
            graph.edges.len(),
            circles.len()
        );
        if show_edges {
            for ((from, to), line) in &graph.edges {
                println!("  {}:{} -> {}", from.display(), line, to.display());
            }
        }
        for circle in circles {
            let ok = allowed.contains(&circle.files);
            print!("{}{circle}", if ok { "allowed " } else { "" });
            failed |= !ok;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
