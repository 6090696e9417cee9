/* ferrox: inference engine for decoder-only language models.
 *
 * The only public header. Handles are opaque; objects are created with
 * fx_<object>_create/_load and released with fx_<object>_free (NULL is a
 * no-op). Actions return an int status: FX_OK (0) or a negative FX_E_* code,
 * with a message in a caller-owned struct fx_err or, for a context, read back
 * with fx_context_errmsg. Nothing here calls exit() or abort() on bad input.
 *
 * Thread safety: a model is read-only after loading and may be shared by
 * any number of contexts and threads; a context or sampler is used by one
 * thread at a time.
 */
#ifndef FERROX_H
#define FERROX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libferrox exports: it is compiled with -fvisibility=hidden, so every
 * name without FX_API stays inside the library (tests/check-symbols.sh). */
#if defined(__GNUC__)
#define FX_API __attribute__((visibility("default")))
#else
#define FX_API
#endif

/* ---- status ---------------------------------------------------------- */

enum {
	FX_OK = 0,
	FX_E_NOMEM = -1,       /* allocation failed */
	FX_E_IO = -2,          /* file missing, unreadable, or mmap failed */
	FX_E_FORMAT = -3,      /* malformed input file */
	FX_E_UNSUPPORTED = -4, /* valid input ferrox does not handle (yet) */
	FX_E_INVALID = -5,     /* bad argument from the caller */
	FX_E_CTX_FULL = -6,    /* the sequence would exceed n_ctx */
	FX_E_KV_FULL = -7,     /* no free KV block for the request: queue or preempt it */
};

/* Caller-owned error record; filled on failure. */
struct fx_err {
	int code;
	char msg[512];
};

/* Short English name of a status code ("malformed file"). Static string. */
FX_API const char *fx_status_str(int code);

typedef int32_t fx_token;

/* ---- model ----------------------------------------------------------- */

struct fx_model;

struct fx_model_params {
	size_t size;     /* sizeof(struct fx_model_params), for ABI growth */
	bool vocab_only; /* load only the tokenizer (GGUF files without tensors) */
	const char *quant; /* NULL: weights as stored; else quantize float matrices on
			    * load to this type ("q8_0", "q4_0", "q4_K", ...; GGML's names,
			    * any case), as llama-quantize would. Borrowed during the call. */
	bool repack;       /* rearrange matrices the CPU's kernels read faster (eight
			    * rows interleaved, as llama.cpp's repacked types) at load;
			    * for a GGUF file, after moving the dense ones out of the file
			    * mapping into memory on transparent huge pages (the file's
			    * pages released as they are copied: one copy stays
			    * resident): same bytes, same results, faster decode, prefill
			    * and batches.
			    * Default true; such a model then runs only with the kernels it
			    * was repacked for (FX_KERNELS_AUTO), not FX_KERNELS_PORTABLE. */
	bool no_mmap;      /* GGUF files: read the file into private memory (read(2),
			    * huge pages asked for) instead of mapping it, as llama.cpp's
			    * --no-mmap (use_mmap = false): for file systems where mmap is
			    * slow or missing. The weights are then used where they were
			    * read (no second copy). A checkpoint directory is mapped
			    * regardless. Default false. */
	/* Called during loading with the fraction done in [0, 1] (reading the
	 * file or, when mapped, moving its matrices into memory, then
	 * repacking them), 1 at the end; arg is progress_arg. false from it
	 * stops the load: FX_E_IO ("cancelled"). NULL: none. As llama.cpp's
	 * llama_model_params.progress_callback. */
	bool (*progress)(float p, void *arg);
	void *progress_arg;
};

FX_API struct fx_model_params fx_model_default_params(void);

/* Load a GGUF file by mmap. *out is owned by the caller (fx_model_free).
 * Errors: FX_E_IO, FX_E_FORMAT, FX_E_UNSUPPORTED (architecture, tensor type or
 * tokenizer ferrox does not know: the message names it), FX_E_NOMEM. */
FX_API int fx_model_load(const char *path, const struct fx_model_params *p,
			 struct fx_model **out, struct fx_err *err);
FX_API void fx_model_free(struct fx_model *m);
/* Lock the model's weight matrices (every matrix a forward pass may read:
 * token embeddings, layers, experts, the lm head) in memory with mlock(2),
 * as llama.cpp's --mlock: no page of them is swapped out or, when mapped,
 * dropped and read back. Pages not yet resident are read in first. Call
 * after fx_model_load, once. Errors: FX_E_IO when the system refuses (the
 * message gives the bytes and the cause; usually RLIMIT_MEMLOCK, `ulimit -l`);
 * whatever was locked stays locked until fx_model_free. */
FX_API int fx_model_lock(struct fx_model *m, struct fx_err *err);

FX_API int32_t fx_model_n_vocab(const struct fx_model *m);
/* false for Hugging Face directories until tokenizer.json is supported:
 * such models run from token ids (ferrox logits). */
FX_API bool fx_model_has_vocab(const struct fx_model *m);
FX_API int32_t fx_model_n_ctx_train(const struct fx_model *m);
FX_API const char *fx_model_arch_name(const struct fx_model *m); /* "gemma3", ... */
/* Width of the residual stream: a hidden row's floats (fx_batch_hidden). */
FX_API int32_t fx_model_n_embd(const struct fx_model *m);
/* Multi-token-prediction blocks the model carries (Qwen 3.5 and Qwen3-Next
 * mtp.*, GLM-4.5's extra layer; GGUF {arch}.nextn_predict_layers), loaded
 * beside the layers and run only by an MTP context
 * (fx_context_params.mtp); 0 when none. */
FX_API int32_t fx_model_n_mtp(const struct fx_model *m);
/* *total: bytes of every tensor of the file, norms included, as
 * llama-bench's size column (after --quant: the matrices as requantized). *per_token: bytes one decode step reads
 * from them: every matrix once (MoE layers: n_expert_used of n_expert
 * experts, pro rata) and one token-embedding row unless the
 * embedding doubles as the LM head. Over memory bandwidth it bounds decode
 * speed (the roofline). *n_params: weight elements. */
FX_API void fx_model_weight_bytes(const struct fx_model *m, uint64_t *total, uint64_t *per_token,
				  uint64_t *n_params);
/* Multiply-accumulates of the weight matrices for one token: *layers
 * through every layer (MoE: n_expert_used experts; dense matrices only,
 * not attention's own scores and sums, which grow with the context), and
 * *lm_head for one row of logits. Over a step's time this is the compute a
 * prefill or batched decode runs at (ferrox bench's compute roofline). */
FX_API void fx_model_macs(const struct fx_model *m, uint64_t *layers, uint64_t *lm_head);

/* Human-readable report of a GGUF file (architecture, sizes, tensor types
 * with counts, tokenizer kind, chat template present). *report is
 * malloc'ed; release it with fx_string_free. */
FX_API int fx_inspect(const char *path, char **report, struct fx_err *err);
FX_API void fx_string_free(char *s);

/* Write the model at src (a GGUF file, or a Hugging Face checkpoint
 * directory mapped as fx_model_load does) to dst as a GGUF v3 file with
 * llama.cpp's names, keys and converter transforms, like llama.cpp's
 * convert_hf_to_gguf.py + llama-quantize. type_name: NULL keeps every
 * tensor's type; otherwise "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1",
 * "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k" or "q6_k" for the weight
 * matrices (vectors stay f32), or "q4_k_m": llama-quantize's Q4_K_M mix
 * (q6_K for output.weight and for attn_v/ffn_down in its use_more_bits
 * layers, q4_K elsewhere; dense models). No tokenizer is written for a
 * directory unless vocab_from (may be NULL) names a GGUF file whose
 * tokenizer.* keys replace the source's.
 * dst is written via "dst.tmp" and a rename: on failure dst is untouched.
 * Errors: FX_E_INVALID (unknown type name: the message lists the valid
 * ones), FX_E_UNSUPPORTED (no quantizer for that type in this build yet),
 * FX_E_IO (unwritable path, disk full), FX_E_FORMAT, FX_E_NOMEM. */
