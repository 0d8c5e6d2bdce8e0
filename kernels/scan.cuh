// scan.cuh: stable compaction of the indices 0..n by class across many blocks, shared by
// select.cu (the valid pool) and generation.cu (the evaluation order). A tile is GROVE_TILE
// consecutive indices, one block of GROVE_TILE_THREADS threads, each taking GROVE_TILE_ITEMS
// consecutive indices. Three launches: a count per tile (a block per tile), an exclusive scan
// of the tiles' counts (one block, looping over the tiles), and the writer (a block per tile),
// which places each kept index at its tile's offset plus its rank within the tile: the order is
// the indices' order, as on the CPU. Counts of two classes travel packed in one 64-bit word
// (first class in the high half, second in the low half; each sum stays below 2^32).
#ifndef GROVE_SCAN_CUH
#define GROVE_SCAN_CUH

#define GROVE_TILE_THREADS 256  // threads of a tile's block (a power of two; TILE_THREADS in kernels.rs)
#define GROVE_TILE_ITEMS 4      // consecutive indices per thread (TILE_ITEMS in kernels.rs)
#define GROVE_TILE (GROVE_TILE_THREADS * GROVE_TILE_ITEMS)

// The first index of the calling thread's run.
__device__ __forceinline__ unsigned grove_tile_first() {
    return blockIdx.x * GROVE_TILE + threadIdx.x * GROVE_TILE_ITEMS;
}

// Exclusive scan of v over the block's GROVE_TILE_THREADS threads (Hillis-Steele in shared
// memory); the block's total in `total`. Every thread of the block calls it.
__device__ unsigned long long grove_block_scan(unsigned long long v, unsigned long long& total) {
    __shared__ unsigned long long s[GROVE_TILE_THREADS];
    const unsigned t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (unsigned d = 1; d < GROVE_TILE_THREADS; d *= 2) {
        const unsigned long long u = t >= d ? s[t - d] : 0ull;
        __syncthreads();
        s[t] += u;
        __syncthreads();
    }
    const unsigned long long inclusive = s[t];
    total = s[GROVE_TILE_THREADS - 1];
    __syncthreads();  // s is free for the next call
    return inclusive - v;
}

// tiles[0..n_tiles) from counts to exclusive offsets, in place; returns the total. One block.
__device__ unsigned long long grove_tiles_scan(unsigned long long* tiles, unsigned n_tiles) {
    unsigned long long carry = 0;
    for (unsigned base = 0; base < n_tiles; base += GROVE_TILE_THREADS) {
        const unsigned i = base + threadIdx.x;
        const unsigned long long v = i < n_tiles ? tiles[i] : 0ull;
        unsigned long long total;
        const unsigned long long before = grove_block_scan(v, total);
        if (i < n_tiles) tiles[i] = carry + before;
        carry += total;
    }
    return carry;
}

#endif  // GROVE_SCAN_CUH
