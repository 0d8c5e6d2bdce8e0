//! Compiling kernel sources with NVRTC: to CUBIN for a real architecture (`sm_90`), or to PTX
//! for a virtual one when this NVRTC is older than the device. Needs NVRTC, not a GPU, so the
//! tests compile every kernel on machines without one. Compile errors carry the NVRTC log and
//! the source lines around each error, numbered as in the `.cu` file.

use std::ffi::{CStr, CString, c_char};

use cudarc::nvrtc::{result, sys};

use super::error::{CompileFailure, During, GpuError, Result};
use super::kernels::{KernelSource, OPS_HEADER};
use super::probe;

/// What a compilation targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A real architecture (`sm_90` is `Sm(90)`): NVRTC emits CUBIN, loaded as is.
    Sm(u32),
    /// A virtual architecture (`compute_90`): NVRTC emits PTX, which the driver compiles.
    Compute(u32),
}

impl Target {
    /// `sm_90` or `compute_90`.
    pub fn name(self) -> String {
        match self {
            Target::Sm(a) => format!("sm_{a}"),
            Target::Compute(a) => format!("compute_{a}"),
        }
    }
}

/// What the image holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for one architecture.
    Cubin,
    /// PTX text (NUL-terminated, as the driver wants it).
    Ptx,
}

/// A compiled kernel file.
#[derive(Clone, Debug)]
pub struct Image {
    /// CUBIN or PTX.
    pub kind: ImageKind,
    /// The bytes to hand to `cuModuleLoadData`.
    pub bytes: Vec<u8>,
    /// NVRTC's log (warnings), possibly empty.
    pub log: String,
}

/// NVRTC's version, `(major, minor)`.
pub fn version() -> Result<(i32, i32)> {
    Ok(probe::nvrtc()?.version)
}

/// The architectures this NVRTC can target, as numbers (`90` for sm_90), ascending.
pub fn supported_archs() -> Result<Vec<u32>> {
    probe::nvrtc()?;
    let mut n = 0;
    // SAFETY: NVRTC is loaded (probe above); `n` is a valid int to write.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }.result().during(|| "listing NVRTC's architectures".into())?;
    let mut archs = vec![0; n.max(0) as usize];
    // SAFETY: `archs` has room for the `n` ints NVRTC writes.
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .during(|| "listing NVRTC's architectures".into())?;
    let mut archs: Vec<u32> = archs.into_iter().map(|a| a as u32).collect();
    archs.sort_unstable();
    Ok(archs)
}

/// The target for a device of compute capability `(major, minor)`: its own `sm_XY` when this
/// NVRTC knows it, else PTX for the newest older architecture NVRTC knows.
pub fn target_for(cc: (i32, i32)) -> Result<Target> {
    let want = (cc.0 * 10 + cc.1) as u32;
    let archs = supported_archs()?;
    if archs.contains(&want) {
        return Ok(Target::Sm(want));
    }
    archs.iter().rev().find(|&&a| a <= want).map(|&a| Target::Compute(a)).ok_or_else(|| {
        GpuError::NoGpu(probe::NoGpu::new(format!(
            "NVRTC {:?} cannot target compute capability {}.{} (it knows {archs:?})",
            probe::nvrtc().map(|n| n.version).unwrap_or_default(),
            cc.0,
            cc.1
        )))
    })
}