FX_API int fx_convert(const char *src, const char *dst, const char *type_name, const char *vocab_from,
		      struct fx_err *err);

/* ---- vocabulary ------------------------------------------------------ */

FX_API fx_token fx_token_bos(const struct fx_model *m); /* -1 when the model has none */
FX_API fx_token fx_token_eos(const struct fx_model *m);
FX_API bool fx_add_bos(const struct fx_model *m);        /* tokenizer.ggml.add_bos_token */
/* End of generation: eos, eot, <end_of_turn>, <|im_end|>, ... */
FX_API bool fx_token_is_eog(const struct fx_model *m, fx_token t);

/* Tokenize text[0..len) (UTF-8; invalid bytes are tokenized as bytes).
 * add_special: prepend BOS when the model asks for it (fx_add_bos).
 * parse_special: match control/user-defined token texts such as
 * "<start_of_turn>" in the text (llama.cpp's parse_special); otherwise they
 * are tokenized as plain text.
 * Writes at most cap ids to out and the full count to *n_out; returns
 * FX_E_INVALID (with *n_out the needed count) when cap is too small,
 * FX_E_NOMEM, and FX_E_FORMAT when a tokenizer.json vocabulary cannot
 * spell the text and names no unknown token (tokenizers' MissingUnkId:
 * e.g. a Unigram without unk_id meeting a character it lacks). */
FX_API int fx_tokenize(const struct fx_model *m, const char *text, size_t len,
		       bool add_special, bool parse_special, fx_token *out, size_t cap,
		       size_t *n_out);

/* Bytes of token t's text (U+2581 -> space, <0xNN> -> the byte, byte-level
 * BPE unmapped). Control tokens give their text only when special is true.
 * Writes at most cap bytes (no NUL) and the full length to *n_out; returns
 * FX_E_INVALID when t is out of range or cap is too small. */
FX_API int fx_token_to_piece(const struct fx_model *m, fx_token t, bool special,
			     char *buf, size_t cap, size_t *n_out);

/* Streaming detokenizer: holds back an incomplete UTF-8 sequence split
 * across tokens and emits it once complete (a malformed sequence is emitted
 * as U+FFFD). Zero-initialise; caller-owned. */
struct fx_detok {
	unsigned char pending[8];
	int n_pending;
};
/* Append token t's text to the stream; writes the bytes ready to print into
 * out and their count to *n_out. Returns FX_E_INVALID, with the size needed
 * in *n_out and the state unchanged, when cap is too small (each invalid
 * byte becomes a 3-byte U+FFFD). fx_detok_flush emits whatever is pending. */
FX_API int fx_detok_push(const struct fx_model *m, struct fx_detok *st, fx_token t,
			 bool special, char *out, size_t cap, size_t *n_out);
FX_API int fx_detok_flush(struct fx_detok *st, char *out, size_t cap, size_t *n_out);

/* ---- context: KV caches, sequences and the forward pass -------------- */

struct fx_context;

/* Where sequences keep their K/V: a choice the caller names. */
enum fx_kv_layout {
	FX_KV_CONTIGUOUS = 0, /* each sequence owns n_ctx contiguous rows */
	FX_KV_PAGED = 1,      /* a pool of n_ctx rows in blocks of block_size,
			       * shared by all sequences; forks share blocks
			       * (PagedAttention, Kwon et al. 2023) */
};

struct fx_context_params {
	size_t size;        /* sizeof(struct fx_context_params) */
	uint32_t n_ctx;     /* contiguous: tokens per sequence; paged: tokens in the
			     * pool. 0 = the model's training context */
	uint32_t n_ubatch;  /* max rows per forward step; 0 = n_ctx */
	int32_t n_threads;  /* 0 = one per online core */
	int32_t type_k;     /* KV cache element type: FX_KV_DEFAULT (f16 for GGUF files,
			     * as llama.cpp; f32 for HF checkpoints, as transformers),
			     * FX_KV_F32, FX_KV_F16 or FX_KV_Q8_0 */
	int32_t type_v;
	uint32_t n_seq_max; /* sequences alive at once (1) */
	int32_t kv_layout;  /* enum fx_kv_layout (FX_KV_CONTIGUOUS) */
	uint32_t block_size;/* paged: tokens per block (16) */
	int32_t kernels;    /* enum fx_kernels (FX_KERNELS_AUTO) */
	bool hidden;        /* keep every computed row's final hidden state, after the
			     * final norm (fx_batch_hidden): the input of an MTP
			     * context's rows (false) */
	bool mtp;           /* a draft context: its forward is the model's first
			     * multi-token-prediction block (fx_model_n_mtp > 0; else
			     * FX_E_INVALID), with K/V of its own (contiguous layout
			     * only: FX_E_UNSUPPORTED otherwise); every batch row
			     * pairs its token with a target hidden row (fx_batch.hidden)
			     * and its logits predict the token after the next. As
			     * llama.cpp's LLAMA_CONTEXT_TYPE_MTP (false) */
	uint32_t n_rollback;/* models with recurrent layers: the latest tokens any
			     * sequence can take back (fx_seq_rm), the state after each
			     * kept (memory: n_rollback states a sequence); what
			     * speculative decoding needs for its drafts (0: none) */
	bool kv_events;     /* record the prefix cache's changes for fx_context_kv_events
			     * (false: nothing recorded, nothing to drain) */
};

/* Which compute kernels a context runs. AUTO picks the fastest set the CPU
 * supports (AVX2/FMA/F16C on x86-64); PORTABLE forces the scalar C oracle
 * (slow; for checking the SIMD kernels end to end). AVX2, AVXVNNI,
 * AVX512 and AMX (AVX-512 with prompt-sized matrix products on Intel's
 * AMX tiles) ask for one x86 set by name (all read the same repacked
 * weights and give the same bits): to measure a set on a CPU that has a
 * later one, as an older CPU would run it. A set this CPU or build lacks is
 * FX_E_UNSUPPORTED at fx_context_create. */
enum fx_kernels {
	FX_KERNELS_AUTO = 0,
	FX_KERNELS_PORTABLE = 1,
	FX_KERNELS_AVX2 = 2,
	FX_KERNELS_AVXVNNI = 3,
	FX_KERNELS_AVX512 = 4,
	FX_KERNELS_AMX = 5,
};

/* The kernel set ctx runs, by its fx_kernels_built name ("avx512", ...;
 * static). */
FX_API const char *fx_context_kernels(const struct fx_context *ctx);

/* *kernels = the enum fx_kernels value named name ("auto", "portable",
 * "avx2", "avxvnni", "avx512", "amx": fx_kernels_built's names). Errors:
 * FX_E_INVALID for any other name (*kernels untouched). */
FX_API int fx_kernels_from_name(const char *name, int32_t *kernels);

/* The compute roofline's peak: *macs_per_s, the u8 x s8 multiply-
 * accumulates per second this CPU does on n_threads threads (1..256) at
 * once with the integer dot-product instruction the kernel set `kernels`
 * (enum fx_kernels) builds its sums from: AVX2 vpmaddubsw ymm, AVX-VNNI
 * vpdpbusd ymm, AVX-512 vpdpbusd zmm or ymm (the faster), AMX tdpbssd
 * on full tiles (its prefill kernels' instruction), portable C's
 * int8 multiply-add. Chains of that instruction alone, independent, best
 * of five runs of ~10-20 ms per thread: no kernel of the set, which also
 * loads, unpacks and scales, can exceed it (AVX2's kernels also widen with
 * vpmaddwd on the same ports: at most about half to two thirds of it).
 * *instr (may be NULL): a static string naming the instruction. Takes
 * about 0.1-0.3 s. Errors: FX_E_INVALID (n_threads, kernels),
 * FX_E_UNSUPPORTED (a set this CPU or build lacks), FX_E_NOMEM (a thread
 * could not start). As llama.cpp has no such probe, the method is our own
 * (uops.info's throughput tables are what it should agree with). */
