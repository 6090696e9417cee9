/* Pre-tokenizers for byte-level BPE: the regexes llama.cpp's
 * llm_tokenizer_bpe selects by tokenizer.ggml.pre, run with PCRE2, and
 * llama.cpp's unicode_regex_split around them (src/unicode.cpp).
 *
 * How the patterns differ from llama.cpp's text, and why they still split
 * the same way:
 * - llama.cpp matches "\s" against its own White_Space table (non-ASCII
 *   white space is mapped to \x0B before std::regex runs, and its custom
 *   splitters test the same table). PCRE2's \s is a different set, so each
 *   \s and \S here is spelled out as the class WS below.
 * - Where llama.cpp runs std::wregex over literal non-ASCII ranges, white
 *   space inside those ranges never matches (it was mapped to \x0B); those
 *   ranges are guarded with a (?!WS) lookahead.
 * - "$" is end of text only (PCRE2_DOLLAR_ENDONLY), as in ECMAScript.
 * - The gpt2, llama3 and qwen2 patterns are the ones llama.cpp replaces by
 *   hand-written splitters (unicode_regex_split_custom_*); those splitters
 *   implement the regex, so running the regex gives the same words.
 * - \p{L}, \p{N}, \p{P} come from PCRE2's Unicode tables (14.0 for 10.42)
 *   where llama.cpp uses its own generated tables: code points assigned
 *   after that version may be classified differently.
 */
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "tokenizer/vocab_impl.h"

#define WS PRETOK_WS
#define RE_S "[" WS "]"
#define RE_NS "[^" WS "]"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* GPT-2's pattern: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" \
		RE_S "+(?!" RE_NS ")"
/* Llama 3 / Qwen 2: contractions|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 * ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ (Qwen 2: \p{N});
 * Qwen 3.5 takes marks into words: [\p{L}\p{M}]+ and [^\s\p{L}\p{M}\p{N}]. */
#define RE_LLAMA3_(letter, digits) RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[" letter "]+" \
	"|\\p{N}" digits "| ?[^" WS letter "\\p{N}]+[\\r\\n]*|" RE_S "*[\\r\\n]+|" \
	RE_S "+(?!" RE_NS ")|" RE_S "+"
#define RE_LLAMA3 RE_LLAMA3_("\\p{L}", "{1,3}")
#define RE_QWEN2 RE_LLAMA3_("\\p{L}", "")
#define RE_QWEN35 RE_LLAMA3_("\\p{L}\\p{M}", "")
/* CJK ranges of the DeepSeek patterns: U+4E00-9FA5, U+0800-4E00, U+AC00-D7FF. */
#define RE_DEEPSEEK_CJK \
	"(?:(?!" RE_S ")[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}])+"

static const char *const names_default[] = { "default", NULL };
static const char *const names_llama3[] = {
	"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
	"lfm2", "jina-v5-nano", NULL
};
static const char *const names_dbrx[] = { "dbrx", "smaug-bpe", NULL };
static const char *const names_qwen2[] = {
	"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open", NULL
};
static const char *const names_smollm[] = {
	"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b",
	"mellum2", NULL
};
static const char *const names_gpt2[] = {
	"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
	"a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "trillion",
	"granite-docling", "exaone4", NULL
};
static const char *const names_qwen35[] = { "qwen35", NULL };
static const char *const names_gemma4[] = { "gemma4", "granite-embed-multi-311m", NULL };
static const char *const names_falcon[] = { "falcon", NULL };
static const char *const names_deepseek_llm[] = { "deepseek-llm", NULL };
static const char *const names_deepseek_coder[] = { "deepseek-coder", NULL };

/* One row per family of tokenizer.ggml.pre values (llama.cpp's
 * LLAMA_VOCAB_PRE_TYPE_*); the regexes run in order, each splitting the
 * words the previous one produced. */
