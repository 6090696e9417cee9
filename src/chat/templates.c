/* Built-in chat templates (fx_chat_builtin_template): llama.cpp's named
 * formats (src/llama-chat.cpp, llm_chat_apply_template, read for the
 * formats only) written here as Jinja, so that `--chat-template gemma`
 * gives a base model a chat prompt byte for byte as llama.cpp's
 * llama_chat_apply_template("gemma", ...) does (tests/test_chat_builtin.c
 * checks every name against llama.cpp's own output,
 * scripts/make-chat-builtin-refs.py).
 *
 * Conventions shared by all of them:
 * - no bos_token: llama.cpp's formatter writes none (the tokenizer adds
 *   BOS), and ferrox's callers tokenize with add_special as llama.cpp;
 * - llama.cpp's trim() is C isspace() (" \t\n\v\f\r"); jinja2's bare
 *   |trim is Python's str.strip(), which also strips U+00A0, U+3000,
 *   \x1c-\x1f, ..., so every trim passes llama.cpp's set explicitly;
 * - content that is not a string (null beside tool_calls) renders as "",
 *   where llama.cpp has no such message at all; a U+0000 in content is
 *   kept, where llama.cpp's C strings end there;
 * - literal "<s>" / "</s>" stay literal text as in llama.cpp (the
 *   tokenizer's special-token matching makes them control tokens). */
#include <stddef.h>
#include <string.h>

#include "ferrox.h"

/* Jinja string literal: the characters C's isspace() accepts. */
#define WS "' \\t\\n\\v\\f\\r'"
#define FOR "{%- for m in messages -%}{%- set c = m['content'] if m['content'] is string else '' -%}"
#define ENDFOR "{%- endfor -%}"
#define AGP(s) "{%- if add_generation_prompt -%}{{- " s " -}}{%- endif -%}"
#define ROLE(r) "m['role'] == '" r "'"

/* llama2 and its variants: sysfmt renders a system message, next opens a
 * turn after an assistant message, pre is run over every content. No
 * generation prompt: "[/INST]" already ends the prompt. */
#define LLAMA2(pre, sysfmt, next) \
	"{{- '[INST] ' -}}{%- set ns = namespace(inside=true) -%}" FOR pre \
	"{%- if not ns.inside -%}{%- set ns.inside = true -%}{{- " next " -}}{%- endif -%}" \
	"{%- if " ROLE("system") " -%}{{- " sysfmt " -}}" \
	"{%- elif " ROLE("user") " -%}{{- c + ' [/INST]' -}}" \
	"{%- else -%}{{- c + '</s>' -}}{%- set ns.inside = false -%}{%- endif -%}" ENDFOR
#define L2_SYS "'<<SYS>>\\n' + c + '\\n<</SYS>>\\n\\n'"

/* mistral v1 / v3 / v3-tekken: lead before "[INST]" and "[/INST]", trail
 * after "[INST]" and before a reply, reply: the assistant's content. */
#define MISTRAL(lead, trail, reply) \
	"{%- set ns = namespace(inside=false) -%}" FOR \
	"{%- if not ns.inside -%}{{- " lead " + '[INST]' + " trail " -}}{%- set ns.inside = true -%}{%- endif -%}" \
	"{%- if " ROLE("system") " -%}{{- c + '\\n\\n' -}}" \
	"{%- elif " ROLE("user") " -%}{{- c + " lead " + '[/INST]' -}}" \
	"{%- else -%}{{- " trail " + " reply " + '</s>' -}}{%- set ns.inside = false -%}{%- endif -%}" ENDFOR

/* mistral v7 / v7-tekken: sp after the opening tags and before replies. */
#define MISTRAL7(sp) \
	FOR "{%- if " ROLE("system") " -%}{{- '[SYSTEM_PROMPT]' + " sp " + c + '[/SYSTEM_PROMPT]' -}}" \
	"{%- elif " ROLE("user") " -%}{{- '[INST]' + " sp " + c + '[/INST]' -}}" \
	"{%- else -%}{{- " sp " + c + '</s>' -}}{%- endif -%}" ENDFOR