FX_API int fx_kernels_peak(int32_t kernels, int32_t n_threads, double *macs_per_s,
			   const char **instr, struct fx_err *err);

/* The kernel sets this build has, in order of preference, space-separated
 * ("portable avx2 avxvnni avx512 amx" on an x86-64 build whose compiler knows
 * all of them; "portable" elsewhere), and the one FX_KERNELS_AUTO picks on
 * this CPU (its name from that list). Static strings; the second reads
 * CPUID (microseconds): for version and report lines, not per token. */
FX_API const char *fx_kernels_built(void);
FX_API const char *fx_kernels_auto(void);

/* KV cache element types (values are GGML type ids). q8_0 halves f16's
 * memory again at some precision (32-value blocks with an f16 scale). */
enum { FX_KV_DEFAULT = -1, FX_KV_F32 = 0, FX_KV_F16 = 1, FX_KV_Q8_0 = 8 };

FX_API struct fx_context_params fx_context_default_params(void);

/* The model is borrowed and must outlive the context. Memory: contiguous
 * n_seq_max x n_ctx rows of K and V per layer; paged n_ctx rows. */
FX_API int fx_context_create(const struct fx_model *m, const struct fx_context_params *p,
			     struct fx_context **out, struct fx_err *err);
FX_API void fx_context_free(struct fx_context *ctx);

FX_API uint32_t fx_context_n_ctx(const struct fx_context *ctx);

/* ---- sequences ----
 * A sequence is an id in [0, n_seq_max). Sequence 0 exists from the start
 * (fx_decode uses it); others are added, forked and freed. */
typedef int32_t fx_seq;

/* A new empty sequence. Errors: FX_E_INVALID (n_seq_max reached). */
FX_API int fx_seq_add(struct fx_context *ctx, fx_seq *out);
/* A new sequence holding src's tokens: paged, it shares src's blocks (the
 * first write into a shared partial block copies it); contiguous, the rows
 * are copied. Errors: FX_E_INVALID, FX_E_NOMEM. */
FX_API int fx_seq_fork(struct fx_context *ctx, fx_seq src, fx_seq *out);
/* Forget the sequence and release its blocks (sequence 0 is only emptied). */
FX_API void fx_seq_free(struct fx_context *ctx, fx_seq seq);
FX_API uint32_t fx_seq_n_past(const struct fx_context *ctx, fx_seq seq);
/* Prefix caching for a caller that feeds a long prompt in chunks (a
 * server's chunked prefill): an empty sequence takes the cached K/V of the
 * longest prefix of tok[0..n) that whole cached blocks cover, at most
 * n - 1 tokens (the last one is always computed, for its logits), and
 * *n_reused says how many: the caller feeds tok[*n_reused..n) next. For
 * sliding-window layers the cached blocks of the prefix's last window are
 * enough. fx_batch_decode does the same by itself for a sequence's first
 * batch, limited to that batch's rows. 0 tokens when the sequence is not
 * empty, the layout is contiguous or nothing is cached (follows vLLM's
 * scheduler asking its KV cache manager for computed blocks before
 * scheduling a prefill). tok is borrowed. Errors: FX_E_INVALID (no such
 * sequence; *n_reused is 0). */
FX_API int fx_seq_reuse_prefix(struct fx_context *ctx, fx_seq seq, const int32_t *tok, uint32_t n,
			       uint32_t *n_reused);
/* Remove seq's tokens from position pos on (llama.cpp's
 * llama_memory_seq_rm): the next token goes to position pos, as if the
 * removed ones were never decoded; pos at or past fx_seq_n_past changes
 * nothing. Any layout; for draft roll-back (speculative decoding) and
 * editing a conversation's tail. Errors: FX_E_INVALID (no such sequence,
 * or on the paged layout a sliding-window model's rows before pos were
 * already released: the paged layout keeps 32 rows beyond the window, so
 * going back up to 32 tokens always works; the sequence is unchanged). */
FX_API int fx_seq_rm(struct fx_context *ctx, fx_seq seq, uint32_t pos);
/* How many of its latest tokens any sequence can always take back with
 * fx_seq_rm (what speculative decoding's roll-back needs): a model with
 * recurrent layers keeps states for n_rollback (fx_context_params), else
 * its state exists only at the snapshots (src/kv/recurrent.c); attention
 * alone: n_ctx (the paged layout's sliding-window layers keep 32 rows
 * past the window, so there 32). fx_context_can_roll_back: it is > 0. */
FX_API int32_t fx_context_roll_back_max(const struct fx_context *ctx);
FX_API bool fx_context_can_roll_back(const struct fx_context *ctx);
/* Context shift: move seq's tokens at positions [p0, p1) to [p0 + delta,
 * p1 + delta), re-rotating their cached K by delta with each layer's own
 * RoPE (NoPE layers: positions only), and drop the tokens at [p0 + delta,
 * p0). Follows llama.cpp's llama_memory_seq_rm(p0 + delta, p0) followed by
 * llama_memory_seq_add(p0, p1, delta) (its --context-shift: keep n_keep,
 * discard n_discard, p0 = n_keep + n_discard, delta = -n_discard); here
 * positions stay dense, so the drop is part of the call and the moved
 * range must reach the end: p1 < 0 or p1 >= fx_seq_n_past (p1 < n_past
 * would leave a hole). Positions are token counts; afterwards n_past is
 * n_past + delta, and the next token goes there. The result is what the
 * moved tokens' K/V become at their new positions (they were computed
 * seeing the dropped tokens), equal to within float rounding of the
 * rotation (f16/q8_0 caches round again): not bit-identical to any fresh
 * run. The prefix cache never serves the moved rows. delta == 0 changes
 * nothing; p0 == n_past drops [n_past + delta, n_past) only (fx_seq_rm,
 * with its errors).
 * Errors (the sequence is unchanged): FX_E_INVALID (no such sequence,
 * p0 < 0, p0 > n_past, p0 + delta < 0, 0 <= p1 < p0), FX_E_UNSUPPORTED
 * (delta > 0 or p0 <= p1 < n_past: a hole; paged layout with sliding-window layers: rows the
 * window needs at the new end, with the 32 kept for roll-back, were
 * already released), FX_E_KV_FULL (paged: no free block for the moved
 * rows: a shared block written, or released ones of a sliding window;
 * about one block beyond what the sequence holds), FX_E_NOMEM. */
FX_API int fx_seq_shift(struct fx_context *ctx, fx_seq seq, int32_t p0, int32_t p1, int32_t delta);
/* Save one sequence's state to a file, and load it back: what llama.cpp's
 * llama_state_seq_save_file / llama_state_seq_load_file do (llama-server's
 * POST /slots?action=save|restore), for the K/V a sequence holds and, for
 * models with recurrent layers, their state after its tokens.
 * The file (src/engine/state.c) has a versioned header naming the model
 * (a hash of its architecture, sizes and final norm weights), the K/V
 * element types and each layer's row bytes, then tok[0..n_tok), every
 * layer's K and V rows for those positions, the recurrent state, and a
 * checksum. It does not depend on the layout: a file saved from a
 * contiguous context loads into a paged one and back.
 *
 * fx_seq_state_save: seq holds exactly n_tok tokens (fx_seq_n_past), and
 * tok are they (borrowed; the caller knows them: the backings keep rows,
 * not always tokens). *n_bytes (may be NULL): the file's size. Errors:
 * FX_E_INVALID (no such sequence, n_tok differs from what it holds, an
 * MTP context), FX_E_UNSUPPORTED (rows moved by fx_seq_shift, which are
 * not what the tokens compute; a paged sliding-window layer that already
 * released rows), FX_E_IO (cannot write path; a partial file is removed),
 * FX_E_NOMEM.
 *
 * fx_seq_state_load: into an empty seq; afterwards it holds the file's
 * tokens, decoding continues at position *n_tok, and (paged layout) its
 * full blocks are in the prefix cache as if computed here, so a later
 * prompt starting with those tokens reuses them (fx_seq_reuse_prefix;
 * with recurrent layers only where a state snapshot exists: at the end,
 * when n_tok falls on the snapshot spacing; fx_seq_rm cannot go back to
 * *n_tok or before, where no state is kept).
 * The tokens go to tok_out[0..cap) and their count to *n_tok; *n_bytes
 * (may be NULL): bytes read. Errors, seq left empty: FX_E_IO (cannot read
 * path), FX_E_FORMAT (not such a file, truncated, checksum mismatch: the
 * message says which), FX_E_UNSUPPORTED (a newer version), FX_E_INVALID
 * (saved from another model, or with other K/V types or row sizes; seq
 * missing or not empty; cap too small, *n_tok then the count needed; a
 * token id out of range), FX_E_CTX_FULL (more tokens than a sequence
 * holds), FX_E_KV_FULL (paged: no free blocks for them), FX_E_NOMEM.
 * Bit-identical: the next logits after a load equal those of a sequence
 * that decoded the tokens itself. */
