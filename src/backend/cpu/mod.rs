//! The CPU backend: the reference implementations the CUDA kernels are held to, on host memory.
//! [`breed`] is the CPU side of the breeding contract ([`super::breed::Breeder`]).

pub mod breed;
