/* The family registry (model/arch/registry.c) and Hugging Face checkpoints
 * through it: every row's HF model_types map back to the row, the
 * "supported:" messages list what the registry holds, and an HF directory
 * with a tensor its row does not allow, or without one it requires, is
 * refused naming the tensor (the GGUF cases are in test_gguf.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ferrox.h"
#include "io/hf.h"
#include "model/arch.h"

static void test_names(void)
{
	char names[512], hf[512];
	arch_names(names, sizeof(names));
	arch_hf.names(hf, sizeof(hf));
	static const char *const ggufs[] = { "llama", "gemma3", "qwen2moe", "gpt-oss", "deepseek2" };
	for (size_t i = 0; i < sizeof(ggufs) / sizeof(ggufs[0]); i++) {
		CHECKF(strstr(names, ggufs[i]), "'%s' lacks %s", names, ggufs[i]);
		CHECK(arch_find(ggufs[i], strlen(ggufs[i])) != NULL);
	}
	static const char *const types[][2] = { { "mistral", "llama" }, { "mixtral", "llama" },
		{ "gemma3_text", "gemma3" }, { "qwen2_moe", "qwen2moe" }, { "gpt_oss", "gpt-oss" },
		{ "deepseek_v3", "deepseek2" } };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		const char *arch = NULL;
		const struct hf_family *f = arch_hf.find(types[i][0], &arch);
		CHECKF(f && !strcmp(f->model_type, types[i][0]) && arch && !strcmp(arch, types[i][1]),
		       "%s -> %s", types[i][0], arch ? arch : "(none)");
		CHECKF(strstr(hf, types[i][0]), "'%s' lacks %s", hf, types[i][0]);
	}
	const char *arch = NULL;
	CHECK(arch_hf.find("bert", &arch) == NULL);
	/* Truncation keeps the buffer a string. */
	CHECK(strlen(arch_names(names, 8)) < 8);
}

/* dir/name = text. */
static void write_text(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(p, 1, n, f) == n);
	if (f)
		fclose(f);
}

static char *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	if (f && !fseek(f, 0, SEEK_END)) {
		long sz = ftell(f);
		p = sz > 0 ? malloc((size_t)sz) : NULL;
		rewind(f);
		*n = p && fread(p, 1, (size_t)sz, f) == (size_t)sz ? (size_t)sz : 0;
	}
	if (f)
		fclose(f);
	CHECKF(p && *n, "cannot read %s", path);
	return p;
}

/* Fixture `name` copied into a fresh directory (dir, mkdtemp'ed), its
 * safetensors header without tensor `drop` (its bytes stay, unreferenced)
 * and with an extra F32 tensor `add` of n_add zeros at the end. */
static bool remake_hf(const char *name, const char *drop, const char *add, int n_add, char *dir)
{
	char src[256], key[256];
	size_t n_cfg = 0, n_st = 0;
	snprintf(src, sizeof(src), "tests/fixtures/hf-tiny/%s/config.json", name);
	char *cfg = read_all(src, &n_cfg);
	snprintf(src, sizeof(src), "tests/fixtures/hf-tiny/%s/model.safetensors", name);
	char *st = read_all(src, &n_st);
	if (!cfg || !st || !mkdtemp(dir)) {
		free(cfg);
		free(st);
		return false;
	}
	write_text(dir, "config.json", cfg, n_cfg);
	uint64_t hl;
	memcpy(&hl, st, 8);
	size_t data_n = n_st - 8 - (size_t)hl;
	char *hdr = calloc(1, (size_t)hl + 512);
	memcpy(hdr, st + 8, (size_t)hl);
	while (hl && hdr[hl - 1] == ' ')
		hdr[--hl] = 0; /* the writer's padding */
	if (drop) {
		snprintf(key, sizeof(key), "\"%s\":{", drop);
		char *a = strstr(hdr, key), *b = a ? strchr(a, '}') : NULL;
		CHECKF(a && b, "%s has no %s", name, drop);
		if (a && b) {
			b += b[1] == ',' ? 2 : 1; /* the entry and its comma */
			memmove(a, b, strlen(b) + 1);
			hl = strlen(hdr);
		}
	}
	if (add) /* before the header's closing brace */
		hl += (size_t)snprintf(hdr + hl - 1, 512, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
				       "\"data_offsets\":[%zu,%zu]}}", add, n_add, data_n,
				       data_n + 4 * (size_t)n_add) - 1;
	while (hl % 8)
		hdr[hl++] = ' ';
	size_t out_n = 8 + hl + data_n + 4 * (size_t)(add ? n_add : 0);
	uint8_t *out = calloc(1, out_n);
	memcpy(out, &hl, 8);
	memcpy(out + 8, hdr, hl);
	memcpy(out + 8 + hl, st + n_st - data_n, data_n);
	write_text(dir, "model.safetensors", out, out_n);
	free(out);
	free(hdr);
	free(cfg);
	free(st);
	return true;
}

