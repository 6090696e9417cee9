/* fx_grammar_vocab: a model's token byte strings as a preorder trie
 * (grammar.h), so a mask walks each shared prefix once and skips a whole
 * subtree where the grammar dies (the token-trie idea of llguidance and
 * xgrammar; llama.cpp instead matches every candidate token on its own).
 *
 * Built by sorting the token ids by their bytes: in sorted order every
 * token extends the path of the previous one after their common prefix,
 * so nodes come out in preorder and the tokens ending at a node are
 * adjacent.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "grammar/grammar.h"

#define VOCAB_MAX_PIECE 1024

/* qsort context: C11 qsort has none, so the ids carry a pointer pair. */
struct tok_ref {
	const unsigned char *p;
	uint32_t len;
	fx_token id;
};

static int ref_cmp(const void *a, const void *b)
{
	const struct tok_ref *x = a, *y = b;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->p, y->p, n);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

void fx_grammar_vocab_free(struct fx_grammar_vocab *v)
{
	if (!v)
		return;
	fx_free(v->byte);
	fx_free(v->depth);
	fx_free(v->skip);
	fx_free(v->tok_off);
	fx_free(v->tok);
	fx_free(v->piece_off);
	fx_free(v->pieces);
	fx_free(v->eog);
	fx_free(v);
}

/* Every token's bytes into v->pieces / piece_off; v->eog marked. */
static int read_pieces(const struct fx_model *m, struct fx_grammar_vocab *v, struct fx_err *err)
{
	size_t cap = (size_t)v->n_vocab * 8 + 64, n = 0;
	char buf[VOCAB_MAX_PIECE];
	if (!(v->pieces = fx_malloc_array(cap, 1)))
		return fx_fail(err, FX_E_NOMEM, "grammar vocab: out of memory");
	for (fx_token t = 0; t < v->n_vocab; t++) {
		size_t len = 0;
		v->piece_off[t] = (uint32_t)n;
		if (fx_token_is_eog(m, t)) {
			v->eog[t] = true;
			continue;
		}
		/* a piece longer than the buffer is no token a grammar needs: left out */
		if (fx_token_to_piece(m, t, true, buf, sizeof(buf), &len))
			len = 0;
		if (n + len > cap) {
			while (n + len > cap)
				cap *= 2;
			char *p = fx_realloc_array(v->pieces, cap, 1);
			if (!p)
				return fx_fail(err, FX_E_NOMEM, "grammar vocab: out of memory");
			v->pieces = p;
		}
		memcpy(v->pieces + n, buf, len);
		n += len;
		if (n > UINT32_MAX - VOCAB_MAX_PIECE)
			return fx_fail(err, FX_E_UNSUPPORTED, "grammar vocab: token texts exceed 4 GiB");
	}
	v->piece_off[v->n_vocab] = (uint32_t)n;
	return FX_OK;
}

static bool node_add(struct fx_grammar_vocab *v, int32_t *cap, uint8_t byte, uint16_t depth,
		     int32_t n_tok)
{
	if (v->n_nodes == *cap) {
		int32_t c = *cap * 2;
		uint8_t *b = fx_realloc_array(v->byte, (size_t)c, 1);
		if (b)
			v->byte = b;
		uint16_t *d = fx_realloc_array(v->depth, (size_t)c, sizeof(uint16_t));
		if (d)
			v->depth = d;
		int32_t *s = fx_realloc_array(v->skip, (size_t)c, sizeof(int32_t));
		if (s)
			v->skip = s;
		int32_t *o = fx_realloc_array(v->tok_off, (size_t)c + 1, sizeof(int32_t));
		if (o)
			v->tok_off = o;
		if (!b || !d || !s || !o)
			return false;
		*cap = c;
	}
	v->byte[v->n_nodes] = byte;
	v->depth[v->n_nodes] = depth;
	v->skip[v->n_nodes] = -1;
	v->tok_off[v->n_nodes] = n_tok;
	v->n_nodes++;
	return true;
}