static const struct pretok_def pretok_defs[] = {
	{ .names = names_default,
	  .regex = { "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]" } },
	{ .names = names_llama3, .regex = { RE_LLAMA3 }, .ignore_merges = true, .add_bos = true },
	{ .names = names_dbrx, .regex = { RE_LLAMA3 } },
	{ .names = names_qwen2, .regex = { RE_QWEN2 } },
	{ .names = names_qwen35, .regex = { RE_QWEN35 } },
	/* spaces are U+2581 by then; BPE runs on whole lines, newline runs apart */
	{ .names = names_gemma4, .regex = { "[^\\n]+|[\\n]+" }, .force_bos = true, .raw_utf8 = true,
	  .newline_words = true },
	{ .names = names_smollm, .regex = { "\\p{N}", RE_GPT2 } },
	{ .names = names_gpt2, .regex = { RE_GPT2 } },
	{ .names = names_falcon,
	  .regex = { "[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]" } },
	{ .names = names_deepseek_llm, .regex = {
		"[\\r\\n]",
		RE_S "?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
		"\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
		"\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
		"\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
		"\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
		"\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
		"\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
		"\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
		"\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
		"\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
		"\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
		"\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
		"\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
		"\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
		"\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
		"\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
		"\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
		"\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
		/* U+3000 is white space, so of U+3000-3002 only 3001-3002 match */
		RE_S "?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
		"\\x{3001}-\\x{3002}]+",
		RE_S "+$",
		RE_DEEPSEEK_CJK,
		"\\p{N}+" } },
	{ .names = names_deepseek_coder, .regex = {
		"[\\r\\n]", RE_S "?\\p{L}+", RE_S "?\\p{P}+", RE_DEEPSEEK_CJK, "\\p{N}" } },
};

const struct pretok_def *pretok_find(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(pretok_defs) / sizeof(pretok_defs[0]); i++)
		for (const char *const *s = pretok_defs[i].names; *s; s++)
			if (strlen(*s) == n && !memcmp(*s, name, n))
				return &pretok_defs[i];
	return NULL;
}

static void *re_malloc(PCRE2_SIZE n, void *arg)
{
	(void)arg;
	return malloc(n);
}

static void re_free(void *p, void *arg)
{
	(void)arg;
	free(p);
}

pcre2_general_context *pretok_re_context(void)
{
	return pcre2_general_context_create(re_malloc, re_free, NULL);
}

int pretok_compile(struct vocab *v, const struct pretok_def *def, struct fx_err *err)
{
	int rc = FX_OK;
	pcre2_compile_context *cc = NULL;
	v->n_re = 0;
	if (!(v->re_mem = pretok_re_context()) ||
	    !(cc = pcre2_compile_context_create(v->re_mem))) {
		rc = fx_fail(err, FX_E_NOMEM, "pre-tokenizer %s: out of memory", def->names[0]);
		goto out;
	}
	for (int i = 0; i < PRETOK_MAX_RE && def->regex[i]; i++) {
		int ec;
		PCRE2_SIZE eo;
		pcre2_code *re = pcre2_compile((PCRE2_SPTR)def->regex[i], PCRE2_ZERO_TERMINATED,
					       PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec,
					       &eo, cc);
		if (!re && ec == PCRE2_ERROR_HEAP_FAILED) {
			rc = fx_fail(err, FX_E_NOMEM, "pre-tokenizer %s: out of memory compiling "
				     "regex %d", def->names[0], i);
			goto out;
		}
		if (!re) {
			PCRE2_UCHAR msg[128];

			pcre2_get_error_message(ec, msg, sizeof(msg));
			rc = fx_fail(err, FX_E_UNSUPPORTED,
				     "pre-tokenizer %s: PCRE2 rejects regex %d at offset %zu: %s",
				     def->names[0], i, (size_t)eo, (const char *)msg);
			goto out;
		}
		pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
		v->re[v->n_re++] = re;
	}
out:
	pcre2_compile_context_free(cc);
	return rc;
}

void pretok_free(struct vocab *v)
{
	for (int i = 0; i < v->n_re; i++)
		pcre2_code_free(v->re[i]);
	v->n_re = 0;
	pcre2_general_context_free(v->re_mem);
	v->re_mem = NULL;
}

/* GPT-2's bytes_to_unicode (llama.cpp's unicode_byte_to_utf8_map): the
 * printable bytes map to themselves, the others to U+0100 upwards. */
