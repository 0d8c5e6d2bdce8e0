//! Genomes for grammatical evolution: the genotype-to-phenotype mapper (the CPU reference of
//! `kernels/map.cu`).

pub mod map;

pub use map::{Codons, MapConfig, Mapped, Mapper};
