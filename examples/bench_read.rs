//! Throughput of the data reader: writes a PonyGE2-style tab-separated file (6 columns, numbers
//! with 12 significant digits) of about `--mb` megabytes to a temporary directory, then times
//! `grove::data::read` on it, best of three. Run: `cargo run --release --example bench_read`.

use std::io::Write;
use std::time::Instant;

use grove::rng::{Purpose, Stream};

fn main() -> anyhow::Result<()> {
    let mb: usize = std::env::args()
        .skip_while(|a| a != "--mb")
        .nth(1)
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(200);
    let path = std::env::temp_dir().join(format!("grove-bench-read-{}.txt", std::process::id()));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        writeln!(f, "x0\tx1\tx2\tx3\tx4\tresponse")?;
        let mut s = Stream::new(1, 0, 0, Purpose::Bench);
        let mut written = 0usize;
        while written < mb << 20 {
            let mut line = String::new();
            for c in 0..6 {
                line.push_str(&format!("{:.12}", s.unit_f64() * 6.0));
                line.push(if c == 5 { '\n' } else { '\t' });
            }
            written += line.len();
            f.write_all(line.as_bytes())?;
        }
    }
    let bytes = std::fs::metadata(&path)?.len() as f64;
    let mut best = f64::INFINITY;
    let mut rows = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let d = grove::data::read(&path, None)?;
        best = best.min(t.elapsed().as_secs_f64());
        rows = d.n_rows;
    }
    std::fs::remove_file(&path)?;
    println!(
        "{:.1} MB, {rows} rows, {} threads: best {best:.3} s, {:.0} MB/s (file read from the page cache + parse)",
        bytes / 1e6,
        rayon::current_num_threads(),
        bytes / 1e6 / best
    );
    Ok(())
}