FX_API int fx_seq_state_save(struct fx_context *ctx, fx_seq seq, const char *path,
			     const fx_token *tok, uint32_t n_tok, uint64_t *n_bytes);
FX_API int fx_seq_state_load(struct fx_context *ctx, fx_seq seq, const char *path,
			     fx_token *tok_out, uint32_t cap, uint32_t *n_tok, uint64_t *n_bytes);
/* Paged: blocks with references (0 when every sequence is empty);
 * contiguous: 0. */
FX_API int32_t fx_context_kv_blocks_used(const struct fx_context *ctx);
/* Paged: blocks in the pools (used + free, all groups); contiguous: 0. */
FX_API int32_t fx_context_kv_blocks_total(const struct fx_context *ctx);
/* Paged: prompt tokens served from the prefix cache so far. A new
 * sequence whose first rows repeat full blocks another sequence computed
 * (keyed by the tokens of the block and of all before it) reuses them
 * instead of recomputing, with bit-identical results; idle cached blocks
 * are evicted least recently used first. */
FX_API int64_t fx_context_prefix_hits(const struct fx_context *ctx);

/* ---- KV-cache events ----
 * What the paged layout's prefix cache holds, as a stream of changes
 * (vLLM's KV-cache events, which prefix-aware routers consume): a full
 * block of block_size tokens is STORED when a later prompt starting with
 * the same tokens could reuse it, REMOVED when it is evicted or
 * overwritten; CLEARED says to forget every block announced before (sent
 * after the log could not grow: what is still held is then unannounced,
 * never the reverse). A hash covers the block's tokens and its parent's
 * hash (0: the first block of a prompt), FNV-1a 64 (src/kv/paged.c).
 * Models with sliding-window layers announce their full-attention layers'
 * blocks (a prompt reuses them where the sliding layers still hold its
 * last window too); the contiguous layout and models with recurrent layers
 * keep no reusable blocks this way and announce nothing. */
enum fx_kv_event_kind { FX_KV_EVENT_STORED = 1, FX_KV_EVENT_REMOVED = 2, FX_KV_EVENT_CLEARED = 3 };

struct fx_kv_event {
	int32_t kind;           /* enum fx_kv_event_kind */
	int32_t n_tokens;       /* STORED: the block's tokens (block_size); else 0 */
	uint64_t hash;          /* STORED, REMOVED: the block's hash (never 0) */
	uint64_t parent;        /* STORED: the previous block's hash, 0: none */
	const fx_token *tokens; /* STORED: [n_tokens], valid during the call only */
};

typedef void (*fx_kv_event_fn)(void *arg, const struct fx_kv_event *ev);

/* Hand every event recorded since the last call to fn, oldest first, and
 * forget them. Recorded only with fx_context_params.kv_events (else
 * nothing). Call between decodes, from the thread that decodes. Returns
 * the number of events handed over. */
FX_API int64_t fx_context_kv_events(struct fx_context *ctx, fx_kv_event_fn fn, void *arg);
/* The hashes of every block the events announce as held now (the
 * context's own view, to check a consumer's against): up to cap of them
 * into out (any order); returns how many there are (more than cap: call
 * again with room). 0 when events are not recorded. Same thread rules. */
FX_API int64_t fx_context_kv_held(const struct fx_context *ctx, uint64_t *out, int64_t cap);

/* Bytes the context holds: *kv_bytes in K/V caches (allocated, used or
 * not), *scratch_bytes in per-step activation buffers and logits. With
 * fx_model_weight_bytes this is what peak RSS should come to. */
FX_API void fx_context_memory(const struct fx_context *ctx, uint64_t *kv_bytes, uint64_t *scratch_bytes);

/* ---- batches ----
 * Row i appends token[i] to sequence seq[i] at its next position; rows of
 * one sequence are taken in batch order. A row's logits depend only on its
 * own sequence's tokens: they are bit-identical whatever else is in the
 * batch, the ubatch size, the layout, the block size or the thread count. */
struct fx_batch {
	int32_t n;
	const fx_seq *seq;      /* [n] */
	const fx_token *token;  /* [n] */
	const bool *logits;     /* [n] rows whose logits to keep; NULL: the last
				 * row of each sequence in the batch */
	const float *hidden;    /* MTP contexts only: [n, n_embd], row i the target's final
				 * hidden state (fx_batch_hidden of its context) at the
				 * position before token[i]'s, zeros for position 0; the
				 * MTP row at position p pairs token p with hidden p - 1
				 * (llama.cpp's common_speculative draft-mtp). Borrowed */
};

/* Run a batch. Each sequence succeeds or fails as a whole: one that does
 * not fit (FX_E_KV_FULL: no free block; FX_E_CTX_FULL: past n_ctx) or has a
 * bad token (FX_E_INVALID) is left unchanged and its rows skipped, while
 * the others advance. Returns FX_OK when every sequence advanced, else the
 * first failure (message in fx_context_errmsg); seq_status, if not NULL,
 * receives each sequence's result ([n_seq_max], FX_OK for untouched ones). */
FX_API int fx_batch_decode(struct fx_context *ctx, const struct fx_batch *b, int *seq_status);

/* Logits [n_vocab] of batch row i of the last fx_batch_decode, or NULL when
 * not kept (or its sequence failed). Valid until the next decode. */
FX_API const float *fx_batch_logits(const struct fx_context *ctx, int32_t i);

/* Final hidden state [fx_model_n_embd] (after the final norm, the LM
 * head's input; an MTP context's: after its head norm) of batch row i of
 * the last fx_batch_decode or fx_decode, for every row computed, on a
 * context created with hidden = true; else NULL (also for rows served
 * from the prefix cache, which are not computed). Valid until the next
 * decode. */
FX_API const float *fx_batch_hidden(const struct fx_context *ctx, int32_t i);

/* ---- embeddings ----
 * A pooled embedding of a token sequence from a decoder model: the final
 * hidden states (after the final norm: transformers' last_hidden_state,
 * what fx_batch_hidden gives) of every token, pooled into one row of
 * fx_model_n_embd floats. Follows llama.cpp's pooling types
 * (llama_pooling_type: LAST = 3, MEAN = 1, CLS = 2 there) and
 * common_embd_normalize's Euclidean norm (embd_normalize 2). */
enum fx_pooling {
	FX_POOLING_LAST = 0, /* the last token's row (Qwen3-Embedding, e5-mistral style) */
	FX_POOLING_MEAN = 1, /* the mean over every token's row */
	FX_POOLING_CLS = 2,  /* the first token's row */
};