/* The trie over refs[0..n) (sorted). */
static int build_trie(struct fx_grammar_vocab *v, const struct tok_ref *refs, int32_t n,
		      struct fx_err *err)
{
	int32_t cap = 1024, *path = NULL, n_tok = 0;
	int rc = fx_fail(err, FX_E_NOMEM, "grammar vocab: out of memory");
	v->byte = fx_malloc_array((size_t)cap, 1);
	v->depth = fx_malloc_array((size_t)cap, sizeof(uint16_t));
	v->skip = fx_malloc_array((size_t)cap, sizeof(int32_t));
	v->tok_off = fx_malloc_array((size_t)cap + 1, sizeof(int32_t));
	v->tok = fx_malloc_array((size_t)n + 1, sizeof(fx_token));
	path = fx_malloc_array((size_t)v->max_depth + 1, sizeof(int32_t)); /* node at each depth */
	if (!v->byte || !v->depth || !v->skip || !v->tok_off || !v->tok || !path)
		goto out;
	if (!node_add(v, &cap, 0, 0, 0))
		goto out;
	path[0] = 0;
	uint32_t depth = 0; /* length of the current path */
	const struct tok_ref *prev = NULL;
	for (int32_t i = 0; i < n; i++) {
		const struct tok_ref *r = &refs[i];
		uint32_t common = 0;
		if (prev)
			while (common < prev->len && common < r->len && prev->p[common] == r->p[common])
				common++;
		if (common > depth)
			common = depth;
		for (; depth > common; depth--) /* close the nodes past the common prefix */
			v->skip[path[depth]] = v->n_nodes;
		for (; depth < r->len; depth++) {
			if (!node_add(v, &cap, r->p[depth], (uint16_t)(depth + 1), n_tok))
				goto out;
			path[depth + 1] = v->n_nodes - 1;
		}
		v->tok[n_tok++] = r->id;
		prev = r;
	}
	for (; depth > 0; depth--)
		v->skip[path[depth]] = v->n_nodes;
	v->skip[0] = v->n_nodes;
	v->tok_off[v->n_nodes] = n_tok;
	rc = FX_OK;
out:
	fx_free(path);
	return rc;
}

int fx_grammar_vocab_create(const struct fx_model *m, struct fx_grammar_vocab **out,
			    struct fx_err *err)
{
	struct fx_grammar_vocab *v;
	struct tok_ref *refs = NULL;
	int rc;

	if (!out)
		return fx_fail(err, FX_E_INVALID, "grammar vocab: out is NULL");
	*out = NULL;
	if (!m || !fx_model_has_vocab(m) || fx_model_n_vocab(m) <= 0)
		return fx_fail(err, FX_E_INVALID,
			       "grammar vocab: the model has no tokenizer (constrained decoding needs one)");
	if (!(v = fx_calloc(1, sizeof(*v))))
		return fx_fail(err, FX_E_NOMEM, "grammar vocab: out of memory");
	v->n_vocab = fx_model_n_vocab(m);
	v->piece_off = fx_calloc((size_t)v->n_vocab + 1, sizeof(uint32_t));
	v->eog = fx_calloc((size_t)v->n_vocab, sizeof(bool));
	refs = fx_calloc((size_t)v->n_vocab, sizeof(*refs));
	if (!v->piece_off || !v->eog || !refs) {
		rc = fx_fail(err, FX_E_NOMEM, "grammar vocab: out of memory");
		goto fail;
	}
	if ((rc = read_pieces(m, v, err)))
		goto fail;
	int32_t n = 0;
	for (fx_token t = 0; t < v->n_vocab; t++) {
		uint32_t len = v->piece_off[t + 1] - v->piece_off[t];
		if (!len)
			continue; /* EOG (matched by can_end) or a token with no text: never allowed */
		refs[n++] = (struct tok_ref){ (const unsigned char *)v->pieces + v->piece_off[t], len, t };
		if ((int32_t)len > v->max_depth)
			v->max_depth = (int32_t)len;
	}
	qsort(refs, (size_t)n, sizeof(*refs), ref_cmp);
	if ((rc = build_trie(v, refs, n, err)))
		goto fail;
	fx_free(refs);
	*out = v;
	return FX_OK;
fail:
	fx_free(refs);
	fx_grammar_vocab_free(v);
	return rc;
}
