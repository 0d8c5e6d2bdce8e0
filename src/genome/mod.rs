//! Genomes for grammatical evolution: initialisation, the genotype-to-phenotype mapper (the CPU
//! reference of `kernels/map.cu`) and variation.

pub mod init;
pub mod map;
pub mod vary;

pub use init::{Genomes, InitConfig, InitMethod};
pub use map::{Codons, MapConfig, Mapped, Mapper};
