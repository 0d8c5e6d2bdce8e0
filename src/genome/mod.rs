//! Genomes for grammatical evolution: initialisation, the genotype-to-phenotype mapper and the
//! derivation-to-tree builder (together the CPU reference of `kernels/map.cu`) and variation
//! (on codons, and on derivation trees in `subtree`).

pub mod build;
pub mod init;
pub mod map;
pub mod subtree;
pub mod vary;

pub use init::{Genomes, InitConfig, InitMethod};
pub use map::{Codons, MapConfig, Mapped, Mapper};

/// Symbols the GPU mapper keeps pending per genome (`GROVE_MAP_STACK` in `kernels/map.cu`). The
/// evolution loops map with [`Mapper::with_max_stack`] at this bound on both devices, so that
/// their results agree; `grove map` has no bound (the GPU hands such genomes to the CPU).
pub const MAP_STACK: usize = 256;
