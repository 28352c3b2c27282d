// decode: a few query rows per sequence against a long K/V (flash-decoding), kernels/decode/
// decode.cu. Pure C++ here: the split rule is the IO model's too (bench/runner.cpp passes it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/variant.hpp"

namespace fa {

// The kernel's tile: the packed query rows of one K/V head (one m16 tile) and the keys of one
// step of its cp.async ring (four warps of 16 keys).
inline constexpr int kDecodeRows = 16;
inline constexpr int kDecodeKeys = 64;
// The fewest keys a split takes: its start (the Q tile, the ring's fill) and its share of the
// combine stay small beside its loads.
inline constexpr std::int64_t kDecodeMinSplitKeys = 256;
// Thread blocks resident per SM (two fit: the ring's 3 stages of 32 KB and Q, 215 registers).
inline constexpr int kDecodeBlocksPerSm = 2;
// The split count: the fewest whose blocks fill this share of their waves' slots
// (decode_splits). Measured on the H200 at batch 1 (8 K/V heads, 16k-128k keys): 29-31 splits
// (88-94% of one wave) ran 3-6% slower than 32 (97%).
inline constexpr double kDecodeWaveFill = 0.95;
inline constexpr std::int64_t kDecodeMaxSplits = 128;

// How many parts the K/V sequence is split into: the fewest whose thread blocks (those holding
// keys) fill kDecodeWaveFill of their waves of kDecodeBlocksPerSm per SM (else the fullest
// count), no more than N_kv / kDecodeMinSplitKeys; the splits are whole tiles of kDecodeKeys (the
// last one shorter), and none is empty (decode_split_keys).
int decode_splits(const Shape& s, int sm_count);
// Keys per split (a multiple of kDecodeKeys) for `splits` splits.
std::int64_t decode_split_keys(const Shape& s, int splits);

// "" when the decode kernel takes the shape, else the row's reason: N * H / H_kv query rows per
// K/V head must fit one 16-row tile.
std::string decode_shape_rule(const Shape& s);

std::vector<Tiles> decode_tile_options(int d);
std::unique_ptr<Launcher> make_decode_launcher(const LaunchOptions& o = {});

}  // namespace fa
