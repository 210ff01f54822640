use evaluation::packing::{simulate, View};
use evaluation::workload::{generate, WorkloadSpec};
use placement::{BestFit, FirstFit, Placement, Tetris};
fn main() {
    let spec = WorkloadSpec::full(11);
    let jobs = generate(&spec);
    let n: usize = jobs.iter().map(|j| j.durations.len()).sum();
    println!("jobs {} tasks {n} last arrival {}", jobs.len(), jobs.last().unwrap().arrival_s);
    let pols: Vec<(String, Box<dyn Placement>)> = vec![
        ("ff".into(), Box::new(FirstFit)), ("bf".into(), Box::new(BestFit)),
        ("t0".into(), Box::new(Tetris::new(0.0).unwrap())), ("t25".into(), Box::new(Tetris::new(0.25).unwrap())), ("t99".into(), Box::new(Tetris::new(0.99).unwrap()))];
    for v in [View::Blind, View::Aware] {
        for (n, p) in &pols {
            let t = std::time::Instant::now();
            let r = simulate(&jobs, &spec, p.as_ref(), if n.starts_with('t') { View::Aware } else { v });
            println!("{v:?} {n}: mk {:.0} jct {:.0} util {:?} unfair {:.3} slow {:.2} ({:.1}s)", r.makespan_s, r.avg_jct_s, r.utilisation.map(|u| (u*100.0).round()), r.unfairness, r.slowdown, t.elapsed().as_secs_f64());
        }
    }
}
