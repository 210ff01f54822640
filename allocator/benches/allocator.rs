//! Allocator benchmarks.
//!
//! Run with:
//! - `cargo bench -p parley-allocator --bench allocator` — criterion timing of one `pick`, then the
//!   `DeclineOffers` rounds at the small size (1k agents x 100 frameworks).
//! - `ALLOC_BENCH_SIZE=10k cargo bench -p parley-allocator --bench allocator -- rounds` — one size only
//!   (`1k`, `10k`, `50k`), rounds only; `ALLOC_BENCH_TREE=flat` for a flat tree (each framework in
//!   its own top-level role) instead of 10 top roles x 10 sub-roles; `ALLOC_BENCH_ROUNDS=n` to
//!   override the number of rounds; `ALLOC_BENCH_WINDOW=n` for the window size of the per-window
//!   summaries (default 100 rounds); `ALLOC_BENCH_FILTERS=exact` for `FilterMode::Exact` (default:
//!   the allocator's default, `SkipOnly`); `ALLOC_BENCH_GPUS=P` to give P % of the agents
//!   `gpus=4` (every (100/P)-th agent), turn GPU gating on and let every 10th framework declare
//!   the `gpu_resources` capability; `ALLOC_BENCH_QUOTA=1` to put the 10 top roles under quota
//!   (a guarantee they meet, a cpus limit that binds); `ALLOC_BENCH_RESERVED=F` to
//!   reserve `cpus=4,mem=1024,disk=1024` (or `ALLOC_BENCH_RESERVE`) of their free resources on
//!   a fraction F (0 to 1, spread evenly) of the agents for top role `t(i % 10)`
//!   (those pools are decided inside that role's subtree).
//!
//! The rounds follow Apache Mesos' `DeclineOffers` benchmark: agents of `cpus:24, mem:4096,
//! disk:4096` with 16 cpus already in use (allocated round-robin to the frameworks); each round
//! offers every agent's free resources once (`cycle`) and every framework declines every offer
//! with an infinite filter (`decline(.., u64::MAX)`: `release_in` and `add_filter` in one call, as
//! Mesos' `recoverResources` takes the filter). It prints round 0, a summary
//! of every window of 100 rounds (min / median / max), the largest window median (the acceptance
//! figure: every 100-round window's median), and the process's peak memory (VmHWM). Run one size per process so the
//! peak memory belongs to that size.
//!
//! The bench allocates with mimalloc, as the coordinator (the allocator's one user) does.

/// The coordinator's memory allocator (see the module docs).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use allocator::{Allocator, FilterMode, Policy};
use criterion::Criterion;
use protocol::{AgentId, FrameworkId, Resources, RolePath};
use uuid::Uuid;

#[derive(Clone, Copy)]
struct Size {
    name: &'static str,
    agents: usize,
    frameworks: usize,
    rounds: usize,
}

const SIZES: [Size; 3] = [
    Size {
        name: "1k",
        agents: 1_000,
        frameworks: 100,
        rounds: 200,
    },
    Size {
        name: "10k",
        agents: 10_000,
        frameworks: 1_000,
        rounds: 2_000,
    },
    Size {
        name: "50k",
        agents: 50_000,
        frameworks: 6_000,
        rounds: 20,
    },
];

fn res(s: &str) -> Resources {
    s.parse().unwrap_or_default()
}

fn role_for(i: usize, flat: bool) -> RolePath {
    let path = if flat {
        format!("f{i}")
    } else {
        format!("t{}/s{}", i % 10, (i / 10) % 10)
    };
    RolePath::new(path)
        .unwrap_or_else(|_| RolePath::new("bench").unwrap_or_else(|_| unreachable!()))
}

