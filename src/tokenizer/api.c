/* Public tokenizer API (include/ferrox.h): thin wrappers that find the
 * model's vocabulary and call the vocab_* functions, whose contracts they
 * share. A model without a vocabulary (or NULL) gives FX_E_INVALID, -1 ids
 * and false predicates.
 */
#include "tokenizer/model_vocab.h"
#include "tokenizer/vocab_impl.h"

fx_token fx_token_bos(const struct fx_model *m)
{
	const struct vocab *v = model_vocab(m);

	return v ? vocab_bos(v) : -1;
}

fx_token fx_token_eos(const struct fx_model *m)
{
	const struct vocab *v = model_vocab(m);

	return v ? vocab_eos(v) : -1;
}

bool fx_add_bos(const struct fx_model *m)
{
	const struct vocab *v = model_vocab(m);

	return v && vocab_add_bos(v);
}

bool fx_token_is_eog(const struct fx_model *m, fx_token t)
{
	const struct vocab *v = model_vocab(m);

	return v && vocab_is_eog(v, t);
}

int fx_tokenize(const struct fx_model *m, const char *text, size_t len,
		bool add_special, bool parse_special, fx_token *out, size_t cap,
		size_t *n_out)
{
	const struct vocab *v = model_vocab(m);

	if (!v)
		return FX_E_INVALID;
	return vocab_tokenize(v, text, len, add_special, parse_special, out, cap, n_out);
}

int fx_tokenize_prompt(const struct fx_model *m, const struct fx_chat_prompt *p, bool add_special,
		       fx_token *out, size_t cap, size_t *n_out)
{
	const struct vocab *v = model_vocab(m);

	if (!v)
		return FX_E_INVALID;
	return vocab_tokenize_prompt(v, p, add_special, out, cap, n_out);
}

int fx_token_to_piece(const struct fx_model *m, fx_token t, bool special,
		      char *buf, size_t cap, size_t *n_out)
{
	const struct vocab *v = model_vocab(m);

	if (!v)
		return FX_E_INVALID;
	return vocab_token_to_piece(v, t, special, buf, cap, n_out);
}

int fx_detok_push(const struct fx_model *m, struct fx_detok *st, fx_token t,
		  bool special, char *out, size_t cap, size_t *n_out)
{
	const struct vocab *v = model_vocab(m);

	if (!v)
		return FX_E_INVALID;
	return vocab_detok_push(v, st, t, special, out, cap, n_out);
}

int fx_detok_flush(struct fx_detok *st, char *out, size_t cap, size_t *n_out)
{
	return detok_flush(st, out, cap, n_out);
}