/* Embed tokens[0..n_tokens) (used exactly as given: add BOS/EOS as the
 * model wants when tokenizing) in sequence seq, which must exist and be
 * empty, on a context created with hidden = true (either KV layout, not an
 * MTP context). Every row is computed (the prefix cache serves none: its
 * rows have no hidden state). out receives fx_model_n_embd floats: the
 * rows pooled as pooling says (enum fx_pooling; the mean accumulated in
 * double in token order), divided by their L2 norm when normalize (a zero
 * vector stays zero). The sequence is empty again afterwards, whether the
 * forward pass succeeded or failed (a call refused before it, for the
 * arguments below, leaves it as it was). The result depends only on the tokens: the
 * same bits on either layout, for any ubatch size or thread count.
 * Errors: FX_E_INVALID (no hidden rows kept, an MTP context, no such
 * sequence or it is not empty, n_tokens <= 0, a NULL pointer, an unknown
 * pooling, a token id out of range), FX_E_CTX_FULL (n_tokens > n_ctx),
 * FX_E_KV_FULL (paged: too few free blocks), FX_E_NOMEM; out is then
 * unspecified. Message in fx_context_errmsg. */
FX_API int fx_embed(struct fx_context *ctx, fx_seq seq, const int32_t *tokens, int32_t n_tokens,
		    int32_t pooling, bool normalize, float *out);

/* fx_embed for n_seq inputs at once, computed together in one batch (each
 * weight read once per ubatch, as fx_batch_decode): input i is
 * tokens[i][0..n_tokens[i]) in sequence seq[i] (distinct, existing, empty
 * sequences), its row out[i * n_embd ..]; each row equals what fx_embed
 * gives for that input alone, bit for bit. All inputs succeed or the call
 * fails (every sequence empty again after a forward pass). Same errors as
 * fx_embed; FX_E_CTX_FULL when one input exceeds n_ctx, FX_E_KV_FULL when
 * the paged pool cannot hold them all at once. Arrays are borrowed. */
FX_API int fx_embed_batch(struct fx_context *ctx, int32_t n_seq, const fx_seq *seq,
			  const int32_t *const *tokens, const int32_t *n_tokens, int32_t pooling,
			  bool normalize, float *out);

/* ---- single sequence (sequence 0) ---- */

FX_API uint32_t fx_context_n_past(const struct fx_context *ctx); /* tokens in sequence 0 */
/* Free every sequence; sequence 0 stays, empty. */
FX_API void fx_context_reset(struct fx_context *ctx);

/* Append tokens[0..n) to sequence 0 and run the forward pass: prefill in
 * chunks of n_ubatch. all_logits: keep logits for every token, else only the
 * last. Errors: FX_E_CTX_FULL (n_past + n > n_ctx), FX_E_KV_FULL (paged
 * pool), FX_E_INVALID (a token id out of range); nothing is changed. */
FX_API int fx_decode(struct fx_context *ctx, const fx_token *tokens, int32_t n, bool all_logits);

/* Logits of the last fx_decode: [n_rows, n_vocab] f32 row-major, rows in
 * token order (n_rows = n with all_logits, else 1). Borrowed; valid until
 * the next decode/reset/free. */
FX_API const float *fx_get_logits(const struct fx_context *ctx, int32_t *n_rows);

FX_API const char *fx_context_errmsg(const struct fx_context *ctx);

/* ---- sampling -------------------------------------------------------- */

struct fx_sampler;

/* The chain runs in llama.cpp's default order: repetition penalty, top-k,
 * top-p, min-p, temperature, then a seeded draw; temp <= 0 is greedy
 * (argmax, lowest id on ties). A filter with its neutral value is skipped. */
struct fx_sampler_params {
	size_t size;            /* sizeof(struct fx_sampler_params) */
	float temp;             /* 0.8; <= 0: greedy */
	int32_t top_k;          /* 40; <= 0: off */
	float top_p;            /* 0.95; >= 1: off */
	float min_p;            /* 0.05; <= 0: off */
	float repeat_penalty;   /* 1.0 (off) */
	int32_t repeat_last_n;  /* 64 tokens of history the penalty sees */
	uint64_t seed;          /* same seed, same logits -> same tokens */
};

FX_API struct fx_sampler_params fx_sampler_default_params(void);

FX_API int fx_sampler_create(const struct fx_sampler_params *p, int32_t n_vocab,
			     struct fx_sampler **out, struct fx_err *err);
FX_API void fx_sampler_free(struct fx_sampler *s);
/* Pick a token from logits [n_vocab] (not modified). -1 when s or logits
 * is NULL, or when a matcher is set and allows no token (or its mask ran
 * out of memory). */
FX_API fx_token fx_sampler_sample(struct fx_sampler *s, const float *logits);
/* As fx_sampler_sample, the draw's noise keyed by (seed, pos) alone: pos
 * is the position in the sequence of the token being sampled (the KV
 * position it will take). Plain decoding that samples every position this
 * way and a speculative step that samples the verified rows the same way
 * (fx_spec_verify) give the same tokens for the same seed, whatever was
 * drafted. fx_sampler_sample(s, l) is fx_sampler_sample_at(s, l, k) for
 * its k-th call. */
FX_API fx_token fx_sampler_sample_at(struct fx_sampler *s, const float *logits, int64_t pos);
struct fx_matcher; /* a grammar position: see "grammars" below */

/* Constrain the sampler's picks to what matcher m allows (NULL: none).
 * Borrowed: m must outlive the sampler or be detached first. The sampler
 * does not advance m: after each sampled token the caller calls
 * fx_matcher_accept. Scheme (llama.cpp's common_sampler_sample): the chain
 * picks from the unmasked logits; when m allows that token it stands (at
 * temp <= 0 this is the token full masking would give: the argmax of the
 * allowed set); otherwise the logits are masked (fx_matcher_mask) and the
 * chain runs again on them. */
FX_API void fx_sampler_set_matcher(struct fx_sampler *s, struct fx_matcher *m);
/* Never pick tokens toks[0..n): the chain (and any matcher) sees their
 * logits as -inf, as llama.cpp's --logit-bias T-inf; its --ignore-eos is
 * this over every end-of-generation token (fx_token_is_eog). The list is
 * copied and replaces any earlier one (n 0: none). Each draw then copies
 * the logits once (n_vocab floats). Errors: FX_E_INVALID (a token outside
 * [0, n_vocab), or n < 0), FX_E_NOMEM. */
FX_API int fx_sampler_ban(struct fx_sampler *s, const fx_token *toks, int32_t n, struct fx_err *err);
/* Record a token in the penalty history (prompt tokens and sampled ones). */
FX_API void fx_sampler_accept(struct fx_sampler *s, fx_token t);

/* ---- speculative decoding (src/engine/spec.c) ------------------------ */

/* Proposers, as llama.cpp's --spec-type names them. */
enum fx_spec_type {
	FX_SPEC_NGRAM_SIMPLE = 1u << 0, /* "ngram-simple": prompt lookup in the sequence's own text */
	FX_SPEC_DRAFT_SIMPLE = 1u << 1, /* "draft-simple": a smaller model with the same
					 * vocabulary drafts greedily (fx_spec_drafter_create) */
	FX_SPEC_DRAFT_MTP = 1u << 2,    /* "draft-mtp": the target's own multi-token-prediction
					 * block (fx_model_n_mtp) drafts, chained on its own
					 * hidden rows (fx_spec_drafter_observe feeds it) */
};

struct fx_spec_params {
	size_t size;            /* sizeof(struct fx_spec_params) */
	uint32_t types;         /* FX_SPEC_* bits; 0: off */
	int32_t n_max;          /* most tokens drafted per step (16; llama.cpp
				 * --spec-draft-n-max / --draft-max) */
	int32_t n_min;          /* fewer drafted: none verified (0; --spec-draft-n-min /
				 * --draft-min) */
	int32_t ngram_size_n;   /* ngram-simple: tokens matched (12; --spec-ngram-simple-size-n) */
	int32_t ngram_size_m;   /* ngram-simple: tokens copied after the match, at most
				 * (48; --spec-ngram-simple-size-m) */
	float p_min;            /* draft-simple: stop drafting where the draft model's
				 * top token has a lower probability (0; --spec-draft-p-min) */
};

FX_API struct fx_spec_params fx_spec_default_params(void);

/* "ngram-simple" (comma-separated, llama.cpp's --spec-type spelling) into
 * FX_SPEC_* bits. Errors: FX_E_INVALID naming an unknown or not yet
 * supported type (draft-simple, draft-mtp, ngram-mod, ...). */