/* Formats that write system, user and assistant messages each their own
 * way and skip any other role. */
#define SUA(sys, user, asst, gen) \
	FOR "{%- if " ROLE("system") " -%}{{- " sys " -}}" \
	"{%- elif " ROLE("user") " -%}{{- " user " -}}" \
	"{%- elif " ROLE("assistant") " -%}{{- " asst " -}}{%- endif -%}" ENDFOR AGP(gen)

#define VICUNA(sys) SUA(sys, "'USER: ' + c + '\\n'", "'ASSISTANT: ' + c + '</s>\\n'", "'ASSISTANT:'")
#define TRIMMED "(c|trim(" WS "))"
/* DeepSeek's fullwidth bars and U+2581 (as Jinja escapes: ASCII source) */
#define DS_EOS "'<\\uff5cend\\u2581of\\u2581sentence\\uff5c>'"

struct builtin {
	const char *name, *src;
};

/* Sorted by name, as llama.cpp lists its own (a std::map). */
static const struct builtin BUILTINS[] = {
	{ "chatglm3", "{{- '[gMASK]sop' -}}" FOR "{{- '<|' + m['role'] + '|>\\n ' + c -}}" ENDFOR AGP("'<|assistant|>'") },
	{ "chatglm4",
	  "{{- '[gMASK]<sop>' -}}" FOR "{{- '<|' + m['role'] + '|>\\n' + c -}}" ENDFOR AGP("'<|assistant|>\\n'") },
	{ "chatml", FOR "{{- '<|im_start|>' + m['role'] + '\\n' + c + '<|im_end|>\\n' -}}" ENDFOR AGP(
			    "'<|im_start|>assistant\\n'") },
	{ "command-r", SUA("'<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + " TRIMMED " + '<|END_OF_TURN_TOKEN|>'",
			   "'<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + " TRIMMED " + '<|END_OF_TURN_TOKEN|>'",
			   "'<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' + " TRIMMED " + '<|END_OF_TURN_TOKEN|>'",
			   "'<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'") },
	{ "deepseek", SUA("c", "'### Instruction:\\n' + c + '\\n'", "'### Response:\\n' + c + '\\n<|EOT|>\\n'",
			  "'### Response:\\n'") },
	{ "deepseek2",
	  SUA("c + '\\n\\n'", "'User: ' + c + '\\n\\n'", "'Assistant: ' + c + " DS_EOS, "'Assistant:'") },
	{ "deepseek3", SUA("c + '\\n\\n'", "'<\\uff5cUser\\uff5c>' + c", "'<\\uff5cAssistant\\uff5c>' + c + " DS_EOS,
			   "'<\\uff5cAssistant\\uff5c>'") },
	{ "exaone3", SUA("'[|system|]' + " TRIMMED " + '[|endofturn|]\\n'", "'[|user|]' + " TRIMMED " + '\\n'",
			 "'[|assistant|]' + " TRIMMED " + '[|endofturn|]\\n'", "'[|assistant|]'") },
	{ "falcon3", FOR "{{- '<|' + m['role'] + '|>\\n' + c + '\\n' -}}" ENDFOR AGP("'<|assistant|>\\n'") },
	/* system messages (trimmed, joined) go into the next non-model turn */
	{ "gemma", "{%- set ns = namespace(sys='') -%}" FOR
		   "{%- if " ROLE("system") " -%}{%- set ns.sys = ns.sys + " TRIMMED " -%}{%- else -%}"
		   "{%- set role = 'model' if " ROLE("assistant") " else m['role'] -%}"
		   "{{- '<start_of_turn>' + role + '\\n' -}}"
		   "{%- if ns.sys and role != 'model' -%}{{- ns.sys + '\\n\\n' -}}{%- set ns.sys = '' -%}{%- endif -%}"
		   "{{- " TRIMMED " + '<end_of_turn>\\n' -}}{%- endif -%}" ENDFOR AGP("'<start_of_turn>model\\n'") },
	{ "llama2", LLAMA2("", "c + '\\n'", "'[INST] '") },
	{ "llama2-sys", LLAMA2("", L2_SYS, "'[INST] '") },
	{ "llama2-sys-bos", LLAMA2("", L2_SYS, "'<s>[INST] '") },
	{ "llama2-sys-strip", LLAMA2("{%- set c = c|trim(" WS ") -%}", L2_SYS, "'[INST] '") },
	{ "llama3", FOR "{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + " TRIMMED
			" + '<|eot_id|>' -}}" ENDFOR AGP("'<|start_header_id|>assistant<|end_header_id|>\\n\\n'") },
	/* llama.cpp has no template named "mistral", yet accepts the name: its
	 * detection (the name holds "mistral", no [SYSTEM_PROMPT] or
	 * [AVAILABLE_TOOLS]) sends it to llama2, the original Mistral-7B-Instruct
	 * v0.1 layout; the newer ones are mistral-v1 ... mistral-v7-tekken */
	{ "mistral", LLAMA2("", "c + '\\n'", "'[INST] '") },
	{ "mistral-v1", MISTRAL("' '", "' '", "c") },
	{ "mistral-v3", MISTRAL("''", "' '", TRIMMED) },
	{ "mistral-v3-tekken", MISTRAL("''", "''", "c") },
	{ "mistral-v7", MISTRAL7("' '") },
	{ "mistral-v7-tekken", MISTRAL7("''") },
	{ "monarch", FOR "{{- ('' if loop.first else '<s>') + m['role'] + '\\n' + c + '</s>\\n' -}}" ENDFOR AGP(
			     "'<s>assistant\\n'") },
	/* llama.cpp upper-cases the role's first byte (C toupper); |upper is
	 * Python's, which differs only for a role starting with a non-ASCII
	 * letter */
	{ "openchat", FOR "{%- if " ROLE("system") " -%}{{- c + '<|end_of_turn|>' -}}{%- else -%}"
		      "{{- 'GPT4 Correct ' + (m['role'][:1]|upper) + m['role'][1:] + ': ' + c + '<|end_of_turn|>' -}}"
		      "{%- endif -%}" ENDFOR AGP("'GPT4 Correct Assistant:'") },
	/* system messages (joined) go after the next "Human: " */
	{ "orion", "{%- set ns = namespace(sys='') -%}" FOR
		   "{%- if " ROLE("system") " -%}{%- set ns.sys = ns.sys + c -%}"
		   "{%- elif " ROLE("user") " -%}{{- 'Human: ' -}}"
		   "{%- if ns.sys -%}{{- ns.sys + '\\n\\n' -}}{%- set ns.sys = '' -%}{%- endif -%}"
		   "{{- c + '\\n\\nAssistant: </s>' -}}{%- else -%}{{- c + '</s>' -}}{%- endif -%}" ENDFOR },
	{ "phi3", FOR "{{- '<|' + m['role'] + '|>\\n' + c + '<|end|>\\n' -}}" ENDFOR AGP("'<|assistant|>\\n'") },
	{ "phi4", FOR "{{- '<|im_start|>' + m['role'] + '<|im_sep|>' + c + '<|im_end|>' -}}" ENDFOR AGP(
			  "'<|im_start|>assistant<|im_sep|>'") },
	{ "vicuna", VICUNA("c + '\\n\\n'") },
	{ "vicuna-orca", VICUNA("'SYSTEM: ' + c + '\\n'") },
	{ "zephyr", FOR "{{- '<|' + m['role'] + '|>\\n' + c + '<|endoftext|>\\n' -}}" ENDFOR AGP(
			    "'<|assistant|>\\n'") },
};

#define N_BUILTINS (sizeof(BUILTINS) / sizeof(BUILTINS[0]))

const char *fx_chat_builtin_template(const char *name)
{
	for (size_t i = 0; name && i < N_BUILTINS; i++)
		if (!strcmp(BUILTINS[i].name, name))
			return BUILTINS[i].src;
	return NULL;
}

size_t fx_chat_builtin_names(const char **names, size_t cap)
{
	for (size_t i = 0; names && i < cap && i < N_BUILTINS; i++)
		names[i] = BUILTINS[i].name;
	return N_BUILTINS;
}