void pretok_init_bytemap(struct vocab *v)
{
	int n = 0;

	for (int i = 0; i < 324; i++)
		v->cpt_byte[i] = -1;
	for (int b = 0; b < 256; b++) {
		bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
		uint32_t cpt = printable ? (uint32_t)b : 256u + (uint32_t)n++;
		char tmp[4];

		v->byte_utf8_len[b] = (uint8_t)utf8_encode(cpt, tmp);
		memcpy(v->byte_utf8[b], tmp, v->byte_utf8_len[b]);
		v->cpt_byte[cpt] = (int16_t)b;
	}
}

/* Working state of one split: the text as code points, re-encoded as valid
 * UTF-8 for PCRE2, and the current words as [start, end) code point ranges. */
struct split {
	uint32_t *cpt;   /* [n_cpt] */
	size_t n_cpt;
	char *subj;      /* valid UTF-8, one sequence per code point */
	size_t *off;     /* [n_cpt + 1] byte offset of each code point in subj */
	size_t *b2c;     /* [subj length + 1] code point index at a byte offset */
	size_t *cut, *cut2; /* word ends (exclusive), ascending */
	size_t n_cut, n_cut2, cap_cut;
};

/* Append a word end to the list being built (cut2). */
static int push_cut(struct split *s, size_t end)
{
	if (s->n_cut2 == s->cap_cut) {
		size_t cap = s->cap_cut ? 2 * s->cap_cut : 64;
		size_t *a = fx_realloc_array(s->cut, cap, sizeof(*a));

		if (!a)
			return FX_E_NOMEM;
		s->cut = a;
		if (!(a = fx_realloc_array(s->cut2, cap, sizeof(*a))))
			return FX_E_NOMEM;
		s->cut2 = a;
		s->cap_cut = cap;
	}
	s->cut2[s->n_cut2++] = end;
	return FX_OK;
}

/* One pcre2_match from byte start of subj[0..n); falls back from the JIT
 * to the interpreter when a long run exhausts the JIT stack. */
static int run_match(const pcre2_code *re, const char *subj, size_t n, size_t start,
		     pcre2_match_data *md)
{
	int rc = pcre2_match(re, (PCRE2_SPTR)subj, n, start, PCRE2_NO_UTF_CHECK, md, NULL);

	if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* very long runs: use the interpreter */
		rc = pcre2_match(re, (PCRE2_SPTR)subj, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
				 md, NULL);
	return rc;
}

/* Split every current word by re: matches and the text between them both
 * become words (unicode_regex_split_stl and the custom splitters). */
static int split_by(struct split *s, const pcre2_code *re, pcre2_match_data *md)
{
	size_t begin = 0;
	int rc;

	s->n_cut2 = 0;
	for (size_t w = 0; w < s->n_cut; w++) {
		size_t end = s->cut[w];
		const char *sub = s->subj + s->off[begin];
		size_t n = s->off[end] - s->off[begin], pos = 0, last = begin;

		while (pos < n) {
			PCRE2_SIZE *ov;
			size_t ms, me;

			rc = run_match(re, sub, n, pos, md);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0)
				return rc == PCRE2_ERROR_NOMEMORY ? FX_E_NOMEM : FX_E_INVALID;
			ov = pcre2_get_ovector_pointer(md);
			ms = s->b2c[s->off[begin] + ov[0]];
			me = s->b2c[s->off[begin] + ov[1]];
			if (ms > last && (rc = push_cut(s, ms)))
				return rc;
			if (me > ms && (rc = push_cut(s, me)))
				return rc;
			last = me;
			if (me > ms)
				pos = ov[1];
			else if (ms < end) /* an empty match makes no word: step over a code point */
				pos = s->off[ms + 1] - s->off[begin];
			else
				break;
		}
		if (end > last && (rc = push_cut(s, end)))
			return rc;
		begin = end;
	}
	size_t *t = s->cut;
	s->cut = s->cut2;
	s->cut2 = t;
	s->n_cut = s->n_cut2;
	return FX_OK;
}

/* Decode text (llama.cpp's unicode_cpts_from_utf8), build the PCRE2
 * subject and offset maps; the word list starts as the whole text. */