/// Preprocessor definitions selecting a variant of a kernel file (`[("GROVE_K", 4)]`).
pub type Defines<'a> = &'a [(&'a str, u32)];

/// The NVRTC options for `target` and `defines` (also part of the cache key). `--fmad=false`:
/// no multiply and add are fused, as on the CPU, so the kernels' arithmetic gives the CPU's bits
/// (`src/program/fastmath.rs`); NVRTC's defaults already keep IEEE division, square roots and
/// subnormals. With `GROVE_KERNEL_LINEINFO=1` the kernels carry line tables for profilers
/// (Nsight Compute): the same machine code, three times the bytes.
pub fn options(target: Target, defines: Defines<'_>) -> Vec<String> {
    let mut o = vec![format!("--gpu-architecture={}", target.name()), "--std=c++17".into(), "--fmad=false".into()];
    o.extend(defines.iter().map(|(k, v)| format!("-D{k}={v}")));
    if std::env::var("GROVE_KERNEL_LINEINFO").as_deref() == Ok("1") {
        o.push("--generate-line-info".into());
    }
    o
}

/// Frees an NVRTC program when dropped.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

/// Compiles `src` (with the generated operator header in front) for `target`, with `defines`.
pub fn compile(src: &KernelSource<'_>, target: Target, defines: Defines<'_>) -> Result<Image> {
    probe::nvrtc()?;
    let opts = options(target, defines);
    let text = CString::new(src.full_source())
        .map_err(|_| GpuError::Input(format!("{} contains a NUL byte", src.file)))?;
    let name = CString::new(src.file).map_err(|_| GpuError::Input("kernel file name has a NUL byte".into()))?;
    let prog = Program(result::create_program(&text, Some(&name)).during(|| format!("creating the {} program", src.file))?);
    // SAFETY: `prog` is a live program; `text` and `name` outlive it (dropped after it).
    let compiled = unsafe { result::compile_program(prog.0, &opts) };
    // SAFETY: `prog` is live; the log is NUL-terminated.
    let log = unsafe { result::get_program_log(prog.0) }
        .map(|l| c_chars_to_string(&l))
        .during(|| format!("reading the log of {}", src.file))?;
    if let Err(e) = compiled {
        if e.0 != sys::nvrtcResult::NVRTC_ERROR_COMPILATION {
            return Err(GpuError::Nvrtc { during: format!("compiling {} ({log})", src.file), error: e });
        }
        let header = super::kernels::ops_header();
        let excerpt = excerpt(&log, &[(OPS_HEADER, header.as_str()), (src.file, src.text)]);
        return Err(GpuError::Compile(CompileFailure { file: src.file.into(), arch: target.name(), log, excerpt }));
    }
    let (kind, bytes) = match target {
        Target::Sm(_) => {
            let mut size = 0usize;
            // SAFETY: `prog` compiled for a real architecture, so it has a CUBIN of `size` bytes.
            unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }.result().during(|| "sizing the CUBIN".into())?;
            let mut bytes = vec![0u8; size];
            // SAFETY: `bytes` has room for the `size` bytes NVRTC writes.
            unsafe { sys::nvrtcGetCUBIN(prog.0, bytes.as_mut_ptr().cast::<c_char>()) }
                .result()
                .during(|| "reading the CUBIN".into())?;
            (ImageKind::Cubin, bytes)
        }
        Target::Compute(_) => {
            // SAFETY: `prog` compiled; PTX comes NUL-terminated, as cuModuleLoadData wants it.
            let ptx = unsafe { result::get_ptx(prog.0) }.during(|| "reading the PTX".into())?;
            (ImageKind::Ptx, ptx.into_iter().map(|c| c as u8).collect())
        }
    };
    Ok(Image { kind, bytes, log })
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// For each location `file(line): ...` in an NVRTC log (up to 5), the message and the lines
/// around it from the named part of the source, numbered as in that file.
pub fn excerpt(log: &str, files: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut shown: Vec<(&str, usize)> = Vec::new();
    for msg in log.lines() {
        let Some((file, line, rest)) = parse_location(msg) else { continue };
        let Some((_, text)) = files.iter().find(|(f, _)| *f == file) else { continue };
        out.push_str(&format!("{file}:{line}:{rest}\n"));
        if shown.contains(&(file, line)) {
            continue; // the lines are already shown above
        }
        if shown.len() == 5 {
            out.push_str("(more errors in the log)\n");
            break;
        }
        shown.push((file, line));
        let lines: Vec<&str> = text.lines().collect();
        let (lo, hi) = (line.saturating_sub(3).max(1), (line + 3).min(lines.len()));
        for n in lo..=hi {
            let mark = if n == line { ">" } else { " " };
            out.push_str(&format!("{mark}{n:5} | {}\n", lines[n - 1]));
        }
    }
    out
}

/// `eval.cu(42): error: ...` into `("eval.cu", 42, " error: ...")`.
fn parse_location(msg: &str) -> Option<(&str, usize, &str)> {
    let open = msg.find('(')?;
    let close = open + msg[open..].find("):")?;
    let line = msg[open + 1..close].parse().ok()?;
    Some((&msg[..open], line, &msg[close + 2..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_numbers_lines_of_the_named_file() {
        let text = "a\nb\nc\nd\ne\nf\n";
        let log = "k.cu(4): error: identifier \"d\" is undefined\n  d\n  ^\n";
        let ex = excerpt(log, &[("k.cu", text)]);
        assert!(ex.starts_with("k.cu:4: error: identifier \"d\" is undefined\n"), "{ex}");
        assert!(ex.contains(">    4 | d\n"), "{ex}");
        assert!(ex.contains("     1 | a\n") && ex.contains("     6 | f\n"), "{ex}");
        assert_eq!(excerpt("other.cu(1): error: x", &[("k.cu", text)]), "");
    }
}