FX_API int fx_spec_types_parse(const char *list, uint32_t *types, struct fx_err *err);

/* Drafts for the sequence hist[0..n) (prompt and output so far, the last
 * sampled token, not yet decoded, at hist[n - 1]) into draft[0..cap):
 * ngram-simple as llama.cpp's common_ngram_simple_draft: the last
 * ngram_size_n tokens are searched for backwards in the history before
 * them; after the latest earlier occurrence, up to ngram_size_m tokens
 * (and at most cap, n_max) that followed it are the draft, none when
 * fewer than ngram_size_n would be copied. Returns the count (0: no draft). */
FX_API int32_t fx_spec_draft(const struct fx_spec_params *p, const fx_token *hist, int32_t n,
			     fx_token *draft, int32_t cap);

/* A proposer with state: ngram-simple over the history, and/or a draft
 * model (draft, may be NULL; borrowed, must outlive the drafter) run in a
 * context of its own (n_ctx tokens, n_threads) whose K/V follows the
 * target sequence's history from call to call (the common prefix kept,
 * the rest rolled back: llama.cpp's common_speculative draft-simple).
 * Errors: FX_E_INVALID (the draft model's vocabulary differs from the
 * target's in size or BOS/EOS; draft-simple asked without a draft model),
 * FX_E_NOMEM. */
struct fx_spec_drafter;
FX_API int fx_spec_drafter_create(const struct fx_spec_params *p, const struct fx_model *target,
				  const struct fx_model *draft, uint32_t n_ctx, int32_t n_threads,
				  struct fx_spec_drafter **out, struct fx_err *err);
FX_API void fx_spec_drafter_free(struct fx_spec_drafter *d);
/* Tell the drafter what the target kept: batch rows row0 .. row0 + n at
 * sequence positions pos0 .. pos0 + n (after a prompt's decode; after a
 * step, the rows fx_spec_accept kept: last and the accepted drafts). After
 * a step it sets the next draft's length: at most the accepted run + 1,
 * doubled after a wholly accepted draft, up to n_max (so a text the drafts
 * fail on costs short verifications only). draft-mtp also reads the rows'
 * final hidden states (the target's context created with hidden = true);
 * positions from pos0 + n on are forgotten. Errors: FX_E_INVALID (draft-mtp:
 * a row without a hidden state), FX_E_NOMEM. */
FX_API int fx_spec_drafter_observe(struct fx_spec_drafter *d, const struct fx_context *target_ctx,
				   int32_t row0, int32_t pos0, int32_t n);
/* Drafts continuing hist[0..n) (as fx_spec_draft) into draft[0..cap),
 * at most n_max: ngram-simple's when it has one, else the draft model's
 * greedy tokens (stopping below p_min), else the MTP block's (greedy,
 * each next one from its own hidden row: llama.cpp's draft-mtp). Returns
 * the count; 0 when there is none or a draft step failed. */
FX_API int32_t fx_spec_drafter_draft(struct fx_spec_drafter *d, const fx_token *hist, int32_t n,
				     fx_token *draft, int32_t cap);

/* Verify drafts for sequence seq after a fx_batch_decode whose rows
 * row .. row + k of that sequence were [last, draft[0..k)], with logits kept
 * for all of them (positions p .. p + k, p the sequence's position of
 * last): row i's token is sampled at position p + i + 1
 * (fx_sampler_sample_at) and recorded (fx_sampler_accept; the sampler's
 * grammar matcher, if any, fx_matcher_accept), and drafting stops at the
 * first sampled token that differs from draft[i], at an end-of-generation
 * token (returned, not recorded) or where the matcher is done. out[0..*n_out)
 * (room for k + 1) gets the sampled tokens: the accepted drafts then the
 * target's own token; the sequence is rolled back to p + *n_out rows (the
 * rejected drafts' K/V removed: fx_seq_rm), so out[*n_out - 1] is the next
 * token to decode, as after plain decoding. With the same sampler seed the
 * tokens are those plain decoding samples, token for token, whatever was
 * drafted (lossless by construction; at temperature 0 the argmax).
 * Errors: FX_E_INVALID (a row without logits, bad arguments), FX_E_NOMEM
 * (the matcher), -1 from the sampler as FX_E_INVALID (the grammar allows
 * nothing); FX_E_UNSUPPORTED for a model with recurrent layers (their
 * state cannot go back to a drafted position yet). */
FX_API int fx_spec_accept(struct fx_context *ctx, fx_seq seq, struct fx_sampler *smp, int32_t row,
			  const fx_token *draft, int32_t k, fx_token *out, int32_t *n_out);

/* One speculative step of sequence seq on its own: decode [last,
 * draft[0..k)] with every row's logits, then fx_spec_accept. The
 * sequence is unchanged when the decode fails (its error). */
FX_API int fx_spec_verify(struct fx_context *ctx, fx_seq seq, struct fx_sampler *smp, fx_token last,
			  const fx_token *draft, int32_t k, fx_token *out, int32_t *n_out);

/* ---- grammars: constrained decoding (src/grammar) -------------------- */

/* A compiled grammar in llama.cpp's GBNF syntax (grammars/README.md of
 * llama.cpp): rules `name ::= alternatives`, `|`, grouping `( )`, string
 * literals "...", character classes [a-z] [^"\\] (code points, UTF-8),
 * `.` (any code point), repetition `* + ?` and `{m}` `{m,}` `{m,n}`,
 * escapes \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH, `#` comments.
 * It is compiled to a byte-level pushdown automaton (character classes
 * become UTF-8 byte sequences), so the tokens it is matched against may
 * split a character. Immutable after creation: one grammar may be shared
 * by any number of matchers and threads. */
struct fx_grammar;

/* Compile gbnf[0..len) (UTF-8; need not be NUL-terminated) with start rule
 * root (NULL: "root"). *out is owned by the caller (fx_grammar_free).
 * Errors: FX_E_INVALID with the line and column and what was expected
 * ("grammar: line 3, column 7: expected ::= after rule name"), an
 * undefined rule, a missing root, left recursion (named: the automaton
 * cannot run it), a repetition bound over 10000; FX_E_NOMEM. */
FX_API int fx_grammar_parse(const char *gbnf, size_t len, const char *root, struct fx_grammar **out,
			    struct fx_err *err);
FX_API void fx_grammar_free(struct fx_grammar *g);

/* GBNF for JSON matching the JSON Schema schema_json
 * (draft 2020-12 subset; the list is in docs/STRUCTURED.md), with
 * whitespace between tokens bounded as llama.cpp's `space` rule.
 * "{"type":"object"}" alone gives any JSON object. root_name: the start
 * rule's name, and the prefix ("NAME-") of every other rule, so several
 * grammars concatenate into one (NULL: "root", no prefix). *gbnf is
 * malloc'ed (fx_string_free). Errors: FX_E_INVALID naming the keyword or the path
 * ("json schema: /properties/age: unsupported keyword 'multipleOf'"),
 * FX_E_NOMEM. A keyword that would constrain the output and is not
 * supported is an error, never a looser grammar. */
FX_API int fx_json_schema_to_gbnf(const char *schema_json, const char *root_name, char **gbnf,
				  struct fx_err *err);

/* GBNF for strings that match regex (the whole string,
 * as Python's re.fullmatch; the ECMAScript-style subset JSON Schema
 * "pattern" and vLLM's regex use: literals, ., classes, \d \w \s and
 * their negations, groups, (?:...), |, * + ? {m,n}; anchors ^ $ at the
 * ends only). root_name as for fx_json_schema_to_gbnf. *gbnf is
 * malloc'ed (fx_string_free). Errors: FX_E_INVALID
 * naming the position (backreferences, lookaround), FX_E_NOMEM. */
FX_API int fx_regex_to_gbnf(const char *regex, const char *root_name, char **gbnf, struct fx_err *err);