/// The cluster of the benchmark, before any round.
fn setup(size: Size, flat: bool) -> (Allocator, Vec<AgentId>, Vec<FrameworkId>) {
    let mut alloc = Allocator::new(Policy::Hdrf);
    if std::env::var("ALLOC_BENCH_FILTERS").is_ok_and(|m| m == "exact") {
        alloc.set_filter_mode(FilterMode::Exact);
    }
    let fws: Vec<FrameworkId> = (0..size.frameworks)
        .map(|i| FrameworkId(Uuid::from_u128(i as u128 + 1)))
        .collect();
    for (i, fw) in fws.iter().enumerate() {
        alloc
            .add_framework(*fw, &role_for(i, flat))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let total = res("cpus=24,mem=4096,disk=4096");
    let gpu_total = res("cpus=24,mem=4096,disk=4096,gpus=4");
    // Every `gpu_every`-th agent has GPUs (`ALLOC_BENCH_GPUS` percent of them).
    let gpu_every = std::env::var("ALLOC_BENCH_GPUS")
        .ok()
        .and_then(|p| p.parse::<usize>().ok())
        .filter(|p| (1..=100).contains(p))
        .map(|p| 100 / p);
    if gpu_every.is_some() {
        alloc.set_gpu_gating(true);
        for fw in fws.iter().step_by(10) {
            alloc
                .set_gpu_capable(*fw, true)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    // `ALLOC_BENCH_QUOTA=1`: the 10 top roles (`t0`..`t9`) under quota, each guaranteed half of
    // what it holds at the start (met) and limited to 2.5 of its 16 initial cpus per agent
    // share (binding: a role's offers are cut, then it is blocked).
    if std::env::var("ALLOC_BENCH_QUOTA").is_ok_and(|q| q == "1") && !flat {
        let per_role = size.agents as f64 * 16.0 / 10.0;
        for t in 0..10 {
            let role = RolePath::new(format!("t{t}")).unwrap_or_else(|e| panic!("{e}"));
            let g = res(&format!("cpus={}", per_role / 2.0));
            let l = res(&format!(
                "cpus={},mem={}",
                per_role * 1.25,
                size.agents as f64 * 4096.0
            ));
            alloc
                .set_role_quota(&role, Some(&g), Some(&l))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let used = res("cpus=16");
    let agents: Vec<AgentId> = (0..size.agents)
        .map(|i| AgentId(Uuid::from_u128(1 << 64 | i as u128)))
        .collect();
    for (i, agent) in agents.iter().enumerate() {
        let has_gpus = gpu_every.is_some_and(|n| i % n == 0);
        alloc
            .add_agent(*agent, if has_gpus { &gpu_total } else { &total })
            .unwrap_or_else(|e| panic!("{e}"));
        alloc
            .allocate(fws[i % fws.len()], *agent, &used)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    if !flat {
        reserve(&mut alloc, &agents);
    }
    (alloc, agents, fws)
}

/// `ALLOC_BENCH_RESERVED=F`: agent `i` of a fraction F of the agents (spread evenly) reserves
/// `cpus=4,mem=1024,disk=1024` (or `ALLOC_BENCH_RESERVE`) of its free resources for top role
/// `t(i % 10)`.
fn reserve(alloc: &mut Allocator, agents: &[AgentId]) {
    let Some(f) = std::env::var("ALLOC_BENCH_RESERVED")
        .ok()
        .and_then(|f| f.parse::<f64>().ok())
        .filter(|f| (0.0..=1.0).contains(f) && *f > 0.0)
    else {
        return;
    };
    let reserved = res(&std::env::var("ALLOC_BENCH_RESERVE")
        .unwrap_or_else(|_| "cpus=4,mem=1024,disk=1024".into()));
    for (i, agent) in agents.iter().enumerate() {
        if ((i + 1) as f64 * f).floor() > (i as f64 * f).floor() {
            let role = RolePath::new(format!("t{}", i % 10)).unwrap_or_else(|e| panic!("{e}"));
            alloc
                .set_reservation(*agent, &role, &reserved)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn summary(times: &[Duration]) -> String {
    if times.is_empty() {
        return "no rounds".into();
    }
    let mut sorted = times.to_vec();
    sorted.sort();
    format!(
        "min {:.3} ms, median {:.3} ms, max {:.3} ms",
        ms(sorted[0]),
        ms(sorted[sorted.len() / 2]),
        ms(sorted[sorted.len() - 1])
    )
}

/// The median of `times` (the upper one for an even count); zero when empty.
fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn rounds(size: Size, flat: bool, rounds: usize, every: usize) {
    let shape = if flat { "flat" } else { "10x10 tree" };
    let t0 = Instant::now();
    let (mut alloc, _agents, _fws) = setup(size, flat);
    println!(
        "== DeclineOffers {} agents x {} frameworks ({shape}, filters {:?}, GPU gating {}), \
         {rounds} rounds",
        size.agents,
        size.frameworks,
        alloc.filter_mode(),
        alloc.gpu_gating()
    );
    println!("setup {:.1} ms", ms(t0.elapsed()));
    let mut all = Vec::with_capacity(rounds);
    let mut window = Vec::new();
    // The `cycle` part of each round in the window (the rest is the declines).
    let mut cycles = Vec::new();
    let every = every.max(1);
    // (median, first round, last round) of the window with the largest median.
    let mut worst: Option<(Duration, usize, usize)> = None;
    let mut offers = 0usize;
    for r in 0..rounds {
        let start = Instant::now();
        let decisions = alloc.cycle(None, 1);
        let cycle_time = start.elapsed();
        for d in &decisions {
            alloc
                .decline(
                    d.framework,
                    d.agent,
                    &d.resources,
                    d.reservation.as_ref(),
                    u64::MAX,
                )
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let took = start.elapsed();
        offers += decisions.len();
        all.push(took);
        window.push(took);
        cycles.push(cycle_time);
        if r == 0 {
            println!(
                "round 0: {:.3} ms ({} offers; cycle {:.3} ms, declines {:.3} ms)",
                ms(took),
                decisions.len(),
                ms(cycle_time),
                ms(took - cycle_time)
            );
        }
        if (r + 1) % every == 0 || r + 1 == rounds {
            println!(
                "rounds {:>5}..{:>5}: {}; cycle median {:.3} ms ({} offers so far)",
                r + 1 - window.len(),
                r,
                summary(&window),
                ms(median(&cycles)),
                offers
            );
            cycles.clear();
            let m = median(&window);
            if worst.is_none_or(|w| m > w.0) {
                worst = Some((m, r + 1 - window.len(), r));
            }
            window.clear();
        }
    }
    println!("all {rounds} rounds: {}", summary(&all));
    if let Some((m, a, b)) = worst {
        println!(
            "largest {every}-round window median: {:.3} ms (rounds {a}..{b})",
            ms(m)
        );
    }
    println!("total offers (= decline filters stored): {offers}");
    match vm_hwm_kib() {
        Some(kib) => println!("peak memory (VmHWM): {:.1} MiB", kib as f64 / 1024.0),
        None => println!("peak memory: /proc/self/status not readable"),
    }
}

fn pick_benches(c: &mut Criterion) {
    for size in &SIZES[..2] {
        for flat in [false, true] {
            let (mut alloc, agents, _fws) = setup(*size, flat);
            let free = alloc.agent_free(agents[0]).unwrap_or_default();
            let shape = if flat { "flat" } else { "tree" };
            let name = format!(
                "pick/{}x{}/{shape}/no-filters",
                size.agents, size.frameworks
            );
            c.bench_function(&name, |b| b.iter(|| alloc.pick(Some(agents[0]), &free, 1)));
            // Half the frameworks filtered on this agent.
            let mut it = 0;
            while it < size.frameworks / 2 {
                let Some(fw) = alloc.pick(Some(agents[0]), &free, 1) else {
                    break;
                };
                alloc
                    .add_filter(fw, agents[0], &free, u64::MAX)
                    .unwrap_or_else(|e| panic!("{e}"));
                it += 1;
            }
            let name = format!(
                "pick/{}x{}/{shape}/half-filtered",
                size.agents, size.frameworks
            );
            c.bench_function(&name, |b| b.iter(|| alloc.pick(Some(agents[0]), &free, 1)));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let only_rounds = args.iter().any(|a| a == "rounds");
    let size_name = std::env::var("ALLOC_BENCH_SIZE").unwrap_or_else(|_| "1k".into());
    let flat = std::env::var("ALLOC_BENCH_TREE").is_ok_and(|t| t == "flat");
    let Some(size) = SIZES.iter().copied().find(|s| s.name == size_name) else {
        eprintln!("ALLOC_BENCH_SIZE must be one of 1k, 10k, 50k; got {size_name:?}");
        std::process::exit(2);
    };
    let n_rounds = std::env::var("ALLOC_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(size.rounds);
    let window = std::env::var("ALLOC_BENCH_WINDOW")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100);
    if !only_rounds {
        let mut c = Criterion::default()
            .configure_from_args()
            .sample_size(20)
            .measurement_time(Duration::from_secs(2))
            .warm_up_time(Duration::from_millis(300));
        pick_benches(&mut c);
        c.final_summary();
    }
    rounds(size, flat, n_rounds, window);
}