static int split_init(struct split *s, const char *text, size_t n)
{
	size_t i = 0, bytes = 0;

	memset(s, 0, sizeof(*s));
	s->cpt = fx_malloc_array(n, sizeof(*s->cpt));
	s->off = fx_malloc_array(n + 1, sizeof(*s->off));
	s->subj = fx_malloc_array(n, 4);
	s->b2c = fx_malloc_array(4 * n + 1, sizeof(*s->b2c));
	if (!s->cpt || !s->off || !s->subj || !s->b2c)
		return FX_E_NOMEM;
	while (i < n) {
		uint32_t c = utf8_decode_lenient(text, n, &i);
		uint32_t shown;
		size_t k;

		/* Past U+10FFFF (F5..F7 leads) llama.cpp throws and aborts; ferrox
		 * reads U+FFFD instead. */
		if (c > 0x10ffff)
			c = 0xfffd;
		/* PCRE2 needs valid UTF-8: a surrogate stands in as U+E000, which
		 * every supported pattern treats alike (neither letter, digit,
		 * mark, punctuation nor white space). */
		shown = c >= 0xd800 && c <= 0xdfff ? 0xe000 : c;
		s->off[s->n_cpt] = bytes;
		k = utf8_encode(shown, s->subj + bytes);
		for (size_t j = 0; j < k; j++)
			s->b2c[bytes + j] = s->n_cpt;
		bytes += k;
		s->cpt[s->n_cpt++] = c;
	}
	s->off[s->n_cpt] = bytes;
	s->b2c[bytes] = s->n_cpt;
	/* one word, the whole text */
	if (push_cut(s, s->n_cpt))
		return FX_E_NOMEM;
	s->cut[0] = s->cut2[0];
	s->n_cut = 1;
	return FX_OK;
}

static void split_fini(struct split *s)
{
	fx_free(s->cut2);
	fx_free(s->cut);
	fx_free(s->b2c);
	fx_free(s->subj);
	fx_free(s->off);
	fx_free(s->cpt);
}

int pretok_split(const struct vocab *v, const char *text, size_t n,
		 char **buf, struct span **words, size_t *n_words)
{
	struct split s;
	pcre2_match_data *md = NULL;
	char *out = NULL;
	struct span *w = NULL;
	size_t o = 0, begin = 0;
	int rc;

	*buf = NULL;
	*words = NULL;
	*n_words = 0;
	if ((rc = split_init(&s, text, n)))
		goto out_fini;
	if (!(md = pcre2_match_data_create(1, v->re_mem))) {
		rc = FX_E_NOMEM;
		goto out_fini;
	}
	for (int r = 0; r < v->n_re; r++)
		if ((rc = split_by(&s, v->re[r], md)))
			goto out_md;

	/* Words back to UTF-8 (unicode_cpt_to_utf8), then GPT-2 byte-encoded
	 * unless the vocabulary holds raw UTF-8. */
	out = fx_malloc_array(s.n_cpt ? s.n_cpt : 1, 8);
	w = fx_malloc_array(s.n_cut ? s.n_cut : 1, sizeof(*w));
	if (!out || !w) {
		rc = FX_E_NOMEM;
		goto out_md;
	}
	for (size_t k = 0; k < s.n_cut; k++) {
		size_t start = o;

		for (size_t c = begin; c < s.cut[k]; c++) {
			char u[4];
			size_t len = utf8_encode(s.cpt[c], u);

			for (size_t j = 0; j < len; j++) {
				uint8_t b = (uint8_t)u[j];

				if (v->pre->raw_utf8) {
					out[o++] = (char)b;
					continue;
				}
				memcpy(out + o, v->byte_utf8[b], v->byte_utf8_len[b]);
				o += v->byte_utf8_len[b];
			}
		}
		w[k] = (struct span){ out + start, o - start };
		begin = s.cut[k];
	}
	*buf = out;
	*words = w;
	*n_words = s.n_cut;
	out = NULL;
	w = NULL;
out_md:
	fx_free(w);
	fx_free(out);
	pcre2_match_data_free(md);
out_fini:
	split_fini(&s);
	return rc;
}