/* A model's tokens as byte strings in a trie, built once per model and
 * shared read-only by every matcher over that model. A token's bytes are
 * its fx_token_to_piece(special = true) text; end-of-generation tokens
 * (fx_token_is_eog) instead match where the grammar may end. The model is
 * borrowed and must outlive it. Errors: FX_E_INVALID (no vocabulary),
 * FX_E_NOMEM. */
struct fx_grammar_vocab;
FX_API int fx_grammar_vocab_create(const struct fx_model *m, struct fx_grammar_vocab **out,
				   struct fx_err *err);
FX_API void fx_grammar_vocab_free(struct fx_grammar_vocab *v);

/* One sequence's position in a grammar: the set of parse stacks after the
 * bytes accepted so far. Borrows g and v (both must outlive it); owns its
 * caches. One thread at a time. v may be NULL: a matcher of bytes only
 * (fx_matcher_accept_bytes, _next_bytes, _can_end; no token is allowed).
 * Errors: FX_E_INVALID (no grammar), FX_E_NOMEM (also, from any call, for
 * a grammar so ambiguous that a state would hold more than 4096 parse
 * stacks, such as "a"+++++...). */
struct fx_matcher;
FX_API int fx_matcher_create(const struct fx_grammar *g, const struct fx_grammar_vocab *v,
			     struct fx_matcher **out, struct fx_err *err);
FX_API void fx_matcher_free(struct fx_matcher *m);
/* Can token t come next? (an EOG token: iff the grammar may end here.)
 * Cost: t's bytes, one memoized transition each. */
FX_API bool fx_matcher_allows(struct fx_matcher *m, fx_token t);
/* Set logits[t] = -INFINITY for every token that cannot come next
 * (logits [n_vocab]). Cost: a walk of the vocabulary trie pruned where the
 * grammar dies, memoized per parse state (a repeated state is one copy).
 * Returns the number of tokens allowed (0: none; only possible when the
 * grammar is exhausted and the model has no EOG token), or FX_E_NOMEM. */
FX_API int32_t fx_matcher_mask(struct fx_matcher *m, float *logits);
/* Advance by token t. FX_E_INVALID when t is not allowed (the state is
 * unchanged); FX_E_NOMEM. An EOG token is accepted where the grammar may
 * end and leaves the state as it is. */
FX_API int fx_matcher_accept(struct fx_matcher *m, fx_token t);
/* Advance by bytes s[0..n) (forced text, tests). FX_E_INVALID when some
 * byte is not allowed (the state is unchanged); FX_E_NOMEM. */
FX_API int fx_matcher_accept_bytes(struct fx_matcher *m, const char *s, size_t n);
/* allowed[b] = whether byte b can come next (for sampling strings from a
 * grammar in tests). */
FX_API void fx_matcher_next_bytes(struct fx_matcher *m, bool allowed[256]);
/* The bytes accepted so far form a complete sentence of the grammar. */
FX_API bool fx_matcher_can_end(const struct fx_matcher *m);
/* Complete, and no further byte is possible: generation must end. */
FX_API bool fx_matcher_is_done(const struct fx_matcher *m);
/* Back to the start rule, nothing accepted. */
FX_API void fx_matcher_reset(struct fx_matcher *m);

/* ---- chat templates (src/chat) --------------------------------------- */

/* A model's chat template (Jinja) rendered as Python's jinja2 does it in
 * transformers' apply_chat_template: an ImmutableSandboxedEnvironment with
 * trim_blocks and lstrip_blocks, the loopcontrols extension, a tojson
 * filter calling json.dumps(x, ensure_ascii=False, ...), the globals
 * raise_exception(msg) and strftime_now(fmt), and the variables messages,
 * tools (None when absent), documents (None), add_generation_prompt,
 * bos_token and eos_token. Output is byte-identical to jinja2 3.1 for the
 * templates real models ship (tests/chat_conformance.py checks it).
 * A template ferrox cannot render (a construct or filter it lacks, a
 * sandbox violation such as list.append, raise_exception) is an error
 * naming the template line, never a silently different prompt. */

/* Bytes [off, off + len) of a rendered prompt that came from the input
 * data (message contents, tool definitions, extra variables), as opposed
 * to the template's own literals and bos/eos. */
struct fx_chat_span {
	size_t off, len;
};

/* A rendered prompt: text (NUL-terminated, len bytes, UTF-8 as the inputs
 * were) and its data spans, in order, disjoint, non-adjacent. */
struct fx_chat_prompt {
	char *text;
	size_t len;
	struct fx_chat_span *data;
	size_t n_data;
};

/* Render template tmpl (UTF-8 Jinja source, NUL-terminated).
 * messages_json: a JSON array of OpenAI-style messages ({"role", "content",
 * "tool_calls", ...}; any JSON the template reads is passed through).
 * tools_json: a JSON array of tool definitions, or NULL or "null" (tools
 * is None).
 * extra_json: a JSON object of extra template variables (e.g.
 * chat_template_kwargs: {"enable_thinking": false}), or NULL or "null".
 * Extra variables are set last, so they override the ones above.
 * bos_token / eos_token: their texts, or NULL to leave them undefined.
 * now: seconds since the epoch for strftime_now (local time); 0 = now.
 * *out is owned by the caller (fx_chat_prompt_free). Reentrant: no state
 * is kept between calls (the template is parsed on every call; a render
 * of the shared Qwen3 or gpt-oss template takes 0.2-0.6 ms here). What is
 * not supported is listed in README.md, "Chat templates".
 * Errors: FX_E_INVALID (bad JSON, or the template failed while rendering:
 * the message gives the template line and jinja2's reason, e.g. "chat
 * template: template line 3: the template raised an exception: System role
 * not supported"), FX_E_FORMAT (template syntax error, with its line),
 * FX_E_NOMEM. */
FX_API int fx_chat_render(const char *tmpl, const char *messages_json, const char *tools_json,
			  const char *extra_json, bool add_generation_prompt, const char *bos_token,
			  const char *eos_token, int64_t now, struct fx_chat_prompt **out,
			  struct fx_err *err);
FX_API void fx_chat_prompt_free(struct fx_chat_prompt *p);

/* The model's chat template: the GGUF key tokenizer.chat_template, or for a
 * Hugging Face directory chat_template.jinja, else tokenizer_config.json's
 * "chat_template" (a string, or the entry named "default" of a list).
 * NULL when the model has none. Borrowed: valid as long as m. */
FX_API const char *fx_model_chat_template(const struct fx_model *m);

/* A built-in chat template by llama.cpp's name (its --chat-template NAME):
 * chatglm3, chatglm4, chatml, command-r, deepseek, deepseek2, deepseek3,
 * exaone3, falcon3, gemma, llama2, llama2-sys, llama2-sys-bos,
 * llama2-sys-strip, llama3, mistral (= llama2, as llama.cpp resolves that
 * name), mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7,
 * mistral-v7-tekken, monarch, openchat, orion, phi3, phi4, vicuna,
 * vicuna-orca, zephyr. Returns the template's Jinja source (static,
 * NUL-terminated; render it with fx_chat_render), or NULL when name is
 * NULL or not one of them. Each renders, through fx_chat_render, the bytes
 * llama.cpp's llama_chat_apply_template gives for that name (source:
 * llama.cpp src/llama-chat.cpp, rewritten as Jinja), BOS not included (the
 * tokenizer adds it) and content that is not a string rendered as "". */
FX_API const char *fx_chat_builtin_template(const char *name);
/* The built-in names, sorted: writes the first min(cap, count) of them
 * (static strings) into names (may be NULL with cap 0) and returns count,
 * as llama.cpp's llama_chat_builtin_templates. */
FX_API size_t fx_chat_builtin_names(const char **names, size_t cap);

/* Sampling fields a model's file may set (fx_model_sampling_defaults). */
enum {
	FX_SAMPLING_TEMP = 1 << 0,
	FX_SAMPLING_TOP_K = 1 << 1,
	FX_SAMPLING_TOP_P = 1 << 2,
	FX_SAMPLING_MIN_P = 1 << 3,
	FX_SAMPLING_REPEAT_PENALTY = 1 << 4,
	FX_SAMPLING_REPEAT_LAST_N = 1 << 5,
};

