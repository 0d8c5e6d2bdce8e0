//! Tests of the data reader: formats, errors with their lines and columns, limits.

use super::*;

fn parse_str(text: &str, target: Option<&str>) -> Result<Dataset, DataError> {
    parse(text.as_bytes(), "t.csv", target)
}

/// A file in the temporary folder holding `bytes`, removed when dropped.
struct TempFile(std::path::PathBuf);
impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!("grove-read-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// `evolve --data /dev/zero` was killed by the kernel at 24.3 GB, `/dev/urandom` reached
// 6.2 GB in 30 s: the reader had no bound on a line.
#[test]
fn endless_and_binary_files_are_refused_at_once() {
    for dev in ["/dev/zero", "/dev/urandom"] {
        if !Path::new(dev).exists() {
            continue;
        }
        let start = std::time::Instant::now();
        let e = read(dev, None).unwrap_err().to_string();
        assert!(e.contains("NUL byte") && e.starts_with(&format!("{dev}:")), "{e}");
        assert!(start.elapsed().as_secs_f64() < 5.0, "{dev} took {:?}", start.elapsed());
    }
    let f = TempFile::new("nul.csv", b"a,b\n1,2\n3,\x004\n");
    let e = read(&f.0, None).unwrap_err().to_string();
    assert!(e.ends_with(":3: a NUL byte: this is binary data, not a text table"), "{e}");
}

#[test]
fn a_line_over_the_limit_is_named_wherever_the_blocks_cut_it() {
    let text = b"a,b\n1,2\n3333333333333333333333333333333333333333333333333,4\n5,6\n";
    let f = TempFile::new("long.csv", text);
    // Blocks of 8 bytes and a limit of 40: the long line (line 3) spans several blocks.
    for block in [4, 8, 16, 40] {
        let e = read_limited(&f.0, 40, block).unwrap_err().to_string();
        assert!(e.contains(":3: a line longer than 40 bytes"), "block {block}: {e}");
    }
    assert_eq!(read_limited(&f.0, 60, 8).unwrap(), text);
    // A last line without a line end counts too.
    let tail = b"a,b\n1,22222222222222222222222222222222222222222222";
    let f = TempFile::new("tail.csv", tail);
    let e = read_limited(&f.0, 40, 8).unwrap_err().to_string();
    assert!(e.contains(":2: a line longer"), "{e}");
    assert_eq!(read_text_file(&f.0).unwrap(), tail);
}

// A header-only CSV of 100,000 columns took 17 s to refuse: the duplicate-name check
// compared every pair.
#[test]
fn wide_headers_are_read_in_linear_time_and_bounded() {
    let header: Vec<String> = (0..200_000).map(|c| format!("c{c}")).collect();
    let start = std::time::Instant::now();
    let e = parse_str(&header.join(","), None).unwrap_err();
    assert!(e.message.contains("no data rows"), "{e}");
    assert!(start.elapsed().as_secs_f64() < 2.0, "took {:?}", start.elapsed());
    let mut dup = header.clone();
    dup[150_000] = "c7".into();
    let e = parse_str(&dup.join(","), None).unwrap_err();
    assert!(e.message.contains("column 150001 (`c7`): duplicate column name, also column 8"), "{e}");
    let too_many = vec!["x"; MAX_COLUMNS + 1].iter().enumerate().map(|(i, _)| format!("x{i}")).collect::<Vec<_>>().join(",");
    let e = parse_str(&too_many, None).unwrap_err();
    assert!(e.message.contains(&format!("{} columns; grove reads at most {MAX_COLUMNS}", MAX_COLUMNS + 1)), "{e}");
}

#[test]
fn cells_and_names_are_bounded() {
    let long = "9".repeat(MAX_CELL_BYTES + 1);
    let e = parse_str(&format!("a,b\n1,{long}\n"), None).unwrap_err();
    assert_eq!(e.column, Some((2, "b".to_string())));
    assert!(e.message.contains(&format!("a cell of {} bytes", MAX_CELL_BYTES + 1)), "{e}");
    let e = parse_str(&format!("a,{long}x\n1,2\n"), None).unwrap_err();
    assert!(e.message.contains("header column 2 has a name of"), "{e}");
    // At the limit, still a number.
    let at = format!("0.{}", "1".repeat(MAX_CELL_BYTES - 2));
    assert!(parse_str(&format!("a,b\n1,{at}\n"), None).is_ok());
}

/// The error for `text`, checked to be on `line` and in `column` (number, name).
fn error(text: &str, target: Option<&str>, line: Option<usize>, column: Option<(usize, &str)>) -> String {
    let e = parse_str(text, target).expect_err("bad input must be an error");
    assert_eq!(e.line, line, "{e}");
    assert_eq!(e.column, column.map(|(n, s)| (n, s.to_string())), "{e}");
    let shown = e.to_string();
    assert!(!shown.contains('\n'), "one line: {shown}");
    shown
}

#[test]
fn reads_csv_into_feature_major_columns() {
    let d = parse_str("a,b,y\n1,2,3\n4,5,6\n", None).unwrap();
    d.validate().unwrap();
    assert_eq!(d.names, ["a", "b"]);
    assert_eq!(d.target, "y");
    assert_eq!(d.shape(), (2, 2));
    assert_eq!(d.x, [1.0, 4.0, 2.0, 5.0]);
    assert_eq!(d.y, [3.0, 6.0]);
    // A target in the middle is taken out; the features keep their order.
    let d = parse_str("a,b,y\n1,2,3\n4,5,6\n", Some("b")).unwrap();
    assert_eq!((d.names.clone(), d.target.as_str()), (vec!["a".to_string(), "y".into()], "b"));
    assert_eq!((d.x, d.y), (vec![1.0, 4.0, 3.0, 6.0], vec![2.0, 5.0]));
}

#[test]
fn keeps_full_precision_in_f64() {
    let d = parse_str("a,y\n0.1,1e-3\n-2.5E2,.5\n", None).unwrap();
    assert_eq!(d.x64.as_deref(), Some(&[0.1, -250.0][..]));
    assert_eq!(d.y64.as_deref(), Some(&[0.001, 0.5][..]));
    assert_eq!(d.x, [0.1f32, -250.0]);
}

#[test]
fn detects_delimiters() {
    let want = |d: Dataset| {
        assert_eq!(d.names, ["a", "b"]);
        assert_eq!((d.x, d.y), (vec![1.0, 4.0, 2.0, 5.0], vec![3.0, 6.0]));
    };
    want(parse_str("a\tb\ty\n1\t2\t3\n4\t5\t6\n", None).unwrap());
    want(parse_str("a;b;y\n1;2;3\n4;5;6\n", None).unwrap());
    want(parse_str("  a   b  y  \n1 2   3\n\t4  5\t 6\n", None).unwrap());
    want(parse_str("a , b, y\n 1 ,2 , 3\n4,5,6", None).unwrap());
    want(parse_str("# a\tb\ty\n1\t 2\t3 \n4\t5\t6\n", None).unwrap());
    assert_eq!(Delimiter::detect(b"\"a,b\";c"), Delimiter::Semicolon);
    assert_eq!(Delimiter::detect(b"a b,c\td"), Delimiter::Tab);
}

#[test]
fn handles_quotes_bom_crlf_and_blank_lines() {
    let text =
        "\u{feff}\"first, x\",\"say \"\"hi\"\"\",\" y \"\r\n\"1\", \"2.5\" ,3\r\n\r\n4,5,\"6\"\r\n\r\n";
    let d = parse_str(text, None).unwrap();
    assert_eq!(d.names, ["first, x", "say \"hi\""]);
    assert_eq!(d.target, "y");
    assert_eq!((d.x, d.y), (vec![1.0, 4.0, 2.5, 5.0], vec![3.0, 6.0]));
    let d = parse_str("\"a b\" y\n\"1\" 2\n", None).unwrap();
    assert_eq!((d.names, d.target), (vec!["a b".to_string()], "y".to_string()));
    // Blank lines before the header; a last line without a line end.
    let d = parse_str("\n  \na,y\n1,2", None).unwrap();
    assert_eq!((d.x, d.y), (vec![1.0], vec![2.0]));
}

#[test]
fn bad_cells_name_line_and_column() {
    let e = error("a,b,y\n1,2,3\n4,abc,6\n", None, Some(3), Some((2, "b")));
    assert_eq!(e, "t.csv:3: column 2 (b): `abc` is not a number");
    // Line numbers count blank lines and a BOM does not shift them.
    error("\u{feff}a,b,y\n\n1,2,3\n\n4,5,x\n", None, Some(5), Some((3, "y")));
    let e = error("a,b,y\n1,,3\n", None, Some(2), Some((2, "b")));
    assert!(e.contains("empty cell"), "{e}");
    let e = error("a,b,y\n1,\"\",3\n", None, Some(2), Some((2, "b")));
    assert!(e.contains("empty cell"), "{e}");
    let e = error("a,b,y\n1,2,3\n1,1,2,\n", None, Some(3), None);
    assert!(e.contains("row has 4 cells, expected 3 as in the header"), "{e}");
    let e = error("a\tb\ty\n1 2 3\n", None, Some(2), None);
    assert!(e.contains("row has 1 cell, expected 3"), "{e}");
    let e = error("a,b,y\n1,\"2,3\n", None, Some(2), Some((2, "b")));
    assert!(e.contains("unterminated quote"), "{e}");
    let e = error("a,b,y\n1,\"2\"x,3\n", None, Some(2), Some((2, "b")));
    assert!(e.contains("text after the closing quote"), "{e}");
    let e = error("a,b,y\n1,2,3,\"4\n", None, Some(2), None);
    assert!(e.contains("cell 4 (beyond the 3 columns): unterminated quote"), "{e}");
    let long = format!("a,y\n1,{}\n", "z".repeat(100));
    let e = error(&long, None, Some(2), Some((2, "y")));
    assert!(e.contains(&format!("`{}…` is not a number", "z".repeat(40))), "{e}");
}

#[test]
fn nan_infinity_and_overflow_are_rejected() {
    for (cell, what) in [
        ("nan", "is NaN"),
        ("NaN", "is NaN"),
        ("inf", "is infinite"),
        ("-Infinity", "is infinite"),
        ("1e400", "overflows to infinity"),
        ("-3.5e38", "is outside the f32 range"),
    ] {
        let e = error(&format!("a,y\n1,2\n{cell},2\n"), None, Some(3), Some((1, "a")));
        assert!(e.contains(&format!("`{cell}` {what}")), "{e}");
    }
    // The largest f32 is fine.
    assert!(parse_str("a,y\n3.4028234e38,1\n", None).is_ok());
}

#[test]
fn bad_files_and_headers() {
    let e = error("", None, None, None);
    assert_eq!(e, "t.csv: the file is empty: expected a header line of column names, then data rows");
    let e = error("\n \r\n", None, None, None);
    assert!(e.contains("only blank lines"), "{e}");
    let e = error("a,b,y\n", None, Some(1), None);
    assert!(e.contains("header only: the file has no data rows"), "{e}");
    let e = error("\na,b,y\r\n\r\n", None, Some(2), None);
    assert!(e.contains("header only"), "{e}");
    let e = error("a,b,a\n1,2,3\n", None, Some(1), None);
    assert!(e.contains("header column 3 (`a`): duplicate column name, also column 1"), "{e}");
    let e = error("a,,y\n1,2,3\n", None, Some(1), None);
    assert!(e.contains("header column 2 has an empty name"), "{e}");
    // A file without a header: said so, even when its first row repeats a value.
    for text in ["1,2,3\n4,5,6\n", "1,2,1\n4,5,6\n", "0.5 -1e3\n"] {
        let e = error(text, None, Some(1), None);
        assert!(e.contains("looks like data, not a header"), "{e}");
    }
    let e = error("y\n1\n", None, Some(1), None);
    assert!(e.contains("the header has one column (`y`)"), "{e}");
    let e = error("a,y\r1,2\r", None, Some(1), None);
    assert!(e.contains("lone carriage return"), "{e}");
    let e = error("a,\"b\n1,2\n", None, Some(1), None);
    assert!(e.contains("header column 2: unterminated quote"), "{e}");
    let e = parse(b"a,\xff,y\n1,2,3\n", "t.csv", None).unwrap_err();
    assert_eq!((e.line, e.to_string().contains("not valid UTF-8")), (Some(1), true), "{e}");
}

#[test]
fn unknown_target_lists_the_columns() {
    let e = error("x0,x1,Response\n1,2,3\n", Some("response"), Some(1), None);
    assert_eq!(
        e,
        "t.csv:1: unknown target column `response` (did you mean `Response`?): the columns are `x0`, `x1`, `Response`"
    );
    let d = parse_str("x0,x1,Response\n1,2,3\n", Some("x0")).unwrap();
    assert_eq!((d.names, d.y), (vec!["x1".to_string(), "Response".into()], vec![1.0]));
}

#[test]
fn fast_path_agrees_with_str_parse_bit_for_bit() {
    use crate::rng::{Purpose, Stream};
    let mut s = Stream::new(5, 0, 0, Purpose::Bench);
    let mut fast = 0;
    for k in 0..20_000 {
        // Random plain decimals: sign, up to 21 digits with a point somewhere, an exponent.
        let n_digits = 1 + s.below(21) as usize;
        let mut text: String = (0..n_digits).map(|_| char::from(b'0' + s.below(10) as u8)).collect();
        if s.chance(0.7) {
            text.insert(s.below(n_digits as u32 + 1) as usize, '.');
        }
        if s.chance(0.3) {
            text.insert(0, if s.chance(0.5) { '-' } else { '+' });
        }
        if s.chance(0.4) {
            text += &format!("e{}", s.below(60) as i32 - 30);
        }
        let want: f64 = text.parse().unwrap_or_else(|_| panic!("case {k}: `{text}`"));
        if let Some(got) = fast_f64(text.as_bytes()) {
            assert_eq!(got.to_bits(), want.to_bits(), "case {k}: `{text}`");
            fast += 1;
        }
    }
    assert!(fast > 10_000, "the fast path took only {fast} of 20000");
    for text in ["5.21896597549", "-0", "0.5", "1e22", "1.", ".5", "+.5e-3", "1234567890123456e-22"] {
        let got = fast_f64(text.as_bytes()).unwrap_or_else(|| panic!("`{text}` takes the fast path"));
        assert_eq!(got.to_bits(), text.parse::<f64>().unwrap().to_bits(), "`{text}`");
    }
    for text in [
        "1e",
        "e5",
        "-",
        ".",
        "1e-400",
        "1e23",
        "123456789012345678e-22",
        "1.5x",
        "nan",
        "inf",
        "0x10",
        "1_0",
    ] {
        assert_eq!(fast_f64(text.as_bytes()), None, "`{text}` takes the slow path");
    }
    assert_eq!(fast_f64(b"9007199254740993"), None, "above 2^53 goes to the slow path");
    assert_eq!(fast_f64(b"1e"), None);
    assert!(parse_number(b"1e-400").is_ok_and(|v| v == 0.0));
}

/// A generated table of `rows` rows, with blank lines and `\r\n` here and there.
fn table(rows: usize) -> String {
    let mut s = String::from("x0,x1,x2,y\n");
    for r in 0..rows {
        let v = r as f64;
        s += &format!("{},{:.6},{:e},{}", v, v * 0.001 - 3.0, v * 1.5e-7, -v);
        s += if r % 97 == 0 { "\r\n\n" } else { "\n" };
    }
    s
}

#[test]
fn chunked_parse_equals_serial_parse() {
    let text = table(3000);
    let serial = parse_chunked(text.as_bytes(), "t", None, usize::MAX).unwrap();
    for chunk in [1, 7, 100, 4096] {
        let body = &text.as_bytes()[11..];
        assert!(chunk_bounds(body, chunk).len() > 5, "several chunks");
        let parallel = parse_chunked(text.as_bytes(), "t", None, chunk).unwrap();
        assert_eq!(parallel, serial, "chunk {chunk}");
    }
    assert_eq!(serial.shape(), (3000, 3));
    assert_eq!(serial.row(2999).unwrap(), vec![2999.0, (2.999 - 3.0) as f32, (2999.0 * 1.5e-7) as f32]);
    // With the real chunk size, a table of a few megabytes is still split.
    let big = table(120_000);
    assert!(chunk_bounds(big.as_bytes(), CHUNK_BYTES).len() >= 3, "{} bytes", big.len());
    assert_eq!(parse(big.as_bytes(), "t", None), parse_chunked(big.as_bytes(), "t", None, usize::MAX));
}

#[test]
fn chunked_parse_reports_the_first_error_at_its_line() {
    let mut lines: Vec<String> = table(2000).lines().map(str::to_string).collect();
    // Line numbers are 1-based: lines[k] is line k + 1. Two bad cells, far apart.
    lines[1500] = "1,2,bad,4".into();
    lines[700] = "1,2,3".into();
    let text = lines.join("\n");
    for chunk in [usize::MAX, 1, 64, 1000] {
        let e = parse_chunked(text.as_bytes(), "t", None, chunk).unwrap_err();
        assert_eq!((e.line, &e.column), (Some(701), &None), "chunk {chunk}: {e}");
        assert!(e.message.contains("row has 3 cells, expected 4"), "{e}");
    }
    lines[700] = "1,2,3,4".into();
    let text = lines.join("\n");
    for chunk in [usize::MAX, 1, 64, 1000] {
        let e = parse_chunked(text.as_bytes(), "t", None, chunk).unwrap_err();
        assert_eq!((e.line, e.column.clone()), (Some(1501), Some((3, "x2".into()))), "chunk {chunk}");
    }
}
