//! The whole evaluation on tiny workloads: the document's structure and the headline claims.

#![allow(clippy::unwrap_used)]

use evaluation::report::{evaluate, Config};
use indicatif::ProgressBar;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_evaluation_writes_the_document_and_keeps_the_claims() {
    let dir = tempfile::tempdir().unwrap();
    let bar = ProgressBar::hidden();
    let summary = evaluate(&Config::small(), dir.path(), &bar).await.unwrap();
    // H-DRF: no violations, no starvation; the baselines: both, on the paper's examples.
    assert_eq!(summary.violation_steps[0], 0, "{summary:?}");
    assert_eq!(summary.starvation[0], 0, "{summary:?}");
    assert!(
        summary.violation_steps[1] > 0,
        "flattened DRF breaks eng's half: {summary:?}"
    );
    assert!(
        summary.violation_steps[2] > 0,
        "plain sums break n22's: {summary:?}"
    );
    assert!(
        summary.starvation[2] > 0,
        "plain sums starve n22 under churn: {summary:?}"
    );
    // Tetris improves job completion over first-fit in both settings.
    assert!(
        summary.blind_gain.1 < 0.0 && summary.aware_gain.1 < 0.0,
        "{summary:?}"
    );
    // The live coordinator allocates as the pure allocator does.
    assert!(summary.online_deviation < 1e-9, "{summary:?}");

    let doc = std::fs::read_to_string(dir.path().join("evaluation.md")).unwrap();
    for heading in [
        "# Evaluation",
        "## Headline",
        "## 1. Hierarchical fairness",
        "## 2. Packing",
        "### Setting: baselines see CPU and memory only",
        "### Setting: baselines see all four resources",
        "### How close to the paper, and why",
        "## 3. Online equals offline",
        "seed 42",
        "Tetris F=0.99",
    ] {
        assert!(doc.contains(heading), "missing {heading:?}");
    }
    // Every plot the document links exists and is an SVG.
    let mut linked = 0;
    for part in doc.split("](evaluation/").skip(1) {
        let file = &part[..part.find(')').unwrap()];
        let svg = std::fs::read_to_string(dir.path().join("evaluation").join(file)).unwrap();
        assert!(svg.contains("<svg"), "{file}");
        linked += 1;
    }
    assert_eq!(
        linked,
        3 * 3 + 3,
        "nine fairness plots and three utilisation plots"
    );
}
