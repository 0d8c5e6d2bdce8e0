//! The memory plan against what a run really takes (issue 59): `--max-memory` refuses a data
//! file whose reading the plan puts above the limit, and a run the plan admits stays within it.
//! The peak is the kernel's count of the child's resident memory (`getrusage`,
//! `RUSAGE_CHILDREN`): this file holds one test, so the one child measured is the run's.

mod support;
use support::{assert_one_line_error, dir, grove_cpu, s, text};

/// The largest resident set of any child this process has waited for, bytes.
fn children_peak() -> u64 {
    // SAFETY: getrusage writes one `rusage` into the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) }, 0);
    u.ru_maxrss as u64 * 1024
}

#[test]
fn a_run_the_plan_admits_stays_within_max_memory() {
    let d = dir("memory_plan");
    let csv = d.join("rows.csv");
    // 300,000 rows of 8 inputs as text: about 26 MB.
    let mut text_rows = String::from("x0,x1,x2,x3,x4,x5,x6,x7,y\n");
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300_000 {
        let mut row = Vec::with_capacity(9);
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            row.push((x >> 11) as f64 / (1u64 << 53) as f64 * 10.0 - 5.0);
        }
        let y = row[0] * row[1] + row[2];
        text_rows.push_str(&row.iter().chain([&y]).map(|v| format!("{v:.6}")).collect::<Vec<_>>().join(","));
        text_rows.push('\n');
    }
    std::fs::write(&csv, &text_rows).unwrap();
    let size = std::fs::metadata(&csv).unwrap().len();
    let plan = size * grove::input::READ_FACTOR;
    // Below the plan: refused before a byte is read.
    let low = format!("{}", plan / 2);
    let o = grove_cpu(&["evolve", "--data", s(&csv), "--functions", "add,mul", "--pop", "50", "--gens", "2", "--max-memory", &low, "--quiet"]);
    assert_one_line_error(&o, &["reading the data (", "--max-memory"]);
    // At the plan and a little room for the program itself: admitted, and its peak within.
    let limit = plan + (64 << 20);
    let arg = format!("{limit}");
    let before = children_peak();
    let o = grove_cpu(&["evolve", "--data", s(&csv), "--functions", "add,mul", "--pop", "50", "--gens", "2", "--max-memory", &arg, "--quiet"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let peak = children_peak();
    assert!(peak > before && peak > size, "the run's peak {peak} is the measured child's (file {size} bytes)");
    assert!(peak <= limit, "peak {} MiB over the --max-memory of {} MiB (file {} MiB)", peak >> 20, limit >> 20, size >> 20);
    eprintln!("file {} MiB, plan {} MiB, peak {} MiB", size >> 20, plan >> 20, peak >> 20);
}