/* The model's own sampling defaults: the GGUF keys general.sampling.temp,
 * top_k, top_p, min_p, penalty_repeat and penalty_last_n (llama.cpp's
 * names; its converter writes them from generation_config.json), or for a
 * Hugging Face directory its generation_config.json (temperature, top_k,
 * top_p, min_p, repetition_penalty, as vLLM's --generation-config auto).
 * Writes into p each field the model sets whose FX_SAMPLING_* bit is not in
 * keep (the fields the user gave: a flag wins over the model, which wins
 * over fx_sampler_default_params) and returns the bits it wrote (0 when m
 * or p is NULL). repeat_last_n may come back -1: the whole context, which
 * the caller turns into its n_ctx (fx_sampler_create refuses -1). Values
 * were range-checked at load (a bad one fails fx_model_load, named). */
FX_API uint32_t fx_model_sampling_defaults(const struct fx_model *m, uint32_t keep,
					   struct fx_sampler_params *p);

/* Tokenize a rendered prompt as fx_tokenize(add_special, parse_special =
 * true) would, except that control-token texts (such as "<start_of_turn>";
 * llama.cpp's CONTROL and UNKNOWN tokens) are matched only where they lie
 * wholly outside the prompt's data spans: a user who types "<|im_start|>"
 * gets those characters as plain text. User-defined tokens (added words)
 * match everywhere, as in fx_tokenize without parse_special. The text
 * between matched specials is tokenized exactly as fx_tokenize does. Same
 * out/cap/n_out contract as fx_tokenize (FX_E_INVALID with the needed count
 * when cap is too small); FX_E_INVALID also for spans out of order or past
 * the text. Source: llama.cpp's tokenizer_st_partition, restricted. */
FX_API int fx_tokenize_prompt(const struct fx_model *m, const struct fx_chat_prompt *p, bool add_special,
			      fx_token *out, size_t cap, size_t *n_out);

/* ---- OpenAI-compatible HTTP server (src/server) ----------------------- */

struct fx_server_params {
	size_t size;            /* sizeof(struct fx_server_params) */
	const char *model_path; /* GGUF file or checkpoint directory; borrowed */
	const char *host;       /* "127.0.0.1"; an IPv4/IPv6 address or a host name */
	int32_t port;           /* 8080; 0: any free port (printed on stderr) */
	int32_t n_parallel;     /* 4: sequences decoded together */
	uint32_t n_ctx_seq;     /* tokens per request (prompt + output); 0: the
				 * model's training context, at most 4096 */
	const char *api_key;    /* NULL: none; else "Authorization: Bearer KEY" */
	int32_t timeout_s;      /* 600: idle connection timeout */
	size_t max_body;        /* 8 MiB: larger request bodies get 413 */
	int32_t max_queue;      /* 0: 4 x n_parallel waiting requests, then 503 */
	int32_t n_threads;      /* 0: one per online core */
	/* Polled about ten times a second; true starts the drain (/health 503,
	 * new requests refused, accepted ones finish), then fx_serve returns.
	 * NULL: run until the process is killed. */
	bool (*should_stop)(void *arg);
	void *stop_arg;
	/* Chat: the Jinja template to use instead of the model's (its text,
	 * borrowed, e.g. fx_chat_builtin_template("gemma")), or NULL. */
	const char *chat_template;
	/* Chat: where a thinking model's reasoning goes unless a request says
	 * (llama-server's --reasoning-format): NULL or "auto" and "deepseek"
	 * (message.reasoning_content), "none" (left in content). */
	const char *reasoning_format;
	/* true (vLLM's --generation-config auto): a request that leaves
	 * temperature, top_k, top_p, min_p or repetition_penalty out gets the
	 * model's own default (fx_model_sampling_defaults) instead of OpenAI's;
	 * false: OpenAI's (temperature 1, the rest off). */
	bool generation_config;
	/* Speculative decoding every request gets unless it says otherwise
	 * (llama-server's --spec-type and --spec-draft-n-max / -n-min /
	 * --spec-ngram-simple-size-n / -m; its request fields speculative.*).
	 * types 0 (the default): off. Plain decoding where the model cannot
	 * roll back (fx_context_can_roll_back). Output is what plain decoding
	 * gives, token for token, for the same seed. */
	struct fx_spec_params spec;
	/* Paged KV block size in tokens (vLLM's --block-size; 16): the prefix
	 * cache's and the KV events' unit. */
	uint32_t block_size;
	/* The model's id in /v1/models, responses, metrics and KV events
	 * (vLLM's --served-model-name); NULL: the model file's name. */
	const char *served_model_name;
	/* KV-cache events for prefix-aware routers, in vLLM's format
	 * (src/server/kv_events.c): a ZeroMQ PUB socket bound to
	 * kv_events_endpoint (e.g. "tcp://127.0.0.1:5557"; vLLM's default:
	 * port 5557 on every interface), replays from a ROUTER socket at
	 * kv_events_replay, every message's first frame
	 * kv_events_topic. kv_events_config: vLLM's --kv-events-config JSON,
	 * which these three override. All NULL: off. Models whose prefix
	 * cache the events cannot describe (recurrent layers) send none. */
	const char *kv_events_endpoint, *kv_events_replay, *kv_events_topic;
	const char *kv_events_config;
	/* llama-server's --slot-save-path: the folder POST /slots/{id}?action=
	 * save|restore writes and reads state files in (fx_seq_state_save),
	 * a request's "filename" a plain name inside it. NULL: those actions
	 * are refused (501), as llama-server refuses them. */
	const char *slot_save_path;
	/* POST /v1/embeddings (llama-server's --embeddings; OpenAI's shape):
	 * false answers 501 naming the flag. The inputs run on a context of
	 * their own (paged, --ctx-size tokens, hidden rows kept), between the
	 * generation steps of the same engine thread, several inputs per
	 * turn (fx_embed_batch; about a prefill chunk of tokens while streams
	 * decode). pooling: enum fx_pooling (FX_POOLING_LAST);
	 * vectors are L2-normalized. */
	bool embeddings;
	int32_t pooling;
	/* Most rows one forward step takes (llama-server's -ub/--ubatch-size;
	 * 0: 512, its default). */
	uint32_t n_ubatch;
	/* Loading (llama-server's --no-mmap and --mlock): the model read into
	 * memory instead of mapped (fx_model_params.no_mmap); its weights
	 * locked in memory after the load (fx_model_lock; refused: a warning
	 * in the log, as llama.cpp). false, false. */
	bool no_mmap, mlock;
	/* Control tokens (<|im_end|>, ...) shown in completion text
	 * (llama-server's -sp/--special). false. */
	bool special;
	/* The default of every request's "ignore_eos" (llama-server's
	 * --ignore-eos): generation goes on past end-of-generation tokens
	 * to max_tokens; a request's own field wins. false. */
	bool ignore_eos;
	/* llama-server's --context-shift: a choice whose sequence reaches the
	 * per-request context (n_ctx_seq) keeps its first token when the
	 * model adds BOS, drops half of the rest and goes on (fx_seq_shift);
	 * where the backing refuses (recurrent layers, no free block) it ends
	 * with "length" as without. false: it ends with "length". */
	bool context_shift;
};

FX_API struct fx_server_params fx_server_default_params(void);

/* Serve the model over HTTP (OpenAI-style /v1/completions and
 * /v1/chat/completions, /v1/embeddings, /v1/models, /tokenize, /detokenize,
 * /health, /metrics; llama-server's /completion, /props and /slots; a web
 * chat at /) until should_stop says so and every accepted request has been
 * answered. Listens before the model loads (/health answers 503 until it
 * is ready). Logs to stderr. Errors: FX_E_INVALID (bad parameter or
 * address), FX_E_IO (cannot listen), and fx_model_load's and
 * fx_context_create's errors; the message says which. */
FX_API int fx_serve(const struct fx_server_params *p, struct fx_err *err);

#ifdef __cplusplus
}
#endif

#endif
