/* ferrox convert: a Hugging Face checkpoint directory (or a GGUF file)
 * written as GGUF, optionally quantized: llama.cpp's convert_hf_to_gguf.py
 * and llama-quantize in one step (fx_convert). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

static void convert_usage(FILE *f)
{
	fprintf(f,
		"usage: ferrox convert SRC -o OUT.gguf [--type TYPE] [--vocab-from FILE.gguf]\n"
		"  SRC        a Hugging Face checkpoint directory (config.json + *.safetensors)\n"
		"             or a GGUF file\n"
		"  -o FILE    the GGUF file to write (written as FILE.tmp, then renamed)\n"
		"  --type T   weight matrices as f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,\n"
		"             q2_k, q3_k, q4_k, q5_k, q6_k, or q4_k_m (llama-quantize's mix);\n"
		"             norms and biases stay f32; default: keep each tensor's type\n"
		"  --vocab-from FILE.gguf  copy FILE's tokenizer (tokenizer.* keys) into OUT\n"
		"A checkpoint directory's tokenizer.json (BPE: byte-level, or SentencePiece-\n"
		"style) becomes llama.cpp's tokenizer.ggml.* keys; one llama.cpp has no\n"
		"name for is refused, naming it (--vocab-from takes one from a GGUF).\n");
}

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const convert_flag_names[] = {
	"-o", "--out", "--type", "--outtype", "--vocab-from", "-h", "--help", NULL,
};
static const char *const *const convert_flags[] = { convert_flag_names, NULL };

int cmd_convert(int argc, char **argv)
{
	const char *src = NULL, *dst = NULL, *type = NULL, *vocab = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) {
			if (!(dst = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(argv[i], "--type") || !strcmp(argv[i], "--outtype")) {
			if (!(type = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(argv[i], "--vocab-from")) {
			if (!(vocab = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			convert_usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			cli_flag_unknown("convert", convert_flags, argv[i]);
			return 2;
		} else if (!src) {
			src = argv[i];
		} else {
			fprintf(stderr, "error: one source only, got '%s' and '%s'\n", src, argv[i]);
			return 2;
		}
	}
	if (!src || !dst) {
		fprintf(stderr, "error: %s is required\n", src ? "-o OUT.gguf" : "SRC");
		convert_usage(stderr);
		return 2;
	}
	struct fx_err err = { 0 };
	double t0 = cli_now();
	if (fx_convert(src, dst, type, vocab, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "wrote %s (%s) in %.2f s\n", dst, type ? type : "types kept",
		cli_now() - t0);
	return 0;
}
