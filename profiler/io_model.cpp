#include "profiler/io_model.hpp"

#include <algorithm>
#include <functional>

#include "kernels/decode/decode.hpp"
#include "kernels/fa2/fa2.hpp"

namespace fa::model {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

void add(IoModel& m, std::string name, bool is_write, double bytes) {
  (is_write ? m.bytes_written : m.bytes_read) += bytes;
  m.terms.push_back({std::move(name), is_write, bytes});
}

// Rows of block `blk` of size `size` that lie inside [0, N).
std::int64_t rows_in_block(std::int64_t N, std::int64_t size, std::int64_t blk) {
  return std::min(size, N - blk * size);
}

// A paged cache's page-table entries covering each sequence's keys (4 bytes each), read `readers`
// times (0 when not paged).
double page_table_bytes(const Shape& s, std::int64_t readers) {
  if (!s.paged()) return 0;
  double entries = 0;
  for (std::int64_t b = 0; b < s.B; ++b)
    entries += static_cast<double>(ceil_div(s.kv_len_of(b), s.page_size));
  return entries * 4.0 * static_cast<double>(readers);
}

// Each input read once, each output written once: Q, O and the lse per query head, K and V per
// K/V head (grouped-query heads share them).
double compulsory(const Shape& s, bool writes_lse) {
  const double e = static_cast<double>(element_bytes(s.dtype));
  const double heads = static_cast<double>(s.heads_total());
  const double qo = static_cast<double>(s.N) * s.d * e;
  // Each sequence's own K/V rows, once per K/V head; a paged cache's table entries once.
  const double kv = static_cast<double>(s.kv_rows_total()) * s.kv_heads() * s.d * e;
  return heads * (2 * qo + (writes_lse ? 4.0 * s.N : 0.0)) + 2 * kv + page_table_bytes(s, 1);
}

// The seed's FlashAttention law for a tile budget of `budget` bytes (IoModel::bytes_asymptotic),
// over each sequence's own K/V length (lengths apart: their sum, not B times the cache's).
double flash_law_bytes(const Shape& s, double e, double budget) {
  if (budget <= 0) return 0;
  const double N = static_cast<double>(s.N), d = static_cast<double>(s.d);
  const double m_elements = budget / e;
  return static_cast<double>(s.H) * 8.0 * N * static_cast<double>(s.kv_rows_total()) * d * d /
         m_elements * e;
}

// The softmax kernel standard launches (kernels/standard/standard.cu): the row held in registers
// reads S once; rows longer than 16384 or with N % 8 != 0 take the two-pass kernel, which reads
// the row's unmasked part twice (max and sum, then P).
bool standard_softmax_two_pass(const Shape& s) {
  return s.N % 8 != 0 || s.N > 16384;
}

IoModel standard_model(const Shape& s) {
  IoModel m;
  const double e = static_cast<double>(element_bytes(s.dtype));
  const double heads = static_cast<double>(s.heads_total());
  const double N = static_cast<double>(s.N), d = static_cast<double>(s.d);
  const double Nkv = static_cast<double>(s.kv_len());
  const double nd = heads * N * d * e, nn = heads * N * Nkv * e, kvd = heads * Nkv * d * e;
  // The softmax kernel reads only the unmasked prefix of each causal row (N(N+1)/2 per square
  // head) and writes the whole row of P (zeros past the mask).
  const double s_read = heads * s.unmasked_pairs() * e;
  add(m, "Q read (pass 1)", false, nd);
  add(m, "K read (pass 1)", false, kvd);
  add(m, "S written (pass 1)", true, nn);
  if (standard_softmax_two_pass(s)) {
    add(m, "S read (pass 2, max and sum)", false, s_read);
    add(m, "S read again (pass 2, P; two-pass softmax: N > 16384 or N % 8 != 0)", false, s_read);
  } else {
    add(m, "S read (pass 2)", false, s_read);
  }
  add(m, "P written (pass 2)", true, nn);
  add(m, "lse written (pass 2, fp32)", true, heads * N * 4.0);
  add(m, "P read (pass 3)", false, nn);
  add(m, "V read (pass 3)", false, kvd);
  add(m, "O written (pass 3)", true, nd);
  m.flops_matrix = 4.0 * heads * N * Nkv * d;  // cuBLAS computes both full products
  const double valid_scores = heads * s.unmasked_pairs();
  // Per unmasked score: max, subtract, exp, sum, normalise.
  m.flops_nonmatrix = 5.0 * valid_scores;
  m.bytes_compulsory = compulsory(s, true);
  m.bytes_asymptotic = heads * (N * Nkv + N * d) * e;
  return m;
}

// fa2's pattern; `e` is the element size of the Q, K, V the kernel reads (1 for fp8).
IoModel fa2_model(const Shape& s, Tiles t, double e_in = 0) {
  IoModel m;
  const double e_out = static_cast<double>(element_bytes(s.dtype));
  const double e = e_in > 0 ? e_in : e_out;
  const double heads = static_cast<double>(s.heads_total());
  const std::int64_t N = s.N, d = s.d, Br = t.block_q, Bc = t.block_kv;
  const std::int64_t nq = ceil_div(N, Br);
  // K/V rows read: for every query block of every query head, the rows of every K/V block it
  // visits (zero-filled rows past N_kv are not read from HBM).
  double kv_rows = 0, block_pairs = 0;
  for (std::int64_t qb = 0; qb < nq; ++qb) {
    const std::int64_t nkv = kv_blocks_for_query_block(s, t, qb);
    block_pairs += static_cast<double>(nkv);
    for (std::int64_t j = 0; j < nkv; ++j)
      kv_rows += static_cast<double>(rows_in_block(s.kv_len(), Bc, j));
  }
  add(m, "Q read (once)", false, heads * N * d * e);
  add(m, "K read (once per query block)", false, heads * kv_rows * d * e);
  add(m, "V read (once per query block)", false, heads * kv_rows * d * e);
  add(m, "O written (once)", true, heads * N * d * e_out);
  add(m, "lse written (once, fp32)", true, heads * N * 4.0);
  // Whole Br x Bc tiles are issued to the tensor cores, padding and masked entries included.
  m.flops_matrix = heads * block_pairs * 4.0 * Br * Bc * d;
  // Per score: scale, max, exp, sum; per row and block: O rescale (d); per row: 1/l (d).
  m.flops_nonmatrix = heads * (block_pairs * (4.0 * Br * Bc + Br * d) + N * d);
  m.bytes_compulsory = compulsory(s, true);
  // kernels/fa2/fa2.cu, fp8.cu and fa3/fa3.cu (its 2-stage TMA ring): the Q tile and
  // double-buffered K and V tiles.
  m.onchip_budget_bytes = static_cast<double>(Br + 4 * Bc) * d * e;
  m.bytes_asymptotic = flash_law_bytes(s, e, m.onchip_budget_bytes);
  return m;
}

// A library's kernel (tiles assumed, ModelOptions::library_tiles) on fewer query rows than its
// tile with grouped heads (decode): the g query heads of a K/V head packed into one tile's rows,
// N g of them (a position's heads adjacent) in a tile of those rows rounded up to 16, K and V read
// once per tile of each K/V head. Measured on the H200: cuDNN at N = 1, g = 4 issued 16 rows'
// tensor FLOPs per K/V head (4 per query head, 1/32 of a 128-row tile each), and its prefill rows
// (N >= 128) the unpacked tiles' exactly.
IoModel fa2_packed_model(const Shape& s, Tiles t) {
  IoModel m;
  const double e = static_cast<double>(element_bytes(s.dtype));
  const double heads = static_cast<double>(s.heads_total());
  const double kv_heads = static_cast<double>(s.kv_heads_total());
  const std::int64_t g = s.group(), rows = s.N * g, d = s.d;
  // The tile: the packed rows rounded up to an mma's 16 (cuDNN's counted tensor FLOPs at N = 1,
  // g = 4: 16 rows per K/V head).
  const std::int64_t Br = std::min<std::int64_t>(t.block_q, (rows + 15) / 16 * 16);
  const std::int64_t Bc = t.block_kv;
  double kv_rows = 0, block_pairs = 0;
  for (std::int64_t qb = 0; qb < ceil_div(rows, Br); ++qb) {
    const std::int64_t last_position = (std::min(rows, (qb + 1) * Br) - 1) / g;
    const std::int64_t nkv = kv_blocks_through_row(s, Bc, last_position);
    block_pairs += static_cast<double>(nkv);
    for (std::int64_t j = 0; j < nkv; ++j)
      kv_rows += static_cast<double>(rows_in_block(s.kv_len(), Bc, j));
  }
  add(m, "Q read (once)", false, heads * s.N * d * e);
  add(m, "K read (once per query tile of a K/V head, its query heads packed)", false,
      kv_heads * kv_rows * d * e);
  add(m, "V read (once per query tile of a K/V head, its query heads packed)", false,
      kv_heads * kv_rows * d * e);
  add(m, "O written (once)", true, heads * s.N * d * e);
  add(m, "lse written (once, fp32)", true, heads * s.N * 4.0);
  m.flops_matrix = kv_heads * block_pairs * 4.0 * Br * Bc * d;
  m.flops_nonmatrix = kv_heads * block_pairs * (4.0 * Br * Bc + Br * d) + heads * s.N * d;
  m.bytes_compulsory = compulsory(s, true);
  m.onchip_budget_bytes = static_cast<double>(Br + 4 * Bc) * d * e;
  m.bytes_asymptotic = flash_law_bytes(s, e, m.onchip_budget_bytes);
  return m;
}

// The split-K/V decode (kernels/decode/decode.cu): each K/V head's N g query rows packed into one
// tile of Br rows, the cache cut into `splits` parts of C keys (whole Bc-key tiles, C as
// decode_split_keys), one thread block each; sequence b's keys fill ceil(L_b / C) of them (every
// tile of a part is issued; causal masks, it skips none). K and V read once per K/V head; with
// several parts, each writes its O / l (fp32) and lse, which the combine (in the last block of each
// K/V head to finish) reads back; a paged
// cache's table entries read by each K/V head's blocks.
IoModel split_kv_model(const Shape& s, Tiles t, int splits) {
  IoModel m;
  const double e = static_cast<double>(element_bytes(s.dtype));
  const double H = static_cast<double>(s.H), H_kv = static_cast<double>(s.kv_heads());
  const double N = static_cast<double>(s.N), d = static_cast<double>(s.d);
  const std::int64_t Br = t.block_q, Bc = t.block_kv;
  const std::int64_t split_keys = decode_split_keys(s, splits);  // the launcher's own cut
  double tiles = 0, parts = 0;
  for (std::int64_t b = 0; b < s.B; ++b) {
    tiles += static_cast<double>(ceil_div(s.kv_len_of(b), Bc));
    parts += static_cast<double>(ceil_div(s.kv_len_of(b), split_keys));
  }
  const double kv = H_kv * static_cast<double>(s.kv_rows_total()) * d * e;
  const double heads = static_cast<double>(s.heads_total());
  add(m, "Q read (once)", false, heads * N * d * e);
  add(m, "K read (once per K/V head)", false, kv);
  add(m, "V read (once per K/V head)", false, kv);
  if (s.paged()) {
    add(m, "page table read (once per K/V head)", false, page_table_bytes(s, s.kv_heads()));
  }
  if (splits > 1) {
    const double part_bytes = parts * H * N * (d + 1) * 4.0;
    add(m, "parts' O / l and lse written (fp32, once per split)", true, part_bytes);
    add(m, "parts' O / l and lse read (the combine)", false, part_bytes);
  }
  add(m, "O written (once)", true, heads * N * d * e);
  add(m, "lse written (once, fp32)", true, heads * N * 4.0);
  m.flops_matrix = H_kv * tiles * 4.0 * static_cast<double>(Br * Bc) * d;
  // Per score: scale, max, exp, sum; per row and tile: O rescale; the combine: a multiply-add per
  // part and element.
  m.flops_nonmatrix =
      H_kv * tiles * (4.0 * Br * Bc + Br * d) + (splits > 1 ? 2.0 * parts * H * N * d : 0.0);
  m.bytes_compulsory = compulsory(s, true);
  // The Q tile and the three-stage K and V ring.
  m.onchip_budget_bytes = static_cast<double>(Br + 6 * Bc) * d * e;
  m.bytes_asymptotic = flash_law_bytes(s, e, m.onchip_budget_bytes);
  return m;
}

// A model of a cache with lengths apart (or paged) as the sum of each sequence's own: sequence b
// alone (B = 1, N_kv = L_b, contiguous), its terms added by name; a paged cache adds its table
// entries, read once per K/V head. The compulsory bytes are the whole shape's.
IoModel per_sequence_model(const Shape& s, const std::function<IoModel(const Shape&)>& model) {
  IoModel m;
  // Without lengths apart, the whole batch is one part.
  for (std::int64_t b = 0; b < (s.ragged() ? s.B : 1); ++b) {
    Shape one = s;
    if (s.ragged()) {
      one.B = 1;
      one.N_kv = s.kv_len_of(b);
      one.kv_lengths.clear();
    }
    one.page_size = 0;
    const IoModel part = model(one);
    for (const ByteTerm& t : part.terms) {
      auto it = std::find_if(m.terms.begin(), m.terms.end(),
                             [&](const ByteTerm& x) { return x.name == t.name; });
      if (it == m.terms.end()) {
        add(m, t.name, t.is_write, t.bytes);
      } else {
        it->bytes += t.bytes;
        (t.is_write ? m.bytes_written : m.bytes_read) += t.bytes;
      }
    }
    m.flops_matrix += part.flops_matrix;
    m.flops_nonmatrix += part.flops_nonmatrix;
    m.bytes_asymptotic += part.bytes_asymptotic;
    m.onchip_budget_bytes = part.onchip_budget_bytes;
  }
  if (s.paged())
    add(m, "page table read (once per K/V head)", false, page_table_bytes(s, s.kv_heads()));
  m.bytes_compulsory = compulsory(s, true);
  return m;
}

// kernels/fp8/: the fa2 pattern on 1-byte Q, K, V; when the quantisation is timed
// (kernels/fp8/fp8_quant.cu), the quantise pass reads Q, K, V and writes the 1-byte copies (V
// transposed, padded to a multiple of 128 keys), after an amax pass that reads them too with
// per-head scales (--fp8-scale head; per-block scales need none).
IoModel fp8_model(const Shape& s, Tiles t, bool quantisation_timed, bool amax_pass) {
  IoModel m = fa2_model(s, t, 1.0);
  if (quantisation_timed) {
    const double e = static_cast<double>(element_bytes(s.dtype));
    const double heads = static_cast<double>(s.heads_total());
    const double nd = heads * s.N * s.d;
    const double npad = static_cast<double>((s.N + 127) / 128 * 128);
    if (amax_pass) add(m, "Q, K, V read (amax pass)", false, 3 * nd * e);
    add(m, "Q, K, V read (quantise pass)", false, 3 * nd * e);
    add(m, "Q8, K8, V8^T written (quantise pass)", true, 2 * nd + heads * s.d * npad);
  }
  m.bytes_compulsory = compulsory(s, true);
  return m;
}

IoModel fa1_model(const Shape& s, Tiles t, Fa1StateBytes st) {
  IoModel m;
  const double e = static_cast<double>(element_bytes(s.dtype));
  const double eo = st.o_element > 0 ? st.o_element : e;
  const double es = st.stat_element;
  const double heads = static_cast<double>(s.heads_total());
  const std::int64_t N = s.N, d = s.d, Br = t.block_q, Bc = t.block_kv;
  const std::int64_t nq = ceil_div(N, Br);
  // kernels/fa1/fa1.cu: for each K/V block j (K_j, V_j read once), for each query block i that
  // has a row at or below it: Q_i read; the O/l/m state read (except at j = 0, where it starts
  // as 0, 0, -inf) and written back (except at i's last K/V block, where O goes to the output).
  double q_rows = 0, state_reads = 0, state_writes = 0, block_pairs = 0;
  for (std::int64_t i = 0; i < nq; ++i) {
    const std::int64_t rows = rows_in_block(N, Br, i);
    const std::int64_t visits = kv_blocks_for_query_block(s, t, i);  // j = 0 .. visits-1
    q_rows += static_cast<double>(rows * visits);
    state_reads += static_cast<double>(rows * (visits - 1));
    state_writes += static_cast<double>(rows * (visits - 1));
    block_pairs += static_cast<double>(visits);
  }
  const double state_row = d * eo + 2 * es;
  add(m, "K read (once)", false, heads * N * d * e);
  add(m, "V read (once)", false, heads * N * d * e);
  add(m, "Q read (once per K/V block)", false, heads * q_rows * d * e);
  add(m, "O, l, m state read (once per K/V block after the first)", false,
      heads * state_reads * state_row);
  add(m, "O, l, m state written (once per K/V block but the last)", true,
      heads * state_writes * state_row);
  add(m, "O written (once)", true, heads * N * d * e);
  add(m, "lse written (once, fp32)", true, heads * N * 4.0);
  m.flops_matrix = heads * block_pairs * 4.0 * Br * Bc * d;
  // Per score: scale, max, exp, sum; per row and block: merge with the state (3d).
  m.flops_nonmatrix = heads * block_pairs * (4.0 * Br * Bc + 3.0 * Br * d);
  m.bytes_compulsory = compulsory(s, true);
  // kernels/fa1/fa1.cu: two Q buffers, one K and one V tile.
  m.onchip_budget_bytes = static_cast<double>(2 * Br + 2 * Bc) * d * e;
  m.bytes_asymptotic = flash_law_bytes(s, e, m.onchip_budget_bytes);
  return m;
}

// The standard backward (kernels/standard/standard.cu): P held in HBM by the forward (its
// workspace), then five passes, each through HBM:
//   1 dP = dO V^T (cuBLAS)   2 D = rowsum(dO o O) (a kernel)   3 dS = P o (dP - D) (a kernel,
//   in place over dP; causal: only the unmasked prefix of each row is read, the rest written 0)
//   4 dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO (three cuBLAS GEMMs).
IoModel standard_backward_model(const Shape& s) {
  IoModel m;
  const double e = static_cast<double>(element_bytes(s.dtype));
  const double heads = static_cast<double>(s.heads_total());
  const double N = static_cast<double>(s.N), d = static_cast<double>(s.d);
  const double nd = heads * N * d * e, nn = heads * N * N * e, rows = heads * N * 4.0;
  const double tri = s.causal ? heads * N * (N + 1) / 2 * e : nn;
  add(m, "dO read (pass 1, dP = dO V^T)", false, nd);
  add(m, "V read (pass 1)", false, nd);
  add(m, "dP written (pass 1)", true, nn);
  add(m, "dO read (pass 2, D = rowsum(dO o O))", false, nd);
  add(m, "O read (pass 2)", false, nd);
  add(m, "D written (pass 2, fp32)", true, rows);
  add(m, "dP read (pass 3, dS = P o (dP - D))", false, tri);
  add(m, "P read (pass 3)", false, tri);
  add(m, "D read (pass 3, fp32)", false, rows);
  add(m, "dS written (pass 3, over dP)", true, nn);
  add(m, "dS read (pass 4, dQ = dS K)", false, nn);
  add(m, "K read (pass 4)", false, nd);
  add(m, "dQ written (pass 4)", true, nd);
  add(m, "dS read (pass 5, dK = dS^T Q)", false, nn);
  add(m, "Q read (pass 5)", false, nd);
  add(m, "dK written (pass 5)", true, nd);
  add(m, "P read (pass 6, dV = P^T dO)", false, nn);
  add(m, "dO read (pass 6)", false, nd);
  add(m, "dV written (pass 6)", true, nd);
  m.flops_matrix = 8.0 * heads * N * N * d;  // four full N x N x d products
  const double valid = s.causal ? heads * N * (N + 1) / 2 : heads * N * N;
  m.flops_nonmatrix = 3.0 * valid + 2.0 * heads * N * d;  // dS: subtract, multiply; D: dot
  // Each input (Q, K, V, O, dO, lse) read once, each gradient written once.
  m.bytes_compulsory = heads * (8 * N * d * e + 4.0 * N);
  m.bytes_asymptotic = heads * (N * N + N * d) * e;
  return m;
}

// Query rows the K/V-outer loop visits (R: sum over K/V blocks of the rows of the query blocks
// each sees; causal: from the diagonal on) and the number of (K/V block, query block) pairs.
void kv_outer_visits(const Shape& s, Tiles t, double* rows, double* pairs) {
  const std::int64_t N = s.N, Br = t.block_q, Bc = t.block_kv;
  *rows = *pairs = 0;
  for (std::int64_t kb = 0; kb < ceil_div(N, Bc); ++kb) {
    const std::int64_t first = s.causal ? kb * Bc / Br : 0, nq = ceil_div(N, Br);
    for (std::int64_t qb = first; qb < nq; ++qb) {
      *rows += static_cast<double>(rows_in_block(N, Br, qb));
      *pairs += 1;
    }
  }
}

// Key rows the query-outer loop visits (sum over query blocks of the rows of the K/V blocks each
// sees; causal: up to the diagonal) and the number of block pairs.
void q_outer_visits(const Shape& s, Tiles t, double* rows, double* pairs) {
  const std::int64_t N = s.N, Bc = t.block_kv;
  *rows = *pairs = 0;
  for (std::int64_t qb = 0; qb < ceil_div(N, t.block_q); ++qb) {
    const std::int64_t nkv = kv_blocks_for_query_block(s, t, qb);
    for (std::int64_t kb = 0; kb < nkv; ++kb) {
      *rows += static_cast<double>(rows_in_block(N, Bc, kb));
      *pairs += 1;
    }
  }
}

// The fa2 backward (kernels/fa2/fa2_bwd.cu), K/V blocks outer: a pre-pass (D = rowsum(dO o O),
// and with dq-atomic the fp32 dQ accumulator zeroed); the main kernel, one thread block per K/V
// block of Bc rows, looping over the query blocks of Br rows that see it (causal: from the
// diagonal on), reading Q, dO, lse and D of each, holding dK and dV on chip. dQ:
//   dq-atomic    each block pair adds its dQ contribution to the fp32 accumulator with atomics
//                (counted as a read and a write of the Br x d fp32 block per block pair: what the
//                L2 does); a pass converts dQ to the dtype.
//   dq-separate  a second kernel, query blocks of Br' rows outer (fa2_bwd_dq_block_q/_kv), reads
//                Q, dO, lse, D once and K, V once per query block, recomputes S, dP and dS, and
//                writes dQ once.
// bytes_l2_view: the same passes when each head's working set stays in the L2 while its blocks
// run (block_order=blocks): every distinct byte crosses DRAM once per kernel that touches it
// (re-reads and atomics served by the L2; the accumulator read and written back once).
IoModel fa2_backward_model(const Shape& s, Tiles t, bool dq_separate, DqAccumulation dq_path) {
  IoModel m;
  const double e = static_cast<double>(element_bytes(s.dtype));
  const double heads = static_cast<double>(s.heads_total());
  const std::int64_t N = s.N, d = s.d, Br = t.block_q, Bc = t.block_kv;
  double q_rows = 0, block_pairs = 0;
  kv_outer_visits(s, t, &q_rows, &block_pairs);
  const double Nd = static_cast<double>(N) * static_cast<double>(d);
  const double nde = heads * Nd * e, rows4 = heads * N * 4.0;
  double l2_view = 0;
  auto both = [&](std::string name, bool write, double bytes, double once) {
    add(m, std::move(name), write, bytes);
    l2_view += once;
  };
  // The bulk-reduce kernel (fa3) keeps its per-row arrays and the accumulator padded to whole
  // query blocks, and its pre-pass also writes lse log2(e), which the main kernel reads instead.
  const bool bulk = dq_path == DqAccumulation::bulk_reduce;
  const double padded_rows = bulk ? heads * static_cast<double>(ceil_div(N, Br) * Br) : heads * N;
  const double accum = padded_rows * static_cast<double>(d) * 4.0, padded4 = padded_rows * 4.0;
  both("O read (pre-pass, D = rowsum(dO o O))", false, nde, nde);
  both("dO read (pre-pass)", false, nde, nde);
  both("D written (pre-pass, fp32)", true, padded4, padded4);
  if (bulk) {
    both("lse read (pre-pass, fp32)", false, rows4, rows4);
    both("lse log2(e) written (pre-pass, fp32)", true, padded4, padded4);
  }
  if (!dq_separate) both("dQ accumulator zeroed (pre-pass, fp32)", true, accum, accum);
  both("K read (once)", false, nde, nde);
  both("V read (once)", false, nde, nde);
  both("Q read (once per K/V block)", false, heads * q_rows * d * e, nde);
  both("dO read (once per K/V block)", false, heads * q_rows * d * e, nde);
  both(bulk ? "lse log2(e) read (once per K/V block, fp32)" : "lse read (once per K/V block, fp32)",
       false, heads * q_rows * 4.0, rows4);
  both("D read (once per K/V block, fp32)", false, heads * q_rows * 4.0, rows4);
  if (!dq_separate) {
    const char* how = bulk ? "TMA bulk reduce-add" : "atomicAdd";
    both(std::string("dQ accumulator read (") + how + " at the L2, once per K/V block, fp32)",
         false, heads * q_rows * d * 4.0, accum);
    both(std::string("dQ accumulator written (") + how + " at the L2, once per K/V block, fp32)",
         true, heads * q_rows * d * 4.0, accum);
  }
  both("dK written (once)", true, nde, nde);
  both("dV written (once)", true, nde, nde);
  // Per score: scale, exp, subtract, multiply (and the mask); per row: D (2d).
  m.flops_nonmatrix = heads * (block_pairs * 5.0 * static_cast<double>(Br * Bc) + 2.0 * Nd);
  if (dq_separate) {
    const Tiles tq{fa2_bwd_dq_block_q(static_cast<int>(d)),
                   fa2_bwd_dq_block_kv(static_cast<int>(d))};
    double kv_rows = 0, dq_pairs = 0;
    q_outer_visits(s, tq, &kv_rows, &dq_pairs);
    both("Q read (dQ kernel, once)", false, nde, nde);
    both("dO read (dQ kernel, once)", false, nde, nde);
    both("lse read (dQ kernel, once, fp32)", false, rows4, rows4);
    both("D read (dQ kernel, once, fp32)", false, rows4, rows4);
    both("K read (dQ kernel, once per query block)", false, heads * kv_rows * d * e, nde);
    both("V read (dQ kernel, once per query block)", false, heads * kv_rows * d * e, nde);
    both("dQ written (dQ kernel, once)", true, nde, nde);
    // Four products per main-kernel pair (S^T, dP^T, dV, dK), three per dQ-kernel pair (S, dP,
    // dQ), whole tiles.
    m.flops_matrix = heads * (block_pairs * 8.0 * static_cast<double>(Br * Bc * d) +
                              dq_pairs * 6.0 * static_cast<double>(tq.block_q) * tq.block_kv * d);
    m.flops_nonmatrix += heads * dq_pairs * 5.0 * static_cast<double>(tq.block_q) * tq.block_kv;
  } else {
    // The convert pass reads the N rows of each head only, not the padding rows.
    both("dQ accumulator read (convert pass, fp32)", false, heads * Nd * 4.0, heads * Nd * 4.0);
    both("dQ written (convert pass)", true, nde, nde);
    // Five products per block pair (S^T, dP^T, dV, dK, dQ), whole tiles.
    m.flops_matrix = heads * block_pairs * 10.0 * static_cast<double>(Br * Bc * d);
    m.flops_nonmatrix += heads * Nd;  // the convert pass's scale
  }
  m.bytes_l2_view = l2_view;
  m.bytes_compulsory = heads * (8 * Nd * e + 4.0 * N);
  // K, V tiles, Q and dO tiles, the dS tile with dq-atomic (kernels/fa2/fa2_bwd.cu).
  m.onchip_budget_bytes =
      static_cast<double>(2 * Bc + 2 * Br) * d * e + (dq_separate ? 0.0 : Br * Bc * e);
  m.bytes_asymptotic = flash_law_bytes(s, e, m.onchip_budget_bytes);
  return m;
}

}  // namespace