static void expect_hf(const char *name, const char *drop, const char *add, int n_add, int code,
		      const char *needle)
{
	char dir[] = "/tmp/fx_test_registry_XXXXXX", p[600];
	if (!remake_hf(name, drop, add, n_add, dir))
		return;
	struct fx_model *m = NULL;
	struct fx_err e = { 0 };
	int rc = fx_model_load(dir, NULL, &m, &e);
	CHECKF(rc == code, "%s -%s +%s: want %d, got %d (%s)", name, drop ? drop : "",
	       add ? add : "", code, rc, rc ? e.msg : "loaded");
	CHECKF(!needle || strstr(e.msg, needle), "%s: message '%s' lacks '%s'", name, e.msg, needle);
	fx_model_free(m);
	snprintf(p, sizeof(p), "%s/config.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/model.safetensors", dir);
	unlink(p);
	rmdir(dir);
}

static void test_hf_checkpoints(void)
{
	/* The rewriting itself changes nothing. */
	expect_hf("llama", NULL, NULL, 0, FX_OK, NULL);
	expect_hf("llama", NULL, "model.layers.0.self_attn.q_norm.weight", 16, FX_E_FORMAT,
		  "not used by architecture llama: blk.0.attn_q_norm.weight (a Q/K norm)");
	expect_hf("gemma3", NULL, "model.layers.1.self_attn.o_proj.bias", 64, FX_E_FORMAT,
		  "architecture gemma3: blk.1.attn_output.bias (an attention output bias)");
	expect_hf("qwen3", NULL, "model.layers.0.mlp.gate.weight", 64, FX_E_FORMAT,
		  "blk.0.ffn_gate_inp.weight (a mixture-of-experts layer)");
	expect_hf("llama", NULL, "model.layers.0.mlp.extra.weight", 8, FX_E_UNSUPPORTED,
		  "model.layers.0.mlp.extra.weight");
	expect_hf("gemma3", "model.layers.0.self_attn.k_norm.weight", NULL, 0, FX_E_FORMAT,
		  "tensor blk.0.attn_k_norm.weight (a Q/K norm) is missing; architecture gemma3");
	expect_hf("olmo2", "model.layers.1.post_feedforward_layernorm.weight", NULL, 0, FX_E_FORMAT,
		  "tensor blk.1.post_ffw_norm.weight (a post-sublayer norm) is missing");
}

/* An unknown model_type: the message lists the registry's model_types. */
static void test_unknown_type(void)
{
	char dir[] = "/tmp/fx_test_registry_XXXXXX", p[600];
	CHECK(mkdtemp(dir));
	static const char cfg[] = "{\"model_type\": \"bert\"}";
	write_text(dir, "config.json", cfg, sizeof(cfg) - 1);
	struct fx_model *m = NULL;
	struct fx_err e = { 0 };
	CHECK(fx_model_load(dir, NULL, &m, &e) == FX_E_UNSUPPORTED);
	size_t ml = strlen(e.msg);
	CHECKF(strstr(e.msg, "model_type 'bert' is not supported (supported: llama, mistral, mixtral,") &&
	       strstr(e.msg, "gpt_oss, deepseek_v3, ") && strstr(e.msg, ", seed_oss, ") &&
	       ml > 0 && e.msg[ml - 1] == ')', "%s", e.msg);
	snprintf(p, sizeof(p), "%s/config.json", dir);
	unlink(p);
	rmdir(dir);
}

int main(void)
{
	test_names();
	test_hf_checkpoints();
	test_unknown_type();
	return check_exit();
}
