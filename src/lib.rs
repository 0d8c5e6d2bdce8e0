//! grove evolves programs: grammatical evolution and tree genetic programming, for symbolic
//! regression, classification and control, with a CPU reference and a CUDA backend.
//!
//! The pipeline, in the order the modules meet it: [`grammar`] reads a BNF file and compiles it
//! to a flat rule table; [`genome`] maps integer genomes through that table to programs;
//! [`data`] reads data files and generates the built-in benchmark problems they are scored on.
#![warn(missing_docs)]

pub mod backend;
pub mod bench;
pub mod cli;
pub mod data;
pub mod evolve;
pub mod genome;
pub mod grammar;
pub mod input;
pub mod program;
pub mod report;
pub mod rng;
pub mod select;
pub mod sim;
pub mod task;