bool has_backward_model(Algorithm a) {
  return a == Algorithm::standard || a == Algorithm::fa2;
}

std::int64_t q_blocks_for_kv_block(const Shape& s, Tiles t, std::int64_t kb) {
  const std::int64_t total = ceil_div(s.N, t.block_q);
  if (!s.causal) return total;
  return total - kb * t.block_kv / t.block_q;
}

std::int64_t kv_blocks_through_row(const Shape& s, std::int64_t block_kv, std::int64_t row) {
  const std::int64_t total = ceil_div(s.kv_len(), block_kv);
  if (!s.causal) return total;
  // Row `row` sees keys up to row + N_kv - N (bottom-right alignment).
  const std::int64_t last_key = row + s.causal_offset();
  return last_key < 0 ? 0 : std::min(total, last_key / block_kv + 1);
}

std::int64_t kv_blocks_for_query_block(const Shape& s, Tiles t, std::int64_t qb) {
  return kv_blocks_through_row(s, t.block_kv, std::min(s.N, (qb + 1) * t.block_q) - 1);
}

IoModel io_model(Algorithm algorithm, const Shape& shape, Tiles tiles,
                 std::int64_t /*device_smem_per_sm_bytes*/, ModelOptions options) {
  IoModel m;
  // The field's convention (flash-attention's benchmarks): the two products over N x N_kv per
  // query head, causal's square part halved (N N_kv - N^2 / 2: N^2 / 2 for square attention, about
  // N_kv for one decode row).
  // N_kv is each sequence's own length where they differ.
  const double N = static_cast<double>(shape.N);
  double pairs = 0;
  for (std::int64_t b = 0; b < (shape.ragged() ? shape.B : 1); ++b) {
    const double Nkv = static_cast<double>(shape.kv_len_of(b));
    pairs += shape.causal ? N * Nkv - N * N / 2 : N * Nkv;
  }
  const double sequences = shape.ragged() ? 1.0 : static_cast<double>(shape.B);
  const double forward_convention =
      4.0 * sequences * static_cast<double>(shape.H) * pairs * static_cast<double>(shape.d);
  if (options.direction == Direction::backward) {
    if (algorithm == Algorithm::standard) m = standard_backward_model(shape);
    if (algorithm == Algorithm::fa2)
      m = fa2_backward_model(shape, tiles, options.dq_separate, options.dq_accumulation);
    m.flops_convention = 2.5 * forward_convention;  // the field's convention
    return m;
  }
  switch (algorithm) {
    case Algorithm::standard:
      m = standard_model(shape);
      break;
    case Algorithm::fa2: {
      auto one_model = [&](const Shape& s) {
        return options.library_tiles && s.grouped() && s.N < tiles.block_q
                   ? fa2_packed_model(s, tiles)
                   : fa2_model(s, tiles);
      };
      m = shape.ragged() || shape.paged() ? per_sequence_model(shape, one_model) : one_model(shape);
      break;
    }
    case Algorithm::fa1:
      m = fa1_model(shape, tiles, options.fa1);
      break;
    case Algorithm::fp8:
      m = fp8_model(shape, tiles, options.fp8_quantisation_timed, options.fp8_amax_pass);
      break;
    case Algorithm::split_kv:
      m = split_kv_model(shape, tiles, options.kv_splits);
      break;
  }
  if (!options.writes_lse) {  // no "lse written" term, and none in the compulsory bytes
    std::erase_if(m.terms, [&](const ByteTerm& t) {
      const bool lse = t.is_write && t.name.rfind("lse written", 0) == 0;
      if (lse) m.bytes_written -= t.bytes;
      return lse;
    });
    m.bytes_compulsory = compulsory(shape, false);
  }
  m.flops_convention = forward_convention;
  return m;
}

}  // namespace fa::model
